#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What a command leaves behind: background processes outlive the command (with and without a pty), the command
# ends when its process exits even if a background child holds its stdout, while its output up to then is all
# there; timeouts and signals still take the whole process group while the command runs; orphans are reaped.
. "$(dirname "$0")/lib.sh"

space_env_setup
start_daemon

create_sandbox SB --name t30
[ -n "$SB" ] || { last_diag; bail_out "create failed"; }
pass "create a sandbox"

# alive PATTERN: a live (not zombie) process whose command line matches PATTERN, a ps-style ERE written as
# '[s]leep 1001' so that the shell running the check does not match itself.
alive() {
        sc exec "$SB" -- sh -c "ps -o stat,args | grep -E '$1' | grep -qv '^ *Z'" >/dev/null 2>&1
}

gone() {
        ! sc exec "$SB" -- sh -c "ps -o stat,args | grep -qE '$1'" >/dev/null 2>&1
}

# The guest's processes, without kernel threads, for diagnostics.
guest_ps() {
        sc exec "$SB" -- ps -o pid,ppid,pgid,stat,args 2>&1 | grep -v ' \[' | tail -n 15
}

check_alive() {
        if alive "$2"; then pass "$1"; else fail "$1" "no live process matches $2" "$(guest_ps)"; fi
}

check_gone() {
        if gone "$2"; then pass "$1"; else fail "$1" "a process still matches $2" "$(guest_ps)"; fi
}

# check_quick DESC MAX-MS: the last timed run ($t0) took less than MAX-MS.
check_quick() {
        local took=$(($(now_ms) - t0))
        if [ "$took" -lt "$2" ]; then pass "$1 ($took ms)"; else fail "$1" "took $took ms, limit $2"; fi
}

# ---- a background process with its output redirected outlives the command
if sc exec "$SB" -- sh -c 'command -v nohup' >/dev/null 2>&1; then NOHUP=nohup; else
        NOHUP=
        diag "the template has no nohup: the nohup cases run with their redirection only"
fi
t0=$(now_ms)
check_rc "exec sh -c '$NOHUP sleep 1001 >/dev/null 2>&1 &' exits 0" 0 \
        sc exec "$SB" -- sh -c "$NOHUP sleep 1001 >/dev/null 2>&1 &"
check_quick "... and returns at once" 10000
sleep 1
check_alive "the background sleep is still running after the command returned" '[s]leep 1001'
check_rc "exec sh -c 'setsid sleep 1002 >/dev/null 2>&1 &' exits 0" 0 \
        sc exec "$SB" -- sh -c 'setsid sleep 1002 >/dev/null 2>&1 &'
sleep 1
check_alive "a background process in a session of its own survives too" '[s]leep 1002'

# ---- a background writer keeps writing after the command ended
check_rc "start a background writer" 0 sc exec "$SB" -- sh -c \
        'rm -f /tmp/t30.w; (while :; do echo x >>/tmp/t30.w; sleep 0.2; done) >/dev/null 2>&1 </dev/null &'
sleep 1
n1=$(sc exec "$SB" -- sh -c 'wc -l </tmp/t30.w' 2>/dev/null | tr -dc 0-9)
sleep 2
n2=$(sc exec "$SB" -- sh -c 'wc -l </tmp/t30.w' 2>/dev/null | tr -dc 0-9)
if [ -n "$n1" ] && [ -n "$n2" ] && [ "$n2" -gt "$n1" ]; then
        pass "the writer keeps writing after the command ended ($n1 then $n2 lines)"
else
        fail "the writer keeps writing after the command ended" "lines: '$n1' then '$n2'"
fi

# ---- without redirection: the command ends when its process exits, not when the pipes close
t0=$(now_ms)
check_rc "exec sh -c 'sleep 1003 &' (the child holds stdout and stderr) exits 0" 0 sc exec "$SB" -- sh -c 'sleep 1003 &'
check_quick "... and returns at once, not when the child exits" 10000
check_alive "... and the child keeps running" '[s]leep 1003'
check_rc "output written before the exit comes back, the child holding the pipes" 0 \
        sc exec "$SB" -- sh -c 'echo out-1; echo err-1 >&2; sleep 1004 &'
check_eq "... stdout" out-1 "$(cat "$OUT")"
check_eq "... stderr" err-1 "$(cat "$ERR")"
t0=$(now_ms)
check_rc "300000 bytes then a background child holding stdout" 0 \
        sc exec "$SB" -- sh -c 'head -c 300000 /dev/zero | tr "\0" x; sleep 1005 &'
check_eq "... all 300000 bytes arrive" 300000 "$(wc -c <"$OUT")"
check_quick "... and the command ends at once" 20000
check_rc "exit 3 with a background child holding stdout" 3 sc exec "$SB" -- sh -c 'sleep 1013 & exit 3'

# ---- a pty: the command ends with its shell; a job that ignores SIGHUP or has its own session stays
# (the pause lets the job get to its setsid before the shell's exit hangs up its foreground group)
t0=$(now_ms)
check_rc "exec -t sh -c 'setsid sleep 1006 & sleep 1; echo pty-started' exits 0" 0 \
        sc exec -t "$SB" -- sh -c 'setsid sleep 1006 & sleep 1; echo pty-started'
check_quick "... and returns at once though the job holds the terminal" 10000
check_contains "... its output arrives" pty-started "$OUT"
check_alive "... and the setsid job keeps running" '[s]leep 1006'
t0=$(now_ms)
check_rc "exec -t sh -c 'trap \"\" HUP; sleep 1007 &' exits 0" 0 \
        sc exec -t "$SB" -- sh -c 'trap "" HUP; sleep 1007 & echo hup-ignored'
check_quick "... and returns at once" 10000
check_contains "... its output arrives" hup-ignored "$OUT"
check_alive "... and the job that ignores SIGHUP (as under nohup) keeps running" '[s]leep 1007'
check_rc "exec -t: 100000 bytes, a job holding the terminal" 0 \
        sc exec -t "$SB" -- sh -c 'trap "" HUP; sleep 1011 & head -c 100000 /dev/zero | tr "\0" x'
check_eq "... all 100000 bytes arrive" 100000 "$(wc -c <"$OUT")"
t0=$(now_ms)
printf 'sleep 1012 &\nexit\n' >"$TEST_TMP/bash.in"
check_rc "exec -it bash -i: start a job, exit" 0 sc exec -it "$SB" -- bash -i <"$TEST_TMP/bash.in"
check_quick "... and the session ends with the shell" 20000
check_alive "... and the shell's background job keeps running" '[s]leep 1012'

# ---- a timeout still takes the whole group while the command runs
t0=$(now_ms)
check_rc "exec --timeout 1 sh -c 'sleep 1008 & sleep 100' exits 124" 124 \
        sc exec --timeout 1 "$SB" -- sh -c 'sleep 1008 & sleep 100'
check_quick "--timeout 1 returns within 10 s" 10000
check_gone "the timeout killed the command's background child too" '[s]leep 1008'
check_rc "exec --timeout 1 sh -c 'sleep 100' exits 124" 124 sc exec --timeout 1 "$SB" -- sh -c 'sleep 100'

# ---- a signal to a running command reaches its children
sc exec "$SB" -- sh -c 'echo $$ >/tmp/t30.pid; sleep 1009 & sleep 1010 & wait' >"$TEST_TMP/sig.out" 2>&1 &
SIG_BG=$!
wait_for 30 alive '[s]leep 1010'
GPID=$(sc exec "$SB" -- cat /tmp/t30.pid 2>/dev/null | tr -dc 0-9)
check_match "the running command's pid" '^[0-9]+$' "$GPID"
check_rc "spacectl kill -s KILL SB PID exits 0" 0 sc kill -s KILL "$SB" "$GPID"
wait "$SIG_BG"
check_eq "the command dies of SIGKILL (137)" 137 "$?"
check_gone "... and its children with it" '[s]leep 10(09|10)'

# ---- orphans are reaped: no zombies pile up
for i in 1 2 3; do
        sc exec "$SB" -- sh -c 'for i in 1 2 3 4 5 6; do (sleep 0.5; exit 3) & done; sleep 0.1 &' >/dev/null 2>&1
done
sleep 2
check_rc "ps in the guest" 0 sc exec "$SB" -- ps -o pid,ppid,stat,args
if awk 'NR > 1 && $3 ~ /^Z/ { z = 1 } END { exit z ? 1 : 0 }' "$OUT"; then
        pass "no zombies after 21 background children exited"
else
        fail "no zombies after 21 background children exited" "$(grep -E ' Z' "$OUT" | head -n 5)"
fi
check_alive "the background processes from before are still there" '[s]leep 1001'
check_rc "the sandbox still runs commands" 0 sc exec "$SB" -- true

check_rc "rm the sandbox" 0 sc rm "$SB"

done_testing
