/* SPDX-License-Identifier: Apache-2.0 */
#include "cli.h"

/* wake: restores a suspended sandbox's memory and device state into a new QEMU (see suspend). */

const CliHelp cmd_wake_help = {
        .synopsis = "wake [--async] [-q] SANDBOX...",
        .summary = "Bring suspended sandboxes back where they were",
        .options =
        "Options:\n"
        "      --async   print the id of each wake operation instead of waiting for it\n"
        "  -q, --quiet   no progress on the terminal\n"
        "  -h, --help    show this help\n"
        "\n"
        "Prints the id of each sandbox woken. Its processes go on running and its clock is set to now. The\n"
        "exit status is 1 when any of them failed.\n",
};

int cmd_wake(int argc, char *argv[]) {
        return cli_lifecycle_verb(argc, argv, "wake", "waking");
}
