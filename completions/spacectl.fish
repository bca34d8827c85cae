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
            case -n --name --vcpu -m --memory --disk -e --env -w --workdir -u --user --timeout -s --signal --detach-keys --idle-timeout --ttl --on-timeout --egress -v --volume --count --max-bytes --chown
                set skip 1
            case '-*'
            case '*'
                return 1
        end
    end
    return 0
end

# The first positional argument after the verb (the sandbox), for process ids.
function __spacectl_first_arg
    set -l tokens (commandline -opc)
    set -e tokens[1..2]
    set -l skip 0
    for t in $tokens
        if test $skip -eq 1
            set skip 0
            continue
        end
        switch $t
            case -s --signal --detach-keys
                set skip 1
            case '-*'
            case '*'
                echo $t
                return 0
        end
    end
    return 1
end

# True when exactly one positional argument (the sandbox) precedes the cursor.
function __spacectl_one_positional
    set -l tokens (commandline -opc)
    set -e tokens[1..2]
    set -l skip 0
    set -l n 0
    for t in $tokens
        if test $skip -eq 1
            set skip 0
            continue
        end
        switch $t
            case -s --signal --detach-keys
                set skip 1
            case '-*'
            case '*'
                set n (math $n + 1)
        end
    end
    test $n -eq 1
end

function __spacectl_pids
    set -l sb (__spacectl_first_arg); or return
    env SPACE_NO_AUTOSTART=1 spacectl ps $sb 2>/dev/null | awk 'NR > 1 { print $1 }'
end

function __spacectl_ops
    env SPACE_NO_AUTOSTART=1 spacectl op ls 2>/dev/null | awk 'NR > 1 { print $1 }'
end

function __spacectl_checkpoints
    env SPACE_NO_AUTOSTART=1 spacectl checkpoint ls 2>/dev/null | awk 'NR > 1 { print $1; if ($2 != "-") print $2 }'
end

function __spacectl_egress_profiles
    env SPACE_NO_AUTOSTART=1 spacectl egress ls --quiet 2>/dev/null
end

function __spacectl_keys
    env SPACE_NO_AUTOSTART=1 spacectl key ls --quiet 2>/dev/null
end

function __spacectl_volumes
    env SPACE_NO_AUTOSTART=1 spacectl volume ls --quiet 2>/dev/null
end

function __spacectl_secrets
    env SPACE_NO_AUTOSTART=1 spacectl secret ls --quiet 2>/dev/null
end

# True when the verb (the first word after spacectl) is one of the arguments; unlike
# __fish_seen_subcommand_from, sub-verbs such as "key rm" or "op ls" do not count.
function __spacectl_verb_is
    set -l tokens (commandline -opc)
    test (count $tokens) -ge 2; and contains -- $tokens[2] $argv
end

function __spacectl_after_dashdash
    contains -- -- (commandline -opc)
end

set -l verbs create exec run ls inspect rm pause resume suspend wake stop start checkpoint restore fork pool attach ps kill logs op info daemon key secret volume e2b mcp template version help cp egress port

complete -c spacectl -f
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -s h -l help -d 'Show help'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -l version -d 'Show the client version'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a create -d 'Create a sandbox and print its id'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a exec -d 'Run a command in a running sandbox'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a run -d 'Run a command in a new, removed-afterwards sandbox'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a ls -d 'List sandboxes'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a inspect -d 'Show one sandbox'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a rm -d 'Remove sandboxes'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a pause -d 'Stop the CPUs of sandboxes (memory stays)'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a resume -d 'Let paused sandboxes run again'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a suspend -d 'Write sandboxes to disk, free their memory'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a wake -d 'Bring suspended sandboxes back'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a stop -d 'Shut running sandboxes down, keeping their files'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a start -d 'Boot stopped sandboxes again from their disks'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a checkpoint -d 'Take, list and remove checkpoints'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a restore -d 'Put a sandbox back to a checkpoint'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a fork -d 'Make N sandboxes from a sandbox or checkpoint'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a attach -d 'Attach to a running process'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a ps -d 'List the processes of a sandbox'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a kill -d 'Send a signal to a process'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a logs -d 'Print the output of a process'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a cp -d 'Copy files between the host and a sandbox'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a op -d 'List, show, wait for and cancel operations'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a info -d 'Show the daemon'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a daemon -d 'Make the running daemon re-read its configuration'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a key -d 'Create, list and revoke API keys'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a secret -d 'Set, list and remove secrets'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a volume -d 'Create, list and remove volumes'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a e2b -d 'Print the environment for E2B SDKs'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a egress -d 'List egress profiles, test destinations'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a port -d 'Forward a host port into a sandbox'
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a mcp -d 'Serve sandboxes as MCP tools to coding agents (stdio)'
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
    complete -c spacectl -n "__fish_seen_subcommand_from $v; and not __spacectl_after_dashdash" -l idle-timeout -x -d 'Suspend after this long unused (0: never)'
    complete -c spacectl -n "__fish_seen_subcommand_from $v; and not __spacectl_after_dashdash" -l ttl -x -d 'Time to live'
    complete -c spacectl -n "__fish_seen_subcommand_from $v; and not __spacectl_after_dashdash" -l on-timeout -x -a 'remove suspend stop' -d 'What the time to live does'
    complete -c spacectl -n "__fish_seen_subcommand_from $v; and not __spacectl_after_dashdash" -l egress -x -a '(__spacectl_egress_profiles)' -d 'Egress profile (repeatable)'
    complete -c spacectl -n "__fish_seen_subcommand_from $v; and not __spacectl_after_dashdash" -s v -l volume -x -a '(__spacectl_volumes | string replace -r \'$\' :)' -d 'Mount a volume: NAME:/PATH (repeatable)'
    complete -c spacectl -n "__fish_seen_subcommand_from $v; and __spacectl_no_positional" -a '(__spacectl_templates)' -d 'Template'
end
complete -c spacectl -n "__spacectl_verb_is create" -l timeout -x -d 'Time to live (like --ttl)'
complete -c spacectl -n "__fish_seen_subcommand_from create" -l async -d 'Print the operation id and return at once'
complete -c spacectl -n "__spacectl_verb_is create" -l json -d 'Print the sandbox as JSON'
complete -c spacectl -n "__fish_seen_subcommand_from create" -s e -l env -x -a '(set -n | string replace -r \'$\' =)' -d 'Environment of every process'

# exec and run: process options
for v in exec run
    complete -c spacectl -n "__fish_seen_subcommand_from $v; and not __spacectl_after_dashdash" -s i -l interactive -d 'Forward stdin to the command'
    complete -c spacectl -n "__fish_seen_subcommand_from $v; and not __spacectl_after_dashdash" -s t -l tty -d 'Give the command a terminal (pty)'
    complete -c spacectl -n "__fish_seen_subcommand_from $v; and not __spacectl_after_dashdash" -s e -l env -x -a '(set -n | string replace -r \'$\' =)' -d 'Environment variable for the command'
    complete -c spacectl -n "__fish_seen_subcommand_from $v; and not __spacectl_after_dashdash" -s w -l workdir -x -d 'Working directory of the command'
    complete -c spacectl -n "__fish_seen_subcommand_from $v; and not __spacectl_after_dashdash" -s u -l user -x -a root -d 'Run as USER[:GROUP]'
    complete -c spacectl -n "__fish_seen_subcommand_from $v; and not __spacectl_after_dashdash" -l timeout -x -d 'Kill the command after SECONDS'
    complete -c spacectl -n "__fish_seen_subcommand_from $v; and __spacectl_after_dashdash" -F
end
complete -c spacectl -n "__fish_seen_subcommand_from exec; and __spacectl_no_positional" -a '(__spacectl_sandboxes)' -d 'Sandbox'
complete -c spacectl -n "__fish_seen_subcommand_from exec; and not __spacectl_after_dashdash" -l detach-keys -x -a 'ctrl-p,ctrl-q' -d 'Keys that detach'

# attach, ps, kill, logs: SANDBOX [PID]
for v in attach ps kill logs
    complete -c spacectl -n "__fish_seen_subcommand_from $v; and __spacectl_no_positional" -a '(__spacectl_sandboxes)' -d 'Sandbox'
end
for v in attach kill logs
    complete -c spacectl -n "__fish_seen_subcommand_from $v; and __spacectl_one_positional" -a '(__spacectl_pids)' -d 'Process'
end
complete -c spacectl -n "__fish_seen_subcommand_from attach" -l detach-keys -x -a 'ctrl-p,ctrl-q' -d 'Keys that detach'
complete -c spacectl -n "__fish_seen_subcommand_from attach" -l no-stdin -d 'Only watch, do not forward stdin'
complete -c spacectl -n "__fish_seen_subcommand_from ps" -l json -d 'Print JSON'
complete -c spacectl -n "__fish_seen_subcommand_from ps" -s q -l quiet -d 'Print only the PIDs'
complete -c spacectl -n "__fish_seen_subcommand_from kill" -s s -l signal -x -a 'TERM INT HUP KILL QUIT USR1 USR2 STOP CONT WINCH' -d 'Signal to send'
complete -c spacectl -n "__fish_seen_subcommand_from logs" -s f -l follow -d 'Follow until the process exits'

# cp [-a | --chown USER[:GROUP]] [-L] [-q] [--json] [--max-bytes N] SRC DST: SANDBOX:PATH or a local path
complete -c spacectl -n "__fish_seen_subcommand_from cp" -s a -l archive -d 'Keep owners and modes as they are'
complete -c spacectl -n "__fish_seen_subcommand_from cp" -l chown -x -a 'root user' -d 'Copying in, give what cp writes to USER[:GROUP]'
complete -c spacectl -n "__fish_seen_subcommand_from cp" -l json -d 'Print what was copied as JSON'
complete -c spacectl -n "__fish_seen_subcommand_from cp" -s L -l follow-link -d 'Copy what a symlink SRC points to'
complete -c spacectl -n "__fish_seen_subcommand_from cp" -s q -l quiet -d 'No progress on the terminal'
complete -c spacectl -n "__fish_seen_subcommand_from cp" -l max-bytes -x -d 'Copying out, stop past N bytes in all'
complete -c spacectl -n "__fish_seen_subcommand_from cp" -F
complete -c spacectl -n "__fish_seen_subcommand_from cp" -a '(__spacectl_sandboxes | string replace -r \'$\' :)' -d 'Sandbox'

# op ls|show|wait|cancel
complete -c spacectl -n "__fish_seen_subcommand_from op; and not __fish_seen_subcommand_from ls show wait cancel" -a ls -d 'List operations'
complete -c spacectl -n "__fish_seen_subcommand_from op; and not __fish_seen_subcommand_from ls show wait cancel" -a show -d 'Show one operation'
complete -c spacectl -n "__fish_seen_subcommand_from op; and not __fish_seen_subcommand_from ls show wait cancel" -a wait -d 'Wait for an operation'
complete -c spacectl -n "__fish_seen_subcommand_from op; and not __fish_seen_subcommand_from ls show wait cancel" -a cancel -d 'Cancel a running import'
complete -c spacectl -n "__fish_seen_subcommand_from op; and __fish_seen_subcommand_from ls show" -l json -d 'Print JSON'
complete -c spacectl -n "__fish_seen_subcommand_from op; and __fish_seen_subcommand_from ls" -l sandbox -x -a '(__spacectl_sandboxes)' -d 'Only this sandbox'
complete -c spacectl -n "__fish_seen_subcommand_from op; and __fish_seen_subcommand_from wait" -l timeout -x -d 'Give up after SECONDS'
complete -c spacectl -n "__fish_seen_subcommand_from op; and __fish_seen_subcommand_from show wait cancel" -a '(__spacectl_ops)' -d 'Operation'

# info
complete -c spacectl -n "__fish_seen_subcommand_from info" -l json -d 'Print JSON'
complete -c spacectl -n "__fish_seen_subcommand_from daemon; and not __fish_seen_subcommand_from reload" -a reload -d 'Re-read spaced.conf'
complete -c spacectl -n "__fish_seen_subcommand_from daemon" -l json -d 'Print the configuration in force as JSON'

# egress ls|show PROFILE|test SANDBOX HOST[:PORT]|log SANDBOX
complete -c spacectl -n "__spacectl_verb_is egress; and not __fish_seen_subcommand_from ls show test log" -a ls -d 'List egress profiles'
complete -c spacectl -n "__spacectl_verb_is egress; and not __fish_seen_subcommand_from ls show test log" -a show -d 'Print a profile'
complete -c spacectl -n "__spacectl_verb_is egress; and not __fish_seen_subcommand_from ls show test log" -a test -d 'Would a sandbox reach HOST[:PORT]'
complete -c spacectl -n "__spacectl_verb_is egress; and __fish_seen_subcommand_from ls show test log" -l json -d 'Print JSON'
complete -c spacectl -n "__spacectl_verb_is egress; and __fish_seen_subcommand_from ls" -s q -l quiet -d 'Print only names'
complete -c spacectl -n "__spacectl_verb_is egress; and __fish_seen_subcommand_from show" -a '(__spacectl_egress_profiles)' -d 'Profile'
complete -c spacectl -n "__spacectl_verb_is egress; and __fish_seen_subcommand_from test log" -a '(__spacectl_sandboxes)' -d 'Sandbox'
complete -c spacectl -n "__spacectl_verb_is egress; and not __fish_seen_subcommand_from ls show test log" -a log -d "The gateway's decisions for a sandbox"
complete -c spacectl -n "__spacectl_verb_is egress; and __fish_seen_subcommand_from log" -s f -l follow -d 'Keep printing new entries'
complete -c spacectl -n "__spacectl_verb_is egress; and __fish_seen_subcommand_from log" -s n -l lines -x -d 'Print only the last N first'

# port [-d] SANDBOX GUEST_PORT [HOST_PORT]|ls [SANDBOX]|rm SANDBOX HOST_PORT|ID...
complete -c spacectl -n "__spacectl_verb_is port; and not __fish_seen_subcommand_from ls rm" -a ls -d 'List port forwards'
complete -c spacectl -n "__spacectl_verb_is port; and not __fish_seen_subcommand_from ls rm" -a rm -d 'Remove port forwards'
complete -c spacectl -n "__spacectl_verb_is port; and test (count (commandline -opc)) -le 3" -a '(__spacectl_sandboxes)' -d 'Sandbox'
complete -c spacectl -n "__spacectl_verb_is port; and not __fish_seen_subcommand_from ls rm" -s d -l detach -d 'Leave the forward in the daemon'
complete -c spacectl -n "__spacectl_verb_is port; and not __fish_seen_subcommand_from ls rm" -l any-user -d 'Let every local user connect'
complete -c spacectl -n "__spacectl_verb_is port; and not __fish_seen_subcommand_from rm" -l json -d 'Print JSON'
complete -c spacectl -n "__spacectl_verb_is port; and __fish_seen_subcommand_from ls" -s q -l quiet -d 'Print only ids'

# mcp [--template T] [--keep] [--name N]
complete -c spacectl -n "__fish_seen_subcommand_from mcp" -s t -l template -x -a '(__spacectl_templates)' -d 'The session sandbox\'s template'
complete -c spacectl -n "__fish_seen_subcommand_from mcp" -l keep -d 'Keep the session\'s sandboxes when it ends'
complete -c spacectl -n "__fish_seen_subcommand_from mcp" -s n -l name -x -d 'Name of the kept session sandbox (implies --keep)'

# e2b env
complete -c spacectl -n "__fish_seen_subcommand_from e2b; and not __fish_seen_subcommand_from env" -a env -d 'Mint a key, print the exports for E2B SDKs'
complete -c spacectl -n "__fish_seen_subcommand_from e2b; and __fish_seen_subcommand_from env" -l url -d 'E2B_API_URL and E2B_SANDBOX_URL (plain HTTP)'
# key create|ls|rm
complete -c spacectl -n "__fish_seen_subcommand_from key; and not __fish_seen_subcommand_from create ls rm" -a create -d 'Mint an API key'
complete -c spacectl -n "__fish_seen_subcommand_from key; and not __fish_seen_subcommand_from create ls rm" -a ls -d 'List API keys'
complete -c spacectl -n "__fish_seen_subcommand_from key; and not __fish_seen_subcommand_from create ls rm" -a rm -d 'Revoke API keys'
complete -c spacectl -n "__fish_seen_subcommand_from key; and __fish_seen_subcommand_from create" -s n -l name -x -d 'Name of the key'
complete -c spacectl -n "__fish_seen_subcommand_from key; and __fish_seen_subcommand_from ls" -l json -d 'Print JSON'
complete -c spacectl -n "__fish_seen_subcommand_from key; and __fish_seen_subcommand_from ls" -s q -l quiet -d 'Print only ids'
complete -c spacectl -n "__fish_seen_subcommand_from key; and __fish_seen_subcommand_from rm" -a '(__spacectl_keys)' -d 'Key id'

# volume create|ls|rm
complete -c spacectl -n "__fish_seen_subcommand_from volume; and not __fish_seen_subcommand_from create ls rm" -a create -d 'Make a volume'
complete -c spacectl -n "__fish_seen_subcommand_from volume; and not __fish_seen_subcommand_from create ls rm" -a ls -d 'List volumes'
complete -c spacectl -n "__fish_seen_subcommand_from volume; and not __fish_seen_subcommand_from create ls rm" -a rm -d 'Remove volumes'
complete -c spacectl -n "__fish_seen_subcommand_from volume; and __fish_seen_subcommand_from create" -l quota -x -d 'The most its files may hold (512M, 10G)'
complete -c spacectl -n "__fish_seen_subcommand_from volume; and __fish_seen_subcommand_from rm" -a '(__spacectl_volumes)' -d 'Volume'
complete -c spacectl -n "__fish_seen_subcommand_from volume; and __fish_seen_subcommand_from ls" -l json -d 'Print JSON'
complete -c spacectl -n "__fish_seen_subcommand_from volume; and __fish_seen_subcommand_from ls" -s q -l quiet -d 'Print only names'

# secret set|ls|rm
complete -c spacectl -n "__fish_seen_subcommand_from secret; and not __fish_seen_subcommand_from set ls rm" -a set -d 'Create a secret or set a new version'
complete -c spacectl -n "__fish_seen_subcommand_from secret; and not __fish_seen_subcommand_from set ls rm" -a ls -d 'List secrets'
complete -c spacectl -n "__fish_seen_subcommand_from secret; and not __fish_seen_subcommand_from set ls rm" -a rm -d 'Remove secrets'
complete -c spacectl -n "__fish_seen_subcommand_from secret; and __fish_seen_subcommand_from set" -s m -l metadata -x -d 'A label KEY=VALUE'
complete -c spacectl -n "__fish_seen_subcommand_from secret; and __fish_seen_subcommand_from set rm" -a '(__spacectl_secrets)' -d 'Secret'
complete -c spacectl -n "__fish_seen_subcommand_from secret; and __fish_seen_subcommand_from ls" -l json -d 'Print JSON'
complete -c spacectl -n "__fish_seen_subcommand_from secret; and __fish_seen_subcommand_from ls" -s q -l quiet -d 'Print only names'

# ls, inspect, rm
complete -c spacectl -n "__spacectl_verb_is ls" -l json -d 'Print JSON'
complete -c spacectl -n "__spacectl_verb_is ls" -s q -l quiet -d 'Print only ids'
complete -c spacectl -n "__fish_seen_subcommand_from inspect" -l json -d 'Print JSON'
complete -c spacectl -n "__fish_seen_subcommand_from inspect; and __spacectl_no_positional" -a '(__spacectl_sandboxes)' -d 'Sandbox'
complete -c spacectl -n "__spacectl_verb_is rm" -s f -l force -d 'Remove running sandboxes too'
complete -c spacectl -n "__spacectl_verb_is rm" -l async -d 'Print the operation ids and return at once'
complete -c spacectl -n "__spacectl_verb_is rm" -a '(__spacectl_sandboxes)' -d 'Sandbox'

# pause, resume, suspend, wake, stop, start: SANDBOX...
for v in pause resume suspend wake stop start
    complete -c spacectl -n "__spacectl_verb_is $v" -l async -d 'Print the operation ids and return at once'
    complete -c spacectl -n "__spacectl_verb_is $v" -a '(__spacectl_sandboxes)' -d 'Sandbox'
end
complete -c spacectl -n "__spacectl_verb_is suspend wake stop start" -s q -l quiet -d 'No progress on the terminal'

# checkpoint SANDBOX | ls | rm
complete -c spacectl -n "__spacectl_verb_is checkpoint; and __spacectl_no_positional" -a ls -d 'List checkpoints'
complete -c spacectl -n "__spacectl_verb_is checkpoint; and __spacectl_no_positional" -a rm -d 'Remove checkpoints'
complete -c spacectl -n "__spacectl_verb_is checkpoint; and __spacectl_no_positional" -a '(__spacectl_sandboxes)' -d 'Sandbox to checkpoint'
complete -c spacectl -n "__spacectl_verb_is checkpoint; and not __fish_seen_subcommand_from ls rm" -l name -x -d 'Name the checkpoint'
complete -c spacectl -n "__spacectl_verb_is checkpoint; and not __fish_seen_subcommand_from ls rm" -l async -d 'Print the operation id and return at once'
complete -c spacectl -n "__spacectl_verb_is checkpoint; and not __fish_seen_subcommand_from rm" -s q -l quiet -d 'No progress (ls: print only ids)'
complete -c spacectl -n "__spacectl_verb_is checkpoint; and __fish_seen_subcommand_from ls" -l json -d 'Print JSON'
complete -c spacectl -n "__spacectl_verb_is checkpoint; and __fish_seen_subcommand_from ls" -l sandbox -x -a '(__spacectl_sandboxes)' -d 'Only this sandbox'
complete -c spacectl -n "__spacectl_verb_is checkpoint; and __fish_seen_subcommand_from rm" -a '(__spacectl_checkpoints)' -d 'Checkpoint'

# restore SANDBOX CHECKPOINT
complete -c spacectl -n "__spacectl_verb_is restore" -l async -d 'Print the operation id and return at once'
complete -c spacectl -n "__spacectl_verb_is restore; and __spacectl_no_positional" -a '(__spacectl_sandboxes)' -d 'Sandbox'
complete -c spacectl -n "__spacectl_verb_is restore; and __spacectl_one_positional" -a '(__spacectl_checkpoints)' -d 'Checkpoint'

# pool set TEMPLATE N | pool ls
complete -c spacectl -n "not __fish_seen_subcommand_from $verbs" -a pool -d 'Keep N warm sandboxes of a template'
complete -c spacectl -n "__spacectl_verb_is pool; and not __fish_seen_subcommand_from set ls" -a 'set ls' -d 'Pool sub-verb'
complete -c spacectl -n "__spacectl_verb_is pool; and __fish_seen_subcommand_from ls" -l json -d 'Print JSON'

# fork SANDBOX|CHECKPOINT
complete -c spacectl -n "__spacectl_verb_is fork" -s n -l count -x -d 'How many sandboxes (1..64)'
complete -c spacectl -n "__spacectl_verb_is fork" -l name -x -d 'Name the forks (NAME-1 ... NAME-N for several)'
complete -c spacectl -n "__spacectl_verb_is fork" -l async -d 'Print the operation id and return at once'
complete -c spacectl -n "__spacectl_verb_is fork" -l json -d 'Print the new sandboxes as JSON'
complete -c spacectl -n "__spacectl_verb_is fork" -s q -l quiet -d 'No progress on the terminal'
complete -c spacectl -n "__spacectl_verb_is fork; and __spacectl_no_positional" -a '(__spacectl_sandboxes)' -d 'Sandbox'
complete -c spacectl -n "__spacectl_verb_is fork; and __spacectl_no_positional" -a '(__spacectl_checkpoints)' -d 'Checkpoint'

# template ls|import|inspect|tag|rm|gc
set -l template_subs ls import build inspect tag rm gc
complete -c spacectl -n "__fish_seen_subcommand_from template; and not __fish_seen_subcommand_from $template_subs" -a ls -d 'List templates'
complete -c spacectl -n "__fish_seen_subcommand_from template; and not __fish_seen_subcommand_from $template_subs" -a import -d 'Import a rootfs tarball or an OCI image'
complete -c spacectl -n "__fish_seen_subcommand_from template; and not __fish_seen_subcommand_from $template_subs" -a inspect -d 'Print a template as JSON'
complete -c spacectl -n "__fish_seen_subcommand_from template; and not __fish_seen_subcommand_from $template_subs" -a tag -d 'Tag a template'
complete -c spacectl -n "__fish_seen_subcommand_from template; and not __fish_seen_subcommand_from $template_subs" -a rm -d 'Remove tags or templates'
complete -c spacectl -n "__fish_seen_subcommand_from template; and not __fish_seen_subcommand_from $template_subs" -a gc -d 'Remove unused images and base snapshots'
# template build
complete -c spacectl -n "__fish_seen_subcommand_from template; and not __fish_seen_subcommand_from $template_subs" -a build -d 'Build a recipe and import it'
complete -c spacectl -n "__fish_seen_subcommand_from template; and __fish_seen_subcommand_from build" -x -a '(__fish_complete_directories)' -d 'Recipe'
complete -c spacectl -n "__fish_seen_subcommand_from template; and __fish_seen_subcommand_from build" -s t -l tag -x -d 'Tag NAME:TAG'
complete -c spacectl -n "__fish_seen_subcommand_from template; and __fish_seen_subcommand_from build" -s o -l output -r -F -d 'Write the tarball to FILE'
complete -c spacectl -n "__fish_seen_subcommand_from template; and __fish_seen_subcommand_from build" -s q -l quiet -d 'Only errors'
complete -c spacectl -n "__fish_seen_subcommand_from template; and __fish_seen_subcommand_from build" -s v -l verbose -d 'Build output on stderr'
complete -c spacectl -n "__fish_seen_subcommand_from template; and __fish_seen_subcommand_from ls" -l json -d 'Print JSON'
complete -c spacectl -n "__fish_seen_subcommand_from template; and __fish_seen_subcommand_from ls" -s q -l quiet -d 'Print only tags'
complete -c spacectl -n "__fish_seen_subcommand_from template; and __fish_seen_subcommand_from import" -s t -l tag -r -d 'Tag NAME:TAG'
complete -c spacectl -n "__fish_seen_subcommand_from template; and __fish_seen_subcommand_from import" -s e -l env -r -d 'Default environment variable K=V'
complete -c spacectl -n "__fish_seen_subcommand_from template; and __fish_seen_subcommand_from import" -s w -l workdir -r -d 'Default working directory'
complete -c spacectl -n "__fish_seen_subcommand_from template; and __fish_seen_subcommand_from import" -s u -l user -r -d 'Default user'
complete -c spacectl -n "__fish_seen_subcommand_from template; and __fish_seen_subcommand_from import" -l description -r -d 'Description'
complete -c spacectl -n "__fish_seen_subcommand_from template; and __fish_seen_subcommand_from import" -l vcpu -r -d 'Default vCPUs'
complete -c spacectl -n "__fish_seen_subcommand_from template; and __fish_seen_subcommand_from import" -s m -l memory -r -d 'Default memory in MiB'
complete -c spacectl -n "__fish_seen_subcommand_from template; and __fish_seen_subcommand_from import" -l disk -r -d 'Default disk in MiB'
complete -c spacectl -n "__fish_seen_subcommand_from template; and __fish_seen_subcommand_from import" -s q -l quiet -d 'No progress line'
complete -c spacectl -n "__fish_seen_subcommand_from template; and __fish_seen_subcommand_from import" -F
complete -c spacectl -n "__fish_seen_subcommand_from template; and __fish_seen_subcommand_from inspect tag rm" -f -a '(__spacectl_templates)' -d 'Template'

# version, help
complete -c spacectl -n "__fish_seen_subcommand_from version" -l json -d 'Print JSON'
complete -c spacectl -n "__fish_seen_subcommand_from help" -a "$verbs"
complete -c spacectl -n "__spacectl_verb_is pool; and __fish_seen_subcommand_from set" -a '(__spacectl_templates)' -d 'Template'
