/* SPDX-License-Identifier: Apache-2.0 */
#include "cli.h"

/* suspend: memory and device state go to the store and QEMU exits; wake (cmd-wake.c) restores them. */

const CliHelp cmd_suspend_help = {
        .synopsis = "suspend [--async] [-q] SANDBOX...",
        .summary = "Write sandboxes' memory to disk and stop their VMs, freeing the memory",
        .options =
        "Options:\n"
        "      --async   print the id of each suspend operation instead of waiting for it\n"
        "  -q, --quiet   no progress on the terminal\n"
        "  -h, --help    show this help\n"
        "\n"
        "Prints the id of each sandbox suspended. Running or paused sandboxes can be suspended; their\n"
        "processes and files are kept. 'spacectl wake' brings one back, and so does using it (exec, attach).\n"
        "On a terminal a suspend that takes more than a second shows the time spent on stderr. If the state\n"
        "cannot be written (disk full), the sandbox keeps running and the error says why. The exit status is 1\n"
        "when any of them failed.\n",
};

int cmd_suspend(int argc, char *argv[]) {
        return cli_lifecycle_verb(argc, argv, "suspend", "suspending");
}
