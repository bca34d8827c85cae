/* SPDX-License-Identifier: Apache-2.0 */

/* INIT: the identity a sandbox gets after every boot, restore or fork (ARCHITECTURE.md, decision 4): hostname,
 * clock, RNG reseed, sandbox id, and the default environment for later EXECs; the daemon's CA to trust
 * (ca.c); the volumes to mount (volume-mount.c); after a create, also the size the root filesystem must grow
 * to (disk.c); for a template's base snapshot, the service to keep running (service.c). */

#include <errno.h>
#include <fcntl.h>
#include <linux/random.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "agent.h"

#define SEED_MAX 512U
#define DEFAULT_ENV_MAX 1024U

static char **default_env;
static char sandbox_id[128];

char **init_default_env(void) {
        return default_env;
}

static int reseed(const char *hex) {
        struct {
                struct rand_pool_info info;
                uint8_t buf[SEED_MAX];
        } seed = {};
        _cleanup_close_ int fd = -1;
        size_t l = strlen(hex);

        if (l == 0 || l % 2 || l / 2 > SEED_MAX)
                return -EINVAL;
        for (size_t i = 0; i < l / 2; i++) {
                int hi = unhexchar(hex[2 * i]), lo = unhexchar(hex[2 * i + 1]);
                if (hi < 0 || lo < 0)
                        return -EINVAL;
                seed.buf[i] = (uint8_t) (hi << 4 | lo);
        }

        fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        /* Credit the entropy so getrandom() is not left waiting after a restore; mix it in plainly if the
         * ioctl is refused. */
        seed.info.entropy_count = (int) (l / 2 * 8);
        seed.info.buf_size = (int) (l / 2);
        if (ioctl(fd, RNDADDENTROPY, &seed.info) < 0 && write(fd, seed.buf, l / 2) < 0)
                return -errno;
        /* Adding entropy does not rekey the CRNG at once on 6.1: without this, forks of one snapshot can
         * read the same bytes from /dev/urandom for a while. */
        (void) ioctl(fd, RNDRESEEDCRNG);
        return 0;
}

static int set_clock(const char *v) {
        char *end;
        unsigned long long ns;
        struct timespec ts;

        errno = 0;
        ns = strtoull(v, &end, 10);
        if (errno || end == v || *end)
                return -EINVAL;
        ts.tv_sec = (time_t) (ns / 1000000000ULL);
        ts.tv_nsec = (long) (ns % 1000000000ULL);
        if (clock_settime(CLOCK_REALTIME, &ts) < 0)
                return -errno;
        return 0;
}

static int write_sandbox_id(const char *v) {
        _cleanup_close_ int fd = -1;
        size_t l = strlen(v);

        if (l == 0 || l >= sizeof sandbox_id || strchr(v, '/') || strchr(v, '\n'))
                return -EINVAL;
        memcpy(sandbox_id, v, l + 1);

        (void) mkdir("/run/space", 0755);
        fd = open("/run/space/sandbox-id.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return -errno;
        if (write(fd, v, l) != (ssize_t) l || write(fd, "\n", 1) != 1)
                return -EIO;
        if (rename("/run/space/sandbox-id.tmp", "/run/space/sandbox-id") < 0)
                return -errno;
        return 0;
}

/* The sandbox's environment, for what runs without the agent's EXEC: a template's service that was started
 * in the base snapshot reads it again when the sandbox id changes (the code interpreter's server gives its
 * kernels a sandbox's env vars that way). "K=V" records, each ended by NUL; written before sandbox-id. */
static int write_env_file(char **env) {
        _cleanup_close_ int fd = -1;

        (void) mkdir("/run/space", 0755);
        fd = open("/run/space/env.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return -errno;
        for (char **e = env; e && *e; e++) {
                size_t l = strlen(*e) + 1;
                if (write(fd, *e, l) != (ssize_t) l)
                        return -EIO;
        }
        if (rename("/run/space/env.tmp", "/run/space/env") < 0)
                return -errno;
        return 0;
}

static int parse_disk_bytes(const char *v, uint64_t *ret) {
        char *end;
        unsigned long long x;

        errno = 0;
        x = strtoull(v, &end, 10);
        if (errno || end == v || *end || x == 0)
                return -EINVAL;
        *ret = x;
        return 0;
}

/* INIT's mount_volume=ID, mount_path=PATH pairs (lib/proto.h, "Volume mounts"), gathered while it is parsed. */
typedef struct InitMounts {
        struct { const char *id, *path; } m[SPACE_VOLUME_MOUNTS_MAX];
        size_t n;
        const char *pending;      /* a mount_volume waiting for its mount_path */
        int r;                    /* the first failure, told after the rest of the INIT */
        char msg[256];
} InitMounts;

static void mounts_fail(InitMounts *im, int r, const char *msg) {
        if (im->r == 0) {
                im->r = r;
                (void) snprintf(im->msg, sizeof im->msg, "%s", msg);
        }
}

static void mounts_record(InitMounts *im, bool is_path, const char *v) {
        if (!is_path) {
                if (im->pending)
                        mounts_fail(im, EINVAL, "mount: mount_volume without its mount_path");
                im->pending = v;
                return;
        }
        if (!im->pending)
                mounts_fail(im, EINVAL, "mount: mount_path without its mount_volume");
        else if (im->n == ELEMENTSOF(im->m))
                mounts_fail(im, EMFILE, "mount: more volumes than a guest mounts");
        else
                im->m[im->n++] = (__typeof__(im->m[0])) { im->pending, v };
        im->pending = NULL;
}

/* Before the thaw: what the workload runs sees its volumes. */
static void mounts_apply(InitMounts *im) {
        if (im->pending)
                mounts_fail(im, EINVAL, "mount: mount_volume without its mount_path");
        for (size_t i = 0; i < im->n; i++) {
                char msg[256];
                int r = volume_mount(im->m[i].id, im->m[i].path, msg, sizeof msg);

                if (r < 0) {
                        log_warn("%s", msg);
                        mounts_fail(im, -r, msg);
                }
        }
}

/* The answer, once all of the INIT is done: the first of what failed late (a mount, the CA), else OK. */
static void init_answer(Channel *c, uint32_t id, const InitMounts *mounts, int ca_r, const char *ca_msg) {
        if (mounts->r) {
                channel_send_error(c, id, mounts->r, mounts->msg);
                return;
        }
        if (ca_r < 0) {
                log_warn("%s", ca_msg);
                channel_send_error(c, id, -ca_r, ca_msg);
                return;
        }
        if (mounts->n > 0) {
                /* how many it has in place: a host that named mounts tells an older agent by its silence */
                SpaceBuf kv = {};

                (void) space_kv_addf(&kv, "mounts", "%zu", mounts->n);
                (void) channel_send_kv(c, SPACE_F_OK, id, &kv);
                space_buf_done(&kv);
                return;
        }
        (void) channel_send(c, SPACE_F_OK, 0, id, NULL, 0);
}

void init_handle(Channel *c, uint32_t id, const uint8_t *p, size_t n) {
        InitMounts mounts = {};
        char **env = NULL;
        size_t off = 0, klen, n_env = 0;
        const char *k, *v, *what = NULL;
        const char *service_cmd = NULL, *service_user = NULL, *service_cwd = NULL, *new_id = NULL, *ca = NULL;
        char ca_msg[256] = "";
        uint64_t disk_bytes = 0;
        int r, err = 0, ca_r = 0;

        /* Outside a VM (a test run on a host) the machine is not ours: validate, but change nothing. */
        bool own = getpid() == 1;

        while ((r = space_kv_next(p, n, &off, &k, &klen, &v)) > 0) {
                int q = 0;
#define KEY(s) (klen == sizeof(s) - 1 && memcmp(k, s, klen) == 0)
                if (!own && (KEY("hostname") || KEY("time_ns") || KEY("seed") || KEY("sandbox_id") || KEY("disk_bytes")))
                        continue;
                if (KEY("hostname")) {
                        size_t l = strlen(v);
                        q = l == 0 || l > 64 ? -EINVAL : sethostname(v, l) < 0 ? -errno : 0;
                } else if (KEY("time_ns"))
                        q = set_clock(v);
                else if (KEY("seed"))
                        q = reseed(v);
                else if (KEY("sandbox_id"))
                        new_id = v; /* written after the env file, below */
                else if (KEY("disk_bytes"))
                        q = parse_disk_bytes(v, &disk_bytes);
                else if (KEY("service"))
                        service_cmd = v;
                else if (KEY("service_user"))
                        service_user = v;
                else if (KEY("service_cwd"))
                        service_cwd = v;
                else if (KEY("ca"))
                        ca = v;
                else if (KEY("mount_volume") || KEY("mount_path"))
                        mounts_record(&mounts, KEY("mount_path"), v);
                else if (KEY("env")) {
                        const char *eq = strchr(v, '=');
                        char **l;

                        if (!eq || eq == v || n_env >= DEFAULT_ENV_MAX)
                                q = -EINVAL;
                        else if (!(l = realloc(env, (n_env + 2) * sizeof *l)) || !(l[n_env] = strdup(v))) {
                                if (l)
                                        env = l;
                                q = -ENOMEM;
                        } else {
                                env = l;
                                env[++n_env] = NULL;
                        }
                }
                if (q < 0 && err == 0) {
                        err = -q;
                        what = KEY("hostname") ? "hostname" : KEY("time_ns") ? "time_ns" : KEY("seed") ? "seed" :
                               KEY("sandbox_id") ? "sandbox_id" : KEY("disk_bytes") ? "disk_bytes" : "env";
                }
#undef KEY
        }
        if (r < 0) {
                strv_free(env);
                channel_send_error(c, id, EBADMSG, "malformed INIT payload");
                return;
        }

        /* The env list replaces the previous defaults (a restored sandbox gets its own). */
        strv_free(default_env);
        default_env = env;
        if (own && new_id) {
                /* the env file first: whoever sees a new sandbox id finds the new env beside it */
                if (write_env_file(default_env) < 0)
                        log_warn("cannot write /run/space/env: %m");
                r = write_sandbox_id(new_id);
                if (r < 0 && err == 0) {
                        err = -r;
                        what = "sandbox_id";
                }
        }

        if (err) {
                char msg[256];
                (void) snprintf(msg, sizeof msg, "%s: %s", what, strerror(err));
                channel_send_error(c, id, err, msg);
                return;
        }
        /* Before the workload runs: a new CA (a snapshot made with an older one) is in place when it does. A
         * failure is told last, with the identity in place. */
        if (ca)
                ca_r = ca_install(ca, ca_msg, sizeof ca_msg);
        mounts_apply(&mounts);
        /* The clock and the seed are in place: the workload, frozen if this guest was saved for others to
         * restore (freeze.c), may run now, and not an instruction before. */
        work_thaw();
        /* After the defaults it runs with; the payload (and so the strings) lives until we return. */
        r = service_configure(service_cmd, service_user, service_cwd);
        if (r < 0) {
                channel_send_error(c, id, -r, r == -EBUSY ? "service: another command already runs" :
                                              "service: not a valid command, user or directory");
                return;
        }
        /* Last: the identity is in place even if growing fails, and the host learns why it failed. */
        if (disk_bytes > 0) {
                char msg[256];
                r = disk_grow_root(disk_bytes, msg, sizeof msg);
                if (r < 0) {
                        channel_send_error(c, id, -r, msg);
                        return;
                }
        }
        init_answer(c, id, &mounts, ca_r, ca_msg);
}
