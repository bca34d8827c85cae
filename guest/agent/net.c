/* SPDX-License-Identifier: Apache-2.0 */

/*
 * The agent's network side (ARCHITECTURE.md, decision 10): a sandbox has no network device, and every TCP
 * connection a program makes leaves through a tunnel on the channel (tunnel.c), by the HTTP proxy or the
 * transparent capture (net-proxy.c), with names from the DNS stub (net-dns.c). This file owns the listening
 * sockets, the stream ids the guest allocates, and the plumbing into main.c's poll loop and channel.c's
 * dispatch.
 *
 * In a VM the listeners are 127.0.0.1:3128 and [::1]:3128 (proxy), 127.0.0.1:3129 and [::1]:3129 (where
 * nftables redirects captured connections) and 127.0.0.53:53 (DNS). Outside a VM (not PID 1, a test) the
 * machine is not ours: only what $SPACE_AGENT_PROXY_LISTEN, $SPACE_AGENT_TRANSPARENT_LISTEN and
 * $SPACE_AGENT_DNS_LISTEN name (ADDRESS:PORT, [IPV6]:PORT) is opened.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "net.h"

enum {
        LISTEN_PROXY,
        LISTEN_TRANSPARENT,
        LISTEN_DNS,
};

typedef struct Listener {
        int fd;
        int kind;
} Listener;

#define LISTENERS_MAX 5
#define NET_POLL_OWNERS (LISTENERS_MAX + SPACE_TUNNELS_MAX)
_Static_assert(NET_POLL_OWNERS <= AGENT_NET_POLL_MAX, "main.c's poll array is too small");

static Listener listeners[LISTENERS_MAX];
static size_t n_listeners;
static Tunnel *owners[NET_POLL_OWNERS];
static size_t n_polled_listeners;
static uint32_t next_id = SPACE_STREAM_GUEST_BIT | 1U;

/* Where refusals are noted for programs and people in the sandbox (space-egress(5), "In the sandbox"); outside a
 * VM only where $SPACE_AGENT_REFUSED_LOG says, never the machine's own /run. */
#define REFUSED_LOG "/run/space/egress-refused.log"
#define REFUSED_LOG_MAX (64 * 1024)
static const char *refused_log;

static char proxy_env_buf[8][96];
static const char *proxy_env[9];

uint64_t net_now_ms(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000U + (uint64_t) ts.tv_nsec / 1000000U;
}

uint32_t net_id_next(void) {
        /* At most SPACE_TUNNELS_MAX + SPACE_RESOLVES_MAX are in use, so this ends quickly. */
        for (;;) {
                uint32_t id = next_id++;

                if (next_id == 0)
                        next_id = SPACE_STREAM_GUEST_BIT | 1U;
                if (!tunnel_find(id) && !dns_stub_has(id))
                        return id;
        }
}

int net_addr_text(const struct sockaddr_storage *sa, char *buf, size_t size, uint16_t *ret_port) {
        if (sa->ss_family == AF_INET) {
                const struct sockaddr_in *a = (const struct sockaddr_in *) sa;
                if (!inet_ntop(AF_INET, &a->sin_addr, buf, (socklen_t) size))
                        return -errno;
                *ret_port = ntohs(a->sin_port);
                return 0;
        }
        if (sa->ss_family == AF_INET6) {
                const struct sockaddr_in6 *a = (const struct sockaddr_in6 *) sa;
                if (!inet_ntop(AF_INET6, &a->sin6_addr, buf, (socklen_t) size))
                        return -errno;
                *ret_port = ntohs(a->sin6_port);
                return 0;
        }
        return -EAFNOSUPPORT;
}

/* ADDRESS:PORT or [IPV6]:PORT */
static int parse_listen(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len) {
        const char *colon = strrchr(s, ':');
        char host[INET6_ADDRSTRLEN + 2];
        unsigned long port;
        size_t hl;
        char *end;

        if (!colon || colon == s)
                return -EINVAL;
        hl = (size_t) (colon - s);
        if (s[0] == '[') {
                if (hl < 3 || s[hl - 1] != ']')
                        return -EINVAL;
                s++;
                hl -= 2;
        }
        if (hl >= sizeof host)
                return -EINVAL;
        memcpy(host, s, hl);
        host[hl] = 0;
        errno = 0;
        port = strtoul(colon + 1, &end, 10);
        if (errno || end == colon + 1 || *end || port > 65535)
                return -EINVAL;

        *ret = (struct sockaddr_storage) {};
        if (inet_pton(AF_INET, host, &((struct sockaddr_in *) ret)->sin_addr) == 1) {
                ((struct sockaddr_in *) ret)->sin_family = AF_INET;
                ((struct sockaddr_in *) ret)->sin_port = htons((uint16_t) port);
                *ret_len = sizeof(struct sockaddr_in);
                return 0;
        }
        if (inet_pton(AF_INET6, host, &((struct sockaddr_in6 *) ret)->sin6_addr) == 1) {
                ((struct sockaddr_in6 *) ret)->sin6_family = AF_INET6;
                ((struct sockaddr_in6 *) ret)->sin6_port = htons((uint16_t) port);
                *ret_len = sizeof(struct sockaddr_in6);
                return 0;
        }
        return -EINVAL;
}

static int open_listener(const char *spec, int kind) {
        struct sockaddr_storage sa;
        socklen_t len;
        int fd, one = 1, r;

        if (n_listeners >= LISTENERS_MAX)
                return -ENOSPC;
        r = parse_listen(spec, &sa, &len);
        if (r < 0) {
                log_warn("listen address '%s': not ADDRESS:PORT", spec);
                return r;
        }
        fd = socket(sa.ss_family, (kind == LISTEN_DNS ? SOCK_DGRAM : SOCK_STREAM) | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
                r = -errno;
                log_warn("socket for %s: %m", spec);
                return r;
        }
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (sa.ss_family == AF_INET6)
                (void) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        if (bind(fd, (struct sockaddr *) &sa, len) < 0 || (kind != LISTEN_DNS && listen(fd, 128) < 0)) {
                r = -errno;
                /* [::1] is missing when IPv6 is off: the IPv4 listener does the work alone */
                log_warn("listen on %s: %m", spec);
                safe_close(fd);
                return r;
        }
        listeners[n_listeners++] = (Listener) { .fd = fd, .kind = kind };
        return 0;
}

static void proxy_env_set(const char *spec) {
        static const char *const keys[] = { "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy",
                                            "https_proxy", "all_proxy" };
        size_t n = 0;

        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                (void) snprintf(proxy_env_buf[n], sizeof proxy_env_buf[n], "%s=http://%s", keys[i], spec);
                proxy_env[n] = proxy_env_buf[n];
                n++;
        }
        proxy_env[n++] = "NO_PROXY=localhost,127.0.0.1,::1";
        proxy_env[n++] = "no_proxy=localhost,127.0.0.1,::1";
        proxy_env[n] = NULL;
}

void net_note_refusal(const char *via, const char *what, const char *message) {
        char line[768], when[32];
        struct timespec ts;
        struct tm tm;
        struct stat st;
        int fd, l;

        if (!refused_log)
                return;
        (void) clock_gettime(CLOCK_REALTIME, &ts);
        if (!gmtime_r(&ts.tv_sec, &tm) || strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
                strcpy(when, "?");
        l = snprintf(line, sizeof line, "%s %s %.260s: %.400s\n", when, via, what ?: "?", message ?: "refused");
        if (l <= 0)
                return;
        if (l >= (int) sizeof line)
                l = (int) sizeof line - 1, line[l - 1] = '\n';
        /* what the host said is text for a person, one line: no control characters survive */
        for (int i = 0; i < l - 1; i++)
                if ((unsigned char) line[i] < 0x20 || line[i] == 0x7f)
                        line[i] = '?';
        /* bounded: one older generation is kept */
        if (stat(refused_log, &st) == 0 && st.st_size > REFUSED_LOG_MAX) {
                char old[PATH_MAX];

                if (snprintf(old, sizeof old, "%s.1", refused_log) < (int) sizeof old)
                        (void) rename(refused_log, old);
        }
        fd = open(refused_log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0644);
        if (fd < 0)
                return;
        (void) !write(fd, line, (size_t) l);
        (void) close(fd);
}

void net_init(void) {
        const char *proxy[2] = {}, *transparent[2] = {}, *dns = NULL;

        refused_log = getpid() == 1 ? REFUSED_LOG : getenv("SPACE_AGENT_REFUSED_LOG");
        if (getpid() == 1) {
                proxy[0] = "127.0.0.1:3128";
                proxy[1] = "[::1]:3128";
                transparent[0] = "127.0.0.1:3129";
                transparent[1] = "[::1]:3129";
                dns = "127.0.0.53:53";
        } else {
                proxy[0] = getenv("SPACE_AGENT_PROXY_LISTEN");
                transparent[0] = getenv("SPACE_AGENT_TRANSPARENT_LISTEN");
                dns = getenv("SPACE_AGENT_DNS_LISTEN");
        }

        for (size_t i = 0; i < 2; i++) {
                if (proxy[i] && open_listener(proxy[i], LISTEN_PROXY) == 0 && !proxy_env[0])
                        proxy_env_set(proxy[i]);
                if (transparent[i])
                        (void) open_listener(transparent[i], LISTEN_TRANSPARENT);
        }
        if (dns && open_listener(dns, LISTEN_DNS) == 0)
                dns_stub_set_fd(listeners[n_listeners - 1].fd);
}

const char *const *net_proxy_env(void) {
        return proxy_env[0] ? proxy_env : NULL;
}

bool net_frame(Channel *c, const SpaceFrameHeader *h, const uint8_t *p) {
        return tunnel_frame(c, h, p) || dns_stub_frame(c, h, p);
}

void net_port(Channel *c, uint32_t id, const uint8_t *p, size_t n) {
        tunnel_port(c, id, p, n);
}

void net_drop_all(Channel *c) {
        tunnels_drop_all();
        dns_stub_drop_all(c);
}

size_t net_poll_fill(const Channel *c, struct pollfd *fds, size_t max) {
        size_t n = 0;

        for (size_t i = 0; i < n_listeners && n < max; i++)
                fds[n++] = (struct pollfd) { .fd = listeners[i].fd, .events = POLLIN };
        n_polled_listeners = n;
        if (max > NET_POLL_OWNERS)
                max = NET_POLL_OWNERS;
        return n + tunnels_poll_fill(c, fds + n, max - n, owners);
}

static uint64_t next_deadline(void) {
        uint64_t next = 0;

        /* with the time 0 nothing is due: the calls only report their next deadline */
        tunnels_timeouts(NULL, 0, &next);
        dns_stub_timeouts(NULL, 0, &next);
        return next;
}

int net_poll_timeout(void) {
        uint64_t next = next_deadline(), now;

        if (next == 0)
                return -1;
        now = net_now_ms();
        return next <= now ? 0 : next - now > 60000 ? 60000 : (int) (next - now);
}

void net_poll_handle(Channel *c, const struct pollfd *fds, size_t n) {
        uint64_t next = 0, now;

        for (size_t i = 0; i < n_polled_listeners && i < n; i++) {
                if (!fds[i].revents)
                        continue;
                switch (listeners[i].kind) {
                case LISTEN_PROXY:
                        proxy_accept(c, listeners[i].fd);
                        break;
                case LISTEN_TRANSPARENT:
                        transparent_accept(c, listeners[i].fd);
                        break;
                case LISTEN_DNS:
                        dns_stub_read(c);
                        break;
                }
        }
        if (n > n_polled_listeners)
                tunnels_poll_handle(c, fds + n_polled_listeners, n - n_polled_listeners, owners);

        now = net_now_ms();
        tunnels_timeouts(c, now, &next);
        dns_stub_timeouts(c, now, &next);
}
