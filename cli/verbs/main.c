/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "macro.h"

static int cmd_help(int argc, char *argv[]);

static const CliHelp cmd_help_help = {
        .synopsis = "help [VERB]",
        .summary = "Show help for spacectl or one verb",
        .options = "",
};

static const Verb verbs[] = {
        { "create",   cmd_create,   VERB_DAEMON,                       &cmd_create_help   },
        { "exec",     cmd_exec,     VERB_DAEMON | VERB_COMMAND_STATUS, &cmd_exec_help     },
        { "run",      cmd_run,      VERB_DAEMON | VERB_COMMAND_STATUS, &cmd_run_help      },
        { "ls",       cmd_ls,       VERB_DAEMON,                       &cmd_ls_help       },
        { "inspect",  cmd_inspect,  VERB_DAEMON,                       &cmd_inspect_help  },
        { "rm",       cmd_rm,       VERB_DAEMON,                       &cmd_rm_help       },
        { "pause",    cmd_pause,    VERB_DAEMON,                       &cmd_pause_help    },
        { "resume",   cmd_resume,   VERB_DAEMON,                       &cmd_resume_help   },
        { "suspend",  cmd_suspend,  VERB_DAEMON,                       &cmd_suspend_help  },
        { "wake",     cmd_wake,     VERB_DAEMON,                       &cmd_wake_help     },
        { "stop",     cmd_stop,     VERB_DAEMON,                       &cmd_stop_help     },
        { "start",    cmd_start,    VERB_DAEMON,                       &cmd_start_help    },
        { "checkpoint", cmd_checkpoint, VERB_DAEMON,                   &cmd_checkpoint_help },
        { "restore",  cmd_restore,  VERB_DAEMON,                       &cmd_restore_help  },
        { "fork",     cmd_fork,     VERB_DAEMON,                       &cmd_fork_help     },
        { "pool",     cmd_pool,     VERB_DAEMON,                       &cmd_pool_help     },
        { "attach",   cmd_attach,   VERB_DAEMON | VERB_COMMAND_STATUS, &cmd_attach_help   },
        { "ps",       cmd_ps,       VERB_DAEMON,                       &cmd_ps_help       },
        { "kill",     cmd_kill,     VERB_DAEMON,                       &cmd_kill_help     },
        { "logs",     cmd_logs,     VERB_DAEMON,                       &cmd_logs_help     },
        { "op",       cmd_op,       VERB_DAEMON,                       &cmd_op_help       },
        { "info",     cmd_info,     VERB_DAEMON,                       &cmd_info_help     },
        { "daemon",   cmd_daemon,   VERB_DAEMON,                       &cmd_daemon_help   },
        { "key",      cmd_key,      VERB_DAEMON,                       &cmd_key_help      },
        { "secret",   cmd_secret,   VERB_DAEMON,                       &cmd_secret_help   },
        { "volume",   cmd_volume,   VERB_DAEMON,                       &cmd_volume_help   },
        { "e2b",      cmd_e2b,      VERB_DAEMON,                       &cmd_e2b_help      },
        { "mcp",      cmd_mcp,      VERB_DAEMON,                       &cmd_mcp_help      },
        { "template", cmd_template, VERB_DAEMON,                       &cmd_template_help },
        { "cp",       cmd_cp,       VERB_DAEMON,                       &cmd_cp_help       },
        { "egress",   cmd_egress,   VERB_DAEMON,                       &cmd_egress_help   },
        { "port",     cmd_port,     VERB_DAEMON,                       &cmd_port_help     },
        { "version",  cmd_version,  0,                                 &cmd_version_help  },
        { "help",     cmd_help,     0,                                 &cmd_help_help     },
};

static const Verb *find_verb(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                if (streq(verbs[i].name, name))
                        return &verbs[i];
        return NULL;
}

static void main_usage(FILE *f) {
        fputs("Usage: spacectl VERB [OPTIONS] [ARGS]\n"
              "       spacectl help VERB\n"
              "\n"
              "Run commands in self-hosted microVM sandboxes (driven by spaced(8)).\n"
              "\n"
              "Verbs:\n", f);
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                fprintf(f, "  %-10s %s\n", verbs[i].name, verbs[i].help->summary);
        fputs("\n"
              "Options:\n"
              "  -h, --help     show this help\n"
              "  --version      show the client version\n"
              "\n"
              "Environment: SPACE_SOCKET, SPACE_API_URL, SPACE_API_KEY, SPACED. See spacectl(1).\n", f);
}

static int cmd_help(int argc, char *argv[]) {
        const Verb *v;

        if (argc < 2) {
                main_usage(stdout);
                return 0;
        }
        if (argc > 2)
                return cli_usage_error("help takes at most one verb");
        v = find_verb(argv[1]);
        if (!v) {
                log_error("unknown verb '%s'", argv[1]);
                main_usage(stderr);
                return EXIT_USAGE;
        }
        cli_print_help(v, stdout);
        return 0;
}

int main(int argc, char *argv[]) {
        const Verb *v;

        if (argc < 2) {
                main_usage(stderr);
                return EXIT_USAGE;
        }
        if (streq(argv[1], "-h") || streq(argv[1], "--help")) {
                main_usage(stdout);
                return 0;
        }
        if (streq(argv[1], "--version")) {
                printf("spacectl %s\n", PACKAGE_VERSION);
                return 0;
        }

        v = find_verb(argv[1]);
        if (!v) {
                if (argv[1][0] == '-')
                        log_error("unknown option '%s'", argv[1]);
                else
                        log_error("unknown verb '%s'", argv[1]);
                main_usage(stderr);
                return EXIT_USAGE;
        }

        cli_verb = v;
        return v->run(argc - 1, argv + 1);
}
