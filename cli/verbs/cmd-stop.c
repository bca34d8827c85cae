/* SPDX-License-Identifier: Apache-2.0 */
#include "cli.h"

/* stop: the guest's filesystems synced and QEMU shut down, the disk kept; start (cmd-start.c) boots it again. */

const CliHelp cmd_stop_help = {
        .synopsis = "stop [--async] [-q] SANDBOX...",
        .summary = "Shut running sandboxes down, keeping their files",
        .options =
        "Options:\n"
        "      --async   print the id of each stop operation instead of waiting for it\n"
        "  -q, --quiet   no progress on the terminal\n"
        "  -h, --help    show this help\n"
        "\n"
        "Prints the id of each sandbox stopped. Its guest's filesystems are synced and its QEMU shut down: its\n"
        "processes end and its memory is dropped; its disk, ports, egress and env are kept. 'spacectl start'\n"
        "boots it again from its disk. The exit status is 1 when any of them failed.\n",
};

int cmd_stop(int argc, char *argv[]) {
        return cli_lifecycle_verb(argc, argv, "stop", "stopping");
}
