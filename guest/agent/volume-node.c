/* SPDX-License-Identifier: Apache-2.0 */

/*
 * The node table of a volume mount (lib/proto.h, "Volume mounts"): the kernel's node ids mapped to (parent,
 * name), so that a request's path is its parents' names joined. Ids are never reused (a 64-bit counter), so a
 * late FORGET can only name the node it meant. A node lives while the kernel references it (nlookup) or a child
 * names it as parent; LOOKUP of a known (parent, name) gives the same node back, as the kernel expects.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/macro.h"
#include "volume.h"

static size_t hash_id(const VolumeNodes *t, uint64_t id) {
        return (size_t) ((id * 0x9e3779b97f4a7c15ULL) >> 20) & (t->n_buckets - 1);
}

static size_t hash_name(const VolumeNodes *t, const VolumeNode *parent, const char *name) {
        uint64_t h = 1469598103934665603ULL ^ parent->id;

        for (const char *p = name; *p; p++)
                h = (h ^ (uint8_t) *p) * 1099511628211ULL;
        return (size_t) (h ^ (h >> 29)) & (t->n_buckets - 1);
}

bool volume_name_ok(const char *name, size_t len) {
        return len > 0 && len <= SPACE_FILE_NAME_MAX && !memchr(name, '/', len) && !memchr(name, '\0', len) &&
               !(len == 1 && name[0] == '.') && !(len == 2 && name[0] == '.' && name[1] == '.');
}

int volume_nodes_init(VolumeNodes *t) {
        *t = (VolumeNodes) { .n_buckets = 256, .next_id = FUSE_ROOT_ID + 1 };
        t->by_id = calloc(t->n_buckets, sizeof *t->by_id);
        t->by_name = calloc(t->n_buckets, sizeof *t->by_name);
        if (!t->by_id || !t->by_name)
                return -ENOMEM;
        t->root = (VolumeNode) { .id = FUSE_ROOT_ID, .nlookup = 1 };
        return 0;
}

void volume_nodes_done(VolumeNodes *t) {
        for (size_t i = 0; t->by_id && i < t->n_buckets; i++)
                for (VolumeNode *n = t->by_id[i], *next; n; n = next) {
                        next = n->next_id;
                        free(n->name);
                        free(n);
                }
        free(t->by_id);
        free(t->by_name);
        t->by_id = t->by_name = NULL;
}

VolumeNode *volume_node_get(VolumeNodes *t, uint64_t id) {
        if (id == FUSE_ROOT_ID)
                return &t->root;
        for (VolumeNode *n = t->by_id[hash_id(t, id)]; n; n = n->next_id)
                if (n->id == id)
                        return n;
        return NULL;
}

static VolumeNode *child_find(VolumeNodes *t, VolumeNode *parent, const char *name) {
        for (VolumeNode *n = t->by_name[hash_name(t, parent, name)]; n; n = n->next_name)
                if (n->parent == parent && streq(n->name, name))
                        return n;
        return NULL;
}

static void name_unlink(VolumeNodes *t, VolumeNode *n) {
        for (VolumeNode **i = &t->by_name[hash_name(t, n->parent, n->name)]; *i; i = &(*i)->next_name)
                if (*i == n) {
                        *i = n->next_name;
                        return;
                }
}

static void name_link(VolumeNodes *t, VolumeNode *n) {
        size_t b = hash_name(t, n->parent, n->name);

        n->next_name = t->by_name[b];
        t->by_name[b] = n;
}

/* Doubles the buckets once there are more nodes than buckets: chains stay short however many the kernel keeps. */
static void grow(VolumeNodes *t) {
        VolumeNode **by_id, **by_name, *all = NULL;
        size_t old = t->n_buckets;

        if (t->n_nodes < old || old >= (SIZE_MAX / 2) / sizeof(void *))
                return;
        by_id = calloc(old * 2, sizeof *by_id);
        by_name = calloc(old * 2, sizeof *by_name);
        if (!by_id || !by_name) {
                free(by_id);
                free(by_name);
                return; /* longer chains, still right */
        }
        for (size_t i = 0; i < old; i++)
                for (VolumeNode *n = t->by_id[i], *next; n; n = next) {
                        next = n->next_id;
                        n->next_id = all;
                        all = n;
                }
        free(t->by_id);
        free(t->by_name);
        t->by_id = by_id;
        t->by_name = by_name;
        t->n_buckets = old * 2;
        for (VolumeNode *n = all, *next; n; n = next) {
                size_t b = hash_id(t, n->id);

                next = n->next_id;
                n->next_id = t->by_id[b];
                t->by_id[b] = n;
                if (n->parent)
                        name_link(t, n);
        }
}

int volume_node_ref(VolumeNodes *t, VolumeNode *parent, const char *name, uint64_t ino, VolumeNode **ret) {
        VolumeNode *n = child_find(t, parent, name);
        size_t b;

        if (n && n->ino != ino) {
                volume_node_detach_at(t, parent, name);
                n = NULL;
        }
        if (n) {
                n->nlookup++;
                *ret = n;
                return 0;
        }
        n = calloc(1, sizeof *n);
        if (!n || !(n->name = strdup(name))) {
                free(n);
                return -ENOMEM;
        }
        n->id = t->next_id++;
        n->parent = parent;
        n->nlookup = 1;
        n->ino = ino;
        parent->children++;
        b = hash_id(t, n->id);
        n->next_id = t->by_id[b];
        t->by_id[b] = n;
        name_link(t, n);
        t->n_nodes++;
        grow(t);
        *ret = n;
        return 0;
}

/* Takes n out of its place (the hash of names, its parent's children); the parent may go with it. */
static void place_leave(VolumeNodes *t, VolumeNode *n);

static void node_maybe_free(VolumeNodes *t, VolumeNode *n) {
        if (n == &t->root || n->nlookup > 0 || n->children > 0)
                return;
        place_leave(t, n);
        for (VolumeNode **i = &t->by_id[hash_id(t, n->id)]; *i; i = &(*i)->next_id)
                if (*i == n) {
                        *i = n->next_id;
                        break;
                }
        t->n_nodes--;
        free(n->name);
        free(n);
}

static void place_leave(VolumeNodes *t, VolumeNode *n) {
        VolumeNode *parent = n->parent;

        if (!parent)
                return;
        name_unlink(t, n);
        n->parent = NULL;
        n->name = mfree(n->name);
        parent->children--;
        node_maybe_free(t, parent); /* a forgotten directory kept for its last child */
}

void volume_node_forget(VolumeNodes *t, VolumeNode *n, uint64_t nlookup) {
        n->nlookup = nlookup >= n->nlookup ? 0 : n->nlookup - nlookup;
        node_maybe_free(t, n);
}

void volume_node_detach_at(VolumeNodes *t, VolumeNode *parent, const char *name) {
        VolumeNode *n = child_find(t, parent, name);

        if (!n)
                return;
        place_leave(t, n);
        node_maybe_free(t, n);
}

int volume_node_move(VolumeNodes *t, VolumeNode *parent, const char *name, VolumeNode *to_parent, const char *to_name) {
        VolumeNode *n = child_find(t, parent, name);
        char *copy;

        if (n == child_find(t, to_parent, to_name))
                return 0; /* the same place, or neither known */
        volume_node_detach_at(t, to_parent, to_name);
        if (!n)
                return 0; /* the kernel never looked it up: nothing to move */
        copy = strdup(to_name);
        if (!copy) {
                /* out of memory: better a node with no path (ENOENT) than one with the wrong one */
                place_leave(t, n);
                node_maybe_free(t, n);
                return -ENOMEM;
        }
        to_parent->children++; /* first: the old parent may be freed below, and it may be to_parent's parent */
        name_unlink(t, n);
        n->parent->children--;
        free(n->name);
        {
                VolumeNode *old = n->parent;

                n->parent = to_parent;
                n->name = copy;
                name_link(t, n);
                node_maybe_free(t, old);
        }
        return 0;
}

int volume_node_path(const VolumeNode *n, const char *name, char *buf, size_t size) {
        size_t end = size - 1, l;

        if (size < SPACE_FILE_PATH_MAX + 1)
                return -EINVAL;
        buf[end] = '\0';
        if (name) {
                l = strlen(name);
                if (l > end)
                        return -ENAMETOOLONG;
                end -= l;
                memcpy(buf + end, name, l);
        }
        for (; n->parent; n = n->parent) {
                l = strlen(n->name);
                if (end < size - 1) {
                        if (end == 0)
                                return -ENAMETOOLONG;
                        buf[--end] = '/';
                }
                if (l > end)
                        return -ENAMETOOLONG;
                end -= l;
                memcpy(buf + end, n->name, l);
        }
        if (n->id != FUSE_ROOT_ID)
                return -ENOENT; /* detached, or below one that is */
        if (size - 1 - end > SPACE_FILE_PATH_MAX)
                return -ENAMETOOLONG;
        memmove(buf, buf + end, size - end);
        return 0;
}
