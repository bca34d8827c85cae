/* SPDX-License-Identifier: Apache-2.0 */
#include "cli.h"

/* pause: QMP stop; the sandbox's RAM stays where it is (resume, in cmd-resume.c, lets it go on). */

const CliHelp cmd_pause_help = {
        .synopsis = "pause [--async] SANDBOX...",
        .summary = "Stop the virtual CPUs of running sandboxes (their memory stays resident)",
        .options =
        "Options:\n"
        "      --async   print the id of each pause operation instead of waiting for it\n"
        "  -h, --help    show this help\n"
        "\n"
        "Prints the id of each sandbox paused. A paused sandbox runs nothing and keeps its memory; 'spacectl\n"
        "resume' lets it go on, 'spacectl suspend' writes it out. All SANDBOXes are tried; the exit status is 1\n"
        "when any of them failed.\n",
};

int cmd_pause(int argc, char *argv[]) {
        return cli_lifecycle_verb(argc, argv, "pause", NULL);
}
