/* SPDX-License-Identifier: Apache-2.0 */

/*
 * A small blocking QMP client: one unix socket, newline-delimited JSON, replies matched by "id", events skipped.
 * QEMU is only semi-trusted (the guest may have taken it over), so every reply is bounded and parsed defensively.
 */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* vasprintf */
#endif

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cJSON.h>

#include "macro.h"
#include "vm/vmm-internal.h"
#include "vm/vmm.h"

/* A QMP reply bigger than this is a broken or hostile QEMU. query-* replies we use are a few KiB. */
#define QMP_MESSAGE_MAX (1024U * 1024U)

struct Qmp {
        int fd;
        char *buf;      /* received bytes not yet consumed */
        size_t len;
        size_t cap;
        uint64_t next_id;
};

static void cjson_deletep(cJSON **j) {
        if (*j)
                cJSON_Delete(*j);
}
#define _cleanup_cjson_ _cleanup_(cjson_deletep)


Qmp *qmp_close(Qmp *q) {
        if (!q)
                return NULL;
        safe_close(q->fd);
        free(q->buf);
        free(q);
        return NULL;
}

/* Reads one newline-terminated message (without the newline, NUL-terminated, malloc'd). -ETIMEDOUT,
 * -ECONNRESET on EOF, -EMSGSIZE when a message exceeds QMP_MESSAGE_MAX. */
static int qmp_read_message(Qmp *q, int64_t deadline, char **ret) {
        for (;;) {
                char *nl = q->len > 0 ? memchr(q->buf, '\n', q->len) : NULL;
                if (nl) {
                        size_t n = (size_t) (nl - q->buf);
                        char *m = malloc(n + 1);
                        if (!m)
                                return -ENOMEM;
                        memcpy(m, q->buf, n);
                        m[n] = 0;
                        if (n > 0 && m[n - 1] == '\r')
                                m[n - 1] = 0;
                        memmove(q->buf, nl + 1, q->len - n - 1);
                        q->len -= n + 1;
                        *ret = m;
                        return 0;
                }
                if (q->len >= QMP_MESSAGE_MAX)
                        return -EMSGSIZE;

                if (q->cap - q->len < 4096) {
                        size_t ncap = q->cap ? q->cap * 2 : 8192;
                        if (ncap > QMP_MESSAGE_MAX + 1)
                                ncap = QMP_MESSAGE_MAX + 1;
                        char *nb = realloc(q->buf, ncap);
                        if (!nb)
                                return -ENOMEM;
                        q->buf = nb;
                        q->cap = ncap;
                }

                struct pollfd p = { .fd = q->fd, .events = POLLIN };
                int r = poll(&p, 1, remaining_ms(deadline));
                if (r < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (r == 0)
                        return -ETIMEDOUT;

                ssize_t k = recv(q->fd, q->buf + q->len, q->cap - q->len, MSG_DONTWAIT);
                if (k < 0) {
                        if (errno == EINTR || errno == EAGAIN)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        return -ECONNRESET;
                q->len += (size_t) k;
        }
}

static int qmp_send(Qmp *q, const char *data, size_t n, int pass_fd, int64_t deadline) {
        bool fd_sent = pass_fd < 0;

        while (n > 0) {
                struct iovec iov = { .iov_base = (void *) data, .iov_len = n };
                union {
                        struct cmsghdr h;
                        char buf[CMSG_SPACE(sizeof(int))];
                } control = {};
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

                if (!fd_sent) {
                        mh.msg_control = control.buf;
                        mh.msg_controllen = sizeof(control.buf);
                        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                        c->cmsg_level = SOL_SOCKET;
                        c->cmsg_type = SCM_RIGHTS;
                        c->cmsg_len = CMSG_LEN(sizeof(int));
                        memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
                }

                ssize_t k = sendmsg(q->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN)
                                return -errno;
                        struct pollfd p = { .fd = q->fd, .events = POLLOUT };
                        int r = poll(&p, 1, remaining_ms(deadline));
                        if (r < 0 && errno != EINTR)
                                return -errno;
                        if (r == 0)
                                return -ETIMEDOUT;
                        continue;
                }
                fd_sent = true;
                data += k;
                n -= (size_t) k;
        }
        return 0;
}

/* Waits for the reply carrying our id; events and replies to older (timed-out) commands are dropped. */
static int qmp_wait_reply(Qmp *q, const char *id, int64_t deadline, cJSON **ret, Error *reterr) {
        for (;;) {
                _cleanup_free_ char *m = NULL;
                int r = qmp_read_message(q, deadline, &m);
                if (r < 0) {
                        (void) error_set(reterr, ERROR_INTERNAL, "QMP: %s",
                                         r == -ECONNRESET ? "QEMU closed the monitor connection" :
                                         r == -EMSGSIZE   ? "oversized message" :
                                         r == -ETIMEDOUT  ? "timed out waiting for a reply" : strerror(-r));
                        return r;
                }

                cJSON *j = cJSON_Parse(m);
                if (!j || !cJSON_IsObject(j)) {
                        cJSON_Delete(j);
                        (void) error_set(reterr, ERROR_INTERNAL, "QMP: unparsable message");
                        return -EBADMSG;
                }
                if (cJSON_GetObjectItemCaseSensitive(j, "event")) {
                        cJSON_Delete(j);
                        continue;
                }
                const cJSON *jid = cJSON_GetObjectItemCaseSensitive(j, "id");
                if (!id) {
                        /* The greeting has no id. */
                        *ret = j;
                        return 0;
                }
                if (!cJSON_IsString(jid) || !streq(jid->valuestring, id)) {
                        cJSON_Delete(j);
                        continue;
                }
                *ret = j;
                return 0;
        }
}

int qmp_execute(Qmp *q, const char *cmd, const char *args_json, int pass_fd, int timeout_ms,
                char **ret_return_json, Error *reterr) {
        _cleanup_cjson_ cJSON *req = NULL, *reply = NULL;
        _cleanup_free_ char *text = NULL;
        char id[32];
        int64_t deadline = now_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
        int r;

        if (!q || !cmd)
                return -EINVAL;

        req = cJSON_CreateObject();
        if (!req || !cJSON_AddStringToObject(req, "execute", cmd))
                return -ENOMEM;
        if (args_json) {
                cJSON *args = cJSON_Parse(args_json);
                if (!args || !cJSON_IsObject(args)) {
                        cJSON_Delete(args);
                        (void) error_set(reterr, ERROR_INTERNAL, "QMP: invalid arguments for %s", cmd);
                        return -EINVAL;
                }
                cJSON_AddItemToObject(req, "arguments", args);
        }
        snprintf(id, sizeof(id), "space-%llu", (unsigned long long) ++q->next_id);
        if (!cJSON_AddStringToObject(req, "id", id))
                return -ENOMEM;

        text = cJSON_PrintUnformatted(req);
        if (!text)
                return -ENOMEM;
        size_t n = strlen(text);
        char *t = realloc(text, n + 2);
        if (!t)
                return -ENOMEM;
        text = t;
        text[n++] = '\n';
        text[n] = 0;

        r = qmp_send(q, text, n, pass_fd, deadline);
        if (r < 0) {
                (void) error_set(reterr, ERROR_INTERNAL, "QMP: sending %s: %s", cmd, strerror(-r));
                return r;
        }

        r = qmp_wait_reply(q, id, deadline, &reply, reterr);
        if (r < 0)
                return r;

        const cJSON *err = cJSON_GetObjectItemCaseSensitive(reply, "error");
        if (err) {
                const cJSON *desc = cJSON_GetObjectItemCaseSensitive(err, "desc");
                (void) error_set(reterr, ERROR_INTERNAL, "QMP %s: %s", cmd,
                                 cJSON_IsString(desc) ? desc->valuestring : "error without description");
                return -EIO;
        }
        const cJSON *ret = cJSON_GetObjectItemCaseSensitive(reply, "return");
        if (!ret) {
                (void) error_set(reterr, ERROR_INTERNAL, "QMP %s: reply without return", cmd);
                return -EBADMSG;
        }
        if (ret_return_json) {
                char *s = cJSON_PrintUnformatted(ret);
                if (!s)
                        return -ENOMEM;
                *ret_return_json = s;
        }
        return 0;
}

static int connect_unix(const char *path, int *ret_fd) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        size_t n = strlen(path);

        if (n >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, n + 1);

        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        *ret_fd = fd;
        return 0;
}

int qmp_open(const char *path, int timeout_ms, Qmp **ret, Error *reterr) {
        int64_t deadline = now_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
        _cleanup_close_ int fd = -1;
        cJSON *greeting = NULL;
        int r;

        if (!path || !ret)
                return -EINVAL;

        /* QEMU creates the socket shortly after it starts; refused/missing means "not yet". */
        for (;;) {
                r = connect_unix(path, &fd);
                if (r >= 0)
                        break;
                bool retry = r == -ENOENT || r == -ECONNREFUSED || r == -EAGAIN;
                if (!retry || remaining_ms(deadline) == 0) {
                        (void) error_set(reterr, ERROR_INTERNAL, "QMP: cannot connect to %s: %s", path, strerror(-r));
                        return retry ? -ETIMEDOUT : r;
                }
                (void) usleep(1000);
        }

        Qmp *q = calloc(1, sizeof(Qmp));
        if (!q)
                return -ENOMEM;
        q->fd = TAKE_FD(fd);

        r = qmp_wait_reply(q, NULL, deadline, &greeting, reterr);
        if (r < 0)
                goto fail;
        bool is_greeting = cJSON_GetObjectItemCaseSensitive(greeting, "QMP") != NULL;
        cJSON_Delete(greeting);
        if (!is_greeting) {
                (void) error_set(reterr, ERROR_INTERNAL, "QMP: no greeting from %s", path);
                r = -EPROTO;
                goto fail;
        }

        r = qmp_execute(q, "qmp_capabilities", NULL, -1, remaining_ms(deadline), NULL, reterr);
        if (r < 0)
                goto fail;

        *ret = q;
        return 0;
fail:
        qmp_close(q);
        return r;
}

int qmp_wait_status_change(Qmp *q, const char *while_status, int timeout_ms, char **ret_status,
                           Error *reterr) {
        int64_t deadline = now_ms() + (timeout_ms < 0 ? 0 : timeout_ms);

        for (;;) {
                _cleanup_free_ char *reply = NULL;
                _cleanup_cjson_ cJSON *j = NULL;
                int r;

                r = qmp_execute(q, "query-status", NULL, -1, remaining_ms(deadline), &reply, reterr);
                if (r < 0)
                        return r;
                j = cJSON_Parse(reply);
                const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "status");
                if (!cJSON_IsString(s)) {
                        (void) error_set(reterr, ERROR_INTERNAL, "QMP query-status: no status");
                        return -EBADMSG;
                }
                if (!streq_ptr(s->valuestring, while_status)) {
                        if (ret_status) {
                                char *c = strdup(s->valuestring);
                                if (!c)
                                        return -ENOMEM;
                                *ret_status = c;
                        }
                        return 0;
                }
                if (remaining_ms(deadline) == 0) {
                        (void) error_set(reterr, ERROR_INTERNAL, "timed out while the VM was still '%s'", while_status);
                        return -ETIMEDOUT;
                }
                (void) usleep(1000);
        }
}
