#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The MCP server (issue 23) driven by the official MCP client SDKs, unmodified: Python `mcp` 2.3.0 from PyPI
# (tests/mcp/py, pytest) and TypeScript @modelcontextprotocol/sdk 1.32.2 from npm (tests/mcp/js, node --test),
# each over both transports: `spacectl mcp --template minimal` on stdio, started by the SDK as an agent starts
# it, and the daemon's streamable HTTP at /mcp over TCP with an API key. Each test case is one TAP line here.
# SPACE_MCP_PY / SPACE_MCP_JS pick other SDK versions ("latest"); the two suites run at the same time
# (SPACE_T46_SERIAL=1: one after the other); SPACE_MCP_PY_ARGS and SPACE_MCP_JS_TESTS pick tests.
#
# run_code's PNG needs the code-interpreter template, which t44 builds (with its base snapshot, kernels warm:
# minutes under TCG): t44 runs these suites' run_code cases against its daemon (SPACE_MCP_CI_TEMPLATE), and
# here run_code is tested for what it answers in a sandbox without an interpreter.
. "$(dirname "$0")/lib.sh"

MCP_DIR=$TOP_SRCDIR/tests/mcp
SDK_DIR=${SPACE_MCP_SDK_DIR:-$TOP_BUILDDIR/tests/mcp/.sdk}
PY_VERSION=${SPACE_MCP_PY:-2.3.0}
JS_VERSION=${SPACE_MCP_JS:-1.32.2}
T0=$(now_ms)

space_env_setup
tcp_config
start_daemon_tcp

# ---- the SDKs, as a user would install them
run timeout -k 10 900 "$MCP_DIR/setup-sdks.sh" "$SDK_DIR" "$PY_VERSION" "$JS_VERSION"
check_eq "the MCP SDKs install (Python mcp $PY_VERSION, JS @modelcontextprotocol/sdk@$JS_VERSION)" 0 "$RC" ||
        { last_diag; bail_out "no SDKs"; }
PY_ENV=$(sed -n 1p "$OUT")
JS_ENV=$(sed -n 2p "$OUT")
diag "Python mcp $("$PY_ENV/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))'), JS SDK $(node -p \
        "require('$JS_ENV/node_modules/@modelcontextprotocol/sdk/package.json').version")"

KEY=$(mint_key mcp-sdk) || bail_out "cannot mint an API key"

# ---- /mcp over TCP takes the API key like every route
INIT='{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "curl", "version": "0"}}}'
MCP_H=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream')
req POST /mcp "${MCP_H[@]}" -d "$INIT"
check_eq "POST /mcp over TCP without the key: 401" 401 "$STATUS"
req POST /mcp "${MCP_H[@]}" -H "Authorization: Bearer e2b_0000000000000000000000000000000000000000" -d "$INIT"
check_eq "... with a wrong key: 401" 401 "$STATUS"
STATUS=$(curl -sS -o "$OUT" -D "$TEST_TMP/mcp.head" -w '%{http_code}' --max-time 30 -X POST "${MCP_H[@]}" \
        -H "Authorization: Bearer $KEY" -d "$INIT" "$API_URL/mcp" 2>"$ERR")
check_eq "... with it: initialize answers 200" 200 "$STATUS" || last_diag
check_contains "... with an Mcp-Session-Id" "mcp-session-id:" "$TEST_TMP/mcp.head"
check_contains "... and the protocol revision asked for" '"protocolVersion":"2025-06-18"' "$(tr -d ' ' <"$OUT")"
SID=$(awk -F': *' 'tolower($1) == "mcp-session-id" { print $2 }' "$TEST_TMP/mcp.head" | tr -d '\r')

# ---- what someone else would try first: another key, another page, a made-up id, the wrong verbs
KEY2=$(mint_key mcp-other) || bail_out "cannot mint a second API key"
PING='{"jsonrpc": "2.0", "id": 2, "method": "ping"}'
req POST /mcp "${MCP_H[@]}" -H "Authorization: Bearer $KEY" -H "Mcp-Session-Id: $SID" -d "$PING"
check_eq "the session answers its own key" 200 "$STATUS"
req POST /mcp "${MCP_H[@]}" -H "Authorization: Bearer $KEY2" -H "Mcp-Session-Id: $SID" -d "$PING"
check_eq "... another key with its id: 404, as for an id that does not exist" 404 "$STATUS"
check_contains "... as a JSON-RPC error" '"jsonrpc":"2.0"' "$(tr -d ' ' <"$OUT")"
ureq POST /mcp "${MCP_H[@]}" -H "Mcp-Session-Id: $SID" -d "$PING"
check_eq "... the unix socket's user with a TCP key's session: 404" 404 "$STATUS"
req POST /mcp "${MCP_H[@]}" -H "Authorization: Bearer $KEY" -H "Mcp-Session-Id: $(printf '0%.0s' $(seq 32))" -d "$PING"
check_eq "a made-up session id: 404" 404 "$STATUS"
req POST /mcp "${MCP_H[@]}" -H "Authorization: Bearer $KEY" -d "$PING"
check_eq "a request without Mcp-Session-Id (not an initialize): 400" 400 "$STATUS"
req POST /mcp "${MCP_H[@]}" -H "Authorization: Bearer $KEY" -H "Origin: http://evil.example" -d "$INIT"
check_eq "an initialize from another site's page (Origin): 403" 403 "$STATUS"
req POST /mcp "${MCP_H[@]}" -H "Authorization: Bearer $KEY" -H "Origin: http://localhost.evil.example:7070" -d "$INIT"
check_eq "... nor a name that only starts like localhost" 403 "$STATUS"
req POST /mcp "${MCP_H[@]}" -H "Authorization: Bearer $KEY" -H "Origin: http://localhost:3000" -H "Mcp-Session-Id: $SID" \
        -d "$PING"
check_eq "... a page on localhost is let in" 200 "$STATUS"
req POST /mcp "${MCP_H[@]}" -H "Authorization: Bearer $KEY" -H "Mcp-Session-Id: $SID" \
        -H "MCP-Protocol-Version: 1999-01-01" -d "$PING"
check_eq "an unknown MCP-Protocol-Version: 400" 400 "$STATUS"
req POST /mcp -H 'Content-Type: application/json' -H 'Accept: text/html' -H "Authorization: Bearer $KEY" \
        -H "Mcp-Session-Id: $SID" -d "$PING"
check_eq "an Accept that takes neither JSON nor events: 406" 406 "$STATUS"
req POST /mcp "${MCP_H[@]}" -H "Authorization: Bearer $KEY" -H "Mcp-Session-Id: $SID" -d '{"jsonrpc": "2.0", "id": 3, "method":'
check_eq "garbage in a POST: 400" 400 "$STATUS"
check_contains "... with JSON-RPC's parse error" '-32700' "$OUT"
head -c $((2 * 1024 * 1024)) /dev/zero | tr '\0' ' ' >"$TEST_TMP/big.json"
req POST /mcp "${MCP_H[@]}" -H "Authorization: Bearer $KEY" -H "Mcp-Session-Id: $SID" --data-binary @"$TEST_TMP/big.json"
check_eq "a body over 1 MiB: 413" 413 "$STATUS"
req GET /mcp -H "Authorization: Bearer $KEY" -H "Mcp-Session-Id: $SID" -H 'Accept: text/event-stream'
check_eq "GET /mcp (no stream of the server's own): 405" 405 "$STATUS"
req DELETE /mcp -H "Authorization: Bearer $KEY2" -H "Mcp-Session-Id: $SID"
check_eq "DELETE with another key: 404, and the session goes on" 404 "$STATUS"
req DELETE /mcp -H "Authorization: Bearer $KEY" -H "Mcp-Session-Id: $SID"
check_match "DELETE /mcp ends that session: 2xx" '^20[04]$' "$STATUS"
req POST /mcp "${MCP_H[@]}" -H "Authorization: Bearer $KEY" -H "Mcp-Session-Id: $SID" -d "$PING"
check_eq "... after which its id answers 404" 404 "$STATUS"

# The minimal template's base snapshot, once, before two suites ask for it at the same moment.
run timeout -k 10 "$CREATE_TIMEOUT" "$SPACECTL_BIN" create minimal --name t46-warm
check_eq "the minimal template's first sandbox (its base snapshot)" 0 "$RC" || { last_diag; bail_out "no sandbox"; }
sc rm -f t46-warm >/dev/null 2>&1

export SPACECTL=$SPACECTL_BIN SPACE_MCP_URL=$API_URL/mcp SPACE_MCP_KEY=$KEY SPACE_MCP_TEMPLATE=minimal
unset SPACE_MCP_CI_TEMPLATE

# ---- the two suites at once: their sessions mostly wait on their guests
run_py() {
        (cd "$MCP_DIR/py" && PYTHONDONTWRITEBYTECODE=1 SPACE_MCP_ERRLOG=$TEST_TMP/py-raw.log \
                timeout -k 10 "${SPACE_MCP_PY_TIMEOUT:-600}" "$PY_ENV/bin/python" -m pytest -p no:cacheprovider -q \
                --durations=5 --junitxml="$TEST_TMP/py.xml" ${SPACE_MCP_PY_ARGS:-} . >"$TEST_TMP/py.log" 2>&1)
}
run_js() { # from a copy beside the SDK: ES modules resolve packages next to the importing file
        mkdir -p "$TEST_TMP/js"
        cp "$MCP_DIR"/js/*.mjs "$TEST_TMP/js/"
        ln -sfn "$JS_ENV/node_modules" "$TEST_TMP/js/node_modules"
        (cd "$TEST_TMP/js" && timeout -k 10 "${SPACE_MCP_JS_TIMEOUT:-600}" \
                node --test --test-concurrency=1 --test-reporter=junit --test-reporter-destination="$TEST_TMP/js.xml" \
                --test-reporter=spec --test-reporter-destination=stdout ${SPACE_MCP_JS_TESTS:-./*.test.mjs} \
                >"$TEST_TMP/js.log" 2>&1)
}
tap_suite() { # tap_suite LABEL: its test cases as TAP lines
        local label=$1
        python3 "$TOP_SRCDIR/tests/e2b/junit-to-tap.py" "$label" "$TEST_TMP/$label.xml" >"$TEST_TMP/$label.tap"
        tap_from "$TEST_TMP/$label.tap"
        grep -q '^FAIL' "$TEST_TMP/$label.tap" && diag_file "$TEST_TMP/$label.log" 80
        return 0
}
t0=$(now_ms)
if [ "${SPACE_T46_SERIAL:-0}" = 1 ]; then
        run_py
        run_js
else
        run_py &
        pid_py=$!
        run_js &
        pid_js=$!
        wait "$pid_py" "$pid_js"
fi
diag "the suites took $((($(now_ms) - t0) / 1000)) s; pytest: $(tail -n 1 "$TEST_TMP/py.log")" \
        "$(grep -E '^[0-9.]+s (call|setup)' "$TEST_TMP/py.log")"
tap_suite py
tap_suite js

# ---- nothing left behind: the sessions removed what they made, and no spacectl mcp is left running
left=$(curl -s --unix-socket "$SPACE_SOCKET" http://localhost/v1/sandboxes | python3 -c \
        'import json,sys; print(" ".join(s["name"] or s["id"] for s in json.load(sys.stdin)["sandboxes"] if s["state"] != "deleting"))')
check_eq "every sandbox the sessions made is gone" "" "$left"
stray=
for pid in $(ps -eo pid=,args= | awk -v bin="$SPACECTL_BIN" '$2 == bin && $3 == "mcp" { print $1 }'); do
        tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" | grep -qF "$TEST_TMP" && stray+=" $pid"
done
check_eq "no spacectl mcp outlived its client" "" "$stray"
diag "t46 took $((($(now_ms) - T0) / 1000)) s"

done_testing
