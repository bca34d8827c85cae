/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/worker.h"

/* Lifecycle steps block (QEMU start, QMP, snapshot I/O): they run on threads so the event loop keeps
 * serving. A thread never touches Manager state; it posts a Completion that the loop runs. */

int worker_start(Manager *m, void *(*fn)(void *), void *arg) {
        pthread_attr_t attr;
        pthread_t t;
        int r;

        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        r = pthread_create(&t, &attr, fn, arg);
        pthread_attr_destroy(&attr);
        if (r != 0)
                return -r;
        m->workers_running++;
        return 0;
}

static void post(Manager *m, void (*done)(Manager *m, void *userdata), void *userdata, bool worker_end) {
        Completion *c = calloc(1, sizeof *c);
        uint64_t one = 1;

        if (!c)
                abort(); /* nothing sane to do: the loop would wait forever */
        c->done = done;
        c->userdata = userdata;
        c->worker_end = worker_end;
        pthread_mutex_lock(&m->completions_lock);
        /* append, so completions run in the order they were posted */
        Completion **tail = &m->completions;
        while (*tail)
                tail = &(*tail)->next;
        *tail = c;
        pthread_mutex_unlock(&m->completions_lock);
        (void) !write(m->completion_fd, &one, sizeof one);
}

void completion_post(Manager *m, void (*done)(Manager *m, void *userdata), void *userdata) {
        post(m, done, userdata, true);
}

void completion_post_foreign(Manager *m, void (*done)(Manager *m, void *userdata), void *userdata) {
        post(m, done, userdata, false);
}

static int on_completion(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Manager *m = userdata;
        uint64_t v;
        Completion *list;

        (void) !read(fd, &v, sizeof v);
        pthread_mutex_lock(&m->completions_lock);
        list = m->completions;
        m->completions = NULL;
        pthread_mutex_unlock(&m->completions_lock);
        while (list) {
                Completion *c = list;
                list = c->next;
                if (c->worker_end)
                        m->workers_running--;
                c->done(m, c->userdata);
                free(c);
        }
        return 0;
}

int completions_setup(Manager *m) {
        m->completion_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (m->completion_fd < 0)
                return -errno;
        return sd_event_add_io(m->event, &m->completion_source, m->completion_fd, EPOLLIN, on_completion, m);
}
