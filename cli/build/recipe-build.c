/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "macro.h"
#include "paths.h"
#include "build/recipe-build.h"

/* How a recipe becomes a tarball (space-template(5) tells users the same):
 *
 *   from = debian:SUITE   mmdebstrap --variant=minbase writes the tar to a pipe; mmtarfilter drops /dev's
 *                         device nodes on the way to WORKDIR/rootfs.tar. file and run are --customize-hooks, so
 *                         they run in mmdebstrap's chroot with /proc, /sys and /dev mounted and the network up.
 *   from = scratch        one sh script: SCRIPT ROOTDIR, then the file and run steps (chroot, nothing mounted),
 *                         then GNU tar with sorted names, numeric owners and clamped times.
 *
 * Both run as root: as root directly (mmdebstrap --mode=root), otherwise in a user namespace with the user's
 * subordinate ids (mmdebstrap --mode=unshare, and mmdebstrap --unshare-helper for scratch), so that a tree
 * can hold files of several owners without privileges. Every timestamp is clamped to SOURCE_DATE_EPOCH. */

#define DEFAULT_EPOCH 86400ULL /* 1970-01-02, as templates/minimal/build.sh */
#define MMDEBSTRAP "mmdebstrap"
#define MMTARFILTER "mmtarfilter"
#define MERGED_USR_HOOKS "/usr/share/mmdebstrap/hooks/maybe-merged-usr"
#define CHROOT "/usr/sbin/chroot"
#define RUN_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define FAILURE_LINES 15
#define PARENT_TAR ".space-parent.tar" /* the parent template's tree, in the build directory */

/* Documentation, manual pages and translations stay out of Debian trees; the setting stays in the image
 * (/etc/dpkg/dpkg.cfg.d/99mmdebstrap), so what sandboxes install later leaves them out too. */
static const char *const dpkg_options[] = {
        "path-exclude=/usr/share/doc/*",
        "path-include=/usr/share/doc/*/copyright",
        "path-exclude=/usr/share/man/*",
        "path-exclude=/usr/share/info/*",
        "path-exclude=/usr/share/locale/*",
        "path-exclude=/usr/share/lintian/*",
};

typedef struct Strv {
        char **v;
        size_t n;
} Strv;

static void strv_done(Strv *s) {
        for (size_t i = 0; i < s->n; i++)
                free(s->v[i]);
        free(s->v);
        *s = (Strv) {};
}

__attribute__((format(printf, 2, 3))) static int strv_pushf(Strv *s, const char *fmt, ...) {
        char **nv, *x;
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vasprintf(&x, fmt, ap);
        va_end(ap);
        if (n < 0)
                return -ENOMEM;
        nv = realloc(s->v, (s->n + 2) * sizeof(char *));
        if (!nv) {
                free(x);
                return -ENOMEM;
        }
        s->v = nv;
        s->v[s->n++] = x;
        s->v[s->n] = NULL;
        return 0;
}

/* 'it'\''s' */
static char *shell_quote(const char *s) {
        size_t n = 3;
        char *q, *o;

        for (const char *c = s; *c; c++)
                n += *c == '\'' ? 4 : 1;
        q = o = malloc(n);
        if (!q)
                return NULL;
        *o++ = '\'';
        for (; *s; s++)
                if (*s == '\'') {
                        memcpy(o, "'\\''", 4);
                        o += 4;
                } else
                        *o++ = *s;
        *o++ = '\'';
        *o = 0;
        return q;
}

/* For a message inside a double-quoted shell string: one line, at most 200 bytes, nothing the shell expands. */
static char *message_safe(const char *s) {
        char *m = strndup(s, 200);

        if (!m)
                return NULL;
        for (char *c = m; *c; c++)
                if (!isprint((unsigned char) *c) || strchr("'\"$`\\!", *c))
                        *c = '?';
        return m;
}

unsigned long long build_epoch(void) {
        const char *e = getenv("SOURCE_DATE_EPOCH");
        unsigned long long v;
        char *end;

        if (!e || !*e || strspn(e, "0123456789") != strlen(e))
                return DEFAULT_EPOCH;
        errno = 0;
        v = strtoull(e, &end, 10);
        return errno ? DEFAULT_EPOCH : v;
}

static double now_sec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static bool in_path(const char *prog) {
        _cleanup_free_ char *path = strdup(getenv("PATH") ?: "/usr/bin:/bin");
        char *save = NULL;

        if (!path)
                return false;
        for (char *d = strtok_r(path, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
                _cleanup_free_ char *p = NULL;
                if (asprintf(&p, "%s/%s", *d ? d : ".", prog) >= 0 && access(p, X_OK) == 0)
                        return true;
        }
        return false;
}

static int read_small_file(const char *path, char *buf, size_t size) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n;

        if (fd < 0)
                return -errno;
        n = read(fd, buf, size - 1);
        if (n < 0)
                return -errno;
        buf[n] = 0;
        return 0;
}

/* Does /etc/subuid (or subgid) give this user a range? Lines are NAME:START:COUNT or UID:START:COUNT. */
static bool has_subids(const char *file, const char *user, uid_t uid) {
        _cleanup_fclose_ FILE *f = fopen(file, "re");
        char line[512], uid_s[32];

        if (!f)
                return false;
        snprintf(uid_s, sizeof uid_s, "%u", (unsigned) uid);
        while (fgets(line, sizeof line, f)) {
                char *colon = strchr(line, ':');
                if (!colon)
                        continue;
                *colon = 0;
                if ((user && streq(line, user)) || streq(line, uid_s))
                        return true;
        }
        return false;
}

/* As a normal user the build runs in a user namespace mapped to the user's subordinate ids: say exactly what is
 * missing when it cannot. */
static int check_unshare_possible(void) {
        struct passwd *pw = getpwuid(geteuid());
        const char *user = pw ? pw->pw_name : NULL;
        char buf[32];

        if (!in_path("newuidmap") || !in_path("newgidmap")) {
                log_error("building as a user other than root runs in a user namespace, which needs newuidmap and "
                          "newgidmap: install them (apt install uidmap), or build as root");
                return -ENOENT;
        }
        if (read_small_file("/proc/sys/kernel/unprivileged_userns_clone", buf, sizeof buf) == 0 && buf[0] == '0') {
                log_error("building as a user other than root needs unprivileged user namespaces, which this kernel "
                          "has turned off: sysctl -w kernel.unprivileged_userns_clone=1, or build as root");
                return -EPERM;
        }
        if (read_small_file("/proc/sys/user/max_user_namespaces", buf, sizeof buf) == 0 && buf[0] == '0') {
                log_error("building as a user other than root needs user namespaces, and user.max_user_namespaces "
                          "is 0: sysctl -w user.max_user_namespaces=10000, or build as root");
                return -EPERM;
        }
        if (!has_subids("/etc/subuid", user, geteuid()) || !has_subids("/etc/subgid", user, geteuid())) {
                log_error("building as %s (not root) maps the tree's owners to subordinate ids, and %s has none in "
                          "/etc/subuid and /etc/subgid: add a range (as root: usermod --add-subuids 100000-165535 "
                          "--add-subgids 100000-165535 %s), or build as root",
                          user ?: "this user", user ?: "this user", user ?: "USER");
                return -EPERM;
        }
        return 0;
}

/* ---- running the tools ---- */

typedef struct Runner {
        const BuildOptions *o;
        bool live;              /* the tools' output goes to our stderr */
        int log_fd;             /* else to here */
        char *log_path;
} Runner;

static pid_t spawn(Runner *rn, char *const argv[], const char *cwd, int in_fd, int out_fd) {
        int err_fd = rn->live ? STDERR_FILENO : rn->log_fd;
        pid_t pid = fork();

        if (pid < 0)
                return -errno;
        if (pid > 0)
                return pid;

        /* child: its own process group (which a signal to us ends as a whole), stdin, stdout (the tar stream or
         * the log) and stderr, then the tool */
        (void) setpgid(0, 0);
        (void) signal(SIGPIPE, SIG_DFL);
        (void) signal(SIGINT, SIG_DFL);
        (void) signal(SIGTERM, SIG_DFL);
        (void) signal(SIGHUP, SIG_DFL);
        if (in_fd < 0)
                in_fd = open("/dev/null", O_RDONLY);
        if (in_fd < 0 || dup2(in_fd, STDIN_FILENO) < 0 || dup2(out_fd >= 0 ? out_fd : err_fd, STDOUT_FILENO) < 0 ||
            dup2(err_fd, STDERR_FILENO) < 0)
                _exit(126);
        /* nothing of ours (the daemon's connection): mmdebstrap hands apt a pipe by number, as "cat >&N" to a
         * dash that reads one digit only */
        (void) close_range(3, ~0U, 0);
        if (cwd && chdir(cwd) < 0) {
                dprintf(STDERR_FILENO, "space-build: cannot enter %s: %s\n", cwd, strerror(errno));
                _exit(126);
        }
        execvp(argv[0], argv);
        dprintf(STDERR_FILENO, "space-build: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
}

/* Waits for all of pids; a signal to us ends their process groups (they are not the terminal's foreground
 * group: Ctrl-C reaches only us). The first one's status that is not a success is returned in *ret_status (0
 * when all succeeded). */
static int wait_all(pid_t *pids, size_t n, const char *const *names, const char **ret_failed, int *ret_status) {
        bool interrupted = false;

        *ret_status = 0;
        *ret_failed = NULL;
        for (size_t i = 0; i < n; i++) {
                int st;

                for (;;) {
                        if (waitpid(pids[i], &st, 0) == pids[i])
                                break;
                        if (errno != EINTR)
                                return -errno;
                        if (cli_signal_received && !interrupted) {
                                interrupted = true;
                                for (size_t j = i; j < n; j++)
                                        if (kill(-pids[j], SIGTERM) < 0)
                                                (void) kill(pids[j], SIGTERM);
                        }
                }
                if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) && *ret_status == 0) {
                        *ret_status = st ?: 1;
                        *ret_failed = names[i];
                }
        }
        return interrupted || cli_signal_received ? -EINTR : 0;
}

/* After a failure with the output in the log: the lines that say what failed ("E: " from apt and mmdebstrap,
 * "space-build: " from our steps), else the log's tail. */
static void show_log(Runner *rn) {
        _cleanup_fclose_ FILE *f = NULL;
        char *lines[FAILURE_LINES] = {}, *errors[FAILURE_LINES] = {};
        size_t n_lines = 0, n_errors = 0;
        char buf[1024];

        if (rn->live || !rn->log_path)
                return;
        f = fopen(rn->log_path, "re");
        if (!f)
                return;
        while (fgets(buf, sizeof buf, f)) {
                char *s = strdup(buf), **ring;
                size_t *k;

                if (!s)
                        break;
                s[strcspn(s, "\n")] = 0;
                if (strncmp(s, "E: ", 3) == 0 || strncmp(s, "space-build: ", 13) == 0) {
                        ring = errors;
                        k = &n_errors;
                } else {
                        ring = lines;
                        k = &n_lines;
                }
                free(ring[*k % FAILURE_LINES]);
                ring[*k % FAILURE_LINES] = s;
                (*k)++;
        }
        {
                char **ring = n_errors ? errors : lines;
                size_t k = n_errors ? n_errors : n_lines;
                size_t first = k > FAILURE_LINES ? k - FAILURE_LINES : 0;

                for (size_t i = first; i < k; i++)
                        fprintf(stderr, "  %s\n", ring[i % FAILURE_LINES]);
                if (k)
                        fprintf(stderr, "  (rerun with --verbose for the whole output)\n");
        }
        for (size_t i = 0; i < FAILURE_LINES; i++) {
                free(lines[i]);
                free(errors[i]);
        }
}

static int report_failure(Runner *rn, const Recipe *r, const char *tool, int status, int err) {
        if (err == -EINTR) {
                log_error("building %s was interrupted", r->name);
                return -EINTR;
        }
        if (err < 0) {
                log_error("building %s: cannot wait for %s: %s", r->name, tool, strerror(-err));
                return err;
        }
        if (WIFSIGNALED(status))
                log_error("building %s failed: %s was killed by signal %d", r->name, tool, WTERMSIG(status));
        else
                log_error("building %s failed: %s exited with status %d", r->name, tool, WEXITSTATUS(status));
        show_log(rn);
        return -EIO;
}

/* ---- the steps both kinds share, each a shell snippet with the tree as "$1" ---- */

/* scratch: SRC is readable where the snippet runs (the recipe's copy); the tree is written through chroot so
 * that its own symlinks resolve inside it. */
static int step_file_scratch(const RecipeFile *f, const char *src, char **ret) {
        _cleanup_free_ char *src_q = shell_quote(src), *dest = shell_quote(f->dest), *shown = message_safe(f->dest);
        char mode[16];

        if (!src_q || !dest || !shown)
                return -ENOMEM;
        snprintf(mode, sizeof mode, "%04o", (unsigned) f->mode);
        if (asprintf(ret,
                     CHROOT " \"$1\" /bin/sh -c 'd=${1%%/*}; [ -z \"$d\" ] || mkdir -p \"$d\"; "
                     "cat > \"$1\" && chown 0:0 \"$1\" && chmod %s \"$1\"' sh %s < %s || "
                     "{ echo \"space-build: file = ... %s: cannot copy it into the tree\" >&2; exit 1; }",
                     mode, dest, src_q, shown) < 0)
                return -ENOMEM;
        return 0;
}

static int step_run(const char *cmd, unsigned long long epoch, char **ret) {
        static const char *const passed[] = { "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY",
                                              "NO_PROXY" };
        _cleanup_free_ char *q = shell_quote(cmd), *shown = message_safe(cmd), *proxies = strdup("");

        if (!q || !shown || !proxies)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(passed); i++) {
                const char *v = getenv(passed[i]);
                _cleanup_free_ char *qv = NULL, *kv = NULL;
                char *np;

                if (!v)
                        continue;
                if (asprintf(&kv, "%s=%s", passed[i], v) < 0 || !(qv = shell_quote(kv)) ||
                    asprintf(&np, "%s %s", proxies, qv) < 0)
                        return -ENOMEM;
                free(proxies);
                proxies = np;
        }
        if (asprintf(ret,
                     "env -i PATH=" RUN_PATH " HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "
                     "SOURCE_DATE_EPOCH=%llu%s " CHROOT " \"$1\" /bin/sh -c %s || "
                     "{ s=$?; echo \"space-build: run = %s: failed with status $s\" >&2; exit $s; }",
                     epoch, proxies, q, shown) < 0)
                return -ENOMEM;
        return 0;
}

/* Runs argv_a | argv_b > out_fd (argv_b NULL: argv_a > out_fd) with in_fd as argv_a's stdin, and waits. */
static int run_pipeline(Runner *rn, const Recipe *r, char **argv_a, const char *name_a, int in_fd, char **argv_b,
                        const char *name_b, int out_fd) {
        const char *names[2] = { name_a, name_b }, *failed;
        pid_t pids[2] = { -1, -1 };
        int pipefd[2] = { -1, -1 }, status, k;
        size_t n = argv_b ? 2 : 1;

        if (argv_b && pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        pids[0] = spawn(rn, argv_a, NULL, in_fd, argv_b ? pipefd[1] : out_fd);
        if (pids[0] > 0 && argv_b)
                pids[1] = spawn(rn, argv_b, NULL, pipefd[0], out_fd);
        safe_close(pipefd[0]);
        safe_close(pipefd[1]);
        if (pids[0] < 0 || (argv_b && pids[1] < 0)) {
                k = pids[0] < 0 ? pids[0] : pids[1];
                log_error("cannot start %s: %s", pids[0] < 0 ? name_a : name_b, strerror(-k));
                if (pids[0] > 0) {
                        (void) kill(pids[0], SIGTERM);
                        (void) waitpid(pids[0], NULL, 0);
                }
                return k;
        }
        k = wait_all(pids, n, names, &failed, &status);
        if (k < 0 || status)
                return report_failure(rn, r, failed ?: name_a, status, k);
        return 0;
}

/* ---- from = debian:SUITE ---- */

static int cache_dir(const char *suite, char **ret) {
        const char *base = getenv("SPACE_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        int n;

        if (base && *base)
                n = asprintf(ret, "%s/apt/%s", base, suite);
        else if (xdg && *xdg)
                n = asprintf(ret, "%s/space/apt/%s", xdg, suite);
        else if (home && *home)
                n = asprintf(ret, "%s/.cache/space/apt/%s", home, suite);
        else
                return -ENOENT;
        return n < 0 ? -ENOMEM : 0;
}

/* The host's own Debian sources when the recipe asks for the host's release (a local mirror or proxy keeps
 * working); otherwise mmdebstrap's default, deb.debian.org with updates and security. */
static const char *host_sources(const char *suite) {
        static const char *const files[] = { "/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list" };
        _cleanup_fclose_ FILE *f = fopen("/etc/os-release", "re");
        char line[256];
        bool same = false;
        struct stat st;

        if (!f)
                return NULL;
        while (fgets(line, sizeof line, f)) {
                line[strcspn(line, "\n")] = 0;
                if (strncmp(line, "VERSION_CODENAME=", 17) == 0) {
                        const char *v = line + 17;
                        size_t l = strlen(v);

                        if (l >= 2 && v[0] == '"' && v[l - 1] == '"')
                                same = strlen(suite) == l - 2 && strncmp(v + 1, suite, l - 2) == 0;
                        else
                                same = streq(v, suite);
                }
        }
        if (!same)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(files); i++)
                if (stat(files[i], &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
                        return files[i];
        return NULL;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        (void) st;
        (void) type;
        (void) ftw;
        (void) remove(path);
        return 0;
}

static void remove_tree(const char *path) {
        (void) nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* mmdebstrap's special hooks (upload, sync-in, sync-out) run in mmdebstrap's outer process, as us, so they
 * reach our files even when the rest runs as a subordinate id; their arguments are split like a shell's. */
static int debian_file_hooks(Strv *a, const RecipeFile *f) {
        _cleanup_free_ char *src = shell_quote(f->src), *dest = shell_quote(f->dest), *parent = strdup(f->dest),
                                *parent_q = NULL;
        char *slash;

        if (!src || !dest || !parent)
                return -ENOMEM;
        slash = strrchr(parent, '/');
        *slash = 0;
        if (*parent) {
                parent_q = shell_quote(parent);
                if (!parent_q || strv_pushf(a, "--customize-hook=" CHROOT " \"$1\" mkdir -p %s", parent_q) < 0)
                        return -ENOMEM;
        }
        if (strv_pushf(a, "--customize-hook=upload %s %s", src, dest) < 0 ||
            strv_pushf(a, "--customize-hook=" CHROOT " \"$1\" /bin/sh -c 'chown 0:0 \"$1\" && chmod %04o \"$1\"' sh %s",
                       (unsigned) f->mode, dest) < 0)
                return -ENOMEM;
        return 0;
}

/* A recipe's parent, for from = TEMPLATE: its tree as the daemon exported it, and what the tree says of itself. */
typedef struct Parent {
        const char *tarball;
        char suite[65];         /* VERSION_CODENAME of its os-release, else "" */
        bool has_apt;           /* usr/bin/apt-get and var/lib/dpkg/status: packages can be installed */
} Parent;

static int push_packages(Strv *a, char **packages) {
        _cleanup_free_ char *inc = NULL;
        size_t len = 0;

        if (!packages)
                return 0;
        for (char **p = packages; *p; p++)
                len += strlen(*p) + 1;
        inc = calloc(1, len + 1);
        if (!inc)
                return -ENOMEM;
        for (char **p = packages; *p; p++) {
                if (p != packages)
                        strcat(inc, ",");
                strcat(inc, *p);
        }
        return strv_pushf(a, "--include=%s", inc);
}

/* The .debs of earlier builds: synced in before the download, and out, without what the archive no longer has,
 * into a fresh directory that replaces the cache once the build succeeded; the tree's own copy goes with
 * mmdebstrap's cleanup. Without a usable cache directory the build just downloads (*ret_new stays NULL). */
static int push_cache_hooks(Strv *a, const char *suite, char **ret_cache, char **ret_new) {
        _cleanup_free_ char *cache = NULL, *cache_new = NULL, *cache_q = NULL, *cache_new_q = NULL;

        if (cache_dir(suite, &cache) < 0 || space_mkdir_p(cache, 0755) < 0 ||
            asprintf(&cache_new, "%s.new-XXXXXX", cache) < 0 || !mkdtemp(cache_new))
                return 0;
        *ret_new = cache_new; /* removed by the caller whatever happens next */
        cache_new = NULL;
        cache_q = shell_quote(cache);
        cache_new_q = shell_quote(*ret_new);
        if (!cache_q || !cache_new_q || strv_pushf(a, "--skip=essential/unlink") < 0 ||
            strv_pushf(a, "--setup-hook=mkdir -p \"$1\"/var/cache/apt/archives/") < 0 ||
            strv_pushf(a, "--setup-hook=sync-in %s /var/cache/apt/archives/", cache_q) < 0 ||
            /* sync-in gives the directory the cache's owner: the user's uid in unshare mode */
            strv_pushf(a, "--setup-hook=chown -R 0:0 \"$1\"/var/cache/apt/archives/") < 0 ||
            strv_pushf(a, "--customize-hook=" CHROOT " \"$1\" apt-get autoclean -qq || true") < 0 ||
            strv_pushf(a, "--customize-hook=sync-out /var/cache/apt/archives %s", cache_new_q) < 0)
                return -ENOMEM;
        *ret_cache = TAKE_PTR(cache);
        return 0;
}

/* file and run, then what every Debian tree gets: the same apt directories' owners and no host names. */
static int push_customize_hooks(Strv *a, const Recipe *r) {
        unsigned long long epoch = build_epoch();

        for (size_t i = 0; i < r->n_files; i++)
                if (debian_file_hooks(a, &r->files[i]) < 0)
                        return -ENOMEM;
        for (char **c = r->run; c && *c; c++) {
                _cleanup_free_ char *s = NULL;
                if (step_run(*c, epoch, &s) < 0 || strv_pushf(a, "--customize-hook=%s", s) < 0)
                        return -ENOMEM;
        }
        /* apt gives its partial directories to _apt only when _apt could reach the build directory (TMPDIR):
         * the same tree whatever TMPDIR was */
        if (strv_pushf(a, "--customize-hook=" CHROOT " \"$1\" /bin/sh -c "
                          "'for d in /var/cache/apt/archives/partial /var/lib/apt/lists/partial; do "
                          "[ ! -d $d ] || chown _apt:root $d; done; true'") < 0)
                return -ENOMEM;
        /* mmdebstrap copies the host's hostname and resolv.conf in; neither belongs in a template */
        return strv_pushf(a, "--customize-hook=" CHROOT " \"$1\" /bin/sh -c "
                             "'[ -L /etc/hostname ] || echo space > /etc/hostname; "
                             "[ -L /etc/resolv.conf ] || : > /etc/resolv.conf'");
}

/* from = TEMPLATE with apt: mmdebstrap's custom variant over the parent's tree, which a setup hook unpacks
 * (mmdebstrap's own tar-in, so owners come through in unshare mode too). What mmdebstrap wrote to
 * /etc/apt/sources.list* goes first: apt then reads the parent's sources, and resolves the packages against
 * the parent's dpkg status, so only what is missing is downloaded and installed. The cleanup of lists and
 * caches is mmdebstrap's, as for debian:SUITE. */
static int push_parent(Strv *a, const Parent *p) {
        _cleanup_free_ char *tar_q = shell_quote(p->tarball);

        if (!tar_q || strv_pushf(a, "--variant=custom") < 0 ||
            strv_pushf(a, "--setup-hook=rm -f \"$1\"/etc/apt/sources.list \"$1\"/etc/apt/sources.list.d/*") < 0 ||
            strv_pushf(a, "--setup-hook=tar-in %s /", tar_q) < 0)
                return -ENOMEM;
        return 0;
}

static int debian_args(Strv *a, const Recipe *r, bool as_root, const Parent *parent, const char *suite,
                       char **ret_cache, char **ret_cache_new) {
        const char *sources;
        struct stat st;

        if (strv_pushf(a, MMDEBSTRAP) < 0 || strv_pushf(a, "--mode=%s", as_root ? "root" : "unshare") < 0 ||
            strv_pushf(a, "--format=tar") < 0 || push_packages(a, r->packages) < 0)
                return -ENOMEM;
        if (parent) {
                if (push_parent(a, parent) < 0 || (!r->packages && strv_pushf(a, "--skip=update") < 0))
                        return -ENOMEM;
        } else {
                if (strv_pushf(a, "--variant=minbase") < 0)
                        return -ENOMEM;
                /* merged /usr the way debootstrap does it, without the usrmerge package and the perl it pulls in */
                if (stat(MERGED_USR_HOOKS, &st) == 0 && strv_pushf(a, "--hook-dir=" MERGED_USR_HOOKS) < 0)
                        return -ENOMEM;
                for (size_t i = 0; i < ELEMENTSOF(dpkg_options); i++)
                        if (strv_pushf(a, "--dpkgopt=%s", dpkg_options[i]) < 0)
                                return -ENOMEM;
        }
        if ((!parent || r->packages) && push_cache_hooks(a, suite, ret_cache, ret_cache_new) < 0)
                return -ENOMEM;
        if (push_customize_hooks(a, r) < 0 || strv_pushf(a, "%s", suite) < 0 || strv_pushf(a, "-") < 0)
                return -ENOMEM;
        /* a child's sources are the parent's: this one only satisfies mmdebstrap, and the setup hook removes it */
        if (parent)
                return strv_pushf(a, "deb http://deb.debian.org/debian %s main", suite);
        sources = host_sources(suite);
        return sources ? strv_pushf(a, "%s", sources) : 0;
}

/* from = debian:SUITE, or from = TEMPLATE (parent) whose tree has apt. */
static int build_debian(Runner *rn, const Recipe *r, bool as_root, const char *tarball, const Parent *parent) {
        _cleanup_free_ char *cache = NULL, *cache_new = NULL;
        const char *suite = parent ? (*parent->suite ? parent->suite : "stable") : r->suite;
        _cleanup_close_ int out_fd = -1;
        Strv a = {}, f = {};
        int k;

        if (!in_path(MMDEBSTRAP) || !in_path(MMTARFILTER)) {
                log_error("building %s from %s%s needs mmdebstrap and mmtarfilter: install mmdebstrap (as root: "
                          "build-aux/install-deps.sh, or apt install mmdebstrap)", r->name,
                          parent ? "" : "debian:", parent ? r->parent : r->suite);
                return -ENOENT;
        }
        k = debian_args(&a, r, as_root, parent, suite, &cache, &cache_new);
        if (k >= 0)
                k = strv_pushf(&f, MMTARFILTER) < 0 || strv_pushf(&f, "--path-exclude=/dev/*") < 0 ? -ENOMEM : 0;
        if (k < 0)
                goto out;

        out_fd = open(tarball, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (out_fd < 0) {
                k = -errno;
                log_error("cannot create %s: %s", tarball, strerror(errno));
                goto out;
        }
        k = run_pipeline(rn, r, a.v, MMDEBSTRAP, -1, f.v, MMTARFILTER, out_fd);
        if (k >= 0 && cache_new && cache) {
                /* the new cache in place of the old one, which goes */
                if (renameat2(AT_FDCWD, cache_new, AT_FDCWD, cache, RENAME_EXCHANGE) < 0)
                        log_error("warning: cannot update the package cache %s: %s", cache, strerror(errno));
        }
out:
        if (cache_new)
                remove_tree(cache_new);
        strv_done(&a);
        strv_done(&f);
        return k;
}

/* ---- from = scratch ---- */

/* The script runs as root, or as root of a user namespace whose ids are the user's subordinate ones and so
 * cannot read the user's files: the recipe comes in as a tar stream on stdin and the tree's tarball goes out on
 * stdout, and the tree itself lives in a private temporary directory that the script removes. */
/* The script's first step: the build script, or the parent's tree (a from = TEMPLATE parent without apt), which
 * comes in with the recipe as PARENT_TAR. */
static int scratch_first_step(const Recipe *r, bool parent, char **ret) {
        _cleanup_free_ char *build_q = NULL, *shown = NULL;

        if (parent)
                return asprintf(ret, "tar -x -p --numeric-owner -C \"$1\" -f ./" PARENT_TAR " && rm -f ./" PARENT_TAR
                                     " || { echo 'space-build: cannot unpack the parent template' >&2; exit 1; }\n") < 0
                               ? -ENOMEM : 0;
        build_q = shell_quote(r->build + strlen(r->dir) + 1);
        shown = message_safe(r->build + strlen(r->dir) + 1);
        if (!build_q || !shown ||
            asprintf(ret, "./%s \"$1\" || { s=$?; echo \"space-build: build = %s: failed with status $s\" >&2; exit $s; }\n",
                     build_q, shown) < 0)
                return -ENOMEM;
        return 0;
}

static int build_scratch(Runner *rn, const Recipe *r, bool as_root, const char *tarball, const Parent *parent) {
        _cleanup_free_ char *script = NULL, *first = NULL, *parent_dir = NULL;
        unsigned long long epoch = build_epoch();
        _cleanup_close_ int out_fd = -1;
        size_t dir_len = strlen(r->dir), len;
        Strv a = {}, t = {};
        FILE *s;
        int k;

        if (!as_root && !in_path(MMDEBSTRAP)) {
                log_error("building %s as a user other than root needs mmdebstrap (its --unshare-helper): "
                          "install mmdebstrap, or build as root", r->name);
                return -ENOENT;
        }
        if (scratch_first_step(r, parent, &first) < 0)
                return -ENOMEM;
        s = open_memstream(&script, &len);
        if (!s)
                return -ENOMEM;
        fprintf(s, "set -e\n"
                   "exec 3>&1 1>&2\n"
                   "work=$(mktemp -d \"${TMPDIR:-/var/tmp}/space-tree.XXXXXX\")\n"
                   "trap 'rm -rf \"$work\"' EXIT\n"
                   "trap 'exit 143' TERM; trap 'exit 130' INT; trap 'exit 129' HUP\n"
                   "mkdir \"$work/recipe\"\n"
                   "tar -x --no-same-owner -C \"$work/recipe\" -f -\n"
                   "mkdir -m 0755 \"$work/root\"\n"
                   "set -- \"$work/root\"\n"
                   "cd \"$work/recipe\"\n"
                   "%s", first);
        if (r->n_files > 0 || r->run)
                fprintf(s, "[ -e \"$1/bin/sh\" ] || [ -L \"$1/bin/sh\" ] || "
                           "{ echo 'space-build: file = and run = need /bin/sh in the tree' >&2; exit 1; }\n");
        for (size_t i = 0; i < r->n_files; i++) {
                _cleanup_free_ char *step = NULL, *src = NULL;
                if (asprintf(&src, "%s", r->files[i].src + dir_len + 1) < 0 ||
                    step_file_scratch(&r->files[i], src, &step) < 0) {
                        fclose(s);
                        return -ENOMEM;
                }
                fprintf(s, "%s\n", step);
        }
        for (char **c = r->run; c && *c; c++) {
                _cleanup_free_ char *step = NULL;
                if (step_run(*c, epoch, &step) < 0) {
                        fclose(s);
                        return -ENOMEM;
                }
                fprintf(s, "%s\n", step);
        }
        /* The same tree gives the same bytes: sorted names, numeric owners, no atime/ctime, times clamped. */
        fprintf(s, "tar --create --file=- --directory=\"$1\" --sort=name --format=pax "
                   "--pax-option=exthdr.name=%%d/PaxHeaders/%%f,delete=atime,delete=ctime --numeric-owner "
                   "--mtime=@%llu --clamp-mtime . >&3 || "
                   "{ echo 'space-build: tar could not pack the tree' >&2; exit 1; }\n",
                epoch);
        if (fclose(s) != 0 || !script)
                return -ENOMEM;

        k = 0;
        if (!as_root)
                k = strv_pushf(&a, MMDEBSTRAP) < 0 || strv_pushf(&a, "--unshare-helper") < 0;
        /* the recipe, with what its symlinks point to */
        k = k || strv_pushf(&a, "/bin/sh") < 0 || strv_pushf(&a, "-c") < 0 || strv_pushf(&a, "%s", script) < 0 ||
            strv_pushf(&a, "space-build") < 0 || strv_pushf(&t, "tar") < 0 || strv_pushf(&t, "--create") < 0 ||
            strv_pushf(&t, "--dereference") < 0 || strv_pushf(&t, "--file=-") < 0 ||
            strv_pushf(&t, "--directory=%s", r->dir) < 0 || strv_pushf(&t, ".") < 0;
        /* the parent's tree after the recipe, as PARENT_TAR, for the root of the namespace to read */
        if (!k && parent) {
                parent_dir = strdup(parent->tarball);
                k = !parent_dir || strv_pushf(&t, "--directory=%s", dirname(parent_dir)) < 0 || strv_pushf(&t, PARENT_TAR) < 0;
        }
        if (k) {
                k = -ENOMEM;
                goto out;
        }
        out_fd = open(tarball, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (out_fd < 0) {
                k = -errno;
                log_error("cannot create %s: %s", tarball, strerror(errno));
                goto out;
        }
        /* tar of the recipe | the script > tarball */
        k = run_pipeline(rn, r, t.v, "tar (of the recipe)", -1, a.v, "the build", out_fd);
out:
        strv_done(&a);
        strv_done(&t);
        return k;
}

/* ---- from = TEMPLATE ---- */

/* Runs argv with its stdout read into buf (at most size - 1 bytes, NUL-terminated): its exit status, or < 0. */
static int run_capture(Runner *rn, char *const argv[], char *buf, size_t size) {
        int pipefd[2], st;
        size_t n = 0;
        pid_t pid;

        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        pid = spawn(rn, argv, NULL, -1, pipefd[1]);
        safe_close(pipefd[1]);
        if (pid < 0) {
                safe_close(pipefd[0]);
                return pid;
        }
        for (;;) {
                char drop[4096];
                ssize_t k = n + 1 < size ? read(pipefd[0], buf + n, size - 1 - n) : read(pipefd[0], drop, sizeof drop);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                if (n + 1 < size)
                        n += (size_t) k;
        }
        buf[n] = 0;
        safe_close(pipefd[0]);
        while (waitpid(pid, &st, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* What the parent's tree says of itself: whether it has apt and dpkg, and its Debian suite (for the package
 * cache, which is per suite). The tar is the daemon's export: member names without "./". */
static int inspect_parent(Runner *rn, Parent *p) {
        char *has[] = { "tar", "-tf", (char *) p->tarball, "usr/bin/apt-get", "var/lib/dpkg/status", NULL };
        char *osr[] = { "tar", "-xOf", (char *) p->tarball, "usr/lib/os-release", NULL };
        char buf[8192];
        int k;

        k = run_capture(rn, has, buf, sizeof buf);
        if (k < 0)
                return k;
        p->has_apt = k == 0;
        if (run_capture(rn, osr, buf, sizeof buf) == 0)
                for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
                        if (strncmp(line, "VERSION_CODENAME=", 17) == 0) {
                                const char *v = line + 17 + (line[17] == '"');
                                size_t l = strcspn(v, "\"");
                                if (l < sizeof p->suite && strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789.-") >= l)
                                        snprintf(p->suite, sizeof p->suite, "%.*s", (int) l, v);
                        }
        return 0;
}

static int build_from_template(Runner *rn, const Recipe *r, const BuildOptions *o, bool as_root, const char *workdir,
                               const char *tarball) {
        _cleanup_free_ char *path = NULL;
        Parent p = {};
        int k;

        if (asprintf(&path, "%s/" PARENT_TAR, workdir) < 0)
                return -ENOMEM;
        if (!o->fetch_parent) {
                log_error("building %s from %s needs the daemon's copy of %s", r->name, r->parent, r->parent);
                return -EINVAL;
        }
        k = o->fetch_parent(path, o->fetch_userdata);
        if (k < 0)
                return k;
        p.tarball = path;
        k = inspect_parent(rn, &p);
        if (k < 0) {
                log_error("cannot read the tree of %s: %s", r->parent, strerror(-k));
                return k;
        }
        if (r->packages && !p.has_apt) {
                log_error("%s: packages = needs apt and dpkg in the parent's tree, and %s has none (it was built "
                          "from = scratch?): install with run = steps, or build from a Debian template", r->conf,
                          r->parent);
                return -EINVAL;
        }
        k = p.has_apt ? build_debian(rn, r, as_root, tarball, &p) : build_scratch(rn, r, as_root, tarball, &p);
        (void) unlink(path); /* the tree is in the tarball now */
        return k;
}

/* ---- the whole build ---- */

void build_result_done(BuildResult *b) {
        /* Our own files only: a scratch tree, which may hold files of other owners, removed itself. */
        if (b->workdir)
                remove_tree(b->workdir);
        free(b->workdir);
        free(b->tarball);
        *b = (BuildResult) {};
}

int recipe_build(const Recipe *r, const BuildOptions *o, BuildResult *ret) {
        _cleanup_free_ char *tmpl = NULL;
        const char *tmp = getenv("TMPDIR");
        BuildResult b = {};
        Runner rn = { .o = o, .log_fd = -1 };
        bool as_root = geteuid() == 0;
        char epoch_s[32];
        double t0 = now_sec();
        int k;

        if (!as_root) {
                k = check_unshare_possible();
                if (k < 0)
                        return k;
        }
        /* /var/tmp: a Debian tree is 100+ MiB, more than a tmpfs /tmp may hold */
        if (asprintf(&tmpl, "%s/space-build.XXXXXX", tmp && *tmp ? tmp : "/var/tmp") < 0)
                return -ENOMEM;
        if (!mkdtemp(tmpl)) {
                k = -errno;
                log_error("cannot create a build directory %s: %s", tmpl, strerror(errno));
                return k;
        }
        b.workdir = TAKE_PTR(tmpl);
        if (asprintf(&b.tarball, "%s/rootfs.tar", b.workdir) < 0 || asprintf(&rn.log_path, "%s/build.log", b.workdir) < 0) {
                build_result_done(&b);
                free(rn.log_path);
                return -ENOMEM;
        }
        rn.live = o->verbose || (!o->quiet && isatty(STDERR_FILENO));
        if (!rn.live) {
                rn.log_fd = open(rn.log_path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
                if (rn.log_fd < 0) {
                        k = -errno;
                        log_error("cannot create %s: %s", rn.log_path, strerror(errno));
                        goto out;
                }
        }
        /* for the tools (mmdebstrap, dpkg, python's byte-compiler, tar) and the build script */
        snprintf(epoch_s, sizeof epoch_s, "%llu", build_epoch());
        if (setenv("SOURCE_DATE_EPOCH", epoch_s, 1) < 0 || setenv("LC_ALL", "C.UTF-8", 1) < 0) {
                k = -ENOMEM;
                goto out;
        }
        if (rn.live)
                fprintf(stderr, "building %s from %s%s%s\n", r->name, r->from == RECIPE_FROM_DEBIAN ? "debian:" : "",
                        r->from == RECIPE_FROM_DEBIAN ? r->suite : r->from == RECIPE_FROM_TEMPLATE ? r->parent : "scratch",
                        as_root ? "" : " (in a user namespace)");

        if (r->from == RECIPE_FROM_DEBIAN)
                k = build_debian(&rn, r, as_root, b.tarball, NULL);
        else if (r->from == RECIPE_FROM_TEMPLATE)
                k = build_from_template(&rn, r, o, as_root, b.workdir, b.tarball);
        else
                k = build_scratch(&rn, r, as_root, b.tarball, NULL);
        if (k < 0)
                goto out;
        b.seconds = now_sec() - t0;
        *ret = b;
        b = (BuildResult) {};
out:
        safe_close(rn.log_fd);
        free(rn.log_path);
        build_result_done(&b);
        return k;
}
