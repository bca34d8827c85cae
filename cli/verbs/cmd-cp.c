/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "copy/cp.h"
#include "copy/dl-archive.h"
#include "macro.h"
#include "user.h"

const CliHelp cmd_cp_help = {
        .synopsis = "cp [-a | --chown USER[:GROUP]] [-L] [-q] [--json] [--max-bytes N] SRC DST\n"
                    "cp [-a | --chown USER[:GROUP]] [-L] [-q] [--json] - SANDBOX:DIR\n"
                    "cp [-a] [-L] [-q] [--max-bytes N] SANDBOX:PATH -",
        .summary = "Copy files and directories between the host and a sandbox",
        .options =
        "Exactly one of SRC and DST is SANDBOX:PATH (a sandbox's name or id; a relative PATH is taken from the\n"
        "sandbox's /). A local path with a ':' in it needs a '/' before the colon (./a:b).\n"
        "Like docker cp: a file copied to an existing directory goes into it; a directory is copied into an\n"
        "existing directory, or becomes DST when that does not exist; SRC/. copies the contents of SRC.\n"
        "Modes, symlinks and modification times are kept; symlinks are copied, not followed. Files copied out\n"
        "without -a lose setuid, setgid and sticky bits and get your umask; a directory that exists here already\n"
        "keeps its own mode and owner.\n"
        "Owners: what cp makes in a sandbox belongs to the sandbox's user (the template's; root on minimal)\n"
        "when that user could have made it there (its home, /tmp, a new top-level directory such as /work), and\n"
        "to root elsewhere (/etc, /usr/local/bin); a file it replaces keeps its owner. -a keeps the owners the\n"
        "files have; --chown gives everything cp writes to USER[:GROUP] (names or numbers of the sandbox).\n"
        "'-' as SRC extracts a tar stream from stdin into the sandbox's directory DIR; '-' as DST writes a tar\n"
        "stream of SANDBOX:PATH to stdout.\n"
        "\n"
        "Options:\n"
        "  -a, --archive       keep owners (uid/gid) and modes as they are (setuid, setgid, sticky; no umask);\n"
        "                      without it files copied out belong to you\n"
        "      --chown USER[:GROUP]\n"
        "                      copying in, give what cp writes to USER (and GROUP, else USER's group)\n"
        "      --json          print what was copied (files, bytes, skipped) as JSON on stdout\n"
        "  -L, --follow-link   if SRC is a symlink, copy what it points to\n"
        "  -q, --quiet         no progress on a terminal\n"
        "      --max-bytes N   copying out, stop with an error once the files' contents would pass N bytes\n"
        "                      (K, M, G, T: powers of 1024; 0: no limit; default: 32G)\n"
        "  -h, --help          show this help\n",
};

/* A byte count: digits with an optional K, M, G or T (powers of 1024, "KiB" and "KB" too). */
static int parse_bytes(const char *s, uint64_t *ret) {
        unsigned long long v;
        unsigned shift = 0;
        char *end;

        if (*s < '0' || *s > '9')
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0)
                return -ERANGE;
        if (*end) {
                const char *units = "KMGT", *u = strchr(units, *end);

                if (!u || !(streq(end + 1, "") || streq(end + 1, "iB") || streq(end + 1, "B")))
                        return -EINVAL;
                shift = 10 * (unsigned) (u - units + 1);
        }
        if (v > (UINT64_MAX >> shift))
                return -ERANGE;
        *ret = (uint64_t) v << shift;
        return 0;
}

/* "SANDBOX:PATH": 1 with the parts; 0 for a local path (or "-"); < 0 (usage error printed) when malformed. */
static int parse_remote(const char *arg, char **ret_ref, char **ret_path) {
        const char *colon = strchr(arg, ':'), *slash = strchr(arg, '/');
        _cleanup_free_ char *ref = NULL;
        char *path;

        if (streq(arg, "-") || !colon || (slash && slash < colon))
                return 0;
        if (colon == arg) {
                cli_usage_error("'%s': no sandbox before the ':' (use ./%s for a local path)", arg, arg);
                return -EINVAL;
        }
        ref = strndup(arg, (size_t) (colon - arg));
        if (!ref)
                return -ENOMEM;
        colon++;
        /* relative paths are taken from the sandbox's / */
        if (asprintf(&path, "%s%s", colon[0] == '/' ? "" : "/", colon) < 0)
                return -ENOMEM;
        *ret_ref = TAKE_PTR(ref);
        *ret_path = path;
        return 1;
}

static int parse_chown(const char *arg, void *userdata) {
        if (space_user_spec_parse(arg, NULL) < 0) {
                (void) cli_usage_error("--chown: '%s' is not USER[:GROUP] (a name or a number each, e.g. user or "
                                       "1000:1000)", arg);
                return -EINVAL;
        }
        *(const char **) userdata = arg;
        return 0;
}

/* --json: the copy's tally. */
static int print_tally(const CpContext *c) {
        cJSON *o = cJSON_CreateObject();
        int r = -ENOMEM;

        if (o && cJSON_AddNumberToObject(o, "files", (double) c->files) &&
            cJSON_AddNumberToObject(o, "bytes", (double) c->bytes) &&
            cJSON_AddNumberToObject(o, "skipped", (double) c->skipped))
                r = cli_print_json(o);
        cJSON_Delete(o);
        return r;
}

static int parse_max_bytes(const char *arg, void *userdata) {
        if (parse_bytes(arg, userdata) < 0) {
                (void) cli_usage_error("--max-bytes: '%s' is not a byte count like 512M or 2G", arg);
                return -EINVAL;
        }
        return 0;
}

int cmd_cp(int argc, char *argv[]) {
        _cleanup_free_ char *src_ref = NULL, *src_path = NULL, *dst_ref = NULL, *dst_path = NULL;
        CpContext c = { .max_bytes = CP_MAX_BYTES_DEFAULT };
        const char *src, *dst;
        bool json = false;
        int r, rs, rd;
        const CliOption options[] = {
                CLI_FLAG("archive", 'a', &c.archive),
                CLI_FLAG("follow-link", 'L', &c.follow),
                CLI_FLAG("quiet", 'q', &c.quiet),
                CLI_PARSE("chown", 0, parse_chown, &c.chown),
                CLI_FLAG("json", 0, &json),
                CLI_PARSE("max-bytes", 0, parse_max_bytes, &c.max_bytes),
        };

        r = cli_parse_options(argc, argv, options, ELEMENTSOF(options), 0);
        if (r >= 0)
                return r;
        if (argc - optind != 2)
                return cli_usage_error("cp needs a SRC and a DST");
        src = argv[optind];
        dst = argv[optind + 1];
        if (!*src || !*dst)
                return cli_usage_error("SRC and DST must not be empty");
        rs = parse_remote(src, &src_ref, &src_path);
        rd = parse_remote(dst, &dst_ref, &dst_path);
        if (rs < 0 || rd < 0)
                return rs == -ENOMEM || rd == -ENOMEM ? EXIT_FAIL : EXIT_USAGE;
        if (rs == rd)
                return cli_usage_error(rs ? "cannot copy between two sandboxes: one of SRC and DST must be a local path"
                                          : "one of SRC and DST must be SANDBOX:PATH");
        if (streq(src, "-") && streq(dst, "-"))
                return cli_usage_error("'-' can be SRC or DST, not both");
        if (c.chown && (rs || c.archive))
                return cli_usage_error(rs ? "--chown is for copies into a sandbox (files copied out are yours)"
                                          : "-a keeps the owners the files have; --chown names one: choose one");
        if (json && streq(dst, "-"))
                return cli_usage_error("--json needs stdout, which '-' as DST gives to the tar stream");

        /* Loaded here, not linked: libarchive pulls in libxml2 and ICU, which no other verb should pay for. */
        if (dl_archive_open() < 0)
                return EXIT_FAIL;

        /* Names in tar streams are UTF-8 (pax) and the daemon's names are too: with the C locale's ASCII,
         * libarchive could not convert them. Names on disk are bytes either way. */
        (void) setlocale(LC_CTYPE, "C.UTF-8");

        c.ref = rs ? src_ref : dst_ref;
        /* read it the only way there is, and put it back */
        c.user_umask = umask(0);
        (void) umask(c.user_umask);
        c.progress = !c.quiet && isatty(STDERR_FILENO);
        if (cli_sandbox_path(c.ref, "/files", &c.files_path) < 0) {
                log_error("out of memory");
                return EXIT_FAIL;
        }
        c.http = cli_http();
        if (!c.http) {
                free(c.files_path);
                return EXIT_FAIL;
        }
        /* Ctrl-C ends a transfer cleanly: an upload in flight leaves nothing in the sandbox */
        if (cli_signals_install() >= 0)
                space_http_set_cancel(c.http, &cli_signal_received);

        r = rs ? cp_download(&c, src_path, dst) : cp_upload(&c, src, dst_path);
        if (c.progress && (c.files > 0 || c.bytes > 0))
                cp_progress(&c, 0, true);
        if (c.skipped > 0)
                log_error("cp: warning: skipped %llu special file%s (devices, FIFOs or sockets), the first was %s",
                          (unsigned long long) c.skipped, c.skipped == 1 ? "" : "s", c.first_skipped ?: "?");
        if (r >= 0 && json)
                r = print_tally(&c);
        free(c.first_skipped);
        free(c.files_path);
        if (r == -ENOMEM)
                log_error("out of memory");
        return r < 0 ? EXIT_FAIL : 0;
}
