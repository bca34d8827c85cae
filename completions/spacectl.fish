# SPDX-License-Identifier: Apache-2.0
# fish completion for spacectl(1)

# Ids and names come from the daemon; a Tab press must never start it (SPACE_NO_AUTOSTART).
function __spacectl_sandboxes
    env SPACE_NO_AUTOSTART=1 spacectl ls --quiet 2>/dev/null
end

function __spacectl_templates
    env SPACE_NO_AUTOSTART=1 spacectl template ls --quiet 2>/dev/null
end

# True while the command line holds the verb and no positional argument after it yet (options aside).
function __spacectl_no_positional
    set -l tokens (commandline -opc)
    set -e tokens[1..2]
    set -l skip 0
    for t in $tokens
        if test $skip -eq 1
            set skip 0
            continue
        end
        switch $t
            case -- '--'
                return 1
            case -n --name --vcpu -m --memory --disk -e --env -w --workdir --timeout
                set skip 1
            case '-*'
            case '*'
                return 1
        end
    end
    return 0
end

function __spacectl_after_dashdash
    contains -- -- (commandline -opc)
end

set -l verbs create exec run ls inspect rm template version help

complete -c spacectl -f
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -s h -l help -d 'Show help'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -l version -d 'Show the client version'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a create -d 'Create a sandbox and print its id'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a exec -d 'Run a command in a running sandbox'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a run -d 'Run a command in a new, removed-afterwards sandbox'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a ls -d 'List sandboxes'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a inspect -d 'Show one sandbox'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a rm -d 'Remove sandboxes'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a template -d 'Work with templates'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a version -d 'Show client and daemon versions'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a help -d 'Show help for a verb'

# -h on every verb
complete -c spacectl -n "__fish_seen_subcommand_from $verbs; and not __spacectl_after_dashdash" -s h -l help -d 'Show help'

# create and run: sandbox options, template
for v in create run
    complete -c spacectl -n "__fish_seen_subcommand_from $v; and not __spacectl_after_dashdash" -s n -l name -x -d 'Name the sandbox'
    complete -c spacectl -n "__fish_seen_subcommand_from $v; and not __spacectl_after_dashdash" -l vcpu -x -d 'Virtual CPUs'
    complete -c spacectl -n "__fish_seen_subcommand_from $v; and not __spacectl_after_dashdash" -s m -l memory -x -d 'Memory in MiB'
    complete -c spacectl -n "__fish_seen_subcommand_from $v; and not __spacectl_after_dashdash" -l disk -x -d 'Writable disk in MiB'
    complete -c spacectl -n "__fish_seen_subcommand_from $v; and __spacectl_no_positional" -a '(__spacectl_templates)' -d 'Template'
end
complete -c spacectl -n "__fish_seen_subcommand_from create" -s e -l env -x -a '(set -n | string replace -r \'$\' =)' -d 'Environment of every process'

# exec and run: process options
for v in exec run
    complete -c spacectl -n "__fish_seen_subcommand_from $v; and not __spacectl_after_dashdash" -s i -l interactive -d 'Forward stdin to the command'
    complete -c spacectl -n "__fish_seen_subcommand_from $v; and not __spacectl_after_dashdash" -s e -l env -x -a '(set -n | string replace -r \'$\' =)' -d 'Environment variable for the command'
    complete -c spacectl -n "__fish_seen_subcommand_from $v; and not __spacectl_after_dashdash" -s w -l workdir -x -d 'Working directory of the command'
    complete -c spacectl -n "__fish_seen_subcommand_from $v; and not __spacectl_after_dashdash" -l timeout -x -d 'Kill the command after SECONDS'
    complete -c spacectl -n "__fish_seen_subcommand_from $v; and __spacectl_after_dashdash" -F
end
complete -c spacectl -n "__fish_seen_subcommand_from exec; and __spacectl_no_positional" -a '(__spacectl_sandboxes)' -d 'Sandbox'

# ls, inspect, rm
complete -c spacectl -n "__fish_seen_subcommand_from ls" -l json -d 'Print JSON'
complete -c spacectl -n "__fish_seen_subcommand_from ls" -s q -l quiet -d 'Print only ids'
complete -c spacectl -n "__fish_seen_subcommand_from inspect" -l json -d 'Print JSON'
complete -c spacectl -n "__fish_seen_subcommand_from inspect; and __spacectl_no_positional" -a '(__spacectl_sandboxes)' -d 'Sandbox'
complete -c spacectl -n "__fish_seen_subcommand_from rm" -s f -l force -d 'Remove running sandboxes too'
complete -c spacectl -n "__fish_seen_subcommand_from rm" -a '(__spacectl_sandboxes)' -d 'Sandbox'

# template ls
complete -c spacectl -n "__fish_seen_subcommand_from template; and not __fish_seen_subcommand_from ls" -a ls -d 'List templates'
complete -c spacectl -n "__fish_seen_subcommand_from template; and __fish_seen_subcommand_from ls" -l json -d 'Print JSON'
complete -c spacectl -n "__fish_seen_subcommand_from template; and __fish_seen_subcommand_from ls" -s q -l quiet -d 'Print only names'

# version, help
complete -c spacectl -n "__fish_seen_subcommand_from version" -l json -d 'Print JSON'
complete -c spacectl -n "__fish_seen_subcommand_from help" -a "$verbs"
