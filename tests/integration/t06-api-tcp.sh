#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The TCP API: API keys (missing, unknown, both header styles, revoked), spacectl key and info, spacectl over TCP,
# lifecycle through HTTP with operations, bad input refused with the documented code and status, the OpenAPI
# document (parses, and agrees with the routes the daemon serves), and examples/first_sandbox.py.
. "$(dirname "$0")/lib.sh"

space_env_setup
tcp_config
start_daemon_tcp
diag "TCP API on $API_URL"
ZERO_KEY=e2b_0000000000000000000000000000000000000000

# ---- no key, wrong keys
req GET /v1/version
check_status "GET /v1/version over TCP without a key: 401 unauthorized" 401 unauthorized
req GET /v1/sandboxes
check_status "GET /v1/sandboxes over TCP without a key: 401 unauthorized" 401 unauthorized
req POST /v1/sandboxes -H 'Content-Type: application/json' -d '{}'
check_status "POST /v1/sandboxes over TCP without a key: 401 unauthorized" 401 unauthorized
req GET /v1/sandboxes -H "Authorization: Bearer $ZERO_KEY"
check_status "an unknown key in Authorization: Bearer: 401 unauthorized" 401 unauthorized
req GET /v1/sandboxes -H "X-API-Key: $ZERO_KEY"
check_status "an unknown key in X-API-Key: 401 unauthorized" 401 unauthorized
req GET /v1/sandboxes -H "Authorization: Bearer not-a-key"
check_status "a malformed key: 401 unauthorized" 401 unauthorized
req GET /v1/sandboxes -H "Authorization: Basic dXNlcjpwYXNz"
check_status "Authorization: Basic: 401 unauthorized" 401 unauthorized
check_eq "nothing was created by the refused POST" 0 "$(sandbox_count)"

# ---- spacectl key create | ls | rm
check_rc "spacectl key create --name t06-cli exits 0" 0 sc key create --name t06-cli
KEY1=$(grep -oE 'e2b_[0-9a-f]{40}' "$OUT" | head -n1)
check_match "key create prints a key e2b_<40 hex>" '^e2b_[0-9a-f]{40}$' "$KEY1"
[ -n "$KEY1" ] || { last_diag; KEY1=$(mint_key t06-fallback); diag "key create failed: minted one over the API"; }
[ -n "$KEY1" ] || bail_out "no API key: neither spacectl key create nor POST /v1/keys worked"
KEY1_ID=${KEY1:4:8}
check_rc "spacectl key ls exits 0" 0 sc key ls
check_contains "key ls shows the key's id" "$KEY1_ID" "$OUT"
check_contains "key ls shows the key's name" t06-cli "$OUT"
if grep -qF "${KEY1:12}" "$OUT"; then fail "key ls never shows the key itself"; else pass "key ls never shows the key itself"; fi
leak=$(find "$SPACE_STATE_DIR" -maxdepth 2 -type f \( -name '*.db' -o -name '*.db-*' -o -name '*.sqlite*' \) \
        -exec grep -laF "${KEY1:12}" {} + 2>/dev/null)
if [ -z "$leak" ]; then pass "the key is not stored in clear in the state dir's database"; else fail "the key is not stored in clear" "found in: $leak"; fi

API_KEY=$KEY1
req GET /v1/sandboxes -H "Authorization: Bearer $KEY1"
check_status "GET /v1/sandboxes with Authorization: Bearer KEY: 200" 200
check_eq "... and the body is {\"sandboxes\": [...]}" true "$(json "$OUT" 'isinstance(d["sandboxes"], list)' 2>&1)"
req GET /v1/sandboxes -H "X-API-Key: $KEY1"
check_status "GET /v1/sandboxes with X-API-Key: KEY: 200" 200
req GET /v1/version -H "x-api-key: $KEY1"
check_status "header names are case-insensitive (x-api-key)" 200
req GET /v1/version -H "authorization: Bearer $KEY1"
check_status "header names are case-insensitive (authorization)" 200
kreq GET /v1/keys
check_status "GET /v1/keys over TCP: 200" 200
check_eq "GET /v1/keys lists the key by id" true "$(json "$OUT" 'any(k["id"] == "'"$KEY1_ID"'" for k in d["keys"])' 2>&1)"
check_eq "GET /v1/keys never returns the key" false "$(json "$OUT" 'any("key" in k for k in d["keys"])' 2>&1)"
check_eq "the key's last_used_at is set once used" true \
        "$(json "$OUT" '[k for k in d["keys"] if k["id"] == "'"$KEY1_ID"'"][0]["last_used_at"] is not None' 2>&1)"

# A second key, minted over TCP, then revoked with spacectl key rm.
kreq POST /v1/keys -H 'Content-Type: application/json' -d '{"name": "t06-api"}'
check_status "POST /v1/keys over TCP: 201" 201
KEY2=$(json "$OUT" 'd["key"]' 2>/dev/null)
KEY2_ID=$(json "$OUT" 'd["id"]' 2>/dev/null)
check_match "the new key has the documented form" '^e2b_[0-9a-f]{40}$' "$KEY2"
check_eq "its id is the 8 hex after e2b_" "${KEY2:4:8}" "$KEY2_ID"
req GET /v1/version -H "X-API-Key: $KEY2"
check_status "the second key works" 200
check_rc "spacectl key rm ID exits 0" 0 sc key rm "$KEY2_ID"
req GET /v1/version -H "X-API-Key: $KEY2"
check_status "a revoked key (X-API-Key) is refused: 401" 401 unauthorized
req GET /v1/version -H "Authorization: Bearer $KEY2"
check_status "a revoked key (Bearer) is refused: 401" 401 unauthorized
check_rc "spacectl key ls exits 0" 0 sc key ls
if grep -qF "$KEY2_ID" "$OUT"; then fail "key ls no longer shows the revoked key"; else pass "key ls no longer shows the revoked key"; fi
kreq DELETE /v1/keys/ffffffff
check_status "DELETE /v1/keys/UNKNOWN: 404 key_not_found" 404 key_not_found
check_fails "spacectl key rm of an unknown id fails with a message" sc key rm ffffffff
req GET /v1/version -H "Authorization: Bearer $KEY1"
check_status "the first key still works" 200

# ---- info, over the socket and over TCP
check_rc "spacectl info --json exits 0" 0 sc info --json
check_eq "info --json: api_url is the TCP listener" "$API_URL" "$(json "$OUT" 'd["api_url"].rstrip("/")' 2>&1)"
check_eq "info --json: socket" "$SPACE_SOCKET" "$(json "$OUT" 'd["socket"]' 2>&1)"
check_match "info --json: accel" '^(tcg|kvm)$' "$(json "$OUT" 'd["accel"]' 2>&1)"
check_match "info --json: version" '^[0-9]+\.[0-9]+' "$(json "$OUT" 'd["version"]' 2>&1)"
check_rc "spacectl info exits 0" 0 sc info
check_contains "info shows the API URL" "$API_URL" "$OUT"
kreq GET /v1/info
check_status "GET /v1/info over TCP: 200" 200
check_eq "GET /v1/info: pid is the daemon's" "$(daemon_pid)" "$(json "$OUT" 'd["pid"]' 2>&1)"

# ---- spacectl over TCP (SPACE_API_URL + SPACE_API_KEY); a socket path that does not exist proves it
NOSOCK=$TEST_TMP/no-such-dir/api.sock
check_rc "spacectl ls --json over TCP exits 0" 0 env SPACE_SOCKET="$NOSOCK" SPACE_API_URL="$API_URL" SPACE_API_KEY="$KEY1" \
        timeout 60 spacectl ls --json
check_eq "... and prints the sandboxes object" true "$(json "$OUT" 'isinstance(d["sandboxes"], list)' 2>&1)"
check_rc "spacectl info --json over TCP exits 0" 0 env SPACE_SOCKET="$NOSOCK" SPACE_API_URL="$API_URL" SPACE_API_KEY="$KEY1" \
        timeout 60 spacectl info --json
check_eq "info over TCP: api_url" "$API_URL" "$(json "$OUT" 'd["api_url"].rstrip("/")' 2>&1)"
run env SPACE_SOCKET="$NOSOCK" SPACE_API_URL="$API_URL" SPACE_API_KEY="$ZERO_KEY" timeout 60 spacectl ls
if [ "$RC" -ne 0 ] && [ -s "$ERR" ]; then pass "spacectl over TCP with an unknown key fails with a message"; else fail "spacectl over TCP with an unknown key fails with a message"; last_diag; fi
# The daemon's message for a key it does not know (401 unauthorized), not just any message with "key" in it.
check_contains "... that says the key was refused" "the API key is not valid" "$ERR"
if [ -e "$NOSOCK" ]; then fail "spacectl over TCP did not start a daemon of its own"; else pass "spacectl over TCP did not start a daemon of its own"; fi

# ---- lifecycle over HTTP: create with ?wait, operations
kreq POST '/v1/sandboxes?wait=120' -H 'Content-Type: application/json' -d '{"template": "minimal", "name": "t06-http", "env": {"T06": "tcp"}}'
check_status "POST /v1/sandboxes?wait=120 over TCP: 201" 201
SB=$(json "$OUT" 'd["sandbox"]["id"]' 2>/dev/null)
OP=$(json "$OUT" 'd["operation"]["id"]' 2>/dev/null)
check_match "the answer names the sandbox" "$ID_RE" "$SB"
check_eq "the operation succeeded" succeeded "$(json "$OUT" 'd["operation"]["state"]' 2>&1)"
[ -n "$SB" ] && track_sandbox "$SB"
kreq GET "/v1/operations/$OP"
check_status "GET /v1/operations/ID: 200" 200
check_eq "the operation is the create" "create $SB" "$(json "$OUT" 'd["kind"] + " " + d["sandbox_id"]' 2>&1)"
kreq GET /v1/operations
check_status "GET /v1/operations: 200" 200
check_eq "the list holds the create" true "$(json "$OUT" 'any(o["id"] == "'"$OP"'" for o in d["operations"])' 2>&1)"
check_rc "spacectl op ls exits 0" 0 sc op ls
check_contains "op ls shows the operation" "$OP" "$OUT"
check_rc "spacectl op show OP exits 0" 0 sc op show "$OP"
check_contains "op show shows its state" succeeded "$OUT"
check_rc "spacectl op wait OP exits 0 (already done)" 0 sc op wait "$OP"
check_rc "spacectl create --async exits 0" 0 sc_create --async --name t06-async
AOP=$(grep -oE 'op-[0-9a-f]+' "$OUT" | head -n1)
check_match "create --async prints an operation id" '^op-[0-9a-f]+$' "$AOP"
check_rc "spacectl op wait on it exits 0" 0 sc op wait "$AOP"
check_eq "the async sandbox is running" running "$(state_of t06-async 2>&1)"
track_sandbox "$(json "$TEST_TMP/inspect.json" 'd["id"]' 2>/dev/null)"
check_rc "spacectl rm --async exits 0" 0 sc rm --async t06-async
ROP=$(grep -oE 'op-[0-9a-f]+' "$OUT" | head -n1)
check_rc "spacectl op wait on the delete exits 0" 0 sc op wait "$ROP"
check_fails "op show of an unknown operation fails with a message" sc op show op-00000000000000000000000000000000

# ---- bad input: the documented code and status
kreq POST /v1/sandboxes -H 'Content-Type: application/json' -d '{"template": "minimal",'
check_status "malformed JSON: 400 invalid_argument" 400 invalid_argument
kreq POST /v1/sandboxes -H 'Content-Type: application/json' -d '["minimal"]'
check_status "JSON that is not an object: 400 invalid_argument" 400 invalid_argument
kreq POST /v1/sandboxes -H 'Content-Type: application/json' -d '{"template": "minimal", "bogus_t06": 1}'
check_status "an unknown field: 400 invalid_argument" 400 invalid_argument
check_contains "... and the message names the field" bogus_t06 "$(json "$OUT" 'd["message"]' 2>&1)"
python3 -c 'import sys; sys.stdout.write("{\"template\": \"minimal\", \"name\": \"" + "x" * (2 << 20) + "\"}")' >"$TEST_TMP/big.json"
kreq POST /v1/sandboxes -H 'Content-Type: application/json' --data-binary @"$TEST_TMP/big.json"
check_status "a 2 MiB body: 413 payload_too_large" 413 payload_too_large
kreq GET /v1/sandboxes/no-such-sandbox-t06
check_status "an unknown sandbox: 404 sandbox_not_found" 404 sandbox_not_found
kreq GET /v1/sandboxes/0123456789abcdef0123456789abcdef
check_status "a wrong full id: 404 sandbox_not_found" 404 sandbox_not_found
kreq GET /v1/operations/op-0000000000000000
check_status "an unknown operation: 404 operation_not_found" 404 operation_not_found
kreq GET /v1/no-such-route
check_status "an unknown route: 404 not_found" 404 not_found
kreq POST "/v1/sandboxes/$SB/sessions" -H 'Content-Type: application/json' -d '{"argv": []}'
check_status "a session with an empty argv: 400 invalid_argument" 400 invalid_argument
kreq POST "/v1/sandboxes/$SB/sessions" -H 'Content-Type: application/json' -d '{"argv": ["true"], "bogus_t06": true}'
check_status "a session with an unknown field: 400 invalid_argument" 400 invalid_argument
kreq POST "/v1/sandboxes/$SB/sessions" -H 'Content-Type: application/json' -d '{"argv": ["true"], "rows": 0, "pty": true}'
check_status "a session with rows 0: 400 invalid_argument" 400 invalid_argument
kreq GET "/v1/sandboxes/$SB/processes/999999"
# (404 with the handler's own code: the router's not_found would mean the documented route is missing)
case $STATUS:$(json "$OUT" 'd["code"]' 2>&1) in
404:not_found | 404:json*) fail "an unknown pid: 404 from the process route" "got $STATUS: $(head -c 200 "$OUT")" ;;
404:*) pass "an unknown pid: 404 from the process route ($(json "$OUT" 'd["code"]' 2>&1))" ;;
*) fail "an unknown pid: 404 from the process route" "got $STATUS: $(head -c 200 "$OUT")" ;;
esac
kreq GET "/v1/sandboxes/$SB/processes/not-a-pid"
case $STATUS in 400 | 404) pass "a pid that is not a number: $STATUS ($(json "$OUT" 'd["code"]' 2>&1))" ;; *) fail "a pid that is not a number: 400 or 404" "got $STATUS: $(head -c 200 "$OUT")" ;; esac
kreq POST "/v1/sandboxes/$SB/processes/1/signal" -H 'Content-Type: application/json' -d '{"signal": 99999}'
case $STATUS in 400 | 404) pass "signal 99999: refused ($STATUS $(json "$OUT" 'd["code"]' 2>&1))" ;; *) fail "signal 99999: refused with 400 or 404" "got $STATUS: $(head -c 200 "$OUT")" ;; esac

# ---- attach tokens: the stream route takes the session's token instead of a key; foreign tokens are refused
kreq POST "/v1/sandboxes/$SB/sessions" -H 'Content-Type: application/json' -d '{"argv": ["sh", "-c", "echo one-$((20+3))"]}'
check_status "POST sessions over TCP: 201" 201
cp "$OUT" "$TEST_TMP/s1.json"
kreq POST "/v1/sandboxes/$SB/sessions" -H 'Content-Type: application/json' -d '{"argv": ["sh", "-c", "echo two-$((40+2))"]}'
check_status "a second session: 201" 201
cp "$OUT" "$TEST_TMP/s2.json"
S1_URL=$(json "$TEST_TMP/s1.json" 'd["stream_url"]' 2>/dev/null)
S1_TOK=$(json "$TEST_TMP/s1.json" 'd["attach_token"]' 2>/dev/null)
S2_URL=$(json "$TEST_TMP/s2.json" 'd["stream_url"]' 2>/dev/null)
S2_TOK=$(json "$TEST_TMP/s2.json" 'd["attach_token"]' 2>/dev/null)
check_match "session_id has the documented form" '^ses-[0-9a-f]{16}$' "$(json "$TEST_TMP/s1.json" 'd["session_id"]' 2>&1)"
check_match "attach_token is 64 hex" '^[0-9a-f]{64}$' "$S1_TOK"
check_match "stream_url is the session's stream route" "^/v1/sandboxes/$SB/sessions/ses-[0-9a-f]{16}/stream\$" "$S1_URL"
check_match "expires_at is a time" '^[0-9]{4}-[0-9]{2}-[0-9]{2}T' "$(json "$TEST_TMP/s1.json" 'd["expires_at"]' 2>&1)"
req GET "$S1_URL"
check_status "the stream without a token or key: 401" 401
req GET "$S1_URL" -H "Authorization: Bearer $S2_TOK"
check_status "the stream with another session's token: 401 invalid_token" 401 invalid_token
req GET "$S1_URL" -H "Authorization: Bearer $(printf '%064d' 0)"
check_status "the stream with a made-up token: 401 invalid_token" 401 invalid_token
req GET "$S1_URL" -H "Authorization: Bearer $S1_TOK"
check_status "the stream with its own token: 200" 200
check_contains "... carries the output (base64 of one-23)" "$(printf 'one-23\n' | base64)" "$OUT"
check_contains "... and process_exited" process_exited "$OUT"
req GET "$S2_URL?token=$S2_TOK"
check_status "the stream with ?token=: 200" 200
check_contains "... carries the output (base64 of two-42)" "$(printf 'two-42\n' | base64)" "$OUT"
S2_SID=$(json "$TEST_TMP/s2.json" 'd["session_id"]' 2>/dev/null)
kreq POST "/v1/sandboxes/$SB/sessions/$S2_SID/token"
check_status "POST .../sessions/SID/token: 201" 201
NEWTOK=$(json "$OUT" 'd["attach_token"]' 2>/dev/null)
req GET "$S2_URL" -H "Authorization: Bearer $NEWTOK" -H 'Last-Event-ID: 0'
check_status "the fresh token attaches (a finished session replays from Last-Event-ID 0)" 200
check_contains "... with the same output" "$(printf 'two-42\n' | base64)" "$OUT"
req POST "/v1/sandboxes/$SB/sessions/$S2_SID/token" -H "Authorization: Bearer $S2_TOK"
check_status "an attach token is not an API key (token route): 401" 401
req GET "/v1/sandboxes" -H "Authorization: Bearer $S2_TOK"
check_status "an attach token is not an API key (sandboxes): 401" 401

# ---- the OpenAPI document: served without a key, parses, lists the documented routes, and agrees with the daemon
req GET /v1/openapi.json
check_status "GET /v1/openapi.json without a key: 200" 200
cp "$OUT" "$TEST_TMP/openapi.json"
check_match "it is OpenAPI 3.0" '^3\.0' "$(json "$TEST_TMP/openapi.json" 'd["openapi"]' 2>&1)"
check_eq "it has paths and component schemas" true "$(json "$TEST_TMP/openapi.json" 'len(d["paths"]) > 10 and len(d["components"]["schemas"]) > 0' 2>&1)"
run python3 - "$TEST_TMP/openapi.json" <<'EOF'
import json, re, sys
d = json.load(open(sys.argv[1]))
norm = lambda p: re.sub(r"\{[^}]*\}", "{}", p)
have = {(m.upper(), norm(p)) for p, ops in d["paths"].items() for m in ops if m in ("get", "post", "put", "delete", "patch")}
want = """GET /v1/version|GET /v1/info|GET /v1/openapi.json|GET /v1/templates|GET /v1/sandboxes|POST /v1/sandboxes
GET /v1/sandboxes/{}|DELETE /v1/sandboxes/{}|GET /v1/operations|GET /v1/operations/{}|GET /v1/keys|POST /v1/keys
DELETE /v1/keys/{}|POST /v1/sandboxes/{}/processes|GET /v1/sandboxes/{}/processes|GET /v1/sandboxes/{}/processes/{}
GET /v1/sandboxes/{}/processes/{}/stream|GET /v1/sandboxes/{}/processes/{}/logs|POST /v1/sandboxes/{}/processes/{}/stdin
POST /v1/sandboxes/{}/processes/{}/close-stdin|POST /v1/sandboxes/{}/processes/{}/signal
POST /v1/sandboxes/{}/processes/{}/resize|POST /v1/sandboxes/{}/sessions|GET /v1/sandboxes/{}/sessions/{}/stream
POST /v1/sandboxes/{}/sessions/{}/token"""
missing = [w for w in want.replace("\n", "|").split("|") if tuple(w.split(" ")) not in have]
print("missing: " + ", ".join(missing) if missing else "all %d documented routes are in the document" % len(have))
sys.exit(1 if missing else 0)
EOF
if [ "$RC" = 0 ]; then pass "openapi.json lists every route of API.md"; else fail "openapi.json lists every route of API.md" "$(cat "$OUT" "$ERR" | head -c 600)"; fi
# The other direction: every (method, path) in the document is served. A placeholder-filled request must reach a
# handler (it may say sandbox_not_found, invalid_argument, ...), never the router's "not_found" for unknown routes.
run python3 - "$TEST_TMP/openapi.json" "$API_URL" "$KEY1" <<'EOF'
import http.client, json, re, sys, urllib.parse
d = json.load(open(sys.argv[1]))
u = urllib.parse.urlsplit(sys.argv[2])
bad, n = [], 0
for p, ops in sorted(d["paths"].items()):
    for m in ops:
        if m not in ("get", "post", "put", "delete", "patch"):
            continue
        path = re.sub(r"\{[^}]*\}", "zzt06nope", p)
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        body = b'{"t06_probe": 1}' if m in ("post", "put", "patch") else None
        c.request(m.upper(), path, body=body, headers={"Authorization": "Bearer " + sys.argv[3], "Content-Type": "application/json"})
        r = c.getresponse()
        raw = r.read()
        c.close()
        n += 1
        try:
            code = json.loads(raw).get("code") if raw and r.status >= 400 else None
        except ValueError:
            code = None
        if (r.status == 404 and code == "not_found") or r.status == 405:
            bad.append("%s %s -> %d %s" % (m.upper(), p, r.status, code))
print("; ".join(bad) if bad else "%d (method, path) pairs of the document all reach a handler" % n)
sys.exit(1 if bad else 0)
EOF
if [ "$RC" = 0 ]; then pass "every route in openapi.json is served ($(cat "$OUT"))"; else fail "every route in openapi.json is served" "$(cat "$OUT" "$ERR" | head -c 800)"; fi

# ---- examples/first_sandbox.py against the TCP API
EXAMPLE=$TOP_SRCDIR/examples/first_sandbox.py
if [ -f "$EXAMPLE" ]; then
        BEFORE=$(sandbox_ids)
        t0=$(now_ms)
        check_rc "examples/first_sandbox.py exits 0 over TCP with a key from spacectl key create" 0 \
                env SPACE_API_URL="$API_URL" SPACE_API_KEY="$KEY1" timeout 300 python3 "$EXAMPLE"
        diag "first_sandbox.py: $(($(now_ms) - t0)) ms"
        check_contains "it prints the command's output" "hello from" "$OUT"
        check_eq "it leaves no sandbox behind" "$BEFORE" "$(sandbox_ids)"
        check_rc "first_sandbox.py with a command that exits 3 exits 1" 1 \
                env SPACE_API_URL="$API_URL" SPACE_API_KEY="$KEY1" timeout 300 python3 "$EXAMPLE" sh -c 'echo bye; exit 3'
        check_eq "... and leaves no sandbox behind either" "$BEFORE" "$(sandbox_ids)"
        check_rc "first_sandbox.py with a command that does not exist exits 1 (error event)" 1 \
                env SPACE_API_URL="$API_URL" SPACE_API_KEY="$KEY1" timeout 300 python3 "$EXAMPLE" no-such-command-t06
        check_contains "... and says command_not_found" command_not_found "$(cat "$OUT" "$ERR")"
        check_rc "first_sandbox.py with an unknown key exits 1" 1 \
                env SPACE_API_URL="$API_URL" SPACE_API_KEY="$ZERO_KEY" timeout 60 python3 "$EXAMPLE"
        check_contains "... and says why" unauthorized "$(cat "$OUT" "$ERR")"
else
        fail "examples/first_sandbox.py exists"
fi

# ---- delete over HTTP
kreq DELETE "/v1/sandboxes/$SB?wait=60"
check_status "DELETE /v1/sandboxes/ID?wait=60: 200" 200
check_eq "the delete operation succeeded" succeeded "$(json "$OUT" 'd["operation"]["state"]' 2>&1)"
kreq GET "/v1/sandboxes/$SB"
check_status "the sandbox is gone: 404 sandbox_not_found" 404 sandbox_not_found
check_eq "nothing left" 0 "$(sandbox_count)"

done_testing
