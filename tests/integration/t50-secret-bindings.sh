#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Secret bindings on plain HTTP (issue 22; space-egress(5), "Secrets"). Servers on 127.0.50.2 (api.test, bound)
# and 127.0.50.3 (other.test, not bound) record every request's headers. From a real sandbox (seed) whose profile
# binds two secrets to api.test:8080, one as "Authorization: Bearer {value}" and one by placeholder: the server
# gets the values; a header the guest forges is replaced; a placeholder in the path, or sent to other.test, goes
# as it is; a new version is used by the next request on the same kept-alive connection; the value is nowhere
# in the guest (its processes' environments, its files, exec output), nor in inspect, the daemon's log or the
# egress audit log, which names the secret. A create whose profile binds a secret that does not exist is refused,
# naming it; a secret removed later leaves requests without it, and the audit log says so; a bad egress_secret
# line is refused by a reload, naming what is wrong. HTTPS to a bound host is left to TLS interception (next).
. "$(dirname "$0")/lib.sh"

space_env_setup
A=127.0.50.2 O=127.0.50.3
printf '%s api.test\n%s other.test\n' "$A" "$O" >"$TEST_TMP/hosts"
python3 "$TESTS_DIR/secret-recorder.py" "$A:8080" "$O:8080" >"$TEST_TMP/recorder.out" 2>"$TEST_TMP/recorder.err" &
track_pid $!
wait_for 20 grep -q ready "$TEST_TMP/recorder.out" || { diag_file "$TEST_TMP/recorder.err"; bail_out "recorder did not start"; }
seen() { curl -s --max-time 10 "http://$A:8080/_seen"; }
reset_seen() { curl -s --max-time 10 -X POST "http://$A:8080/_reset" >/dev/null; }
# last_headers SERVER: the headers of the last request SERVER (ADDR:PORT) got, one "name: value" a line
last_headers() {
        seen | python3 -c 'import json, sys
reqs = [r for r in json.load(sys.stdin) if r["server"] == sys.argv[1]]
print("\n".join("%s: %s" % (k, v) for k, v in reqs[-1]["headers"]) if reqs else "")' "$1"
}

tcp_config \
        "egress_hosts_file = $TEST_TMP/hosts" \
        "egress_resolve = hosts" \
        "egress_profile = api: allow api.test:8080, other.test:8080, $A:8080, $O:8080" \
        "egress_secret = api: tok api.test:8080 header Authorization: Bearer {value}" \
        "egress_secret = api: ph api.test:8080" \
        "egress_profile = ghost: allow api.test:8080" \
        "egress_secret = ghost: missing-one api.test"
start_daemon_tcp

VALUE="tok-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
VALUE2="tok2-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
PHVAL="ph-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
check_rc "secret tok set" 0 sh -c "echo '$VALUE' | '$SPACECTL_BIN' secret set tok"
check_rc "secret ph set" 0 sh -c "echo '$PHVAL' | '$SPACECTL_BIN' secret set ph"

seed_template
check_eq "the seed template" 0 "$RC" || { last_diag; bail_out "no seed template"; }

# ---- a create that binds a secret that does not exist
check_fails "a create whose profile binds a secret that does not exist is refused" sc create seed --egress ghost
check_contains "... naming the secret and what to do" "binds the secret 'missing-one', which does not exist" "$ERR"
check_eq "... and no sandbox is made" 0 "$(sandbox_count)"

create_sandbox SB seed --egress api
check_match "a sandbox with the api profile" "$ID_RE" "$SB" || bail_out "no sandbox"
gx() { run timeout -k 5 120 "$SPACECTL_BIN" exec -u root "$SB" -- "$@"; }

gx sh -c 'echo "$SPACE_SECRET_TOK $SPACE_SECRET_PH"'
check_match "the sandbox holds placeholders, one per bound secret" \
        '^space-secret-tok-[0-9a-f]{16} space-secret-ph-[0-9a-f]{16}$' "$(cat "$OUT")"
PH=$(cut -d' ' -f2 "$OUT")

# ---- a header binding
gx curl -fsS --max-time 30 http://api.test:8080/plain
check_contains "a request to the bound host goes through" "ok" "$OUT" || last_diag
check_contains "... and the server got Authorization: Bearer VALUE" "Authorization: Bearer $VALUE" "$(last_headers "$A:8080")"
gx curl -fsS --max-time 30 -H 'Authorization: Bearer forged' http://api.test:8080/forged
check_eq "a forged Authorization is replaced: the server got one, the secret's" "Authorization: Bearer $VALUE" \
        "$(last_headers "$A:8080" | grep -i '^authorization:')"

# ---- a placeholder
gx sh -c 'curl -fsS --max-time 30 -H "X-Api-Key: key=$SPACE_SECRET_PH;" "http://api.test:8080/path/$SPACE_SECRET_PH"'
check_contains "a placeholder in a header value is replaced by the value" "X-Api-Key: key=$PHVAL;" "$(last_headers "$A:8080")"
check_eq "... but not in the request's path" "/path/$PH" "$(seen | python3 -c 'import json,sys; print(json.load(sys.stdin)[-1]["path"])')"
gx sh -c 'curl -fsS --max-time 30 -H "X-Api-Key: $SPACE_SECRET_PH" http://other.test:8080/'
check_contains "a placeholder sent to a host with no binding arrives as it is" "X-Api-Key: $PH" "$(last_headers "$O:8080")"
check_eq "... and that host gets no Authorization" "" "$(last_headers "$O:8080" | grep -i '^authorization:')"

# ---- a new version, seen by the next request on the same connection
reset_seen
# the guest's second request waits for /tmp/rotated, which the host makes once it set the new version
timeout -k 5 120 "$SPACECTL_BIN" exec "$SB" -- python3 -c '
import http.client, os, time
c = http.client.HTTPConnection("api.test", 8080, timeout=30)
for i in range(2):
    c.request("GET", "/keepalive/%d" % i)
    print(c.getresponse().read().decode().strip())
    for _ in range(600):
        if i or os.path.exists("/tmp/rotated"):
            break
        time.sleep(0.1)
' >"$TEST_TMP/ka.out" 2>&1 &
ka=$!
first_seen() { seen | grep -q /keepalive/0; }
wait_for 60 first_seen || diag "the first request on the kept-alive connection did not arrive"
check_rc "a new version of tok while the connection is open" 0 sh -c "echo '$VALUE2' | '$SPACECTL_BIN' secret set tok"
sc exec "$SB" -- touch /tmp/rotated
wait $ka
seen >"$TEST_TMP/ka.json"
check_eq "two requests on one kept-alive connection" 1 \
        "$(json "$TEST_TMP/ka.json" 'len(set(r["client_port"] for r in d if r["path"].startswith("/keepalive")))')"
check_eq "... the first with the old value, the second with the new one" "Bearer $VALUE Bearer $VALUE2" \
        "$(json "$TEST_TMP/ka.json" '" ".join(v for r in d for k, v in r["headers"] if k.lower() == "authorization")')"

# ---- the value is nowhere in the guest
gx sh -c "cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -c -e '$VALUE' -e '$VALUE2' -e '$PHVAL' || true"
check_eq "no process's environment holds a value" 0 "$(tr -d ' \n' <"$OUT")"
gx sh -c "grep -rlsF -e '$VALUE' -e '$VALUE2' -e '$PHVAL' / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev | head -5; true"
check_eq "no file in the guest holds a value" "" "$(cat "$OUT")"
run sc inspect --json "$SB"
check "inspect does not show a value" sh -c "! grep -qF -e '$VALUE' -e '$PHVAL' '$OUT'"
run sc egress log --json "$SB"
cp "$OUT" "$TEST_TMP/audit.json"
check_contains "the audit log names the secret used" "secret tok added" "$(cat "$TEST_TMP/audit.json")"
check_contains "... and both where both went" "secrets tok, ph added" "$(cat "$TEST_TMP/audit.json")"
check "... never a value" sh -c "! grep -qF -e '$VALUE' -e '$VALUE2' -e '$PHVAL' '$TEST_TMP/audit.json' '$TEST_TMP/spaced.log'"
run sc secret ls
check_match "secret ls shows when tok was last used" '^tok +2 +[^ ].* ago|^tok +2 .*just now' "$(grep '^tok ' "$OUT" | grep -v never)"

# ---- a secret removed after the create
check_rc "secret rm tok" 0 sc secret rm tok
gx curl -fsS --max-time 30 http://api.test:8080/after-rm
check_contains "a request after the secret was removed still goes" "ok" "$OUT"
check_eq "... without an Authorization" "" "$(last_headers "$A:8080" | grep -i '^authorization:')"
run sc egress log --json "$SB"
check_contains "... and the audit log says the secret is gone" "does not exist any more" "$(cat "$OUT")"

# ---- a bad egress_secret line
cp "$SPACE_CONFIG" "$TEST_TMP/good.conf"
echo "egress_secret = api: tok 10.0.0.1:80" >>"$SPACE_CONFIG"
ureq POST /v1/daemon/reload
check_status "a binding to an address, not a host: the reload is refused" 400 invalid_argument
check_contains "... saying why" "is an address: a binding names hosts" "$(cat "$OUT")"
cp "$TEST_TMP/good.conf" "$SPACE_CONFIG"
echo "egress_secret = api: tok api.test header Host: {value}" >>"$SPACE_CONFIG"
ureq POST /v1/daemon/reload
check_status "a binding that sets Host: refused" 400 invalid_argument
echo "egress_secret = api: tok api.test header X-Key: no-value-here" >"$TEST_TMP/bad3"
cp "$TEST_TMP/good.conf" "$SPACE_CONFIG"
cat "$TEST_TMP/bad3" >>"$SPACE_CONFIG"
ureq POST /v1/daemon/reload
check_status "a header binding without {value}: refused" 400 invalid_argument
cp "$TEST_TMP/good.conf" "$SPACE_CONFIG"
ureq POST /v1/daemon/reload
check_status "the good configuration reloads" 200

done_testing
