#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Command sessions over TCP: held until attached, events with ids from 1, stdin and close-stdin, signals, PTY
# resize, timeouts, a disconnect that does not kill; spacectl exec -t, ps, kill; 50 concurrent sessions.
. "$(dirname "$0")/lib.sh"

space_env_setup
tcp_config
start_daemon_tcp
API_KEY=$(mint_key t07) || bail_out "cannot mint an API key over the unix socket (POST /v1/keys: $STATUS)"

create_sandbox SB --name t07
[ -n "$SB" ] || { last_diag; bail_out "create failed"; }
pass "create a sandbox"

# session_json ARGV-JSON [EXTRA-JSON-FIELDS]: POST .../sessions; the answer in $TEST_TMP/ses.json, PID and
# STREAM set.
new_session() {
        kreq POST "/v1/sandboxes/$SB/sessions" -H 'Content-Type: application/json' -d "{\"argv\": $1${2:+, $2}}"
        cp "$OUT" "$TEST_TMP/ses.json"
        PID=$(json "$TEST_TMP/ses.json" 'd["pid"]' 2>/dev/null)
        STREAM=$(json "$TEST_TMP/ses.json" 'd["stream_url"]' 2>/dev/null)
        TOKEN=$(json "$TEST_TMP/ses.json" 'd["attach_token"]' 2>/dev/null)
        SID=$(json "$TEST_TMP/ses.json" 'd["session_id"]' 2>/dev/null)
}

# bg_stream NAME: reads $STREAM with $TOKEN in the background into $TEST_TMP/NAME.{json,out,err}.
bg_stream() {
        timeout -k 5 120 python3 "$SSE_PY" --url "$API_URL" --token "$TOKEN" stream "$STREAM" \
                --out "$TEST_TMP/$1.out" --err "$TEST_TMP/$1.err" >"$TEST_TMP/$1.json" 2>"$TEST_TMP/$1.py.err" &
        BG=$!
}

proc_field() {
        kreq GET "/v1/sandboxes/$SB/processes/$1"
        json "$OUT" "$2"
}

# ---- a session is held until attached, then streams with ids from 1
new_session '["sh", "-c", "echo out-$((6*7)); echo err-1 >&2; exit 5"]'
check_status "POST sessions: 201" 201
check_match "the session has a pid" '^[0-9]+$' "$PID"
check_eq "before the attach the process is held" held "$(proc_field "$PID" 'd["state"]' 2>&1)"
check_eq "... and has no exit code" None "$(proc_field "$PID" 'str(d["exit_code"])' 2>&1)"
check_eq "... and the session id" "$SID" "$(proc_field "$PID" 'd["session_id"]' 2>&1)"
check_rc "spacectl ps SB exits 0" 0 sc ps "$SB"
check_contains "ps lists the held process" "$PID" "$OUT"
sleep 1
run timeout 60 python3 "$SSE_PY" --url "$API_URL" --token "$TOKEN" stream "$STREAM" --out "$TEST_TMP/a.out" --err "$TEST_TMP/a.err"
cp "$OUT" "$TEST_TMP/a.json"
check_eq "attach: 200" 200 "$(json "$TEST_TMP/a.json" 'd["status"]' 2>&1)"
check_eq "the held process did not run before the attach: its output arrives now" out-42 "$(cat "$TEST_TMP/a.out")"
check_eq "stderr separately" err-1 "$(cat "$TEST_TMP/a.err")"
check_eq "process_exited carries exit code 5" 5 "$(json "$TEST_TMP/a.json" 'd["exit_code"]' 2>&1)"
check_eq "event ids start at 1 and have no gaps" "1 True" "$(json "$TEST_TMP/a.json" 'str(d["first_id"]) + " " + str(d["ids_ok"])' 2>&1)"
check_eq "process_started comes with the session's pid" "$PID" "$(json "$TEST_TMP/a.json" 'd["pid"]' 2>&1)"
check_eq "no error event" 0 "$(json "$TEST_TMP/a.json" 'len(d["errors"])' 2>&1)"
check_eq "afterwards the process is exited, code 5" "exited 5" "$(proc_field "$PID" 'd["state"] + " " + str(d["exit_code"])' 2>&1)"
kreq GET "/v1/sandboxes/$SB/processes"
check_eq "GET processes lists it" true "$(json "$OUT" 'any(p["pid"] == '"${PID:-0}"' for p in d["processes"])' 2>&1)"

# ---- the process route: attach again to a finished process replays, Last-Event-ID skips exactly
kreq GET "/v1/sandboxes/$SB/processes/$PID/stream" -H 'Last-Event-ID: 0'
check_status "GET processes/PID/stream with the key, Last-Event-ID 0: 200" 200
LAST=$(json "$TEST_TMP/a.json" 'd["last_id"]' 2>/dev/null)
check_eq "the replay has every event" "$LAST" "$(grep -c '^id: ' "$OUT")"
kreq GET "/v1/sandboxes/$SB/processes/$PID/stream" -H "Last-Event-ID: $((LAST - 1))"
check_eq "Last-Event-ID N-1 gives exactly the last event" "id: $LAST" "$(grep '^id: ' "$OUT")"
check_contains "... which is process_exited" "event: process_exited" "$OUT"

# ---- a command that does not exist: the error event on attach
new_session '["no-such-command-t07"]'
check_status "a session of a missing command is created (the exec fails on attach)" 201
run timeout 60 python3 "$SSE_PY" --url "$API_URL" --token "$TOKEN" stream "$STREAM"
check_eq "attach gives the error event command_not_found" command_not_found "$(json "$OUT" 'd["errors"][0]["code"]' 2>&1)"

# ---- stdin and close-stdin
new_session '["sh", "-c", "cat; echo eof-seen"]' '"stdin": true'
bg_stream stdin
sleep 0.5
kreq POST "/v1/sandboxes/$SB/processes/$PID/stdin" -H 'Content-Type: application/octet-stream' --data-binary 'line one
'
check_status "POST stdin: 204" 204
printf 'bin\000ary\n' >"$TEST_TMP/stdin2"
kreq POST "/v1/sandboxes/$SB/processes/$PID/stdin" -H 'Content-Type: application/octet-stream' --data-binary @"$TEST_TMP/stdin2"
check_status "POST stdin with a NUL byte: 204" 204
kreq POST "/v1/sandboxes/$SB/processes/$PID/close-stdin"
check_status "POST close-stdin: 204" 204
wait_for 30 pid_gone "$BG"
check_eq "cat echoed stdin byte for byte, then saw EOF" "$(printf 'line one\nbin\000ary\neof-seen\n' | od -An -tx1 | tr -d ' \n')" \
        "$(od -An -tx1 <"$TEST_TMP/stdin.out" | tr -d ' \n')"
check_eq "... and exited 0" 0 "$(json "$TEST_TMP/stdin.json" 'd["exit_code"]' 2>&1)"

# ---- signals, through the API and through spacectl kill
new_session '["sleep", "600"]'
bg_stream sig
sleep 1
check_eq "sleep is running" running "$(proc_field "$PID" 'd["state"]' 2>&1)"
kreq POST "/v1/sandboxes/$SB/processes/$PID/signal" -H 'Content-Type: application/json' -d '{"signal": 15}'
check_status "POST signal 15: 204" 204
wait_for 30 pid_gone "$BG"
check_eq "process_exited reports signal 15" 15 "$(json "$TEST_TMP/sig.json" 'd["signal"]' 2>&1)"

new_session '["sleep", "600"]'
bg_stream kill
sleep 1
check_rc "spacectl kill SB PID exits 0" 0 sc kill "$SB" "$PID"
wait_for 30 pid_gone "$BG"
check_eq "spacectl kill sends SIGTERM by default" 15 "$(json "$TEST_TMP/kill.json" 'd["signal"]' 2>&1)"
new_session '["sleep", "600"]'
bg_stream kill9
sleep 1
check_rc "spacectl kill -s KILL SB PID exits 0" 0 sc kill -s KILL "$SB" "$PID"
wait_for 30 pid_gone "$BG"
check_eq "kill -s KILL: signal 9" 9 "$(json "$TEST_TMP/kill9.json" 'd["signal"]' 2>&1)"
check_rc "spacectl ps SB exits 0" 0 sc ps "$SB"
check_contains "ps shows the killed process" "$PID" "$OUT"
check_fails "spacectl kill of an unknown pid fails with a message" sc kill "$SB" 999999

# ---- PTY: resize reaches the guest; no PTY: 409 not_a_tty
new_session '["sh", "-c", "stty size; sleep 2; stty size"]' '"pty": true, "rows": 24, "cols": 80'
bg_stream pty
sleep 1
kreq POST "/v1/sandboxes/$SB/processes/$PID/resize" -H 'Content-Type: application/json' -d '{"rows": 33, "cols": 101}'
check_status "POST resize: 204" 204
wait_for 30 pid_gone "$BG"
check_eq "the pty had 24x80, then 33x101" "24 80|33 101" "$(tr -d '\r' <"$TEST_TMP/pty.out" | paste -sd'|')"
check_eq "a pty session's Process says pty" True "$(proc_field "$PID" 'str(d["pty"])' 2>&1)"
new_session '["sleep", "5"]'
bg_stream notty
sleep 0.5
kreq POST "/v1/sandboxes/$SB/processes/$PID/resize" -H 'Content-Type: application/json' -d '{"rows": 10, "cols": 10}'
check_status "resize without a pty: 409 not_a_tty" 409 not_a_tty
kreq POST "/v1/sandboxes/$SB/processes/$PID/signal" -H 'Content-Type: application/json' -d '{"signal": 9}'

# ---- timeout
t0=$(now_ms)
new_session '["sleep", "30"]' '"timeout": 1'
run timeout 60 python3 "$SSE_PY" --url "$API_URL" --token "$TOKEN" stream "$STREAM"
check_eq "a session with timeout 1: process_exited timed_out" True "$(json "$OUT" 'str(d["timed_out"])' 2>&1)"
took=$(($(now_ms) - t0))
if [ "$took" -lt 10000 ]; then pass "... within 10 s ($took ms)"; else fail "... within 10 s" "took $took ms"; fi

# ---- a disconnect never kills: drop after the first output, the process goes on; reattach and resume
new_session '["sh", "-c", "echo first; sleep 3; echo second"]'
run timeout 60 python3 "$SSE_PY" --url "$API_URL" --token "$TOKEN" stream "$STREAM" --max-events 2
cp "$OUT" "$TEST_TMP/d1.json"
LEI=$(json "$TEST_TMP/d1.json" 'd["last_id"]' 2>/dev/null)
check_eq "first attach saw process_started and stdout, then dropped" true "$(json "$TEST_TMP/d1.json" 'd["events"] == 2 and d["stdout_bytes"] > 0' 2>&1)"
sleep 0.5
check_eq "after the disconnect the process is still running" running "$(proc_field "$PID" 'd["state"]' 2>&1)"
run timeout 60 python3 "$SSE_PY" --url "$API_URL" --token "$TOKEN" stream "$STREAM" --last-event-id "$LEI" --out "$TEST_TMP/d2.out"
check_eq "the reattach resumes after event $LEI: exactly the rest" second "$(cat "$TEST_TMP/d2.out")"
check_eq "... ids continue without a gap, exit 0" "True 0" "$(json "$OUT" 'str(d["ids_ok"]) + " " + str(d["exit_code"])' 2>&1)"

# ---- spacectl exec -t: a pty in the guest, even without a terminal here
check_rc "spacectl exec -t SB -- tty exits 0" 0 sc exec -t "$SB" -- tty
check_match "exec -t gives the command a pty" '^/dev/pts/[0-9]+' "$(tr -d '\r' <"$OUT")"
check_rc "spacectl exec without -t: no tty (tty exits 1)" 1 sc exec "$SB" -- tty
check_rc "exec -t passes the exit code" 3 sc exec -t "$SB" -- sh -c 'exit 3'

# ---- 50 concurrent sessions in one sandbox: each its own output, stderr and exit code
N=50
SSE_TIMEOUT=300 sse many "$SB" "$N" --dir "$TEST_TMP"
cp "$OUT" "$TEST_TMP/many.json"
check_eq "$N concurrent sessions: all complete with the right stdout, stderr and exit code" "$N" \
        "$(json "$TEST_TMP/many.json" 'd["ok"]' 2>&1)" ||
        diag "$(json "$TEST_TMP/many.json" 'd.get("failures") or d' 2>&1 | head -c 1500)"
check_eq "$N distinct pids" "$N" "$(json "$TEST_TMP/many.json" 'd["distinct_pids"]' 2>&1)"
ATT=$(json "$TEST_TMP/many.json" 'd["attach_secs"]' 2>/dev/null)
diag "$N sessions: create $(json "$TEST_TMP/many.json" 'd["create_secs"]' 2>&1) s, attach to exit $ATT s (each sleeps 1 s)"
if python3 -c "import sys; sys.exit(0 if float('$ATT') < 40 else 1)" 2>/dev/null; then
        pass "the $N ran at the same time (${ATT} s for $N x sleep 1)"
else
        fail "the $N ran at the same time" "took $ATT s; one after the other would be >= $N s"
fi
check_rc "spacectl ps after $N sessions exits 0" 0 sc ps "$SB"
check_rc "the sandbox still answers" 0 sc exec "$SB" -- echo still-here

check_rc "rm" 0 sc rm "$SB"
done_testing
