/* SPDX-License-Identifier: Apache-2.0 */
#include "cli.h"

/* resume: QMP cont for a paused sandbox (see pause). */

const CliHelp cmd_resume_help = {
        .synopsis = "resume [--async] SANDBOX...",
        .summary = "Let paused sandboxes run again",
        .options =
        "Options:\n"
        "      --async   print the id of each resume operation instead of waiting for it\n"
        "  -h, --help    show this help\n"
        "\n"
        "Prints the id of each sandbox resumed. The exit status is 1 when any of them failed.\n",
};

int cmd_resume(int argc, char *argv[]) {
        return cli_lifecycle_verb(argc, argv, "resume", NULL);
}
