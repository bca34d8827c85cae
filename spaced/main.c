/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
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

#include "http/http.h"
#include "core/log.h"
#include "macro.h"
#include "core/util.h"
#include "core/worker.h"
#include "sandbox/sandbox.h"
#include "template/template.h"
#include "paths.h"

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

/* The TCP listener (ARCHITECTURE.md, decision 11: loopback only, API keys). A taken port is not fatal: the caller warns and
 * keeps serving the unix socket. */
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

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        log_info("received %s, exiting; sandboxes keep running", strsignal((int) si->ssi_signo));
        return sd_event_exit(sd_event_source_get_event(s), 0);
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

int main(int argc, char **argv) {
        _cleanup_free_ char *config_path = NULL, *lock_path = NULL, *pid_path = NULL, *db_path = NULL,
                            *reason = NULL;
        _cleanup_(error_done) Error err = {};
        _cleanup_close_ int lock_fd = -1;
        Manager m = { .completion_fd = -1, .config.idle_timeout = IDLE_TIMEOUT_DEFAULT };
        _cleanup_strv_free_ char **fd_names = NULL;
        const char *listen_setting;
        int listen_fd = -1, tcp_fd = -1, r, n;
        sigset_t mask;

        r = parse_args(argc, argv);
        if (r <= 0)
                return r < 0 ? 2 : 0;
        signal(SIGPIPE, SIG_IGN);

        if (dup_or(arg_socket, space_socket_path, &m.socket_path) < 0 ||
            dup_or(arg_lib_dir, space_lib_dir, &m.lib_dir) < 0 || dup_or(arg_config, space_config_path, &config_path) < 0) {
                log_error("cannot work out where things live: set HOME or XDG_RUNTIME_DIR");
                return 1;
        }
        r = config_load(&m.config, config_path, &err);
        if (r < 0) {
                log_error("bad configuration: %s", err.message ?: strerror(-r));
                return 1;
        }
        if (dup_or(arg_state_dir ?: m.config.state_dir, space_state_dir, &m.state_dir) < 0) {
                log_error("cannot work out the state directory: set HOME or --state-dir");
                return 1;
        }
        if (arg_runtime_dir)
                m.runtime_dir = strdup(arg_runtime_dir);
        else if (arg_socket) {
                m.runtime_dir = strdup(arg_socket);
                char *slash = strrchr(m.runtime_dir, '/');
                if (slash && slash != m.runtime_dir)
                        *slash = 0;
        } else if (space_runtime_dir(&m.runtime_dir) < 0)
                m.runtime_dir = NULL;
        if (!m.runtime_dir) {
                log_error("cannot work out the runtime directory");
                return 1;
        }

        if (arg_accel && accel_setting_from_string(arg_accel, &m.config.accel) < 0) {
                log_error("--accel %s: expected auto, kvm or tcg", arg_accel);
                return 2;
        }

        r = space_mkdir_p(m.runtime_dir, 0700);
        if (r >= 0)
                r = space_mkdir_p(m.state_dir, 0700);
        if (r < 0) {
                log_error_errno(r, "cannot create %s or %s", m.runtime_dir, m.state_dir);
                return 1;
        }

        /* One daemon per user: concurrent spacectl calls may each start one; the losers leave quietly. */
        if (asprintf(&lock_path, "%s/spaced.lock", m.runtime_dir) < 0)
                return 1;
        lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (lock_fd < 0 || flock(lock_fd, LOCK_EX | LOCK_NB) < 0) {
                if (errno == EWOULDBLOCK) {
                        log_info("another spaced is running for %s; exiting", m.runtime_dir);
                        return 0;
                }
                log_error("cannot lock %s: %m", lock_path);
                return 1;
        }

        /* Socket activation: the unix socket is named "api" (or unnamed), the TCP listener "http". */
        n = sd_listen_fds_with_names(1, &fd_names);
        for (int i = 0; i < n; i++) {
                const char *name = fd_names && fd_names[i] ? fd_names[i] : "unknown";
                int *slot = streq(name, "http") ? &tcp_fd : &listen_fd;

                if (*slot >= 0) {
                        log_error("systemd passed more than one '%s' socket; expected 'api' (unix) and 'http' (TCP)",
                                  name);
                        return 1;
                }
                *slot = SD_LISTEN_FDS_START + i;
        }
        if (listen_fd < 0) {
                r = bind_socket(m.socket_path, &listen_fd);
                if (r < 0) {
                        log_error_errno(r, "cannot listen on %s", m.socket_path);
                        return 1;
                }
        }

        listen_setting = arg_listen ?: m.config.listen ?: LISTEN_DEFAULT;
        if (tcp_fd < 0 && !streq(listen_setting, "off")) {
                r = bind_tcp(listen_setting, &tcp_fd);
                if (r == -EADDRINUSE)
                        log_warning("cannot listen on %s: the port is taken (another spaced?); serving only the unix "
                                    "socket. Set 'listen = 127.0.0.1:PORT' in %s or pass --listen", listen_setting,
                                    config_path);
                else if (r < 0)
                        log_warning_errno(r, "cannot listen on %s; serving only the unix socket", listen_setting);
        }

        if (asprintf(&pid_path, "%s/spaced.pid", m.runtime_dir) >= 0) {
                char buf[32];
                snprintf(buf, sizeof buf, "%d\n", (int) getpid());
                (void) write_file_atomic(pid_path, buf);
        }

        switch (m.config.accel) {
        case ACCEL_KVM:
                m.accel = VM_ACCEL_KVM;
                break;
        case ACCEL_TCG:
                m.accel = VM_ACCEL_TCG;
                break;
        default:
                m.accel = vm_accel_detect(&reason);
                if (m.accel == VM_ACCEL_TCG)
                        log_warning("using TCG (software emulation): %s", reason ?: "KVM is not usable");
        }
        m.tsc_khz = vm_host_tsc_khz();
        m.host_cpus = count_cpus();
        m.memory_limit_mib = m.config.memory_limit_mib ?: host_memory_mib() * 8 / 10;
        pthread_mutex_init(&m.completions_lock, NULL);
        pthread_mutex_init(&m.base_lock, NULL);

        if (asprintf(&db_path, "%s/space.db", m.state_dir) < 0)
                return 1;
        r = store_open(db_path, &m.store, &err);
        if (r < 0) {
                log_error("cannot open the state database: %s", err.message ?: strerror(-r));
                return 1;
        }
        (void) store_prune_operations(m.store, now_unix() - 7 * 86400);
        r = store_load_sandboxes(m.store, &m);
        if (r >= 0)
                r = store_load_operations(m.store, &m);
        if (r < 0) {
                log_error_errno(r, "cannot read the state database %s", db_path);
                return 1;
        }
        r = checkpoints_load(&m);
        if (r < 0)
                log_warning_errno(r, "cannot read checkpoints from the state database");
        r = templates_load(&m);
        if (r >= 0 && pools_load(&m) < 0)
                log_warning("cannot read the warm pool settings");
        if (r < 0)
                log_warning_errno(r, "cannot load templates from %s", m.lib_dir);

        r = sd_event_default(&m.event);
        if (r < 0)
                return log_error_errno(r, "sd_event_default"), 1;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        (void) sd_event_add_signal(m.event, NULL, SIGTERM, on_signal, NULL);
        (void) sd_event_add_signal(m.event, NULL, SIGINT, on_signal, NULL);
        r = completions_setup(&m);
        if (r < 0)
                return log_error_errno(r, "cannot set up worker completions"), 1;

        (void) sd_event_add_time_relative(m.event, NULL, CLOCK_MONOTONIC, HOUSEKEEPING_USEC, 0, on_housekeeping, &m);
        (void) sd_event_add_time_relative(m.event, NULL, CLOCK_MONOTONIC, 1000000ULL, 100000, on_lifecycle_tick, &m);
        base_cleanup_stale(m.runtime_dir);
        r = manager_reconcile(&m);
        if (r < 0)
                log_warning_errno(r, "reconciling state failed");
        m.disk_backend = disk_backend_detect(m.state_dir);
        log_info("disk store in %s: %s", m.state_dir,
                 m.disk_backend == DISK_BACKEND_BTRFS ? "btrfs subvolumes and reflinks" : "qcow2 overlays");
        (void) layers_gc(&m); /* what interrupted creates and removals left */
        pool_refill(&m);

        r = http_new(&m, listen_fd, tcp_fd, &m.http);
        if (r < 0)
                return log_error_errno(r, "cannot start the HTTP server"), 1;

        log_info("spaced %s listening on %s%s%s (state %s, accel %s, memory limit %llu MiB)", PACKAGE_VERSION,
                 m.socket_path, http_api_url(m.http) ? " and " : "", http_api_url(m.http) ?: "", m.state_dir, m.accel == VM_ACCEL_KVM ? "kvm" : "tcg",
                 (unsigned long long) m.memory_limit_mib);
        (void) sd_notify(0, "READY=1");
        r = sd_event_loop(m.event);

        /* Workers may still run (a create mid-restore): VMs outlive us by design, so just go. The next start
         * reconciles whatever they left. */
        if (pid_path)
                (void) unlink(pid_path);
        /* Worker threads may still hold pieces of the model; the OS takes it all back. exit() rather than
         * return keeps the model reachable for LeakSanitizer, which would otherwise report all of it. */
        store_close(m.store);
        exit(r < 0 ? 1 : 0);
}
