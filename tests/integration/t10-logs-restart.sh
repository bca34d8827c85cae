#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Process output survives the daemon: a process writes known output, spaced is killed with SIGKILL, the next
# spacectl call starts it again; `spacectl ps` still lists the processes (the finished one and one still
# running), `spacectl logs` prints the same bytes, `logs -f` follows the running one until it is killed.
. "$(dirname "$0")/lib.sh"

space_env_setup
start_daemon
PID1=$(daemon_pid)

create_sandbox SB --name t10
[ -n "$SB" ] || { last_diag; bail_out "create failed"; }
pass "create a sandbox"

# A finished process with known stdout and stderr (the pid comes first, on stderr).
check_rc "a process writes known output" 0 sc exec "$SB" -- sh -c 'echo "$$" >&2; seq 1 20000 | sed "s/^/line-/"; echo tail-err >&2'
cp "$OUT" "$TEST_TMP/p1.out"
P1=$(head -n1 "$ERR")
check_match "it told its pid" '^[0-9]+$' "$P1"
EXPECTED_SHA=$(seq 1 20000 | sed 's/^/line-/' | sha256sum | cut -d' ' -f1)
check_eq "its output is as expected" "$EXPECTED_SHA" "$(sha256sum <"$TEST_TMP/p1.out" | cut -d' ' -f1)"
check_rc "spacectl logs SB PID before the restart exits 0" 0 sc logs "$SB" "$P1"
check_eq "logs prints the same stdout" "$EXPECTED_SHA" "$(sha256sum <"$OUT" | cut -d' ' -f1)"
check_eq "... and the same stderr, separately" "$(printf '%s\ntail-err' "$P1")" "$(cat "$ERR")"

# A process still running: a session started over the socket, its client gone.
ureq POST "/v1/sandboxes/$SB/sessions" -H 'Content-Type: application/json' \
        -d '{"argv": ["sh", "-c", "echo running-1; i=0; while :; do i=$((i+1)); echo tick-$i; sleep 1; done"]}'
check_eq "a session for a process that keeps running: 201" 201 "$STATUS"
cp "$OUT" "$TEST_TMP/s2.json"
P2=$(json "$TEST_TMP/s2.json" 'd["pid"]' 2>/dev/null)
run timeout 60 python3 "$SSE_PY" --unix "$SPACE_SOCKET" --token "$(json "$TEST_TMP/s2.json" 'd["attach_token"]' 2>/dev/null)" \
        stream "$(json "$TEST_TMP/s2.json" 'd["stream_url"]' 2>/dev/null)" --max-events 3
check_eq "it started (and its client went away)" 200 "$(json "$OUT" 'd["status"]' 2>&1)"
sleep 2

check_rc "spacectl ps SB before the restart exits 0" 0 sc ps "$SB"
cp "$OUT" "$TEST_TMP/ps-before.txt"
LOGDIR=$SPACE_STATE_DIR/sandboxes/$SB/processes
if ls "$LOGDIR/$P1.log"* >/dev/null 2>&1; then pass "the log file is under the state dir ($LOGDIR/$P1.log)"; else fail "the log file is under the state dir" "$(ls -la "$LOGDIR" 2>&1 | head -5)"; fi

# ---- kill -9 the daemon; the next spacectl call starts it again
kill -KILL "$PID1"
if wait_for 10 pid_gone "$PID1"; then pass "spaced died on SIGKILL"; else fail "spaced died on SIGKILL"; fi
check_rc "spacectl ps SB after the crash exits 0 (daemon started again)" 0 sc ps "$SB"
cp "$OUT" "$TEST_TMP/ps-after.txt"
PID2=$(daemon_pid)
SEEN_PIDS+=("$PID2")
if [ -n "$PID2" ] && [ "$PID2" != "$PID1" ]; then pass "a new spaced runs ($PID1 -> $PID2)"; else fail "a new spaced runs" "spaced.pid '$PID2'"; fi
check_match "ps still lists the finished process" "(^|[[:space:]])$P1([[:space:]]|$)" "$(cat "$TEST_TMP/ps-after.txt")"
check_match "ps still lists the running process" "(^|[[:space:]])$P2([[:space:]]|$)" "$(cat "$TEST_TMP/ps-after.txt")"
run api_get "/v1/sandboxes/$SB/processes"
cp "$OUT" "$TEST_TMP/procs.json"
check_eq "the finished process: exited, code 0" "exited 0" \
        "$(json "$TEST_TMP/procs.json" '[p["state"] + " " + str(p["exit_code"]) for p in d["processes"] if p["pid"] == '"${P1:-0}"'][0]' 2>&1)"
check_eq "the running process: still running (the agent still knows it)" running \
        "$(json "$TEST_TMP/procs.json" '[p["state"] for p in d["processes"] if p["pid"] == '"${P2:-0}"'][0]' 2>&1)"

check_rc "spacectl logs SB PID after the restart exits 0" 0 sc logs "$SB" "$P1"
check_eq "logs after the restart prints the same stdout, byte for byte" "$EXPECTED_SHA" "$(sha256sum <"$OUT" | cut -d' ' -f1)"
check_eq "... and the same stderr" "$(printf '%s\ntail-err' "$P1")" "$(cat "$ERR")"
ureq GET "/v1/sandboxes/$SB/processes/$P1/logs"
check_eq "GET .../logs after the restart: 200" 200 "$STATUS"
check_contains "... an SSE stream that ends with process_exited" "event: process_exited" "$OUT"

# ---- logs -f on the running process: the old output, then live output, until it is killed
timeout -k 5 60 spacectl logs -f "$SB" "$P2" >"$TEST_TMP/follow.out" 2>"$TEST_TMP/follow.err" &
FOLLOW=$!
sleep 3
check_contains "logs -f shows the output from before the restart" running-1 "$TEST_TMP/follow.out"
N1=$(grep -c '^tick-' "$TEST_TMP/follow.out")
sleep 2
N2=$(grep -c '^tick-' "$TEST_TMP/follow.out")
if [ "$N2" -gt "$N1" ]; then pass "logs -f follows new output ($N1 -> $N2 ticks)"; else fail "logs -f follows new output" "$N1 -> $N2 ticks"; fi
check_eq "the ticks come in order, none twice" "$(grep '^tick-' "$TEST_TMP/follow.out" | sort -t- -k2 -n -u)" "$(grep '^tick-' "$TEST_TMP/follow.out")"
check_rc "spacectl kill SB PID" 0 sc kill "$SB" "$P2"
if wait_for 20 pid_gone "$FOLLOW"; then pass "logs -f ends when the process is killed"; else fail "logs -f ends when the process is killed"; fi
run api_get "/v1/sandboxes/$SB/processes/$P2"
check_eq "the killed process: exited by signal 15" "exited 15" "$(json "$OUT" 'd["state"] + " " + str(d["signal"])' 2>&1)"

# ---- a second restart with no process running: logs of both still there
kill -KILL "$PID2"
wait_for 10 pid_gone "$PID2"
check_rc "spacectl logs after a second crash exits 0" 0 sc logs "$SB" "$P2"
SEEN_PIDS+=("$(daemon_pid)")
check_contains "the killed process's logs are kept" running-1 "$OUT"

check_rc "rm" 0 sc rm "$SB"
check_fails "logs of a removed sandbox fails with a message" sc logs "$SB" "$P1"
done_testing
