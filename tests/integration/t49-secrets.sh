#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Secrets (issue 22, the store): spacectl secret set/ls/rm and /v1/secrets over the socket and TCP. A value goes
# in from stdin and never comes out: not in an answer, an error (broken JSON quoting it included), the daemon's
# log or its database; it is a 0600 file in a 0700 directory. Versions count up on each set, metadata is kept
# or replaced, names are checked (an id's shape refused), values that cannot be a header refused, and what a
# crash leaves (a value file no row names, a row whose file is gone) is cleaned up or shown at the next start.
# E2B's /secrets is tested with the real SDKs in tests/e2b (t45). No VM.
. "$(dirname "$0")/lib.sh"

space_env_setup
tcp_config
start_daemon_tcp
API_KEY=$(mint_key t49)
[ -n "$API_KEY" ] || bail_out "no API key"

VALUE="sk-t49-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
VALUE2="sk-t49-rotated-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"

# no_leak DESC: neither value is in the daemon's log, database or the last answer
no_leak() {
        local where
        where=$(grep -laF -e "$VALUE" -e "$VALUE2" "$TEST_TMP/spaced.log" "$SPACE_STATE_DIR"/space.db* "$OUT" "$ERR" 2>/dev/null)
        if [ -z "$where" ]; then pass "$1"; else fail "$1" "found in: $where"; fi
}

# ---- set, ls, versions
check_rc "secret set reads the value from stdin" 0 sh -c "printf '%s\n' '$VALUE' | '$SPACECTL_BIN' secret set api-token -m owner=ci -m team=t49"
check_eq "... prints nothing on stdout" "" "$(cat "$OUT")"
check_contains "... and says it was created, version 1, on stderr" "Created secret api-token (version 1)" "$ERR"
check_rc "secret ls" 0 sc secret ls
check_match "ls shows NAME VERSION UPDATED LAST USED" '^NAME +VERSION +UPDATED +LAST USED' "$(head -n1 "$OUT")"
check_match "... the secret, version 1, never used" '^api-token +1 .*never' "$(sed -n 2p "$OUT")"
no_leak "ls never shows the value"
check_rc "secret ls --json" 0 sc secret ls --json
ID=$(json "$OUT" 'd["secrets"][0]["id"]' 2>/dev/null)
check_match "... an id sec-<16 hex>" '^sec-[0-9a-f]{16}$' "$ID"
check_eq "... its metadata" '[["owner", "ci"], ["team", "t49"]]' "$(json "$OUT" 'sorted(d["secrets"][0]["metadata"].items())')"
check_eq "... no field holds the value" false "$(json "$OUT" '"value" in d["secrets"][0]')"
run sc secret ls -q
check_eq "secret ls -q prints the names" api-token "$(cat "$OUT")"

check_rc "secret set again sets a new version" 0 sh -c "printf '%s' '$VALUE2' | '$SPACECTL_BIN' secret set api-token"
check_contains "... version 2" "Set secret api-token (version 2)" "$ERR"
ureq GET /v1/secrets/api-token
check_status "GET /v1/secrets/NAME: 200" 200
check_eq "... version 2, metadata kept when none is given" '[2, [["owner", "ci"], ["team", "t49"]]]' \
        "$(json "$OUT" '[d["version"], sorted(d["metadata"].items())]')"
ureq GET "/v1/secrets/$ID"
check_status "GET /v1/secrets/ID: the same secret" 200
check_eq "... by its id" api-token "$(json "$OUT" 'd["name"]')"

# ---- the value on disk: only there, only for the daemon's user
check_eq "the secrets directory is 0700" 700 "$(stat -c %a "$SPACE_STATE_DIR/secrets")"
check_eq "the value's file is 0600" 600 "$(stat -c %a "$SPACE_STATE_DIR/secrets/$ID")"
check_eq "... and holds the new value, without the newline stdin had" "$VALUE2" "$(cat "$SPACE_STATE_DIR/secrets/$ID")"
no_leak "neither value is in the log or the database"

# ---- over TCP with a key, and the JSON body's rules
kreq PUT /v1/secrets/tcp.secret_1 -H 'Content-Type: application/json' -d "{\"value\": \"$VALUE\", \"metadata\": {\"k\": \"v\"}}"
check_status "PUT /v1/secrets/NAME over TCP: 201 for a new secret" 201
check_eq "... version 1, with its metadata" '[1, {"k": "v"}]' "$(json "$OUT" '[d["version"], d["metadata"]]')"
no_leak "... the answer does not hold the value"
kreq PUT /v1/secrets/tcp.secret_1 -H 'Content-Type: application/json' -d "{\"value\": \"$VALUE2\", \"metadata\": {}}"
check_status "PUT again: 200, a new version" 200
check_eq "... version 2, metadata replaced by {}" '[2, {}]' "$(json "$OUT" '[d["version"], d["metadata"]]')"
req GET /v1/secrets
check_status "GET /v1/secrets over TCP without a key: 401" 401 unauthorized
kreq PUT /v1/secrets/broken -H 'Content-Type: application/json' -d "{\"value\": \"$VALUE"
check_status "a body that breaks off inside the value: 400" 400 invalid_argument
no_leak "... and the error does not quote the value (the usual syntax error shows the bytes near it)"
kreq PUT /v1/secrets/x -H 'Content-Type: application/json' -d "{\"value\": \"$VALUE\", \"extra\": 1}"
check_status "an unknown field: 400" 400 invalid_argument
kreq PUT /v1/secrets/x -H 'Content-Type: application/json' -d '{"value": 5}'
check_status "a value that is no string: 400" 400 invalid_argument
kreq PUT /v1/secrets/x -H 'Content-Type: application/json' -d "{\"value\": \"$VALUE\\r\\nX-Injected: 1\"}"
check_status "a value with CR LF (header injection): 400" 400 invalid_argument
check_contains "... saying why" "cannot hold a line break" "$(cat "$OUT")"
no_leak "... without quoting it"
kreq PUT /v1/secrets/x -H 'Content-Type: application/json' -d '{"value": "ok", "metadata": {"n": 5}}'
check_status "metadata that is not strings: 400" 400 invalid_argument
kreq PUT /v1/secrets/x -H 'Content-Type: application/json' -d '{"value": ""}'
check_status "an empty value: 400" 400 invalid_argument
kreq PUT /v1/secrets/x -H 'Content-Type: application/json' -d '{"value": "\u00ff\ud800"}'
check_status "a value that is no valid UTF-8 (a lone surrogate): 400" 400 invalid_argument
ureq GET /v1/secrets/x
check_status "none of the refused PUTs made a secret" 404 secret_not_found

# ---- bad input over the CLI
check_fails "a value with a line break inside" sh -c "printf 'a\nb' | '$SPACECTL_BIN' secret set multi"
check_contains "... says why" "cannot hold a line break" "$ERR"
check_fails "an empty stdin" sh -c "'$SPACECTL_BIN' secret set empty </dev/null"
check_contains "... says to pipe it in" "no value on stdin" "$ERR"
check_fails "a value over 16384 bytes" sh -c "head -c 16385 /dev/zero | tr '\0' a | '$SPACECTL_BIN' secret set big"
check_contains "... says the limit" "longer than 16384 bytes" "$ERR"
check_rc "a value of exactly 16384 bytes is fine" 0 sh -c "head -c 16384 /dev/zero | tr '\0' a | '$SPACECTL_BIN' secret set big"
check_fails "a NUL byte in the value" sh -c "printf 'a\0b' | '$SPACECTL_BIN' secret set nul"
check_fails "a name with a space" sh -c "echo v | '$SPACECTL_BIN' secret set 'a b'"
check_fails "a name in an id's shape" sh -c "echo v | '$SPACECTL_BIN' secret set sec-0123456789abcdef"
check_contains "... says what a name is" "is not a secret name" "$ERR"
check_fails "a name starting with '-' or '.'" sh -c "echo v | '$SPACECTL_BIN' secret set ./x"
check_fails "set with no name" sh -c "echo v | '$SPACECTL_BIN' secret set"
check_fails "secret rm of one that is not there" sc secret rm no-such-secret
check_contains "... names it" "no secret 'no-such-secret'" "$ERR"

# ---- what a crash can leave, seen at the next start
echo leftover >"$SPACE_STATE_DIR/secrets/sec-00000000000000ff"
kreq GET /v1/secrets
ID2=$(json "$OUT" '[s["id"] for s in d["secrets"] if s["name"] == "tcp.secret_1"][0]' 2>/dev/null)
rm -f "$SPACE_STATE_DIR/secrets/$ID2"
PID=$(daemon_pid)
kill -TERM "$PID"
wait_for 30 pid_gone "$PID" || bail_out "spaced did not stop"
start_daemon_tcp
check "a value file no secret names is removed at start" test ! -e "$SPACE_STATE_DIR/secrets/sec-00000000000000ff"
check_contains "... and the log says so" "a secret's value that no secret names" "$(cat "$TEST_TMP/spaced.log")"
check_rc "secret ls after the restart" 0 sc secret ls
check_match "... a secret whose file is gone shows it" '^tcp\.secret_1 +2 \(value missing\)' "$(grep '^tcp' "$OUT")"
check_match "... the others kept their versions" '^api-token +2 ' "$(grep '^api-token' "$OUT")"
check_contains "the log says to set it again" "set it again with 'spacectl secret set tcp.secret_1'" "$(cat "$TEST_TMP/spaced.log")"
check_rc "setting it again mends it" 0 sh -c "echo v3 | '$SPACECTL_BIN' secret set tcp.secret_1"
ureq GET /v1/secrets/tcp.secret_1
check_eq "... version 3, value no longer missing" '[3, false]' "$(json "$OUT" '[d["version"], d["value_missing"]]')"

# ---- rm
check_rc "secret rm two" 0 sc secret rm api-token big
check_eq "... prints each name removed" "api-token big" "$(tr '\n' ' ' <"$OUT" | sed 's/ $//')"
check "... and the value's file is gone" test ! -e "$SPACE_STATE_DIR/secrets/$ID"
ureq DELETE "/v1/secrets/$ID"
check_status "DELETE of a removed one by its id: 404" 404 secret_not_found
ureq GET /v1/secrets
check_eq "one secret is left" '["tcp.secret_1"]' "$(json "$OUT" '[s["name"] for s in d["secrets"]]')"
no_leak "at the end, neither value is in the log or the database"

done_testing
