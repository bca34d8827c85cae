/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "core/worker.h"
#include "egress/egress-internal.h"
#include "macro.h"

/* The gateway resolves every name itself (a guest's answer is never trusted), from the hosts file first: it is
 * how an operator pins names, and how tests name servers on loopback without a DNS server. */

#define HOSTS_LINE_MAX 4096
#define HOSTS_LINES_MAX 100000U

static bool addr_seen(const EgressAddr *addrs, size_t n, const EgressAddr *a) {
        for (size_t i = 0; i < n; i++)
                if (addrs[i].family == a->family && memcmp(addrs[i].a, a->a, 16) == 0)
                        return true;
        return false;
}

int egress_hosts_lookup(const char *path, const char *name, EgressAddr *addrs, size_t max, size_t *ret_n) {
        _cleanup_fclose_ FILE *f = NULL;
        char line[HOSTS_LINE_MAX];
        unsigned lines = 0;
        size_t n = 0;

        *ret_n = 0;
        if (!path)
                return 0;
        f = fopen(path, "re");
        if (!f)
                return errno == ENOENT ? 0 : -errno;
        while (fgets(line, sizeof line, f) && lines++ < HOSTS_LINES_MAX) {
                char *save = NULL, *tok, *hash = strchr(line, '#');
                EgressAddr a = {};

                if (hash)
                        *hash = 0;
                tok = strtok_r(line, " \t\r\n", &save);
                if (!tok)
                        continue;
                /* Strict forms only: hosts(5) takes what inet_pton takes. */
                if (inet_pton(AF_INET, tok, a.a) == 1)
                        a.family = AF_INET;
                else if (inet_pton(AF_INET6, tok, a.a) == 1)
                        a.family = AF_INET6;
                else
                        continue;
                while ((tok = strtok_r(NULL, " \t\r\n", &save)))
                        if (strcasecmp(tok, name) == 0) {
                                if (n < max && !addr_seen(addrs, n, &a))
                                        addrs[n++] = a;
                                break;
                        }
        }
        *ret_n = n;
        return n > 0;
}

typedef struct ResolveJob {
        Manager *manager;
        char name[EGRESS_HOST_MAX + 1];
        char *hosts_file;
        bool hosts_only;
        EgressResolveDone done;
        void *userdata;
        int err;
        EgressAddr addrs[EGRESS_RESOLVE_ADDRS_MAX];
        size_t n;
} ResolveJob;

static void resolve_job_done(Manager *m, void *userdata) {
        ResolveJob *j = userdata;

        j->done(m, j->userdata, j->err, j->addrs, j->n);
        free(j->hosts_file);
        free(j);
}

static int gai_to_errno(int e) {
        switch (e) {
        case EAI_NONAME:
#ifdef EAI_NODATA
        case EAI_NODATA:
#endif
                return -ENOENT;
        case EAI_AGAIN:
                return -EAGAIN;
        default:
                return -EIO;
        }
}

static void *resolve_worker(void *userdata) {
        ResolveJob *j = userdata;
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL;
        int r;

        r = egress_hosts_lookup(j->hosts_file, j->name, j->addrs, EGRESS_RESOLVE_ADDRS_MAX, &j->n);
        if (r > 0 || j->hosts_only) {
                j->err = r > 0 ? 0 : -ENOENT;
                goto done;
        }
        r = getaddrinfo(j->name, NULL, &hints, &res);
        if (r != 0) {
                j->err = gai_to_errno(r);
                goto done;
        }
        for (struct addrinfo *i = res; i && j->n < EGRESS_RESOLVE_ADDRS_MAX; i = i->ai_next) {
                EgressAddr a = { .family = i->ai_family };

                if (i->ai_family == AF_INET)
                        memcpy(a.a, &((struct sockaddr_in *) i->ai_addr)->sin_addr, 4);
                else if (i->ai_family == AF_INET6)
                        memcpy(a.a, &((struct sockaddr_in6 *) i->ai_addr)->sin6_addr, 16);
                else
                        continue;
                if (!addr_seen(j->addrs, j->n, &a))
                        j->addrs[j->n++] = a;
        }
        freeaddrinfo(res);
        j->err = j->n > 0 ? 0 : -ENOENT;
done:
        completion_post(j->manager, resolve_job_done, j);
        return NULL;
}

int egress_resolve(Manager *m, const char *name, EgressResolveDone done, void *userdata) {
        ResolveJob *j;
        int r;

        if (strlen(name) > EGRESS_HOST_MAX)
                return -ENAMETOOLONG;
        j = calloc(1, sizeof *j);
        if (!j)
                return -ENOMEM;
        j->manager = m;
        strcpy(j->name, name);
        j->hosts_only = m->egress->hosts_only;
        j->done = done;
        j->userdata = userdata;
        if (m->egress->hosts_file && !(j->hosts_file = strdup(m->egress->hosts_file))) {
                free(j);
                return -ENOMEM;
        }
        /* Even the hosts file is read on the worker: it may be large or on a slow disk. */
        r = worker_start(m, resolve_worker, j);
        if (r < 0) {
                free(j->hosts_file);
                free(j);
        }
        return r;
}
