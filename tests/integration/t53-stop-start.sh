#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Stop and start (issue 26): `spacectl stop` syncs the guest's filesystems and shuts QEMU down, keeping the disk;
# `spacectl start` cold-boots the sandbox from that disk. A file written before the stop (not synced by the test)
# is there after the start, a `sleep 1000` started before it is gone (ps in the guest; no QEMU on the host while
# stopped), exec, env and a port forward work after the start, and so across a daemon restart while stopped.
# inspect tells a stopped sandbox from one whose QEMU died (stopped_by); a stop of a stopped sandbox and a start
# of a running one fail clearly (CLI and API); a kill -9 of the daemon in the middle of a stop or a start leaves
# the sandbox running or stopped, startable, and removable; on_timeout "stop" stops at the time to live.
. "$(dirname "$0")/lib.sh"

space_env_setup
start_daemon
LOG=$TEST_TMP/spaced.log

qemu_pid_of() {
        local f=$TEST_TMP/qp.json
        sc inspect "$1" --json >"$f" 2>/dev/null || return 1
        json "$f" 'd["qemu_pid"] or 0'
}

inspect_field() {
        local f=$TEST_TMP/if.json
        sc inspect "$1" --json >"$f" 2>/dev/null || return 1
        json "$f" "d[\"$2\"]"
}

# Our QEMUs whose command line names this sandbox's run dir, one pid a line.
qemus_of() {
        python3 - "$SPACE_RUNTIME_DIR/sandboxes/$1" <<'EOF'
import os, sys
run = sys.argv[1].encode()
for p in os.listdir("/proc"):
    if not p.isdigit():
        continue
    try:
        cmd = open("/proc/%s/cmdline" % p, "rb").read()
        stat = open("/proc/%s/stat" % p).read()
    except OSError:
        continue
    if stat.rsplit(")", 1)[1].split()[0] != "Z" and b"qemu-system" in cmd.split(b"\0")[0] and run in cmd:
        print(p)
EOF
}

is_state() {
        [ "$(state_of "$1")" = "$2" ]
}

kill_daemon() {
        local old
        old=$(daemon_pid)
        kill -KILL "$old"
        wait_for 10 pid_gone "$old" || fail "spaced died on SIGKILL"
}

# start_crashing POINT: a daemon that kills itself at POINT (only it gets the variable, not spacectl).
start_crashing() {
        SPACE_TEST_CRASH_AT=$1 "$SPACED_BIN" >>"$LOG" 2>&1 </dev/null &
        CRASH_PID=$!
        disown "$CRASH_PID"
        SEEN_PIDS+=("$CRASH_PID")
        wait_for 30 daemon_answers
}

create_sandbox SB --name t53 -e T53_VAR=kept-env
[ -n "$SB" ] || { last_diag; bail_out "create failed"; }
pass "create a sandbox"

# ---- files, a process and a port before the stop
check_rc "write a file (no sync) and start sleep 1000" 0 sc exec "$SB" -- sh -c \
        'mkdir -p /root && echo before-stop > /root/kept && (sleep 1000 </dev/null >/dev/null 2>&1 &) ; echo ok'
check_rc "... sleep 1000 runs" 0 sc exec "$SB" -- sh -c 'ps -o args 2>/dev/null | grep -v grep | grep -q "sleep 1000" || ps | grep -v grep | grep -q "sleep 1000"'
SERVER="mkdir -p /tmp/www && echo hello-from-guest >/tmp/www/index.html && cd /tmp/www && "
if sc exec "$SB" -- sh -c 'command -v python3' >/dev/null 2>&1; then
        SERVE="nohup python3 -m http.server --bind 127.0.0.1 8000 >/dev/null 2>&1 &"
else
        SERVE="busybox httpd -p 127.0.0.1:8000 -h /tmp/www >/dev/null 2>&1"
fi
check_rc "a web server in the guest" 0 sc exec "$SB" -- sh -c "$SERVER$SERVE"
P=$(free_port)
check_rc "port -d SB 8000 $P" 0 sc port -d "$SB" 8000 "$P"
fetch_ok() {
        curl -sS -f --max-time 10 "http://127.0.0.1:$P/index.html" 2>/dev/null | grep -q hello-from-guest
}
wait_for 30 fetch_ok && pass "... the forward reaches it" || fail "... the forward reaches it"
QP=$(qemu_pid_of "$SB")

# ---- stop, right after a write that only the guest's page cache holds (the stop's sync puts it on the disk)
check_rc "write 8 MiB and its checksum, then stop at once" 0 sc exec "$SB" -- sh -c \
        'dd if=/dev/urandom of=/root/late bs=1M count=8 2>/dev/null && md5sum /root/late > /root/late.md5'
check_rc "stop" 0 sc stop "$SB"
check_eq "stop prints the sandbox id" "$SB" "$(head -n1 "$OUT")"
check_eq "state is stopped" stopped "$(state_of "$SB")"
check_eq "inspect: stopped_by user" user "$(inspect_field "$SB" stopped_by)"
check_eq "inspect: no error" null "$(inspect_field "$SB" error)"
if pid_alive "$QP"; then fail "its QEMU is gone while stopped" "pid $QP alive"; else pass "its QEMU is gone while stopped"; fi
check_eq "no QEMU on the host names its run dir" "" "$(qemus_of "$SB")"
check_fails "exec into a stopped sandbox is refused" sc exec "$SB" -- true
check_rc "stop of a stopped sandbox: exit 1" 1 sc stop "$SB"
check_contains "... saying it is stopped already" "is stopped already" "$ERR"
ureq POST "/v1/sandboxes/$SB/stop"
check_status "API: stop of a stopped sandbox is 409 invalid_state" 409 invalid_state
check_rc "ls shows it stopped" 0 sc ls
check_match "... in its row" "stopped" "$(grep -F t53 "$OUT")"

# ---- a daemon restart while stopped
kill_daemon
start_daemon
check_eq "after a daemon restart it is still stopped" stopped "$(state_of "$SB")"
check_eq "... by its user" user "$(inspect_field "$SB" stopped_by)"
check_eq "... and no QEMU runs for it" "" "$(qemus_of "$SB")"

# ---- start
T0=$(now_ms)
check_rc "start" 0 sc start "$SB"
T1=$(now_ms)
diag "start (a cold boot of its disk) took $((T1 - T0)) ms; the daemon's own count: $(grep -o 'booted from its disk in [0-9.]* ms' "$LOG" | tail -n 1)"
track_sandbox "$SB"
check_eq "start prints the sandbox id" "$SB" "$(head -n1 "$OUT")"
check_eq "state is running" running "$(state_of "$SB")"
check_eq "inspect: stopped_by is null again" null "$(inspect_field "$SB" stopped_by)"
check_rc "the file written before the stop is there" 0 sc exec "$SB" -- cat /root/kept
check_eq "... with its content" before-stop "$(cat "$OUT")"
check_rc "the 8 MiB written just before the stop are there, intact" 0 sc exec "$SB" -- md5sum -c /root/late.md5
check_rc "ps in the guest" 0 sc exec "$SB" -- ps
if grep -q "sleep 1000" "$OUT"; then fail "sleep 1000 is gone after the start" "$(cat "$OUT")"; else pass "sleep 1000 is gone after the start"; fi
check_rc "exec works: the env kept" 0 sc exec "$SB" -- sh -c 'echo $T53_VAR'
check_eq "... T53_VAR" kept-env "$(cat "$OUT")"
check_rc "the same hostname" 0 sc exec "$SB" -- hostname
check_eq "... sb-<id12>" "sb-${SB:0:12}" "$(cat "$OUT")"
check_rc "the web server is gone, started again" 0 sc exec "$SB" -- sh -c "cd /tmp/www 2>/dev/null || $SERVER true; $SERVER$SERVE"
wait_for 30 fetch_ok && pass "the same forward reaches it after the start" || fail "the same forward reaches it after the start"
check_rc "start of a running sandbox: exit 1" 1 sc start "$SB"
check_contains "... saying it runs" "is running already" "$ERR"
ureq POST "/v1/sandboxes/$SB/start"
check_status "API: start of a running sandbox is 409 invalid_state" 409 invalid_state
check_rc "stop --async prints an operation id" 0 sc stop --async "$SB"
OPID=$(head -n1 "$OUT")
check_match "  ... that looks like op-..." '^op-' "$OPID"
check_rc "op wait on it" 0 sc op wait "$OPID"
check_eq "stopped again" stopped "$(state_of "$SB")"
ureq POST "/v1/sandboxes/$SB/start?wait=120"
check_status "API: start with ?wait= is 200" 200
check_eq "running" running "$(state_of "$SB")"

# ---- kill -9 of the daemon in the middle of a stop, then of a start
for point in stop-synced stop-before-done start-journaled start-booting start-before-done; do
        case $point in stop-*) want_from=running ;; *) want_from=stopped ;; esac
        if [ "$want_from" = stopped ] && ! is_state "$SB" stopped; then sc stop "$SB" >/dev/null 2>&1; fi
        if [ "$want_from" = running ] && ! is_state "$SB" running; then sc start "$SB" >/dev/null 2>&1; fi
        kill_daemon
        start_crashing "$point"
        case $point in stop-*) sc stop --async "$SB" >/dev/null 2>&1 ;; *) sc start --async "$SB" >/dev/null 2>&1 ;; esac
        wait_for 120 pid_gone "$CRASH_PID" || { fail "$point: the daemon reached the crash point"; kill -KILL "$CRASH_PID"; }
        start_daemon
        st=$(state_of "$SB")
        case $st in
        running | stopped) pass "$point: after the restart it is $st" ;;
        *) fail "$point: after the restart it is running or stopped" "state '$st'" ;;
        esac
        [ "$st" = stopped ] && { [ -z "$(qemus_of "$SB")" ] && pass "$point: ... with no QEMU" || fail "$point: ... with no QEMU" "$(qemus_of "$SB")"; }
        [ "$st" = stopped ] && check_rc "$point: start after the restart" 0 sc start "$SB"
        track_sandbox "$SB"
        check_rc "$point: the file is still there" 0 sc exec "$SB" -- cat /root/kept
done

# ---- a sandbox whose QEMU died is stopped with an error, and can be started
QP=$(qemu_pid_of "$SB")
kill -KILL "$QP"
wait_for 20 is_state "$SB" stopped && pass "a killed QEMU leaves it stopped" || fail "a killed QEMU leaves it stopped" "$(state_of "$SB")"
check_eq "inspect: stopped_by failure" failure "$(inspect_field "$SB" stopped_by)"
check_match "... with the error saying so" "QEMU exited" "$(inspect_field "$SB" error)"
check_rc "start brings it back" 0 sc start "$SB"
track_sandbox "$SB"
check_rc "... with its file" 0 sc exec "$SB" -- cat /root/kept

# ---- on_timeout "stop": the time to live stops it
create_sandbox SB2 --ttl 3 --on-timeout stop
[ -n "$SB2" ] && track_sandbox "$SB2"
check_eq "on_timeout stop is recorded" stop "$(inspect_field "$SB2" on_timeout)"
wait_for 60 is_state "$SB2" stopped && pass "... and it is stopped at its time to live" || fail "... and it is stopped at its time to live" "$(state_of "$SB2")"
check_eq "... by its user's policy, with no error" user "$(inspect_field "$SB2" stopped_by)"

check_rc "rm a stopped sandbox" 0 sc rm "$SB2"
check_rc "rm -f the other" 0 sc rm -f "$SB"
check_eq "nothing left of them on the host" "" "$(qemus_of "$SB")$(ls -A "$SPACE_STATE_DIR/sandboxes" 2>/dev/null)"

done_testing
