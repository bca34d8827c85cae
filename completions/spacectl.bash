# SPDX-License-Identifier: Apache-2.0
# bash completion for spacectl(1)

# Ids and names come from the daemon; a Tab press must never start it (SPACE_NO_AUTOSTART).
_spacectl_sandboxes() {
    SPACE_NO_AUTOSTART=1 command spacectl ls --quiet 2>/dev/null
}

_spacectl_templates() {
    SPACE_NO_AUTOSTART=1 command spacectl template ls --quiet 2>/dev/null
}

_spacectl_pids() {
    SPACE_NO_AUTOSTART=1 command spacectl ps "$1" 2>/dev/null | awk 'NR > 1 { print $1 }'
}

_spacectl_ops() {
    SPACE_NO_AUTOSTART=1 command spacectl op ls 2>/dev/null | awk 'NR > 1 { print $1 }'
}

_spacectl_checkpoints() {
    SPACE_NO_AUTOSTART=1 command spacectl checkpoint ls --quiet 2>/dev/null
    SPACE_NO_AUTOSTART=1 command spacectl checkpoint ls 2>/dev/null | awk 'NR > 1 && $2 != "-" { print $2 }'
}

_spacectl_keys() {
    SPACE_NO_AUTOSTART=1 command spacectl key ls --quiet 2>/dev/null
}

_spacectl_secrets() {
    SPACE_NO_AUTOSTART=1 command spacectl secret ls --quiet 2>/dev/null
}

_spacectl_volumes() {
    SPACE_NO_AUTOSTART=1 command spacectl volume ls --quiet 2>/dev/null
}

_spacectl_egress_profiles() {
    SPACE_NO_AUTOSTART=1 command spacectl egress ls --quiet 2>/dev/null
}

_spacectl() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local verbs="create exec run ls inspect rm pause resume suspend wake stop start checkpoint restore fork pool attach ps kill logs op info daemon key secret volume e2b mcp template version help cp egress port"
    local create_opts="--name --vcpu --memory --disk --env --idle-timeout --ttl --on-timeout --egress --volume --help"
    local exec_opts="--interactive --tty --env --workdir --user --timeout --help"
    local signals="TERM INT HUP KILL QUIT USR1 USR2 STOP CONT WINCH"
    local verb i word npos=0 sandbox=

    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W "$verbs --help --version" -- "$cur"))
        return
    fi
    verb=${COMP_WORDS[1]}

    # Count positional arguments before the cursor; after "--" comes the command to run in the sandbox.
    for ((i = 2; i < COMP_CWORD; i++)); do
        word=${COMP_WORDS[i]}
        if [[ $word == -- ]]; then
            # The command runs inside the sandbox: local files are the best guess there is.
            compopt -o default 2>/dev/null
            COMPREPLY=()
            return
        fi
        if [[ $word == -* ]]; then
            case $word in
                -n|--name|--vcpu|-m|--memory|--disk|-e|--env|-w|--workdir|-u|--user|--timeout|--detach-keys|-s|--signal|--sandbox|--idle-timeout|--ttl|--on-timeout|--egress|-v|--volume|--count|--max-bytes|--chown) ((i++)) ;;
            esac
            continue
        fi
        [[ $npos -eq 0 ]] && sandbox=$word
        ((npos++))
    done

    case $prev in
        -e|--env)
            compopt -o nospace 2>/dev/null
            COMPREPLY=($(compgen -e -S = -- "$cur"))
            return ;;
        -s|--signal)
            COMPREPLY=($(compgen -W "$signals" -- "$cur"))
            return ;;
        --detach-keys)
            COMPREPLY=($(compgen -W "ctrl-p,ctrl-q ctrl-a,d ''" -- "$cur"))
            return ;;
        --sandbox)
            COMPREPLY=($(compgen -W "$(_spacectl_sandboxes)" -- "$cur"))
            return ;;
        --on-timeout)
            COMPREPLY=($(compgen -W "remove suspend stop" -- "$cur"))
            return ;;
        --egress)
            COMPREPLY=($(compgen -W "$(_spacectl_egress_profiles)" -- "$cur"))
            return ;;
        -v|--volume)
            # NAME:/PATH: the names, then the user types the path
            [[ $verb == create || $verb == run ]] && { compopt -o nospace 2>/dev/null; COMPREPLY=($(compgen -S : -W "$(_spacectl_volumes)" -- "$cur")); return; } ;;
        --template)
            COMPREPLY=($(compgen -W "$(_spacectl_templates)" -- "$cur"))
            return ;;
        -t)
            # -t is mcp's --template (exec's and run's --tty takes nothing)
            [[ $verb == mcp ]] && { COMPREPLY=($(compgen -W "$(_spacectl_templates)" -- "$cur")); return; } ;;
        -n|--name|--vcpu|-m|--memory|--disk|-w|--workdir|--timeout|--idle-timeout|--ttl|--count|--max-bytes)
            COMPREPLY=()
            return ;;
        --chown)
            # the sandbox's own users are not known here; root and seed's user are common
            COMPREPLY=($(compgen -W "root user" -- "$cur"))
            return ;;
        -u|--user)
            # the sandbox's own users are not known here; root is in every one
            [[ $verb == exec || $verb == run ]] && { COMPREPLY=($(compgen -W "root" -- "$cur")); return; } ;;
    esac

    case $verb in
        mcp)
            [[ $cur == -* ]] && COMPREPLY=($(compgen -W "--template --keep --name --help" -- "$cur")) ;;
        create)
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "$create_opts --timeout --async --json" -- "$cur"))
            elif [[ $npos -eq 0 ]]; then
                COMPREPLY=($(compgen -W "$(_spacectl_templates)" -- "$cur"))
            fi ;;
        exec)
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "$exec_opts --detach-keys --" -- "$cur"))
            elif [[ $npos -eq 0 ]]; then
                COMPREPLY=($(compgen -W "$(_spacectl_sandboxes)" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "--" -- "$cur"))
            fi ;;
        attach|logs|kill)
            local opts="--help"
            [[ $verb == attach ]] && opts="--detach-keys --no-stdin --help"
            [[ $verb == logs ]] && opts="--follow --help"
            [[ $verb == kill ]] && opts="--signal --help"
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "$opts" -- "$cur"))
            elif [[ $npos -eq 0 ]]; then
                COMPREPLY=($(compgen -W "$(_spacectl_sandboxes)" -- "$cur"))
            elif [[ $npos -eq 1 ]]; then
                COMPREPLY=($(compgen -W "$(_spacectl_pids "$sandbox")" -- "$cur"))
            fi ;;
        cp)
            # SANDBOX:PATH or a local path; the ':' is a word break, so sandboxes are offered with it
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "--archive --chown --follow-link --quiet --json --max-bytes --help" -- "$cur"))
            elif [[ $npos -lt 2 && $prev != : ]]; then
                compopt -o default -o nospace 2>/dev/null
                COMPREPLY=($(compgen -W "$(_spacectl_sandboxes | sed 's/$/:/')" -- "$cur"))
            fi ;;
        ps)
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "--json --quiet --help" -- "$cur"))
            elif [[ $npos -eq 0 ]]; then
                COMPREPLY=($(compgen -W "$(_spacectl_sandboxes)" -- "$cur"))
            fi ;;
        op)
            if [[ $npos -eq 0 && $cur != -* ]]; then
                COMPREPLY=($(compgen -W "ls show wait cancel" -- "$cur"))
            elif [[ $cur == -* ]]; then
                case $sandbox in
                    ls) COMPREPLY=($(compgen -W "--json --sandbox --help" -- "$cur")) ;;
                    show) COMPREPLY=($(compgen -W "--json --help" -- "$cur")) ;;
                    wait) COMPREPLY=($(compgen -W "--timeout --help" -- "$cur")) ;;
                    cancel) COMPREPLY=($(compgen -W "--help" -- "$cur")) ;;
                esac
            elif [[ $npos -eq 1 && ( $sandbox == show || $sandbox == wait || $sandbox == cancel ) ]]; then
                COMPREPLY=($(compgen -W "$(_spacectl_ops)" -- "$cur"))
            fi ;;
        info)
            COMPREPLY=($(compgen -W "--json --help" -- "$cur")) ;;
        daemon)
            if [[ $npos -eq 0 && $cur != -* ]]; then
                COMPREPLY=($(compgen -W "reload" -- "$cur"))
            elif [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "--json --help" -- "$cur"))
            fi ;;
        egress)
            if [[ $npos -eq 0 && $cur != -* ]]; then
                COMPREPLY=($(compgen -W "ls show test log" -- "$cur"))
            elif [[ $cur == -* ]]; then
                case $sandbox in
                    ls) COMPREPLY=($(compgen -W "--json --quiet --help" -- "$cur")) ;;
                    show|test) COMPREPLY=($(compgen -W "--json --help" -- "$cur")) ;;
                    log) COMPREPLY=($(compgen -W "--follow --lines --json --help" -- "$cur")) ;;
                esac
            elif [[ $npos -eq 1 && $sandbox == show ]]; then
                COMPREPLY=($(compgen -W "$(_spacectl_egress_profiles)" -- "$cur"))
            elif [[ $npos -eq 1 && ( $sandbox == test || $sandbox == log ) ]]; then
                COMPREPLY=($(compgen -W "$(_spacectl_sandboxes)" -- "$cur"))
            fi ;;
        key)
            if [[ $npos -eq 0 && $cur != -* ]]; then
                COMPREPLY=($(compgen -W "create ls rm" -- "$cur"))
            elif [[ $cur == -* ]]; then
                case $sandbox in
                    create) COMPREPLY=($(compgen -W "--name --help" -- "$cur")) ;;
                    ls) COMPREPLY=($(compgen -W "--json --quiet --help" -- "$cur")) ;;
                    rm) COMPREPLY=($(compgen -W "--help" -- "$cur")) ;;
                esac
            elif [[ $sandbox == rm ]]; then
                COMPREPLY=($(compgen -W "$(_spacectl_keys)" -- "$cur"))
            fi ;;
        secret)
            if [[ $npos -eq 0 && $cur != -* ]]; then
                COMPREPLY=($(compgen -W "set ls rm" -- "$cur"))
            elif [[ $cur == -* ]]; then
                case $sandbox in
                    set) COMPREPLY=($(compgen -W "--metadata --help" -- "$cur")) ;;
                    ls) COMPREPLY=($(compgen -W "--json --quiet --help" -- "$cur")) ;;
                    rm) COMPREPLY=($(compgen -W "--help" -- "$cur")) ;;
                esac
            elif [[ $sandbox == rm || ( $sandbox == set && $npos -eq 1 ) ]]; then
                COMPREPLY=($(compgen -W "$(_spacectl_secrets)" -- "$cur"))
            fi ;;
        volume)
            if [[ $npos -eq 0 && $cur != -* ]]; then
                COMPREPLY=($(compgen -W "create ls rm" -- "$cur"))
            elif [[ $cur == -* ]]; then
                case $sandbox in
                    create) COMPREPLY=($(compgen -W "--quota --help" -- "$cur")) ;;
                    ls) COMPREPLY=($(compgen -W "--json --quiet --help" -- "$cur")) ;;
                    rm) COMPREPLY=($(compgen -W "--help" -- "$cur")) ;;
                esac
            elif [[ $sandbox == rm ]]; then
                COMPREPLY=($(compgen -W "$(_spacectl_volumes)" -- "$cur"))
            fi ;;
        e2b)
            if [[ $npos -eq 0 && $cur != -* ]]; then
                COMPREPLY=($(compgen -W "env" -- "$cur"))
            elif [[ $cur == -* ]]; then
                case $sandbox in
                    env) COMPREPLY=($(compgen -W "--url --help" -- "$cur")) ;;
                    *) COMPREPLY=($(compgen -W "--help" -- "$cur")) ;;
                esac
            fi ;;
        port)
            if [[ $npos -eq 0 && $cur != -* ]]; then
                COMPREPLY=($(compgen -W "ls rm $(_spacectl_sandboxes)" -- "$cur"))
            elif [[ $cur == -* ]]; then
                case $sandbox in
                    ls) COMPREPLY=($(compgen -W "--json --quiet --help" -- "$cur")) ;;
                    rm) COMPREPLY=($(compgen -W "--help" -- "$cur")) ;;
                    *) COMPREPLY=($(compgen -W "--detach --any-user --json --help" -- "$cur")) ;;
                esac
            elif [[ $npos -eq 1 && ( $sandbox == ls || $sandbox == rm ) ]]; then
                COMPREPLY=($(compgen -W "$(_spacectl_sandboxes)" -- "$cur"))
            fi ;;
        run)
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "$create_opts $exec_opts --" -- "$cur"))
            elif [[ $npos -eq 0 ]]; then
                COMPREPLY=($(compgen -W "$(_spacectl_templates)" -- "$cur"))
            fi ;;
        ls)
            COMPREPLY=($(compgen -W "--json --quiet --help" -- "$cur")) ;;
        inspect)
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "--json --help" -- "$cur"))
            elif [[ $npos -eq 0 ]]; then
                COMPREPLY=($(compgen -W "$(_spacectl_sandboxes)" -- "$cur"))
            fi ;;
        rm)
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "--force --async --help" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "$(_spacectl_sandboxes)" -- "$cur"))
            fi ;;
        pause|resume|suspend|wake|stop|start)
            if [[ $cur == -* ]]; then
                local opts="--async --help"
                [[ $verb == suspend || $verb == wake || $verb == stop || $verb == start ]] && opts="--async --quiet --help"
                COMPREPLY=($(compgen -W "$opts" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "$(_spacectl_sandboxes)" -- "$cur"))
            fi ;;
        checkpoint)
            if [[ $npos -eq 0 && $cur != -* ]]; then
                COMPREPLY=($(compgen -W "ls rm $(_spacectl_sandboxes)" -- "$cur"))
            elif [[ $cur == -* ]]; then
                case $sandbox in
                    ls) COMPREPLY=($(compgen -W "--json --quiet --sandbox --help" -- "$cur")) ;;
                    rm) COMPREPLY=($(compgen -W "--help" -- "$cur")) ;;
                    *) COMPREPLY=($(compgen -W "--name --async --quiet --help" -- "$cur")) ;;
                esac
            elif [[ $sandbox == rm ]]; then
                COMPREPLY=($(compgen -W "$(_spacectl_checkpoints)" -- "$cur"))
            fi ;;
        restore)
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "--async --help" -- "$cur"))
            elif [[ $npos -eq 0 ]]; then
                COMPREPLY=($(compgen -W "$(_spacectl_sandboxes)" -- "$cur"))
            elif [[ $npos -eq 1 ]]; then
                COMPREPLY=($(compgen -W "$(_spacectl_checkpoints)" -- "$cur"))
            fi ;;
        pool)
            if [[ $npos -eq 0 ]]; then
                COMPREPLY=($(compgen -W "set ls" -- "$cur"))
            elif [[ $npos -eq 1 && ${words[cword-1]} == set ]]; then
                COMPREPLY=($(compgen -W "$(_spacectl_templates)" -- "$cur"))
            elif [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "--json" -- "$cur"))
            fi ;;
        fork)
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "--count --name --async --json --quiet --help" -- "$cur"))
            elif [[ $npos -eq 0 ]]; then
                COMPREPLY=($(compgen -W "$(_spacectl_sandboxes) $(_spacectl_checkpoints)" -- "$cur"))
            fi ;;
        template)
            local sub=""
            for ((i = 2; i < COMP_CWORD; i++)); do
                [[ ${COMP_WORDS[i]} != -* ]] && { sub=${COMP_WORDS[i]}; break; }
            done
            if [[ -z $sub ]]; then
                [[ $cur == -* ]] && COMPREPLY=($(compgen -W "--help" -- "$cur")) ||
                    COMPREPLY=($(compgen -W "ls import build inspect tag rm gc" -- "$cur"))
            else
                case $sub in
                    ls) COMPREPLY=($(compgen -W "--json --quiet --help" -- "$cur")) ;;
                    import)
                        case $prev in
                            -t|--tag|-e|--env|-u|--user|--description|--vcpu|-m|--memory|--disk) ;;
                            -w|--workdir) ;;
                            *)
                                if [[ $cur == -* ]]; then
                                    COMPREPLY=($(compgen -W "--tag --env --workdir --user --description --vcpu --memory --disk --quiet --help" -- "$cur"))
                                else
                                    compopt -o filenames 2>/dev/null
                                    COMPREPLY=($(compgen -f -- "$cur"))
                                fi ;;
                        esac ;;
                    build)
                        case $prev in
                            -t|--tag) ;;
                            -o|--output) compopt -o default 2>/dev/null ;;
                            *)
                                if [[ $cur == -* ]]; then
                                    COMPREPLY=($(compgen -W "--tag --output --quiet --verbose --help" -- "$cur"))
                                else
                                    compopt -o filenames 2>/dev/null
                                    COMPREPLY=($(compgen -d -- "$cur"))
                                fi ;;
                        esac ;;
                    inspect|rm|tag)
                        [[ $cur == -* ]] && COMPREPLY=($(compgen -W "--help" -- "$cur")) ||
                            COMPREPLY=($(compgen -W "$(_spacectl_templates)" -- "$cur")) ;;
                    gc) COMPREPLY=($(compgen -W "--help" -- "$cur")) ;;
                esac
            fi ;;
        version)
            COMPREPLY=($(compgen -W "--json --help" -- "$cur")) ;;
        help)
            [[ $npos -eq 0 ]] && COMPREPLY=($(compgen -W "$verbs" -- "$cur")) ;;
    esac
}

complete -F _spacectl spacectl
