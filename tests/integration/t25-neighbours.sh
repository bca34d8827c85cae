#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Hostile neighbours (issue 10): another user of the machine or a web page in the user's browser gets nothing.
#   - a runtime directory owned by someone else, open to others, or a symlink: the daemon refuses to start, saying
#     why; a symlink planted at the lock or pid file is not followed;
#   - a TCP port someone else holds: the daemon refuses to start, naming the port and the setting;
#   - spacectl refuses a socket whose listener runs as another user;
#   - a foreign Host header is refused (DNS rebinding), localhost and 127.0.0.1 are served;
#   - without a key, an existing sandbox, a missing one and an unknown path answer the same 401, byte for byte,
#     and so do the token route's unknown sandbox and wrong token.
# Most of it needs no VM; one sandbox is created for the "existing sandbox" cases.
. "$(dirname "$0")/lib.sh"

space_env_setup
RUN=$SPACE_RUNTIME_DIR

# spaced_once [ARGS...]: the daemon in the foreground, expected to give up; status in $RC, what it said in
# $SAID (a file: $ERR is the next check's).
SAID=$TEST_TMP/said
spaced_once() {
        run timeout -k 5 30 "$SPACED_BIN" "$@" </dev/null
        cat "$OUT" "$ERR" >"$SAID"
}

# ---- the runtime directory
if [ "$(id -u)" -eq 0 ]; then
        mkdir -m 0700 "$RUN"
        chown nobody "$RUN"
        spaced_once
        check_eq "a runtime directory owned by nobody: spaced exits 1" 1 "$RC" || last_diag
        check_contains "... and says whose it is" "belongs to uid 65534" "$SAID"
        check_contains "... and names it" "$RUN" "$SAID"
        check_rc "... and created no socket there" 1 test -e "$SPACE_SOCKET"
        rm -rf "$RUN"
else
        skip "a runtime directory owned by someone else" "chown needs root"
        skip "... and says whose it is" "chown needs root"
        skip "... and names it" "chown needs root"
        skip "... and created no socket there" "chown needs root"
fi

mkdir -p "$RUN"
chmod 0755 "$RUN"
spaced_once
check_eq "a runtime directory of mode 0755: spaced exits 1" 1 "$RC" || last_diag
check_contains "... and says the mode and what it must be" "mode 0755" "$SAID"
check_contains "... and what to do" "chmod 0700 $RUN" "$SAID"
rm -rf "$RUN"

mkdir -m 0700 "$TEST_TMP/elsewhere"
ln -s "$TEST_TMP/elsewhere" "$RUN"
spaced_once
check_eq "a runtime directory that is a symlink: spaced exits 1" 1 "$RC" || last_diag
check_contains "... and says so" "is a symlink" "$SAID"
rm -f "$RUN"
rm -rf "$TEST_TMP/elsewhere"

# ---- the state directory: the database holds every sandbox's tokens, the disks and memory images their data
STATE=$SPACE_STATE_DIR
mkdir -p "$STATE"
chmod 0755 "$STATE"
spaced_once
check_eq "a state directory of mode 0755: spaced exits 1" 1 "$RC" || last_diag
check_contains "... and says the mode and what it must be" "state directory $STATE has mode 0755" "$SAID"
check_contains "... and what to do" "chmod 0700 $STATE" "$SAID"
check_rc "... and opened no database there" 1 test -e "$STATE/space.db"
if [ "$(id -u)" -eq 0 ]; then
        chmod 0700 "$STATE"
        chown nobody "$STATE"
        spaced_once
        check_eq "a state directory owned by nobody: spaced exits 1" 1 "$RC" || last_diag
        check_contains "... and says whose it is" "belongs to uid 65534" "$SAID"
else
        skip "a state directory owned by someone else" "chown needs root"
        skip "... and says whose it is" "chown needs root"
fi
rm -rf "$STATE"
# a database an older daemon left readable by others (its umask) is made the user's alone
mkdir -m 0700 "$STATE"
sqlite3 "$STATE/space.db" 'PRAGMA user_version = 0;' 2>/dev/null || python3 -c 'import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute("PRAGMA user_version = 0")' "$STATE/space.db"
chmod 0644 "$STATE/space.db"

# A symlink at the lock file would make spaced create or open whatever it points at.
mkdir -m 0700 "$RUN"
ln -s "$TEST_TMP/victim-lock" "$RUN/spaced.lock"
spaced_once
check_eq "a symlink planted at spaced.lock: spaced exits 1" 1 "$RC" || last_diag
check_rc "... and did not create its target" 1 test -e "$TEST_TMP/victim-lock"
check_contains "... and says why" "symlink" "$SAID"
rm -rf "$RUN"
mkdir -m 0700 "$RUN"

# A symlink at the pid file is replaced, never written through.
echo precious >"$TEST_TMP/victim-pid"
ln -s "$TEST_TMP/victim-pid" "$RUN/spaced.pid"
start_daemon
check_eq "a symlink planted at spaced.pid: its target is untouched" precious "$(cat "$TEST_TMP/victim-pid")"
check "... and spaced.pid is a file of the daemon's own" test -f "$RUN/spaced.pid" -a ! -L "$RUN/spaced.pid"
check_eq "... holding its pid" "$DAEMON_PID" "$(daemon_pid)"
check_eq "a database left with mode 0644 is made 0600" 600 "$(stat -c %a "$STATE/space.db")"
check_eq "... and its WAL too" 600 "$(stat -c %a "$STATE/space.db-wal")"
check_eq "the daemon runs with umask 077" 0077 "$(awk '/^Umask:/ { print $2 }' "/proc/$DAEMON_PID/status")"
_kill_pids "$DAEMON_PID"
DAEMON_PID=

# ---- a TCP port someone else holds
rm -f "$SPACE_SOCKET" # the last daemon's, killed
tcp_config
python3 -c '
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(8)
print("ready", flush=True)
time.sleep(600)
' "$API_PORT" >"$TEST_TMP/squatter.out" 2>&1 &
SQUATTER=$!
track_pid "$SQUATTER"
wait_for 10 grep -q ready "$TEST_TMP/squatter.out" || bail_out "the squatter did not bind 127.0.0.1:$API_PORT"
start=$(now_ms)
spaced_once
check_eq "port $API_PORT taken: spaced exits 1" 1 "$RC" || last_diag
check_rc "... at once (not after the 30 s safety net)" 0 test $(($(now_ms) - start)) -lt 20000
check_contains "... naming the address" "127.0.0.1:$API_PORT" "$SAID"
check_contains "... and the setting to change" "listen = " "$SAID"
check_rc "... and leaving no API socket behind" 1 test -e "$SPACE_SOCKET"
kill "$SQUATTER" 2>/dev/null
wait "$SQUATTER" 2>/dev/null

# ---- spacectl and a socket whose listener is another user's
if [ "$(id -u)" -eq 0 ]; then
        FOREIGN=$TEST_TMP/foreign
        mkdir -m 0777 "$FOREIGN"
        chmod 0711 "$TEST_TMP"
        # It answers like spaced would, so a spacectl that does not check would believe it.
        # the system's python: one under root's home is out of nobody's reach
        setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 -c '
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o777)
s.listen(8)
body = b"{\"sandboxes\": [], \"version\": \"fake\", \"api\": \"v1\"}"
while True:
    c, _ = s.accept()
    try:
        if c.recv(65536):
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                      b"Connection: close\r\n\r\n" % len(body) + body)
    except OSError:
        pass
    c.close()
' "$FOREIGN/api.sock" >"$TEST_TMP/foreign.out" 2>&1 &
        FPID=$!
        track_pid "$FPID"
        wait_for 10 test -S "$FOREIGN/api.sock" || { diag_file "$TEST_TMP/foreign.out"; bail_out "no foreign socket"; }
        run env SPACE_SOCKET="$FOREIGN/api.sock" SPACE_NO_AUTOSTART=1 timeout 30 spacectl ls
        check_eq "spacectl ls on a socket served by nobody: exit 1" 1 "$RC" || last_diag
        cp "$ERR" "$SAID"
        check_contains "... saying whose it is" "runs as uid 65534" "$SAID"
        check_contains "... and naming it" "$FOREIGN/api.sock" "$SAID"
        # version does not start a daemon: it goes straight to libcurl, which must check the peer as well
        run env SPACE_SOCKET="$FOREIGN/api.sock" SPACE_NO_AUTOSTART=1 timeout 30 spacectl version
        cp "$OUT" "$SAID"
        check_rc "spacectl version does not show the impostor's answer" 1 grep -q fake "$SAID" || diag_file "$SAID"
        check_contains "... and says why" "uid 65534" "$SAID"
        kill "$FPID" 2>/dev/null
        chmod 0700 "$TEST_TMP"
else
        for d in "spacectl refuses a socket served by another user" "... saying whose it is" "... and naming it" \
                "spacectl version does not show the impostor's answer" "... and says why"; do
                skip "$d" "running a server as nobody needs root"
        done
fi

# ---- the TCP listener: Host header and uniform 401s
tcp_config "e2b_domain = sbx.test"
start_daemon_tcp
API_KEY=$(mint_key t25) || bail_out "cannot mint an API key"

kreq GET /v1/version -H "Host: evil.example:$API_PORT"
check_status "a foreign Host with a valid key: 421 invalid_host" 421 invalid_host
req GET /v1/openapi.json -H "Host: attacker.example"
check_status "a foreign Host on the public route: 421 invalid_host" 421 invalid_host
req GET /v1/sandboxes -H "Host: 127.0.0.1.nip.io:$API_PORT"
check_status "a rebinding name without a key: 421 invalid_host" 421 invalid_host
kreq GET /v1/version -H "Host: localhost:$API_PORT"
check_status "Host localhost:PORT: 200" 200
kreq GET /v1/version -H "Host: 127.0.0.1:$API_PORT"
check_status "Host 127.0.0.1:PORT: 200" 200
kreq GET /v1/version -H "Host: [::1]:$API_PORT"
check_status "Host [::1]:PORT: 200" 200
kreq GET /v1/version -H "Host: localhost:$((API_PORT + 1))"
check_status "Host localhost with another port: 421" 421 invalid_host
ureq GET /v1/version -H "Host: evil.example"
check_status "the unix socket takes any Host: 200" 200

create_sandbox SB
[ -n "$SB" ] || { last_diag; bail_out "cannot create a sandbox"; }
MISSING=0123456789abcdef0123456789abcdef

# body_of METHOD PATH: the raw 401 body of an unauthenticated request ("STATUS body").
body_of() {
        req "$1" "$2"
        printf '%s %s' "$STATUS" "$(cat "$OUT")"
}
B_EXISTING=$(body_of GET "/v1/sandboxes/$SB")
B_MISSING=$(body_of GET "/v1/sandboxes/$MISSING")
B_PATH=$(body_of GET /v1/no/such/path)
check_match "no key, an existing sandbox: 401" '^401 ' "$B_EXISTING"
check_eq "no key: a missing sandbox answers byte for byte the same" "$B_EXISTING" "$B_MISSING"
check_eq "no key: an unknown path answers byte for byte the same" "$B_EXISTING" "$B_PATH"
check_eq "no key, DELETE: existing and missing the same" "$(body_of DELETE "/v1/sandboxes/$SB")" \
        "$(body_of DELETE "/v1/sandboxes/$MISSING")"
check_eq "no key, POST exec: existing and missing the same" "$(body_of POST "/v1/sandboxes/$SB/processes")" \
        "$(body_of POST "/v1/sandboxes/$MISSING/processes")"

# The token route runs without a key: a guessed token must not tell which sandboxes or sessions exist.
SES=ses-0123456789abcdef
TOK=$(printf '%064d' 0)
T_EXISTING=$(body_of GET "/v1/sandboxes/$SB/sessions/$SES/stream?token=$TOK")
T_MISSING=$(body_of GET "/v1/sandboxes/$MISSING/sessions/$SES/stream?token=$TOK")
check_match "token route, made-up token on an existing sandbox: 401" '^401 ' "$T_EXISTING"
check_eq "token route: a missing sandbox answers byte for byte the same" "$T_EXISTING" "$T_MISSING"
kreq POST "/v1/sandboxes/$SB/sessions" -H 'Content-Type: application/json' -d '{"argv": ["sh", "-c", "echo t25-$((20+5))"]}'
check_status "a session over TCP: 201" 201
cp "$OUT" "$TEST_TMP/ses.json"
S_URL=$(json "$TEST_TMP/ses.json" 'd["stream_url"]' 2>/dev/null)
S_TOK=$(json "$TEST_TMP/ses.json" 'd["attach_token"]' 2>/dev/null)
check_eq "token route: an existing session with a wrong token answers the same" "$T_EXISTING" \
        "$(body_of GET "$S_URL?token=$TOK")"
req GET "$S_URL?token=$S_TOK"
check_status "token route: the session's own token still attaches" 200
check_contains "... and streams its output" "$(printf 't25-25\n' | base64)" "$OUT"

# A token route's token is checked before its body is read: a client that declares a 1 MiB body and sends
# none is answered at once, rather than held (and its body collected) until it is sent.
# answer_before_body PATH HEADER...: the status a POST to PATH gets within 5 s without its body, or "none".
answer_before_body() {
        python3 - "$API_PORT" "$@" <<'PY'
import socket, sys
port, path, headers = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
s = socket.create_connection(("127.0.0.1", port))
head = f"POST {path} HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 1048000\r\n"
head += "".join(h + "\r\n" for h in headers) + "\r\n"
s.sendall(head.encode())
s.settimeout(5)
try:
    line = s.recv(4096).split(b"\r\n", 1)[0].decode()
    print(line.split(" ")[1] if line.startswith("HTTP/1.1 ") else "garbage")
except socket.timeout:
    print("none")
PY
}
check_eq "envd call with a wrong token: answered before the body (Connect's 503)" 503 \
        "$(answer_before_body /process.Process/List "Host: 127.0.0.1:$API_PORT" "E2b-Sandbox-Id: $SB" "X-Access-Token: $TOK")"
check_eq "envd call with no token: 401 before the body" 401 \
        "$(answer_before_body /process.Process/List "Host: 127.0.0.1:$API_PORT" "E2b-Sandbox-Id: $SB")"
check_eq "an envd stream with a wrong token: its error (HTTP 200, an end-of-stream) before the body" 200 \
        "$(answer_before_body /process.Process/Start "Host: 127.0.0.1:$API_PORT" "E2b-Sandbox-Id: $SB" "X-Access-Token: $TOK")"
check_eq "a sandbox's port with no token: 401 before the body" 401 \
        "$(answer_before_body /upload "Host: 8000-$SB.sbx.test:$API_PORT")"
check_eq "... with a traffic token that is not its own: 404 before the body" 404 \
        "$(answer_before_body /upload "Host: 8000-$SB.sbx.test:$API_PORT" "E2b-Traffic-Access-Token: ${TOK:0:32}")"
check_eq "... nor is the envd token taken there: 401" 401 \
        "$(answer_before_body /upload "Host: 8000-$SB.sbx.test:$API_PORT" "X-Access-Token: ${TOK:0:32}")"

done_testing
