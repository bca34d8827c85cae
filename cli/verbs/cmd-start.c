/* SPDX-License-Identifier: Apache-2.0 */
#include "cli.h"

/* start: a stopped sandbox cold-boots from its own disk (see stop). */

const CliHelp cmd_start_help = {
        .synopsis = "start [--async] [-q] SANDBOX...",
        .summary = "Boot stopped sandboxes again from their disks",
        .options =
        "Options:\n"
        "      --async   print the id of each start operation instead of waiting for it\n"
        "  -q, --quiet   no progress on the terminal\n"
        "  -h, --help    show this help\n"
        "\n"
        "Prints the id of each sandbox started. It boots from its own disk with the same id, env, ports and\n"
        "egress; its files are as it left them, no process of before runs, and its template's service is\n"
        "started again. A suspended sandbox can be started too: its memory is dropped. The exit status is 1\n"
        "when any of them failed.\n",
};

int cmd_start(int argc, char *argv[]) {
        return cli_lifecycle_verb(argc, argv, "start", "starting");
}
