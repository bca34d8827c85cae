/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

/* The interactive loop behind `attach` and `exec -t`: one SSE stream of the process's events, and next to it
 * stdin (raw bytes in pty mode, readline lines otherwise), signals and window size changes, each turned into
 * small POSTs on the same curl multi handle. */

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "base64.h"
#include "cli.h"
#include "client/dl-readline.h"
#include "io-util.h"
#include "client/process-events.h"
#include "macro.h"

/* Input is sent one POST at a time (so it arrives in order) and at most this much is held meanwhile;
 * beyond it stdin is not read until the daemon took the previous chunk. */
#define STDIN_CHUNK (64U * 1024U)
/* The unfinished last line of output is shown as readline's prompt, up to this long. */
#define PARTIAL_MAX 512U
#define SIGINT_KILL_AFTER 3U

typedef struct Attach {
        const AttachOptions *o;
        SpaceStream *stream;
        char *pid_path;                 /* <processes_path>/<pid> */

        /* the outcome */
        ProcessOutcome outcome;
        bool detached;
        int end_signal;
        int fatal;                      /* < 0: already logged */

        /* output */
        OutputDecoder decoder;
        bool stdout_broken;

        /* input */
        DetachKeys detach;
        uint8_t *in;
        size_t in_len, in_cap;
        bool in_flight, stdin_watched, stdin_eof, eof_sent, stdin_dead, detach_pending;
        unsigned n_sigint;

        /* window size */
        bool resize_in_flight;
        unsigned want_rows, want_cols, sent_rows, sent_cols;

        /* readline */
        bool rl_active;
        char partial[PARTIAL_MAX + 1];
        size_t partial_len;
        int partial_fd;
} Attach;

/* readline's callbacks take no userdata. */
static Attach *rl_attach = NULL;

static void post_done_ignore(SpaceStream *s, int r, const SpaceHttpReply *reply, void *userdata) {
        /* A signal or resize for a process that just exited is refused; nothing to do about it. */
}

static int post_json(Attach *a, const char *what, const char *body, SpaceStreamPostDone done) {
        _cleanup_free_ char *path = NULL;

        if (asprintf(&path, "%s/%s", a->pid_path, what) < 0)
                return -ENOMEM;
        return space_stream_post(a->stream, path, body ? "application/json" : NULL, body, body ? strlen(body) : 0,
                                 done ?: post_done_ignore, a);
}

/* ---- stdin ---- */

static int stdin_readable(SpaceStream *s, int fd, void *userdata);
static int kick(Attach *a);

static void update_stdin_watch(Attach *a) {
        bool want = a->o->forward_stdin && !a->stdin_eof && !a->stdin_dead && !a->detach_pending &&
                    (a->rl_active || a->in_len < STDIN_CHUNK);

        if (want == a->stdin_watched)
                return;
        if (want) {
                if (space_stream_watch_fd(a->stream, STDIN_FILENO, stdin_readable, a) < 0)
                        return;
        } else
                (void) space_stream_unwatch_fd(a->stream, STDIN_FILENO);
        a->stdin_watched = want;
}

static void stdin_done(SpaceStream *s, int r, const SpaceHttpReply *reply, void *userdata) {
        Attach *a = userdata;

        a->in_flight = false;
        if (r >= 0 && space_http_reply_ok(reply))
                ;
        else if (r >= 0 && reply->error == ERROR_STDIN_CLOSED)
                a->stdin_dead = true; /* the process closed its stdin or exited: the rest is not wanted */
        else {
                if (r < 0)
                        log_error("forwarding stdin failed: %s", strerror(-r));
                else
                        log_error("forwarding stdin failed: %s", reply->error_message);
                a->stdin_dead = true;
        }
        if (a->stdin_dead)
                a->in_len = 0;
        update_stdin_watch(a);
        r = kick(a);
        if (r < 0)
                space_stream_stop(s, r);
}

/* Sends what is pending, one request at a time; then EOF; then, when asked, detaches. */
static int kick(Attach *a) {
        int r;

        if (a->in_flight)
                return 0;
        if (a->in_len > 0 && !a->stdin_dead) {
                _cleanup_free_ char *path = NULL;

                if (asprintf(&path, "%s/stdin", a->pid_path) < 0)
                        return -ENOMEM;
                r = space_stream_post(a->stream, path, "application/octet-stream", a->in, a->in_len, stdin_done, a);
                if (r < 0)
                        return r;
                a->in_len = 0;
                a->in_flight = true;
                update_stdin_watch(a);
                return 0;
        }
        if (a->detach_pending) {
                a->detached = true;
                space_stream_stop(a->stream, -ECANCELED);
                return 0;
        }
        if (a->stdin_eof && !a->eof_sent && !a->stdin_dead) {
                a->eof_sent = true;
                return post_json(a, "close-stdin", NULL, NULL);
        }
        return 0;
}

static int in_append(Attach *a, const void *p, size_t n) {
        if (n == 0)
                return 0;
        if (a->in_len + n > a->in_cap) {
                size_t cap = a->in_cap * 2 > a->in_len + n ? a->in_cap * 2 : a->in_len + n;
                uint8_t *d = realloc(a->in, cap);

                if (!d)
                        return -ENOMEM;
                a->in = d;
                a->in_cap = cap;
        }
        memcpy(a->in + a->in_len, p, n);
        a->in_len += n;
        return 0;
}

static int stdin_readable(SpaceStream *s, int fd, void *userdata) {
        static uint8_t buf[STDIN_CHUNK], out[STDIN_CHUNK + DETACH_KEYS_MAX];
        Attach *a = userdata;
        bool detach;
        size_t k;
        ssize_t n;
        int r;

        if (a->rl_active) {
                libreadline.rl_callback_read_char();
                return kick(a);
        }

        n = read(fd, buf, sizeof buf);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n <= 0) {
                /* EOF, or a read error, which ends our input just the same. */
                a->stdin_eof = true;
                update_stdin_watch(a);
                return kick(a);
        }
        k = detach_keys_feed(&a->detach, buf, (size_t) n, out, &detach);
        r = in_append(a, out, k);
        if (r < 0)
                return r;
        if (detach)
                a->detach_pending = true;
        update_stdin_watch(a);
        return kick(a);
}

/* ---- readline (no pty, stdin a terminal) ---- */

static void rl_show_prompt(Attach *a) {
        char prompt[PARTIAL_MAX + 1];
        size_t n = strnlen(a->partial, a->partial_len);

        memcpy(prompt, a->partial, n);
        prompt[n] = 0;
        libreadline.rl_set_prompt(prompt);
        libreadline.rl_on_new_line();
        libreadline.rl_redisplay();
}

/* Output goes above the line being edited: hide that line, write, show it again after the output's own
 * unfinished last line (a shell's prompt, say), which readline displays as its prompt. */
static void rl_output(Attach *a, int fd, const uint8_t *p, size_t n) {
        const uint8_t *nl = NULL;

        for (size_t i = n; i > 0; i--)
                if (p[i - 1] == '\n') {
                        nl = p + i - 1;
                        break;
                }

        libreadline.rl_clear_visible_line();
        fflush(*libreadline.rl_outstream);
        if (a->partial_len > 0 && fd != a->partial_fd) {
                (void) loop_write(a->partial_fd, a->partial, a->partial_len);
                a->partial_len = 0;
        }
        if (nl) {
                (void) loop_write(fd, a->partial, a->partial_len);
                (void) loop_write(fd, p, (size_t) (nl + 1 - p));
                a->partial_len = 0;
                n -= (size_t) (nl + 1 - p);
                p = nl + 1;
        }
        if (a->partial_len + n <= PARTIAL_MAX) {
                memcpy(a->partial + a->partial_len, p, n);
                a->partial_len += n;
        } else {
                (void) loop_write(fd, a->partial, a->partial_len);
                (void) loop_write(fd, p, n);
                a->partial_len = 0;
        }
        a->partial_fd = fd;
        rl_show_prompt(a);
}

static void rl_on_line(char *line) {
        Attach *a = rl_attach;

        if (!a)
                return;
        if (!line) {
                /* Ctrl-D on an empty line: the process's stdin ends. */
                libreadline.rl_callback_handler_remove();
                a->rl_active = false;
                a->partial_len = 0; /* stays on the screen as it is */
                fputc('\n', *libreadline.rl_outstream);
                fflush(*libreadline.rl_outstream);
                a->stdin_eof = true;
                update_stdin_watch(a);
                return;
        }
        if (*line)
                libreadline.add_history(line);
        if (in_append(a, line, strlen(line)) < 0 || in_append(a, "\n", 1) < 0)
                a->fatal = -ENOMEM;
        free(line);
        /* The prompt (the output's unfinished line) is part of the history on the screen now. */
        a->partial_len = 0;
        libreadline.rl_set_prompt("");
}

static int rl_detach_command(int count, int key) {
        if (rl_attach) {
                rl_attach->detach_pending = true;
                update_stdin_watch(rl_attach);
        }
        return 0;
}

/* readline leaves flow control on, and then the tty driver eats Ctrl-Q (and Ctrl-S) before the detach
 * keys can see them. */
static void rl_prep_terminal_no_ixon(int meta_flag) {
        struct termios t;

        libreadline.rl_prep_terminal(meta_flag);
        if (tcgetattr(fileno(*libreadline.rl_instream), &t) >= 0) {
                t.c_iflag &= ~(tcflag_t) IXON;
                (void) tcsetattr(fileno(*libreadline.rl_instream), TCSANOW, &t);
        }
}

static int rl_start(Attach *a) {
        char seq[DETACH_KEYS_MAX * 4 + 1], *p = seq;
        int r;

        r = dl_readline_open();
        if (r < 0)
                return r;
        r = terminal_save(STDIN_FILENO);
        if (r < 0)
                return r;
        rl_attach = a;
        *libreadline.rl_catch_signals = 0;
        *libreadline.rl_catch_sigwinch = 0;
        *libreadline.rl_readline_name = "spacectl";
        *libreadline.rl_instream = stdin;
        *libreadline.rl_outstream = isatty(STDOUT_FILENO) ? stdout : stderr;
        *libreadline.rl_prep_term_function = rl_prep_terminal_no_ixon;

        if (a->detach.n > 0) {
                for (size_t i = 0; i < a->detach.n; i++) {
                        uint8_t k = a->detach.keys[i];

                        if (k == 0)
                                p = stpcpy(p, "\\C-@");
                        else if (k == '\\' || k == '"')
                                *p++ = '\\', *p++ = (char) k;
                        else
                                *p++ = (char) k;
                }
                *p = 0;
                (void) libreadline.rl_bind_keyseq(seq, rl_detach_command);
        }
        libreadline.rl_callback_handler_install("", rl_on_line);
        a->rl_active = true;
        return 0;
}

static void rl_stop(Attach *a) {
        if (!a->rl_active)
                return;
        if (a->partial_len > 0 || *libreadline.rl_end > 0) {
                /* Leave what is on the screen there and end its line. */
                *libreadline.rl_point = *libreadline.rl_end;
                libreadline.rl_redisplay();
                fputc('\n', *libreadline.rl_outstream);
        }
        libreadline.rl_callback_handler_remove();
        fflush(*libreadline.rl_outstream);
        a->rl_active = false;
        rl_attach = NULL;
}

/* ---- window size ---- */

static void resize_done(SpaceStream *s, int r, const SpaceHttpReply *reply, void *userdata);

static int send_resize(Attach *a) {
        char body[64];
        int r;

        if (a->resize_in_flight || (a->want_rows == a->sent_rows && a->want_cols == a->sent_cols))
                return 0;
        snprintf(body, sizeof body, "{\"rows\":%u,\"cols\":%u}", a->want_rows, a->want_cols);
        r = post_json(a, "resize", body, resize_done);
        if (r < 0)
                return r;
        a->sent_rows = a->want_rows;
        a->sent_cols = a->want_cols;
        a->resize_in_flight = true;
        return 0;
}

static void resize_done(SpaceStream *s, int r, const SpaceHttpReply *reply, void *userdata) {
        Attach *a = userdata;

        a->resize_in_flight = false;
        /* The size changed again meanwhile: send the newest one. */
        r = send_resize(a);
        if (r < 0)
                space_stream_stop(s, r);
}

static int follow_window_size(Attach *a) {
        unsigned rows, cols;

        if (terminal_size(STDOUT_FILENO, &rows, &cols) < 0 && terminal_size(STDIN_FILENO, &rows, &cols) < 0)
                return 0;
        a->want_rows = rows;
        a->want_cols = cols;
        return send_resize(a);
}

/* ---- signals ---- */

static int signal_readable(SpaceStream *s, int fd, void *userdata) {
        char body[32];
        Attach *a = userdata;
        int sig, r;

        while ((sig = cli_signals_next()) > 0) {
                if (sig == SIGWINCH) {
                        if (a->rl_active)
                                libreadline.rl_resize_terminal();
                        if (a->o->pty) {
                                r = follow_window_size(a);
                                if (r < 0)
                                        return r;
                        }
                        continue;
                }
                /* attach: being told to go away ends the attachment, not the process; so does Ctrl-C
                 * when no terminal of ours could have sent it (raw mode). */
                if (a->o->detach_on_signal && (sig != SIGINT || a->o->pty)) {
                        a->end_signal = sig;
                        return -ECANCELED;
                }
                if (sig == SIGINT && ++a->n_sigint >= SIGINT_KILL_AFTER)
                        sig = SIGKILL;
                if (a->rl_active && sig == SIGINT) {
                        /* Like a shell: drop the line being typed. */
                        libreadline.rl_replace_line("", 0);
                        a->partial_len = 0;
                        libreadline.rl_set_prompt("");
                        fputs("^C\n", *libreadline.rl_outstream);
                        libreadline.rl_on_new_line();
                        libreadline.rl_redisplay();
                }
                snprintf(body, sizeof body, "{\"signal\":%d}", sig);
                r = post_json(a, "signal", body, NULL);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- events ---- */

static int output_event(Attach *a, int fd, const char *data, size_t len) {
        const uint8_t *buf;
        size_t n;
        int r;

        r = output_decode(&a->decoder, data, len, &buf, &n);
        if (r < 0)
                return a->fatal = r;
        if (fd == STDOUT_FILENO && a->stdout_broken)
                return 0;
        if (a->rl_active && isatty(fd)) {
                rl_output(a, fd, buf, n);
                return 0;
        }
        r = loop_write(fd, buf, n);
        if (r < 0 && fd == STDOUT_FILENO) {
                /* Our stdout is gone: the process goes on; its output is dropped here (see `logs`). */
                a->stdout_broken = true;
                if (r != -EPIPE)
                        log_error("writing the process's output failed: %s", strerror(-r));
        }
        return 0;
}

static int on_event(const char *event, const char *data, size_t len, const char *id, void *userdata) {
        Attach *a = userdata;
        int r;

        if (streq(event, "stdout"))
                return output_event(a, STDOUT_FILENO, data, len);
        if (streq(event, "stderr"))
                return output_event(a, STDERR_FILENO, data, len);

        r = process_outcome_event(&a->outcome, event, data, len);
        if (r != 0)
                return r < 0 ? (a->fatal = r) : 0;

        /* process_started (the pid is known already) and events of later API versions. */
        return 0;
}

int cli_status_for_error(const char *code, const char *message) {
        if (message)
                log_error("%s", message);
        else
                log_error("spaced failed to run the command (%s)", code ?: "no reason given");
        switch (error_code_from_name(code)) {
        case ERROR_COMMAND_NOT_FOUND:
                return EXIT_COMMAND_NOT_FOUND;
        /* like a shell (and docker exec): the command could not be invoked */
        case ERROR_PERMISSION_DENIED:
        case ERROR_INVALID_CWD:
                return EXIT_CANNOT_EXECUTE;
        default:
                return EXIT_SPACECTL;
        }
}

int cli_attach(const AttachOptions *o) {
        Attach a = { .o = o, .detach = o->detach, .partial_fd = STDOUT_FILENO };
        SpaceHttpReply reply = {};
        bool raw = false;
        SpaceHttp *h;
        int r, status;

        h = cli_http();
        if (!h)
                return EXIT_SPACECTL;
        /* Signals are handled in the loop (forwarded or ending the attachment), not by aborting requests. */
        space_http_set_cancel(h, NULL);

        if (asprintf(&a.pid_path, "%s/%ld", o->processes_path, o->pid) < 0) {
                log_error("out of memory");
                return EXIT_SPACECTL;
        }
        r = space_stream_new_get(h, o->stream_path, o->last_event_id, o->token, on_event, &a, &a.stream);
        if (r < 0) {
                log_error(r == -EINVAL ? "the attach token or event id is malformed" : "out of memory");
                free(a.pid_path);
                return EXIT_SPACECTL;
        }
        if (cli_signals_fd() >= 0)
                (void) space_stream_watch_fd(a.stream, cli_signals_fd(), signal_readable, &a);
        if (o->pty)
                (void) cli_signals_add(SIGWINCH);

        if (o->pty && o->forward_stdin && isatty(STDIN_FILENO)) {
                r = terminal_raw(STDIN_FILENO);
                if (r < 0)
                        log_error("cannot put the terminal in raw mode: %s; going on without", strerror(-r));
                raw = r >= 0;
        } else if (o->readline && o->forward_stdin) {
                r = rl_start(&a);
                if (r == -ENOPKG) /* dl_readline_open() said which package */
                        log_error("going on without line editing");
                else if (r < 0)
                        log_error("cannot set up line editing: %s; going on without", strerror(-r));
        }
        update_stdin_watch(&a);

        if (o->pty && o->resize_on_start) {
                unsigned rows, cols;

                /* A size one off and then the real one: the process gets SIGWINCH even when the size did
                 * not change, so full-screen programs redraw for the newcomer. */
                if (terminal_size(STDOUT_FILENO, &rows, &cols) >= 0 || terminal_size(STDIN_FILENO, &rows, &cols) >= 0) {
                        a.want_rows = rows + 1;
                        a.want_cols = cols + 1;
                        (void) send_resize(&a);
                        a.want_rows = rows;
                        a.want_cols = cols;
                }
        }

        r = space_stream_run(a.stream, &reply);
        if (r >= 0 && a.fatal < 0)
                r = a.fatal;

        rl_stop(&a);
        terminal_restore();
        if (raw && (a.detached || a.end_signal))
                fputc('\n', stderr);

        if (r == -ECANCELED && a.detached) {
                fprintf(stderr, "detached from %s %ld\n", o->ref, o->pid);
                status = 0;
        } else if (r == -ECANCELED && a.end_signal > 0) {
                fprintf(stderr, "detached from %s %ld (%s)\n", o->ref, o->pid, strsignal(a.end_signal));
                status = 128 + a.end_signal;
        } else if (r < 0) {
                if (a.fatal < 0)
                        ; /* logged where it happened */
                else if (r == -ENOMEM)
                        log_error("out of memory");
                else {
                        cli_log_transport_error(h, r);
                        /* The connection broke, not the process: a disconnect never kills it. */
                        if (!space_http_error_is_unreachable(r))
                                log_error("process %ld goes on; reattach with 'spacectl attach %s %ld'", o->pid,
                                          o->ref, o->pid);
                }
                status = EXIT_SPACECTL;
        } else if (!space_http_reply_ok(&reply))
                status = cli_status_for_error(reply.error_code, reply.error_message);
        else if ((status = process_outcome_status(&a.outcome)) >= 0)
                ;
        else {
                log_error("the connection to spaced ended before process %ld exited; is spaced still running? "
                          "reattach with 'spacectl attach %s %ld'", o->pid, o->ref, o->pid);
                status = EXIT_SPACECTL;
        }

        space_http_reply_done(&reply);
        space_stream_free(a.stream);
        free(a.pid_path);
        output_decoder_done(&a.decoder);
        free(a.in);
        process_outcome_done(&a.outcome);
        return status;
}
