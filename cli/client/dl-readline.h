/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * GNU readline, loaded by the line mode of `spacectl attach` (no pty, stdin a terminal) when it starts
 * (dl_readline_open()); every other call goes without it and libtinfo. Calls go through the table:
 * libreadline.rl_redisplay(); its variables are pointers: *libreadline.rl_outstream. A direct use does not
 * link, there being no -lreadline.
 */

#include <stdio.h>

#include <readline/history.h>
#include <readline/readline.h>

#include "client/dl-util.h"

#define DL_READLINE_SONAME "libreadline.so.8"
#define DL_READLINE_PACKAGE "libreadline8"

#define DL_READLINE_FOREACH(X)                  \
        X(add_history)                          \
        X(rl_bind_keyseq)                       \
        X(rl_callback_handler_install)          \
        X(rl_callback_handler_remove)           \
        X(rl_callback_read_char)                \
        X(rl_clear_visible_line)                \
        X(rl_on_new_line)                       \
        X(rl_prep_terminal)                     \
        X(rl_redisplay)                         \
        X(rl_replace_line)                      \
        X(rl_resize_terminal)                   \
        X(rl_set_prompt)                        \
        /* variables */                         \
        X(rl_catch_signals)                     \
        X(rl_catch_sigwinch)                    \
        X(rl_end)                               \
        X(rl_instream)                          \
        X(rl_outstream)                         \
        X(rl_point)                             \
        X(rl_prep_term_function)                \
        X(rl_readline_name)

typedef struct DlReadline {
        DL_READLINE_FOREACH(DL_FIELD)
} DlReadline;

extern DlReadline libreadline;

/* Loads readline (once): 0, or -ENOPKG after printing which package line editing needs. */
int dl_readline_open(void);
