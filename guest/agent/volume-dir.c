/* SPDX-License-Identifier: Apache-2.0 */

/*
 * Open directories of a volume mount: OPENDIR's handle, READDIR from the host's batches (lib/proto.h,
 * "readdir": as many entries as fit in a frame, then the cookie of the next batch). The kernel reads a page of
 * entries at a time and resumes at the FUSE offset of the last one it took, so each entry's offset is its index
 * in the directory (plus one), and a handle remembers where each batch starts, (index, cookie), so that any
 * offset it gave out can be resumed by asking for its batch again. The last batch is kept, for the next page:
 * a directory is fetched once per open, not once per page. Kept batches are bounded (VOLUME_DIR_CACHES_MAX,
 * the least recently used dropped), and so are marks (VOLUME_MARKS_MAX batches: past them the listing ends).
 */

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/macro.h"
#include "volume.h"

static size_t n_cached;
static uint64_t use_clock;

static VolumeDir *dir_find(VolumeMount *m, uint64_t fh) {
        for (VolumeDir *d = m->dirs; d; d = d->next)
                if (d->fh == fh)
                        return d;
        return NULL;
}

static void cache_drop(VolumeDir *d) {
        if (!d->batch)
                return;
        d->batch = mfree(d->batch);
        d->entries = mfree(d->entries);
        d->n_entries = 0;
        n_cached--;
}

static void dir_free(VolumeDir *d) {
        cache_drop(d);
        free(d->marks);
        free(d);
}

int volume_dir_open(VolumeMount *m, uint64_t *ret_fh) {
        VolumeDir *d = calloc(1, sizeof *d);

        if (!d || !(d->marks = calloc(1, sizeof *d->marks))) {
                free(d);
                return -ENOMEM;
        }
        d->n_marks = 1; /* index 0 is at cookie 0 */
        d->fh = ++m->next_fh;
        d->next = m->dirs;
        m->dirs = d;
        *ret_fh = d->fh;
        return 0;
}

void volume_dir_release(VolumeMount *m, uint64_t fh) {
        for (VolumeDir **i = &m->dirs; *i; i = &(*i)->next)
                if ((*i)->fh == fh) {
                        VolumeDir *d = *i;

                        *i = d->next;
                        dir_free(d);
                        return;
                }
}

void volume_dirs_free(VolumeMount *m) {
        for (VolumeDir *d = m->dirs, *next; d; d = next) {
                next = d->next;
                dir_free(d);
        }
        m->dirs = NULL;
}

/* The batch that holds index k: the last mark at or before it. */
static size_t mark_for(const VolumeDir *d, uint64_t k) {
        size_t lo = 0, hi = d->n_marks;

        while (hi - lo > 1) {
                size_t mid = lo + (hi - lo) / 2;

                if (d->marks[mid].index <= k)
                        lo = mid;
                else
                        hi = mid;
        }
        return lo;
}

/* Replies with the entries of the kept batch from index k on, as many as fit in size. */
static void serve(VolumeMount *m, uint64_t unique, VolumeDir *d, uint64_t k, uint32_t size) {
        _cleanup_free_ uint8_t *buf = NULL;
        uint64_t base = d->marks[d->cached_mark].index;
        size_t used = 0;

        if (size > 2 * SPACE_FRAME_PAYLOAD_MAX)
                size = 2 * SPACE_FRAME_PAYLOAD_MAX;
        buf = malloc(size ? size : 1);
        if (!buf) {
                volume_reply_err(m, unique, ENOMEM);
                return;
        }
        d->used = ++use_clock;
        for (uint64_t j = k - base; j < d->n_entries; j++) {
                const VolumeDirEntry *e = &d->entries[j];
                size_t l = strlen(e->name), rec = FUSE_DIRENT_SIZE(&(struct fuse_dirent) { .namelen = (uint32_t) l });
                struct fuse_dirent de = { .ino = e->ino, .off = base + j + 1, .namelen = (uint32_t) l, .type = e->type };

                if (used + rec > size)
                        break;
                memset(buf + used, 0, rec);
                memcpy(buf + used, &de, FUSE_NAME_OFFSET);
                memcpy(buf + used + FUSE_NAME_OFFSET, e->name, l);
                used += rec;
        }
        (void) volume_reply(m, unique, 0, buf, used, NULL, 0);
}

int volume_dir_read(VolumeMount *m, uint64_t unique, uint64_t fh, uint64_t offset, uint32_t size, size_t *ret_mark,
                    uint64_t *ret_cookie) {
        VolumeDir *d = dir_find(m, fh);
        size_t i;

        if (!d)
                return -EBADF;
        i = mark_for(d, offset);
        if (d->batch && d->cached_mark == i) {
                serve(m, unique, d, offset, size); /* past its end (the listing's end, or an offset we never
                                                    * gave): nothing, which the kernel takes as the end */
                return 1;
        }
        if (d->end && offset >= d->end_index) {
                (void) volume_reply(m, unique, 0, NULL, 0, NULL, 0);
                return 1;
        }
        *ret_mark = i;
        *ret_cookie = d->marks[i].cookie;
        return 0;
}

static int dt_type(const char *v, uint32_t *ret) {
        uint32_t mode;
        int r = volume_type_parse(v, &mode);

        if (r >= 0)
                *ret = IFTODT(mode);
        return r;
}

/* The host's records as entries pointing into batch (a copy of them), and the next cookie. */
static int batch_parse(uint8_t *batch, size_t n, VolumeDirEntry **ret, size_t *ret_n, uint64_t *ret_cookie) {
        _cleanup_free_ VolumeDirEntry *e = NULL;
        size_t off = 0, klen, count = 0, cap = 0;
        unsigned have = 7;  /* of the current entry: name 1, type 2, ino 4 */
        bool cookie_seen = false;
        const char *k, *v;
        int r;

        while ((r = space_kv_next(batch, n, &off, &k, &klen, &v)) > 0) {
#define KEY(x) (klen == sizeof(x) - 1 && memcmp(k, x, klen) == 0)
                if (KEY("name")) {
                        if (have != 7 || cookie_seen || !volume_name_ok(v, strlen(v)))
                                return -EBADMSG;
                        if (count == cap) {
                                VolumeDirEntry *l = reallocarray(e, cap ? cap * 2 : 64, sizeof *l);

                                if (!l)
                                        return -ENOMEM;
                                e = l;
                                cap = cap ? cap * 2 : 64;
                        }
                        e[count++] = (VolumeDirEntry) { .name = v };
                        have = 1;
                } else if (KEY("type")) {
                        if (have != 1 || dt_type(v, &e[count - 1].type) < 0)
                                return -EBADMSG;
                        have |= 2;
                } else if (KEY("ino")) {
                        if (!(have & 1) || (have & 4) || volume_parse_u64(v, UINT64_MAX, &e[count - 1].ino) < 0)
                                return -EBADMSG;
                        have |= 4;
                } else if (KEY("cookie")) {
                        if (cookie_seen || volume_parse_u64(v, UINT64_MAX, ret_cookie) < 0)
                                return -EBADMSG;
                        cookie_seen = true;
                }
#undef KEY
        }
        if (r < 0 || have != 7 || !cookie_seen)
                return -EBADMSG;
        *ret = TAKE_PTR(e);
        *ret_n = count;
        return 0;
}

/* Makes room for one more kept batch: the least recently used one of every mount goes. */
static void cache_evict(void) {
        VolumeDir *lru = NULL;

        if (n_cached < VOLUME_DIR_CACHES_MAX)
                return;
        for (size_t i = 0; i < SPACE_VOLUME_MOUNTS_MAX; i++)
                for (VolumeDir *d = volume_mounts[i] ? volume_mounts[i]->dirs : NULL; d; d = d->next)
                        if (d->batch && (!lru || d->used < lru->used))
                                lru = d;
        if (lru)
                cache_drop(lru);
}

void volume_dir_answer(VolumeMount *m, uint64_t unique, uint64_t fh, size_t mark, uint64_t offset, uint32_t size,
                       const uint8_t *kv, size_t n) {
        VolumeDir *d = dir_find(m, fh);
        _cleanup_free_ uint8_t *batch = NULL;
        VolumeDirEntry *entries = NULL;
        size_t count = 0;
        uint64_t cookie = 0, index;

        if (!d || mark >= d->n_marks) {
                volume_reply_err(m, unique, EBADF);
                return;
        }
        batch = malloc(n ? n : 1);
        if (!batch) {
                volume_reply_err(m, unique, ENOMEM);
                return;
        }
        memcpy(batch, kv, n);
        if (batch_parse(batch, n, &entries, &count, &cookie) < 0 || (count == 0 && cookie != 0)) {
                /* an empty batch that is not the end would send the kernel round for ever */
                free(entries);
                log_warn("volume %s: a malformed readdir answer: EIO", m->id);
                volume_reply_err(m, unique, EIO);
                return;
        }
        /* What came after this batch may have changed with it: its marks are found again as the kernel reads on. */
        index = d->marks[mark].index;
        d->n_marks = mark + 1;
        d->end = cookie == 0;
        d->end_index = index + count;
        if (!d->end) {
                void *l = d->n_marks < VOLUME_MARKS_MAX ? reallocarray(d->marks, d->n_marks + 1, sizeof *d->marks) : NULL;

                if (l) {
                        d->marks = l;
                        d->marks[d->n_marks++] = (__typeof__(*d->marks)) { index + count, cookie };
                } else {
                        log_warn("volume %s: a directory of more than %u batches: listed in part", m->id, VOLUME_MARKS_MAX);
                        d->end = true;
                }
        }
        cache_drop(d);
        cache_evict();
        d->batch = TAKE_PTR(batch);
        d->entries = entries;
        d->n_entries = count;
        d->cached_mark = mark;
        n_cached++;
        serve(m, unique, d, offset, size);
}
