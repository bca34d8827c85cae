#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Interactive attach through a real terminal (tmux): `spacectl exec -it SB -- sh`, type, read the screen, resize
# the window and see `stty size` follow, detach with Ctrl-P Ctrl-Q (spacectl exits 0, the shell keeps running and
# `spacectl ps` shows it), reattach with `spacectl attach SB PID` (the shell and its state are still there), exit;
# the local terminal is restored after each exit (icanon, echo).
. "$(dirname "$0")/lib.sh"

space_env_setup
command -v tmux >/dev/null || { echo "1..0 # SKIP tmux is not installed"; exit 0; }
start_daemon

create_sandbox SB --name t09
[ -n "$SB" ] || { last_diag; bail_out "create failed"; }
pass "create a sandbox"

TMUX_SOCK=$TEST_TMP/tmux.sock
HOST_INIT=$(cat /proc/1/comm)
tm() {
        tmux -S "$TMUX_SOCK" "$@"
}
# The tmux server is ours: kill it at exit before lib.sh's cleanup runs (it is a child of nobody once detached).
_t09_cleanup() {
        local rc=$?
        tmux -S "$TMUX_SOCK" kill-server >/dev/null 2>&1
        (exit "$rc") # _space_cleanup takes the script's status from $?
        _space_cleanup
}
trap _t09_cleanup EXIT

screen() {
        tm capture-pane -p -J -S -300 -t t09
}
# wait_screen SECS ERE: until the pane (with its history) shows a line matching ERE.
wait_screen() {
        local secs=$1 re=$2 deadline
        deadline=$(($(date +%s) + secs))
        while :; do
                screen 2>/dev/null | grep -qE -- "$re" && return 0
                [ "$(date +%s)" -ge "$deadline" ] && return 1
                sleep 0.2
        done
}
# check_screen DESC SECS ERE
check_screen() {
        if wait_screen "$2" "$3"; then
                pass "$1"
        else
                fail "$1" "the screen never showed: $3" "screen:"
                screen 2>/dev/null | grep -v '^$' | tail -n 15 | sed 's/^/#   /'
                return 1
        fi
}
type_line() {
        tm send-keys -t t09 -l -- "$1"
        tm send-keys -t t09 Enter
}
# The last non-empty line of the pane is the host shell's bare prompt: no command (spacectl) has the terminal.
host_prompt_last() {
        screen 2>/dev/null | grep -v '^[[:space:]]*$' | tail -n1 | grep -qx 'HOST\$ *'
}
# guest_type LINE: types LINE only when spacectl holds the terminal, so that nothing meant for the guest ever
# runs in the host shell; 1 (typing nothing) otherwise.
guest_type() {
        sleep 0.3
        if host_prompt_last; then
                diag "not typing '$1': the host shell has the terminal"
                return 1
        fi
        type_line "$1"
}

# A host shell in a tmux pane with our environment (the tmux server inherits it), a plain prompt.
tm -f /dev/null new-session -d -s t09 -x 100 -y 30 "while :; do env PS1='HOST\$ ' bash --norc --noprofile; done"
tm set-option -g status off >/dev/null
tm set-option -g history-limit 5000 >/dev/null
tm set-window-option -g window-size manual >/dev/null 2>&1
check_screen "a host shell runs in tmux" 10 'HOST\$'
diag "tmux pane: $(tm display -p -t t09 '#{pane_height}x#{pane_width}'), TERM in the pane: $(tm show-options -gv default-terminal)"

# ---- exec -it: a shell in the guest on a pty
type_line "spacectl exec -it $SB -- sh; echo SPACECTL-EXIT=\$?; stty -a | tr ' ;' '\\n\\n' | grep -Ex -- '-?(icanon|echo)' | paste -sd, | sed 's/^/TTY-MODES=/'"
check_screen "the guest shell's prompt appears" 30 '^/ #'
guest_type 'echo MARK-$((6*7))-$(cat /proc/1/comm); M=kept-$((3*3)); echo GPID=$$'
check_screen "typed keys reach the guest shell, its output reaches the screen" 15 "^MARK-42-"
G_INIT=$(screen | grep -oE '^MARK-42-.*' | tail -n1 | sed 's/^MARK-42-//; s/[[:space:]]*$//')
if [ -n "$G_INIT" ] && [ "$G_INIT" != "$HOST_INIT" ]; then
        pass "... and it is the guest's shell (its PID 1 is $G_INIT, the host's $HOST_INIT)"
else
        fail "... and it is the guest's shell" "PID 1 is '$G_INIT', the host's is '$HOST_INIT'"
fi
GPID=$(screen | grep -oE '^GPID=[0-9]+' | tail -n1 | cut -d= -f2)
check_match "the guest shell told its pid" '^[0-9]+$' "$GPID"
guest_type 'tty'
check_screen "the guest shell has a pty" 15 '^/dev/pts/[0-9]+'

guest_type 'stty size | sed "s/^/SIZE1=/"'
H=$(tm display -p -t t09 '#{pane_height}')
W=$(tm display -p -t t09 '#{pane_width}')
check_screen "stty size in the guest is the pane's size ($H $W)" 15 "^SIZE1=$H $W\$"

tm resize-window -t t09 -x 117 -y 37
sleep 1
H=$(tm display -p -t t09 '#{pane_height}')
W=$(tm display -p -t t09 '#{pane_width}')
guest_type 'stty size | sed "s/^/SIZE2=/"'
check_screen "after resizing the window, stty size follows ($H $W)" 15 "^SIZE2=$H $W\$"
[ "$H $W" != "30 100" ] || diag "tmux did not resize the window; the check above proves little"

# ---- detach with Ctrl-P Ctrl-Q
host_prompt_last || tm send-keys -t t09 C-p C-q
check_screen "Ctrl-P Ctrl-Q detaches: spacectl exits 0" 15 '^SPACECTL-EXIT=0'
check_screen "the terminal is restored after the detach (icanon, echo)" 10 '^TTY-MODES=icanon,echo$'
check_rc "spacectl ps SB exits 0" 0 sc ps "$SB"
cp "$OUT" "$TEST_TMP/ps1.txt"
check_match "ps shows the detached shell" "(^|[[:space:]])$GPID([[:space:]]|$)" "$(cat "$TEST_TMP/ps1.txt")"
check_eq "the detached shell is still running" running "$( (api_get "/v1/sandboxes/$SB/processes/$GPID" >"$TEST_TMP/p.json" && json "$TEST_TMP/p.json" 'd["state"]') 2>&1)"

# ---- reattach: the same shell, with its variable
tm send-keys -t t09 C-l
type_line "spacectl attach $SB $GPID; echo ATTACH-EXIT=\$?; stty -a | tr ' ;' '\\n\\n' | grep -Ex -- '-?(icanon|echo)' | paste -sd, | sed 's/^/TTY-MODES2=/'"
sleep 1
guest_type 'echo "AGAIN-$M-$$"'
check_screen "spacectl attach SB PID: the same shell, its state kept" 20 "^AGAIN-kept-9-$GPID"
tm resize-window -t t09 -x 90 -y 25
sleep 1
H=$(tm display -p -t t09 '#{pane_height}')
W=$(tm display -p -t t09 '#{pane_width}')
guest_type 'stty size | sed "s/^/SIZE3=/"'
check_screen "attach follows window size changes too ($H $W)" 15 "^SIZE3=$H $W\$"
guest_type 'exit 4'
check_screen "exiting the shell ends attach with its exit code (4)" 20 '^ATTACH-EXIT=4'
check_screen "the terminal is restored after attach exits (icanon, echo)" 10 '^TTY-MODES2=icanon,echo$'
run api_get "/v1/sandboxes/$SB/processes/$GPID"
check_eq "the shell is now exited with 4" "exited 4" "$(json "$OUT" 'd["state"] + " " + str(d["exit_code"])' 2>&1)"

# ---- without a pty: attach to a running pipe process; lines typed (with readline history) reach its stdin
ureq POST "/v1/sandboxes/$SB/sessions" -H 'Content-Type: application/json' \
        -d '{"argv": ["sh", "-c", "echo started; while read l; do echo \"got:$l\"; done; echo stdin-closed"], "stdin": true}'
check_eq "a pipe session (stdin, no pty) is created" 201 "$STATUS"
cp "$OUT" "$TEST_TMP/pipe.json"
PPID2=$(json "$TEST_TMP/pipe.json" 'd["pid"]' 2>/dev/null)
# Start it: attach with the client for its first output, then drop the connection (the process keeps running).
run timeout 60 python3 "$SSE_PY" --unix "$SPACE_SOCKET" --token "$(json "$TEST_TMP/pipe.json" 'd["attach_token"]' 2>/dev/null)" \
        stream "$(json "$TEST_TMP/pipe.json" 'd["stream_url"]' 2>/dev/null)" --max-events 2
check_eq "it started and printed its first line" 8 "$(json "$OUT" 'd["stdout_bytes"]' 2>&1)"
tm send-keys -t t09 C-l
type_line "spacectl attach $SB $PPID2; echo ATTACH2-EXIT=\$?"
sleep 1
guest_type 'hello-pipe'
check_screen "spacectl attach without a pty: a typed line reaches the process's stdin" 15 '^got:hello-pipe'
host_prompt_last || { tm send-keys -t t09 Up; tm send-keys -t t09 Enter; }
if wait_for 10 bash -c '[ "$(tmux -S "$0" capture-pane -p -J -S -300 -t t09 | grep -c "^got:hello-pipe")" -ge 2 ]' "$TMUX_SOCK"; then
        pass "readline history: Up recalls the line, it is sent again"
else
        fail "readline history: Up recalls the line, it is sent again" "$(screen | grep -v '^$' | tail -n 8)"
fi
host_prompt_last || tm send-keys -t t09 C-d
check_screen "Ctrl-D closes its stdin, it exits, attach exits 0" 20 '^ATTACH2-EXIT=0'
check_screen "... after the process saw EOF" 5 '^stdin-closed'

tm kill-server >/dev/null 2>&1
check_rc "rm" 0 sc rm "$SB"
done_testing
