# SPDX-License-Identifier: Apache-2.0
# bash completion for spacectl(1)

# Ids and names come from the daemon; a Tab press must never start it (SPACE_NO_AUTOSTART).
_spacectl_sandboxes() {
    SPACE_NO_AUTOSTART=1 command spacectl ls --quiet 2>/dev/null
}

_spacectl_templates() {
    SPACE_NO_AUTOSTART=1 command spacectl template ls --quiet 2>/dev/null
}

_spacectl() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local verbs="create exec run ls inspect rm template version help"
    local create_opts="--name --vcpu --memory --disk --env --help"
    local exec_opts="--interactive --env --workdir --timeout --help"
    local verb i word npos=0

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
                -n|--name|--vcpu|-m|--memory|--disk|-e|--env|-w|--workdir|--timeout) ((i++)) ;;
            esac
            continue
        fi
        ((npos++))
    done

    case $prev in
        -e|--env)
            compopt -o nospace 2>/dev/null
            COMPREPLY=($(compgen -e -S = -- "$cur"))
            return ;;
        -n|--name|--vcpu|-m|--memory|--disk|-w|--workdir|--timeout)
            COMPREPLY=()
            return ;;
    esac

    case $verb in
        create)
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "$create_opts" -- "$cur"))
            elif [[ $npos -eq 0 ]]; then
                COMPREPLY=($(compgen -W "$(_spacectl_templates)" -- "$cur"))
            fi ;;
        exec)
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "$exec_opts --" -- "$cur"))
            elif [[ $npos -eq 0 ]]; then
                COMPREPLY=($(compgen -W "$(_spacectl_sandboxes)" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "--" -- "$cur"))
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
                COMPREPLY=($(compgen -W "--force --help" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "$(_spacectl_sandboxes)" -- "$cur"))
            fi ;;
        template)
            if [[ $npos -eq 0 && $cur != -* ]]; then
                COMPREPLY=($(compgen -W "ls" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "--json --quiet --help" -- "$cur"))
            fi ;;
        version)
            COMPREPLY=($(compgen -W "--json --help" -- "$cur")) ;;
        help)
            [[ $npos -eq 0 ]] && COMPREPLY=($(compgen -W "$verbs" -- "$cur")) ;;
    esac
}

complete -F _spacectl spacectl
