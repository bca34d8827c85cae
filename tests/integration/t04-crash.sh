#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# VMs outlive the daemon: kill -9 spaced mid-use, the next spacectl call starts it again, the sandbox is still
# there and works. Then the same under socket activation (systemd-socket-activate emulates spaced.socket).
. "$(dirname "$0")/lib.sh"

space_env_setup
start_daemon
PID1=$(daemon_pid)

create_sandbox SB
[ -n "$SB" ] || { last_diag; bail_out "create failed"; }
pass "create a sandbox"
check_rc "exec works" 0 sc exec "$SB" -- sh -c 'mkdir -p /tmp && echo before-crash > /tmp/t04-marker'
check_rc "inspect --json" 0 sc inspect "$SB" --json
QEMU_PID=$(json "$OUT" 'd["qemu_pid"]' 2>/dev/null)

# ---- kill -9 while an exec runs
sc exec "$SB" -- sleep 3 >"$TEST_TMP/bg.out" 2>"$TEST_TMP/bg.err" &
BG=$!
sleep 1
kill -KILL "$PID1"
if wait_for 10 pid_gone "$PID1"; then pass "spaced $PID1 died on SIGKILL"; else fail "spaced $PID1 died on SIGKILL"; fi

# The exec that was running ends (with 125 and a message, or 0 if it got its result): it must not hang.
if wait_for 30 pid_gone "$BG"; then
        wait "$BG"
        bgrc=$?
        case $bgrc in
        0 | 125) pass "the exec cut off by the crash ends with 0 or 125 (got $bgrc)" ;;
        *) fail "the exec cut off by the crash ends with 0 or 125" "got $bgrc" "stderr: $(head -c 300 "$TEST_TMP/bg.err")" ;;
        esac
else
        fail "the exec cut off by the crash ends within 30 s"
fi

if pid_alive "$QEMU_PID"; then pass "the sandbox's QEMU survived the daemon"; else fail "the sandbox's QEMU survived the daemon" "qemu_pid=$QEMU_PID"; fi

# ---- the next spacectl call starts the daemon again (spacectl finds spaced next to itself or in $SPACED)
check_rc "ls --json after the crash exits 0 (daemon started by spacectl)" 0 sc ls --json
cp "$OUT" "$TEST_TMP/ls-after.json"
PID2=$(daemon_pid)
SEEN_PIDS+=("$PID2")
if [ -n "$PID2" ] && [ "$PID2" != "$PID1" ] && pid_alive "$PID2"; then
        pass "a new spaced runs (pid $PID1 -> $PID2)"
else
        fail "a new spaced runs" "spaced.pid: '$PID2' (old $PID1)"
fi
check_eq "the sandbox is listed as running" running \
        "$(json "$TEST_TMP/ls-after.json" '[s["state"] for s in S(d) if s["id"] == "'"$SB"'"][0]' 2>&1)"
check_rc "exec in it works" 0 sc exec "$SB" -- cat /tmp/t04-marker
check_eq "it is the same machine (its file is there)" before-crash "$(cat "$OUT")"
check_rc "inspect --json after the crash" 0 sc inspect "$SB" --json
check_eq "it was adopted, not restarted (same qemu_pid)" "$QEMU_PID" "$(json "$OUT" 'd["qemu_pid"]' 2>&1)"
check_rc "exec exit codes still pass through" 7 sc exec "$SB" -- sh -c 'exit 7'

# ---- socket activation: stop the daemon, let systemd-socket-activate own the socket
if ! command -v systemd-socket-activate >/dev/null; then
        skip "socket activation" "systemd-socket-activate is not installed"
        done_testing
fi
kill -TERM "$PID2"
wait_for 15 pid_gone "$PID2" || { kill -KILL "$PID2"; wait_for 5 pid_gone "$PID2"; }
if pid_gone "$PID2"; then pass "spaced stopped on SIGTERM"; else fail "spaced stopped on SIGTERM"; fi
if pid_alive "$QEMU_PID"; then pass "the sandbox outlives a stopped daemon too"; else fail "the sandbox outlives a stopped daemon too"; fi
rm -f "$SPACE_SOCKET" "$SPACE_RUNTIME_DIR/spaced.pid"
mkdir -p "$(dirname "$SPACE_SOCKET")"

# The activator passes on only the environment named with -E, like a unit's Environment=.
ACT_ENV=()
for v in SPACE_STATE_DIR SPACE_RUNTIME_DIR SPACE_SOCKET SPACE_LIB_DIR SPACE_CONFIG XDG_RUNTIME_DIR XDG_STATE_HOME \
        XDG_CONFIG_HOME PATH HOME ASAN_OPTIONS UBSAN_OPTIONS; do
        [ -n "${!v+x}" ] && ACT_ENV+=(-E "$v")
done
systemd-socket-activate -l "$SPACE_SOCKET" --fdname=api "${ACT_ENV[@]}" "$SPACED_BIN" \
        >>"$TEST_TMP/activate.log" 2>&1 </dev/null &
ACT=$!
disown "$ACT"
track_pid "$ACT"
if wait_for 10 test -S "$SPACE_SOCKET"; then pass "systemd-socket-activate listens on the socket"; else fail "systemd-socket-activate listens on the socket"; fi

check_rc "spacectl version answers through the activated socket" 0 sc version
wait_for 10 daemon_pid
PID3=$(daemon_pid)
SEEN_PIDS+=("$PID3")
# systemd-socket-activate execs the daemon in place on the first connection, so spaced has the activator's
# PID (a child of it would do as well); a daemon spacectl started itself would have neither.
if [ -n "$PID3" ] && { [ "$PID3" = "$ACT" ] || [ "$(awk '{print $4}' "/proc/$PID3/stat" 2>/dev/null)" = "$ACT" ]; }; then
        pass "the daemon that answered is the socket-activated one (pid $PID3)"
else
        fail "the daemon that answered is the socket-activated one" "spaced.pid '$PID3', activator $ACT"
fi
if tr '\0' '\n' 2>/dev/null <"/proc/$PID3/environ" | grep -q '^LISTEN_FDS=1$'; then
        pass "it was started with LISTEN_FDS=1"
else
        fail "it was started with LISTEN_FDS=1"
fi
check_eq "the activated daemon lists the sandbox as running" running "$(state_of "$SB" 2>&1)"
check_rc "exec works through the activated daemon" 0 sc exec "$SB" -- cat /tmp/t04-marker
check_eq "same machine again" before-crash "$(cat "$OUT")"
check_rc "rm through the activated daemon" 0 sc rm "$SB"
if wait_for 20 pid_gone "$QEMU_PID"; then pass "its QEMU is gone"; else fail "its QEMU is gone"; fi

done_testing
