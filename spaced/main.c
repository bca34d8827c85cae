/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "e2b/e2b.h"
#include "core/tls.h"
#include "channel/channel.h"
#include "egress/egress.h"
#include "api/api.h"
#include "http/http.h"
#include "mcp/mcp-http.h"
#include "proxy/proxy.h"
#include "core/log.h"
#include "macro.h"
#include "core/util.h"
#include "core/worker.h"
#include "sandbox/forward.h"
#include "sandbox/sandbox.h"
#include "secret/secret.h"
#include "volume/volume.h"
#include "template/template.h"
#include "paths.h"
#include "reload.h"
#include "accel-start.h"

static char *arg_socket = NULL, *arg_state_dir = NULL, *arg_runtime_dir = NULL, *arg_lib_dir = NULL,
            *arg_config = NULL, *arg_accel = NULL, *arg_listen = NULL;

static void help(void) {
        printf("Usage: spaced [OPTIONS]\n\n"
               "The space daemon: owns templates, sandboxes (QEMU microVMs) and operations for one user.\n"
               "Normally started by systemd socket activation or by spacectl.\n\n"
               "  --socket PATH       API socket (default: $XDG_RUNTIME_DIR/space/api.sock)\n"
               "  --state-dir DIR     SQLite state, disks, snapshots (default: $XDG_STATE_HOME/space)\n"
               "  --runtime-dir DIR   per-sandbox sockets and pid files (default: the socket's directory)\n"
               "  --lib-dir DIR       guest kernel, initramfs and templates (default: %s)\n"
               "  --config FILE       configuration file (default: $XDG_CONFIG_HOME/space/spaced.conf)\n"
               "  --accel auto|kvm|tcg  accelerator (overrides the config file)\n"
               "  --listen ADDR:PORT|off  TCP API listener, loopback only (default: " LISTEN_DEFAULT ")\n"
               "  -v, --verbose       debug logging\n"
               "  -h, --help          this help\n"
               "  --version           print the version\n",
               SPACE_PKGLIBDIR);
}

static int parse_args(int argc, char **argv) {
        enum { ARG_SOCKET = 0x100, ARG_STATE, ARG_RUNTIME, ARG_LIB, ARG_CONFIG, ARG_ACCEL, ARG_LISTEN, ARG_VERSION };
        static const struct option options[] = {
                { "socket", required_argument, NULL, ARG_SOCKET },
                { "state-dir", required_argument, NULL, ARG_STATE },
                { "runtime-dir", required_argument, NULL, ARG_RUNTIME },
                { "lib-dir", required_argument, NULL, ARG_LIB },
                { "config", required_argument, NULL, ARG_CONFIG },
                { "accel", required_argument, NULL, ARG_ACCEL },
                { "listen", required_argument, NULL, ARG_LISTEN },
                { "verbose", no_argument, NULL, 'v' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                {},
        };
        int c;

        while ((c = getopt_long(argc, argv, "hv", options, NULL)) >= 0)
                switch (c) {
                case ARG_SOCKET:
                        arg_socket = optarg;
                        break;
                case ARG_STATE:
                        arg_state_dir = optarg;
                        break;
                case ARG_RUNTIME:
                        arg_runtime_dir = optarg;
                        break;
                case ARG_LIB:
                        arg_lib_dir = optarg;
                        break;
                case ARG_CONFIG:
                        arg_config = optarg;
                        break;
                case ARG_ACCEL:
                        arg_accel = optarg;
                        break;
                case ARG_LISTEN: {
                        struct sockaddr_storage sa;
                        socklen_t len;
                        int q = listen_address_parse(optarg, &sa, &len);
                        if (q < 0) {
                                fprintf(stderr, "spaced: --listen %s: %s\n", optarg,
                                        q == -EADDRNOTAVAIL ? "only loopback addresses (127.0.0.0/8, [::1]) are allowed"
                                                            : "expected ADDR:PORT (e.g. 127.0.0.1:7070) or off");
                                return -EINVAL;
                        }
                        arg_listen = optarg;
                        break;
                }
                case 'v':
                        log_max_level = LOG_DEBUG_LEVEL;
                        break;
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("spaced %s\n", PACKAGE_VERSION);
                        return 0;
                default:
                        return -EINVAL;
                }
        if (optind < argc) {
                fprintf(stderr, "spaced: unexpected argument '%s'; see spaced --help\n", argv[optind]);
                return -EINVAL;
        }
        return 1;
}

static int dup_or(const char *arg, int (*fallback)(char **), char **ret) {
        if (arg) {
                *ret = strdup(arg);
                return *ret ? 0 : -ENOMEM;
        }
        return fallback(ret);
}

static int bind_socket(const char *path, int *ret_fd) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -1;
        mode_t old;

        if (strlen(path) >= sizeof sa.sun_path)
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        (void) unlink(path); /* we hold the lock: whatever is there is stale */
        old = umask(0077);
        if (bind(fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
                int r = -errno;
                umask(old);
                return r;
        }
        umask(old);
        if (listen(fd, SOMAXCONN) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* The TCP listener (ARCHITECTURE.md, decision 11: loopback only, API keys). */
static int bind_tcp(const char *setting, int *ret_fd) {
        struct sockaddr_storage sa;
        socklen_t len;
        _cleanup_close_ int fd = -1;
        int r, one = 1;

        *ret_fd = -1;
        r = listen_address_parse(setting, &sa, &len);
        if (r < 0 || len == 0)
                return r;
        fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, (struct sockaddr *) &sa, len) < 0 || listen(fd, SOMAXCONN) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static void exit_loop(Manager *m) {
        log_info("exiting; sandboxes keep running");
        (void) sd_event_exit(m->event, 0);
}

/* MCP sessions end first, while the loop still serves the API their ends call (their sandboxes removed); a
 * second signal exits at once. */
static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = userdata;

        log_info("received %s", strsignal((int) si->ssi_signo));
        if (!mcp_http_shutdown(m, exit_loop))
                exit_loop(m);
        return 0;
}

/* SIGHUP: re-read the configuration, as POST /v1/daemon/reload does (daemon_reload logs the outcome). */
static int on_sighup(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        _cleanup_(error_done) Error err = {};

        (void) daemon_reload(userdata, &err);
        return 0;
}

/* QEMU's stderr log lives as long as the VM; keep it from growing without bound. */
#define QEMU_LOG_MAX (1024 * 1024)
#define HOUSEKEEPING_USEC (600ULL * 1000000ULL)

static int on_housekeeping(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;

        for (Sandbox *sb = m->sandboxes; sb; sb = sb->next) {
                if (sb->run_dir && sb->state == SANDBOX_RUNNING)
                        (void) vm_log_trim(sb->run_dir, QEMU_LOG_MAX);
                (void) sandbox_save(sb); /* last_active is only kept in memory between these */
        }
        (void) store_prune_operations(m->store, now_unix() - 7 * 86400);
        (void) layers_gc(m);
        (void) sd_event_source_set_time(s, usec + HOUSEKEEPING_USEC);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

static int on_lifecycle_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        lifecycle_tick(userdata);
        (void) sd_event_source_set_time(s, usec + 1000000ULL);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

static unsigned count_cpus(void) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        return n > 0 ? (unsigned) n : 1;
}

/* Where things live, from the arguments and the environment: the API socket, the guest files and the
 * configuration file. The state directory waits for the configuration, which may name it. */
static int resolve_paths(Manager *m, char **ret_config_path) {
        if (dup_or(arg_socket, space_socket_path, &m->socket_path) < 0 ||
            dup_or(arg_lib_dir, space_lib_dir, &m->lib_dir) < 0 ||
            dup_or(arg_config, space_config_path, ret_config_path) < 0) {
                log_error("cannot work out where things live: set HOME or XDG_RUNTIME_DIR");
                return -ENOENT;
        }
        return 0;
}

static int load_config(Manager *m, const char *config_path) {
        _cleanup_(error_done) Error err = {};
        int r;

        m->config_path = strdup(config_path);
        if (!m->config_path)
                return log_error_errno(-ENOMEM, "cannot load the configuration: %m");
        r = daemon_config_read(config_path, &m->config, &m->egress, &err);
        if (r < 0) {
                log_error("bad configuration: %s", err.message ?: strerror(-r));
                return r;
        }
        m->config_loaded_at = now_unix();
        m->reload = daemon_reload;
        if (m->egress->policy.n_profiles > 0 || m->egress->policy.base.n > 0)
                log_info("egress: %zu profile(s), %zu base rule(s)",
                         m->egress->policy.n_profiles, m->egress->policy.base.n);
        return 0;
}

/* The state directory (--state-dir, the configuration, then XDG) and the runtime directory (--runtime-dir,
 * the directory of --socket, then XDG). */
static int resolve_dirs(Manager *m) {
        if (dup_or(arg_state_dir ?: m->config.state_dir, space_state_dir, &m->state_dir) < 0) {
                log_error("cannot work out the state directory: set HOME or --state-dir");
                return -ENOENT;
        }
        if (arg_runtime_dir)
                m->runtime_dir = strdup(arg_runtime_dir);
        else if (arg_socket) {
                m->runtime_dir = strdup(arg_socket);
                char *slash = strrchr(m->runtime_dir, '/');
                if (slash && slash != m->runtime_dir)
                        *slash = 0;
        } else if (space_runtime_dir(&m->runtime_dir) < 0)
                m->runtime_dir = NULL;
        if (!m->runtime_dir) {
                log_error("cannot work out the runtime directory");
                return -ENOENT;
        }
        return 0;
}

/* --accel overrides the configuration; checked after it is read, so a bad --accel is a usage error (exit 2).
 * Kept apart from m->config.accel, which stays the file's, so a reload compares the file with the file. */
static AccelSetting accel_setting;

static int apply_accel_arg(Manager *m) {
        accel_setting = m->config.accel;
        if (arg_accel && accel_setting_from_string(arg_accel, &accel_setting) < 0) {
                log_error("--accel %s: expected auto, kvm or tcg", arg_accel);
                return -EINVAL;
        }
        return 0;
}

/* The runtime directory holds the API socket, the lock, the pid file and every QEMU's sockets; the state
 * directory the database (every sandbox's tokens), disks and memory images: a neighbour who owns one or can
 * get into it (/tmp/space-UID created first by someone else) could read them, plant symlinks or listen in our
 * place, so we refuse to start rather than fix it (it may be theirs to fix). override names the variable that
 * points elsewhere. */
static int check_private_dir(const char *path, const char *what, const char *override) {
        struct stat st = {};
        int r;

        r = space_private_dir_check(path, &st);
        switch (r) {
        case 0:
                return 0;
        case -ELOOP:
                log_error("the %s %s is a symlink; refusing to use it (someone may have planted it): remove it, "
                          "or point %s at a directory of your own", what, path, override);
                break;
        case -EPERM:
                log_error("the %s %s belongs to uid %u, not to us (uid %u); refusing to use it: remove it, or "
                          "point %s at a directory of your own with mode 0700",
                          what, path, (unsigned) st.st_uid, (unsigned) geteuid(), override);
                break;
        case -EACCES:
                log_error("the %s %s has mode %04o: group and others can get in, refusing to use it; it must be "
                          "0700 (chmod 0700 %s)", what, path, (unsigned) (st.st_mode & 07777), path);
                break;
        default:
                log_error_errno(r, "cannot check the %s %s", what, path);
        }
        return r;
}

static int make_dirs(const Manager *m) {
        _cleanup_free_ char *socket_dir = NULL;
        char *slash;
        int r;

        r = space_mkdir_p(m->runtime_dir, 0700);
        if (r >= 0)
                r = space_mkdir_p(m->state_dir, 0700);
        if (r < 0)
                return log_error_errno(r, "cannot create %s or %s", m->runtime_dir, m->state_dir);
        r = check_private_dir(m->runtime_dir, "runtime directory", "SPACE_RUNTIME_DIR or XDG_RUNTIME_DIR");
        if (r >= 0)
                r = check_private_dir(m->state_dir, "state directory", "SPACE_STATE_DIR or XDG_STATE_HOME");
        if (r < 0)
                return r;
        /* The socket may live elsewhere (--socket, SPACE_SOCKET): its directory must be as private. */
        socket_dir = strdup(m->socket_path);
        if (!socket_dir)
                return log_error_errno(-ENOMEM, "cannot check the socket's directory");
        slash = strrchr(socket_dir, '/');
        if (!slash || slash == socket_dir)
                return 0;
        *slash = 0;
        if (streq(socket_dir, m->runtime_dir))
                return 0;
        r = space_mkdir_p(socket_dir, 0700);
        if (r < 0)
                return log_error_errno(r, "cannot create %s", socket_dir);
        return check_private_dir(socket_dir, "socket's directory", "SPACE_SOCKET");
}

/* One daemon per user: concurrent spacectl calls may each start one; the losers leave quietly. -EWOULDBLOCK
 * when another spaced holds the lock. */
static int take_lock(const char *runtime_dir, int *ret_fd) {
        _cleanup_free_ char *lock_path = NULL;
        _cleanup_close_ int fd = -1;
        int r;

        if (asprintf(&lock_path, "%s/spaced.lock", runtime_dir) < 0)
                return -ENOMEM;
        fd = open(lock_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
        if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0) {
                r = -errno;
                if (r == -EWOULDBLOCK) {
                        log_info("another spaced is running for %s; exiting", runtime_dir);
                        return r;
                }
                if (r == -ELOOP)
                        log_error("cannot lock %s: it is a symlink, which we do not follow (someone may have planted "
                                  "it); remove it", lock_path);
                else
                        log_error("cannot lock %s: %m", lock_path);
                return r;
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* Socket activation: the unix socket is named "api" (or unnamed), the TCP listener "http", the TLS one "https".
 * Leaves a slot at -1 when systemd passed no such socket. */
static int listeners_from_systemd(int *unix_fd, int *tcp_fd, int *tls_fd) {
        _cleanup_strv_free_ char **fd_names = NULL;
        int n;

        n = sd_listen_fds_with_names(1, &fd_names);
        for (int i = 0; i < n; i++) {
                const char *name = fd_names && fd_names[i] ? fd_names[i] : "unknown";
                int *slot = streq(name, "http") ? tcp_fd : streq(name, "https") ? tls_fd : unix_fd;

                if (*slot >= 0) {
                        log_error("systemd passed more than one '%s' socket; expected 'api' (unix) and 'http' (TCP)",
                                  name);
                        return -EEXIST;
                }
                *slot = SD_LISTEN_FDS_START + i;
        }
        return 0;
}

/* Binds the TCP listener a setting names ("off": none), unless systemd passed one (*ret_fd >= 0); says why
 * not, naming the key, once. */
static int bind_setting(const char *setting, const char *key, const char *what, const char *or_else,
                        const char *config_path, int *ret_fd) {
        int r;

        if (*ret_fd >= 0 || streq(setting, "off"))
                return 0;
        r = bind_tcp(setting, ret_fd);
        if (r == -EADDRINUSE)
                return log_error_errno(r, "cannot listen on %s%s: the port is taken by another process (another "
                                       "user's spaced?); refusing to start, so that no client talks to it instead. "
                                       "Set '%s = 127.0.0.1:OTHER_PORT' or '%s = off' in %s%s", setting, what, key,
                                       key, config_path, or_else);
        if (r < 0)
                return log_error_errno(r, "cannot listen on %s (the '%s =' setting in %s%s); refusing to start",
                                       setting, key, config_path, or_else);
        return 0;
}

/* The listeners systemd passed, else our own. Both must work: a TCP port someone else holds would leave the
 * clients configured for it (SDKs, scripts with an API key) talking to that process, handing it their key,
 * so a daemon that cannot bind refuses to start at all (with "listen = off" it binds none). */
static int setup_listeners(const Manager *m, const char *config_path, int *ret_unix_fd, int *ret_tcp_fd,
                           int *ret_tls_fd) {
        const char *listen_setting, *tls_setting;
        int r;

        r = listeners_from_systemd(ret_unix_fd, ret_tcp_fd, ret_tls_fd);
        if (r < 0)
                return r;

        /* the TLS listener as the TCP one, for the same reason; both before the unix socket: a daemon that
         * gives up on them leaves no socket behind that spacectl would find dead */
        tls_setting = m->config.e2b_tls_listen ?: E2B_TLS_LISTEN_DEFAULT;
        r = bind_setting(tls_setting, "e2b_tls_listen", " (TLS)", "", config_path, ret_tls_fd);
        if (r < 0)
                return r;
        listen_setting = arg_listen ?: m->config.listen ?: LISTEN_DEFAULT;
        r = bind_setting(listen_setting, "listen", "", ", or pass --listen", config_path, ret_tcp_fd);
        if (r < 0)
                return r;

        if (*ret_unix_fd < 0) {
                r = bind_socket(m->socket_path, ret_unix_fd);
                if (r < 0)
                        return log_error_errno(r, "cannot listen on %s", m->socket_path);
        }
        return 0;
}

/* Best effort: *ret_path stays NULL when there is none to remove at exit. */
static void write_pid_file(const char *runtime_dir, char **ret_path) {
        char buf[32];

        if (asprintf(ret_path, "%s/spaced.pid", runtime_dir) < 0) {
                *ret_path = NULL;
                return;
        }
        snprintf(buf, sizeof buf, "%d\n", (int) getpid());
        (void) write_file_atomic(*ret_path, buf);
}

/* The accelerator (from the configuration, or KVM when usable), the host's TSC, CPUs and the memory budget.
 * accel = kvm with a KVM that cannot run guests is refused here, with the reason, rather than at every
 * create as "QEMU exited at start". */
static int detect_host(Manager *m) {
        int r;

        r = accel_decide(m, accel_setting);
        if (r < 0)
                return r;
        m->tsc_khz = vm_host_tsc_khz();
        if (vm_host_fingerprint(m->accel, m->config.qemu_binary, &m->host_fingerprint) < 0)
                m->host_fingerprint = NULL; /* out of memory: snapshots then record no host */
        m->host_cpus = count_cpus();
        m->memory_limit_mib = config_memory_limit_mib(&m->config);
        return 0;
}

/* Whether QEMU can be confined here (ARCHITECTURE.md, decision 12), said once at start when it cannot: under
 * auto every QEMU then runs without its namespaces, under on every create fails. */
static void detect_confinement(Manager *m) {
        _cleanup_free_ char *reason = NULL;

        m->confined = false;
        if (m->config.confine == VM_CONFINE_OFF) {
                m->unconfined_reason = strdup(VM_UNCONFINED_OFF);
                return;
        }
        if (vm_confine_probe(&reason) >= 0) {
                m->confined = true;
                return;
        }
        if (m->config.confine == VM_CONFINE_AUTO)
                log_warning("QEMU runs unconfined, without namespaces of its own: %s. Set confine = on in spaced.conf "
                            "to refuse to start sandboxes instead, or confine = off to silence this",
                            reason ?: "the probe failed");
        else
                log_warning("confine = on, but QEMU cannot be confined here: %s. Sandboxes will fail to start",
                            reason ?: "the probe failed");
        m->unconfined_reason = TAKE_PTR(reason);
}

/* The state database, with the sandboxes and operations it journals. */
static int open_store(Manager *m) {
        _cleanup_(error_done) Error err = {};
        _cleanup_free_ char *db_path = NULL;
        int r;

        if (asprintf(&db_path, "%s/space.db", m->state_dir) < 0)
                return -ENOMEM;
        r = store_open(db_path, &m->store, &err);
        if (r < 0) {
                log_error("cannot open the state database: %s", err.message ?: strerror(-r));
                return r;
        }
        (void) store_prune_operations(m->store, now_unix() - 7 * 86400);
        sandbox_register_ops();   /* before anything below sandbox/ asks about sandboxes */
        r = store_load_sandboxes(m->store, m);
        if (r >= 0)
                r = store_load_operations(m->store, m);
        if (r < 0)
                return log_error_errno(r, "cannot read the state database %s", db_path);
        return 0;
}

/* Checkpoints, templates, warm pools, secrets and volumes: the daemon serves without any of them, so failures only
 * warn. */
static void load_objects(Manager *m) {
        _cleanup_(error_done) Error err = {};
        int r;

        if (secrets_load(m, &err) < 0)
                log_warning("cannot load the secrets: %s", err.message ?: "out of memory");
        error_done(&err);
        if (volumes_load(m, &err) < 0)
                log_warning("cannot load the volumes: %s", err.message ?: "out of memory");

        r = checkpoints_load(m);
        if (r < 0)
                log_warning_errno(r, "cannot read checkpoints from the state database");
        r = templates_load(m);
        if (r >= 0 && pools_load(m) < 0)
                log_warning("cannot read the warm pool settings");
        if (r < 0)
                log_warning_errno(r, "cannot load templates from %s", m->lib_dir);
}

/* The sd-event loop with SIGTERM/SIGINT (exit), SIGHUP (reload), worker completions and the periodic timers. */
static int setup_event_loop(Manager *m) {
        sigset_t mask;
        int r;

        r = sd_event_default(&m->event);
        if (r < 0)
                return log_error_errno(r, "sd_event_default");
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        (void) sd_event_add_signal(m->event, NULL, SIGTERM, on_signal, m);
        (void) sd_event_add_signal(m->event, NULL, SIGINT, on_signal, m);
        (void) sd_event_add_signal(m->event, NULL, SIGHUP, on_sighup, m);
        r = completions_setup(m);
        if (r < 0)
                return log_error_errno(r, "cannot set up worker completions");

        (void) sd_event_add_time_relative(m->event, NULL, CLOCK_MONOTONIC, HOUSEKEEPING_USEC, 0, on_housekeeping, m);
        (void) sd_event_add_time_relative(m->event, NULL, CLOCK_MONOTONIC, 1000000ULL, 100000, on_lifecycle_tick, m);
        return 0;
}

/* What a previous daemon left: stale base snapshot builds, sandboxes and operations to adopt, finish or roll
 * back, and background port forwards to listen on again. */
static void reconcile(Manager *m) {
        int r;

        base_cleanup_stale(m->runtime_dir);
        r = manager_reconcile(m);
        if (r < 0)
                log_warning_errno(r, "reconciling state failed");
        /* after the sandboxes are settled: a forward goes with a sandbox that reconciling removed */
        forwards_restore(m);
}

static void detect_disk_backend(Manager *m) {
        m->disk_backend = disk_backend_detect(m->state_dir);
        log_info("disk store in %s: %s", m->state_dir,
                 m->disk_backend == DISK_BACKEND_BTRFS ? "btrfs subvolumes and reflinks" : "qcow2 overlays");
}

/* The TLS listener's CA and certificate (core/tls.h), before anything starts: a refusal (a planted symlink, a key
 * others may read) stops the daemon with its reason. Without e2b_domain the name is space.localhost:PORT. */
static int setup_tls(Manager *m, int tls_fd, TlsFiles *ret, char **ret_domain) {
        _cleanup_(error_done) Error e = {};
        _cleanup_free_ char *domain = NULL;
        struct sockaddr_storage sa;
        socklen_t len = sizeof sa;
        bool made = false;
        unsigned port;
        int r;

        /* the CA, whether or not there is a listener: the egress gateway signs with it, and guests trust it */
        r = tls_ca_load(m->state_dir, &m->tls_ca, &made, &e);
        if (r < 0)
                return log_error_errno(r, "cannot set up the local CA in %s/tls: %s; refusing to start", m->state_dir,
                                       e.message ?: strerror(-r));
        if (made)
                log_info("made a local CA in %s/tls; clients trust it through 'eval \"$(spacectl e2b env)\"', "
                         "sandboxes always", m->state_dir);
        /* sandboxes do through their base's INIT and each identity INIT, which carry its certificate */
        r = agent_set_guest_ca(tls_ca_pem(m->tls_ca));
        if (r < 0)
                return log_error_errno(r, "the local CA in %s/tls cannot be given to guests: %s; refusing to start",
                                       m->state_dir, strerror(-r));
        if (tls_fd < 0)
                return 0;
        if (getsockname(tls_fd, (struct sockaddr *) &sa, &len) < 0)
                return log_error_errno(-errno, "cannot read the TLS listener's address");
        port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *) &sa)->sin6_port
                                              : ((struct sockaddr_in *) &sa)->sin_port);
        if (!m->config.e2b_domain && asprintf(&domain, E2B_DOMAIN_DEFAULT_NAME ":%u", port) < 0)
                return log_error_errno(-ENOMEM, "out of memory");
        r = tls_setup(m->tls_ca, made, m->state_dir, m->config.e2b_domain ?: domain, TLS_HOST_BUNDLE, ret, &e);
        if (r < 0)
                return log_error_errno(r, "cannot set up TLS for e2b_tls_listen: %s; refusing to start (or set "
                                       "'e2b_tls_listen = off')", e.message ?: strerror(-r));
        if (ret->cert_made)
                log_info("made a TLS certificate for %s and its subdomains, signed by %s",
                         m->config.e2b_domain ?: domain, ret->ca_file);
        *ret_domain = TAKE_PTR(domain);
        return 0;
}

static int setup_http(Manager *m, int unix_fd, int tcp_fd, int tls_fd, TlsFiles *tls, const char *tls_domain) {
        int r;

        /* The router matches tables in the order added: the native API's, then the facade's, then /mcp. */
        r = http_add_routes(api_routes);
        if (r < 0)
                return log_error_errno(r, "cannot add the API routes");
        http_set_host_route(&proxy_host_route);
        r = e2b_add_routes();
        if (r < 0)
                return log_error_errno(r, "cannot add the E2B routes");
        r = mcp_http_setup(m);
        if (r < 0)
                return log_error_errno(r, "cannot add the MCP routes");
        r = http_new(m, unix_fd, tcp_fd, &m->http);
        if (r < 0)
                return log_error_errno(r, "cannot start the HTTP server");
        if (tls_fd >= 0) {
                r = http_add_tls_listener(m->http, tls_fd, tls_domain, tls);
                if (r < 0)
                        return log_error_errno(r, "cannot start the TLS listener");
        }
        /* The gateway never lets a sandbox reach our own TCP API, nor its TLS listener. */
        egress_gateway_setup(http_api_port(m->http), http_tls_port(m->http));
        return 0;
}

/* Tells systemd and the log that we serve, and runs until SIGTERM or SIGINT. */
static int run(Manager *m) {
        log_info("spaced %s listening on %s%s%s%s%s (state %s, accel %s, memory limit %llu MiB)", PACKAGE_VERSION,
                 m->socket_path, http_api_url(m->http) ? " and " : "", http_api_url(m->http) ?: "",
                 http_tls_url(m->http) ? " and " : "", http_tls_url(m->http) ?: "", m->state_dir,
                 m->accel == VM_ACCEL_KVM ? "kvm" : "tcg", (unsigned long long) m->memory_limit_mib);
        (void) sd_notify(0, "READY=1");
        return sd_event_loop(m->event);
}

/* Workers may still run (a create mid-restore): VMs outlive us by design, so just go. The next start
 * reconciles whatever they left. */
static void finish(Manager *m, const char *pid_path) {
        egress_audit_flush_all();
        if (pid_path)
                (void) unlink(pid_path);
        secrets_free(m);
        volumes_free(m);
        store_close(m->store);
}

int main(int argc, char **argv) {
        _cleanup_free_ char *config_path = NULL, *pid_path = NULL, *tls_domain = NULL;
        _cleanup_(tls_files_done) TlsFiles tls = {};
        _cleanup_close_ int lock_fd = -1;
        Manager m = { .completion_fd = -1, .config.idle_timeout = IDLE_TIMEOUT_DEFAULT };
        int listen_fd = -1, tcp_fd = -1, tls_fd = -1, r;

        r = parse_args(argc, argv);
        if (r <= 0)
                return r < 0 ? 2 : 0;
        signal(SIGPIPE, SIG_IGN);
        /* everything the daemon makes is its user's alone (the database holds every sandbox's tokens); what must
         * be shared is shared with an explicit mode */
        (void) umask(0077);

        if (resolve_paths(&m, &config_path) < 0 || load_config(&m, config_path) < 0 || resolve_dirs(&m) < 0)
                return 1;
        if (apply_accel_arg(&m) < 0)
                return 2;
        if (make_dirs(&m) < 0)
                return 1;
        r = take_lock(m.runtime_dir, &lock_fd);
        if (r < 0)
                return r == -EWOULDBLOCK ? 0 : 1;
        if (setup_listeners(&m, config_path, &listen_fd, &tcp_fd, &tls_fd) < 0 ||
            setup_tls(&m, tls_fd, &tls, &tls_domain) < 0)
                return 1;
        write_pid_file(m.runtime_dir, &pid_path);

        /* confinement first: the accelerator's probe VM is confined as sandboxes are */
        detect_confinement(&m);
        if (detect_host(&m) < 0)
                return 1;
        pthread_mutex_init(&m.completions_lock, NULL);
        pthread_mutex_init(&m.base_lock, NULL);
        if (open_store(&m) < 0)
                return 1;
        load_objects(&m);

        if (setup_event_loop(&m) < 0)
                return 1;
        reconcile(&m);
        detect_disk_backend(&m);
        (void) layers_gc(&m); /* what interrupted creates and removals left */
        pool_refill(&m);
        if (setup_http(&m, listen_fd, tcp_fd, tls_fd, &tls, tls_domain) < 0)
                return 1;

        r = run(&m);
        finish(&m, pid_path);
        /* Worker threads may still hold pieces of the model; the OS takes it all back. exit() rather than
         * return keeps the model reachable for LeakSanitizer, which would otherwise report all of it. */
        exit(r < 0 ? 1 : 0);
}
