/* SPDX-License-Identifier: Apache-2.0 */
/*
 * spacectl mcp: an MCP server on stdio (lib/mcp.h's engine, ARCHITECTURE.md "MCP"). MCP's stdio transport:
 * one JSON-RPC message per line on stdin, one per line on stdout, and nothing else on stdout; what we have
 * to say goes to stderr. The session ends at the end of stdin or on SIGINT, SIGTERM or SIGHUP, and then
 * removes the sandboxes it made (unless --keep).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "cli.h"
#include "io-util.h"
#include "macro.h"
#include "mcp.h"

/* A message longer than this is answered with a parse error and skipped: a file_write of 12 MiB of content
 * (16 MiB of base64) fits. */
#define MCP_LINE_MAX (24U * 1024U * 1024U)

const CliHelp cmd_mcp_help = {
        .synopsis = "mcp [--template T] [--keep] [--name N]",
        .summary = "Serve sandboxes as MCP tools on stdin/stdout, for coding agents",
        .options =
        "An MCP (Model Context Protocol) server on stdio: add it to an agent with\n"
        "  claude mcp add space -- spacectl mcp\n"
        "Tools without a sandbox_id use the session's own sandbox, made on first use and removed when the\n"
        "session ends (stdin closes, or SIGINT/SIGTERM/SIGHUP). spacectl-mcp(1) lists the tools.\n"
        "\n"
        "Options:\n"
        "  -t, --template T  the session sandbox's template (default: code-interpreter, else seed, else minimal)\n"
        "      --keep        keep the session's sandboxes when it ends; the session sandbox is named (mcp-TEMPLATE)\n"
        "                    and the next session with --keep picks it up\n"
        "  -n, --name N      the kept session sandbox's name (implies --keep)\n"
        "  -h, --help        show this help\n",
};

typedef struct StdioPeer {
        bool gone;      /* stdout failed: nobody reads what we answer */
} StdioPeer;

static void stdio_send(const cJSON *message, void *context, void *userdata) {
        StdioPeer *p = userdata;
        _cleanup_free_ char *text = NULL;
        size_t n;

        (void) context;
        if (p->gone)
                return;
        text = cJSON_PrintUnformatted(message);
        if (!text)
                return;
        /* JSON escapes every newline in a string, so the one at the end is the only one */
        n = strlen(text);
        text[n] = '\n';
        if (loop_write(STDOUT_FILENO, text, n + 1) < 0)
                p->gone = true;
        text[n] = '\0';
}

/* Reads stdin into buf, handing each complete line to the server; *skip is set while an over-long line is
 * being dropped. 0 at the end of input, 1 to go on, < 0 on failure. */
static int read_lines(McpServer *s, char *buf, size_t *len, bool *skip) {
        ssize_t k;
        char *start, *nl;

        k = read(STDIN_FILENO, buf + *len, MCP_LINE_MAX - *len);
        if (k < 0)
                return errno == EINTR || errno == EAGAIN ? 1 : -errno;
        if (k == 0)
                return 0;
        *len += (size_t) k;
        start = buf;
        while ((nl = memchr(start, '\n', *len - (size_t) (start - buf)))) {
                size_t n = (size_t) (nl - start);

                if (*skip)
                        *skip = false;
                else if (n > 0 && !(n == 1 && start[0] == '\r'))
                        (void) mcp_server_receive(s, start, n, NULL, NULL);
                start = nl + 1;
        }
        *len -= (size_t) (start - buf);
        memmove(buf, start, *len);
        if (*len == MCP_LINE_MAX) {
                /* no newline in MCP_LINE_MAX bytes: answer it as garbage (what JSON-RPC can say of a message it
                 * cannot read) and drop the rest of the line */
                if (!*skip)
                        (void) mcp_server_receive(s, "{", 1, NULL, NULL);
                *skip = true;
                *len = 0;
        }
        return 1;
}

static int serve(McpServer *s, int sfd, StdioPeer *peer) {
        _cleanup_free_ char *buf = malloc(MCP_LINE_MAX);
        size_t len = 0;
        bool skip = false;

        if (!buf)
                return -ENOMEM;
        for (;;) {
                struct pollfd fds[] = {
                        { .fd = STDIN_FILENO, .events = POLLIN },
                        { .fd = sfd, .events = POLLIN },
                };
                int r;

                if (poll(fds, ELEMENTSOF(fds), -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (fds[1].revents & POLLIN)
                        return 0; /* a signal: end the session as at the end of input */
                if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
                        r = read_lines(s, buf, &len, &skip);
                        if (r <= 0) {
                                /* a last line without a newline still counts */
                                if (r == 0 && len > 0 && !skip)
                                        (void) mcp_server_receive(s, buf, len, NULL, NULL);
                                return r;
                        }
                }
                if (peer->gone)
                        return 0;
        }
}

int cmd_mcp(int argc, char *argv[]) {
        _cleanup_mcp_server_ McpServer *s = NULL;
        _cleanup_close_ int sfd = -1;
        const char *template = NULL, *name = NULL;
        bool keep = false;
        StdioPeer peer = {};
        sigset_t mask;
        int r;
        const CliOption options[] = {
                CLI_STRING_NOT_EMPTY("template", 't', &template),
                CLI_FLAG("keep", 0, &keep),
                CLI_STRING_NOT_EMPTY("name", 'n', &name),
        };

        r = cli_parse_options(argc, argv, options, ELEMENTSOF(options), 0);
        if (r >= 0)
                return r;
        if (optind < argc)
                return cli_usage_error("mcp takes no arguments, got '%s'", argv[optind]);
        if (name)
                keep = true;
        if (isatty(STDIN_FILENO))
                fprintf(stderr, "spacectl mcp: an MCP server reading JSON-RPC on stdin; it is meant to be started "
                        "by an agent (claude mcp add space -- spacectl mcp). Ctrl-D ends it.\n");

        /* the daemon is started now, not by the first tool call, and a template that is not there is said
         * here, where whoever set the server up reads it, not to the agent at its first call */
        if (!cli_http())
                return EXIT_FAIL;
        if (template) {
                _cleanup_free_ char *esc = NULL, *path = NULL;
                SpaceHttpReply reply = {};

                if (space_http_escape(template, &esc) < 0 || asprintf(&path, "/v1/templates/%s", esc) < 0) {
                        log_error("out of memory");
                        return EXIT_FAIL;
                }
                if (cli_call("GET", path, NULL, &reply) < 0)
                        return EXIT_FAIL; /* said: "template ... not found", or why the daemon did not answer */
                space_http_reply_done(&reply);
        }

        /* blocked before any thread starts, so every tool thread has them blocked too */
        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGHUP);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0 || (sfd = signalfd(-1, &mask, SFD_CLOEXEC)) < 0) {
                log_error("cannot watch signals: %m");
                return EXIT_FAIL;
        }
        (void) signal(SIGPIPE, SIG_IGN);

        r = mcp_server_new(&(McpServerOptions) {
                .template = template,
                .keep = keep,
                .name = name,
                .send = stdio_send,
                .userdata = &peer,
        }, &s);
        if (r < 0) {
                log_error("cannot start the MCP server: %s", strerror(-r));
                return EXIT_FAIL;
        }
        r = serve(s, sfd, &peer);
        if (r < 0)
                log_error("reading stdin failed: %s", strerror(-r));
        /* the cleanup (cancelling calls, removing the session's sandboxes) runs in mcp_server_free() */
        return r < 0 ? EXIT_FAIL : EXIT_SUCCESS;
}
