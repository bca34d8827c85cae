/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "macro.h"
#include "api/api.h"
#include "volume/volume.h"

/* A whole file as the body of a PUT (the native /v1/volumes/{volume}/files and E2B's volume content API),
 * streamed into the volume as it arrives (volume_upload_*()): no size limit but the volume's quota, which a
 * declared Content-Length is checked against before any of the body is read. */

typedef struct UploadRequest {
        VolumeUpload *upload;
        Error err;           /* why it failed: answered once the body is in */
        bool failed;
        uint64_t dropped;    /* body bytes read and dropped since */
} UploadRequest;

static void upload_request_free(UploadRequest *u) {
        volume_upload_free(u->upload);
        error_done(&u->err);
        free(u);
}

static void upload_detach(void *userdata, Request *r) {
        upload_request_free(userdata);
}

static size_t upload_write(void *userdata, Request *r, const char *data, size_t n) {
        UploadRequest *u = userdata;

        if (!u->failed && volume_upload_append(u->upload, data, n, &u->err) < 0) {
                /* the hidden file goes now; the rest is read and dropped so that the client gets the answer
                 * after its body, up to HTTP_DRAIN_MAX, then it is answered and cut off */
                u->failed = true;
                u->upload = volume_upload_free(u->upload);
        }
        if (u->failed) {
                u->dropped += n;
                if (u->dropped > HTTP_DRAIN_MAX)
                        respond_error_or(r, &u->err, "cannot write the file");
        }
        return n;
}

/* The declared size of the body, VOLUME_SIZE_UNKNOWN without one (chunked). */
static uint64_t content_length(Request *r) {
        uint64_t n;

        return http_content_length(r, &n) >= 0 ? n : VOLUME_SIZE_UNKNOWN;
}

/* Whether a refusal from the headers is read by the client before it sends its body: it waits for a
 * 100 Continue, or the body is more than we would read and drop anyway. */
static bool early_answer_read(Request *r, uint64_t size) {
        const char *expect = http_header(r, "Expect");

        return (expect && strcasecmp(expect, "100-continue") == 0) || size == VOLUME_SIZE_UNKNOWN ||
               size > HTTP_DRAIN_MAX;
}

int api_volume_upload_begin(Request *r, Volume *v, const char *path, const VolumeWriteOptions *o) {
        UploadRequest *u = calloc(1, sizeof *u);
        uint64_t size;
        int q;

        if (!u) {
                http_respond_error(r, ERROR_INTERNAL, "out of memory");
                return -ENOMEM;
        }
        size = content_length(r);
        q = volume_upload_begin(http_manager(r->http), v, path, o, size, &u->upload, &u->err);
        if (q < 0 && !early_answer_read(r, size)) {
                /* the client sends its body whatever we say (no Expect: 100-continue): answered after it, read
                 * and dropped, since an SDK that is cut off while it sends sees a broken connection, not this */
                u->failed = true;
                r->upload = (HttpUpload) { .write = upload_write, .detach = upload_detach, .userdata = u };
                return q;
        }
        if (q < 0) {
                respond_error_or(r, &u->err, "cannot write the file");
                upload_request_free(u);
                return q;
        }
        r->upload = (HttpUpload) { .write = upload_write, .detach = upload_detach, .userdata = u };
        return 0;
}

void api_volume_upload_end(Request *r, unsigned status) {
        UploadRequest *u = r->upload.userdata;
        VolumeEntry e = {};

        if (!u || r->upload_failed)
                return (void) http_respond_error(r, ERROR_INTERNAL, "the upload was not stored");
        if (u->failed)
                return respond_error_or(r, &u->err, "cannot write the file");
        if (volume_upload_finish(http_manager(r->http), u->upload, &e, &u->err) < 0)
                return respond_error_or(r, &u->err, "cannot write the file");
        api_respond_volume_entry(r, status, &e);
}
