#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every sandbox trusts the daemon's local CA (issue 22: the egress gateway shows its certificates for the
# hosts whose secrets it adds; ARCHITECTURE.md, "Secrets"). In a seed sandbox: /etc/space/ca.pem is
# $state/tls/ca.pem; the system bundle holds it beside Debian's CAs; SSL_CERT_FILE, REQUESTS_CA_BUNDLE and
# NODE_EXTRA_CA_CERTS are set for exec'd processes (as root and as the template's user) and for one E2B's envd
# starts, and a user's own SSL_CERT_FILE at create wins; python's default context lists "space local CA"; curl
# and python reach an HTTPS server whose certificate the CA signed (through the egress gateway, which passes
# that TLS through); a fork, a checkpoint's restore
# and a warm pool's member have it all too; no line of ca.key is anywhere under the guest's /. Then $state/tls
# is removed and the daemon started again: a new sandbox trusts the new CA and no longer the old one (from a
# base named by the new CA's fingerprint), the sandbox that ran on gets the new CA with the INIT the new daemon
# sends it, and gc takes the old CA's base once nothing stands on it.
. "$(dirname "$0")/lib.sh"

space_env_setup
A=127.0.51.2 B=127.0.51.3
printf '%s ca.test\n%s ca2.test\n' "$A" "$B" >"$TEST_TMP/hosts"
tcp_config "egress_hosts_file = $TEST_TMP/hosts" "egress_resolve = hosts" \
        "egress_profile = catest: allow ca.test:8443, ca2.test:8443, $A:8443, $B:8443"
start_daemon_tcp
API_KEY=$(mint_key t51)
[ -n "$API_KEY" ] || bail_out "no API key"
TLS=$SPACE_STATE_DIR/tls
[ -s "$TLS/ca.pem" ] && [ -s "$TLS/ca.key" ] || bail_out "no local CA in $TLS"

# serve ADDR NAME: an HTTPS server on ADDR:8443 whose certificate for NAME the daemon's CA of now signed
serve() {
        local d=$TEST_TMP/srv-$1
        mkdir -p "$d"
        openssl req -new -newkey rsa:2048 -nodes -keyout "$d/key.pem" -subj "/CN=$2" -out "$d/csr.pem" 2>/dev/null &&
                printf 'subjectAltName=DNS:%s\n' "$2" >"$d/ext" &&
                openssl x509 -req -in "$d/csr.pem" -CA "$TLS/ca.pem" -CAkey "$TLS/ca.key" -set_serial "0x$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')" \
                        -days 2 -extfile "$d/ext" -out "$d/cert.pem" 2>/dev/null || bail_out "cannot sign a server certificate with $TLS/ca.key"
        python3 - "$1" "$d/cert.pem" "$d/key.pem" >"$d/out" 2>"$d/err" <<'EOF' &
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = b"hello over tls\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer((sys.argv[1], 8443), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[2], sys.argv[3])
s.socket = ctx.wrap_socket(s.socket, server_side=True)
print("ready", flush=True)
s.serve_forever()
EOF
        track_pid $!
        wait_for 20 grep -q ready "$d/out" || { diag_file "$d/err"; bail_out "the HTTPS server on $1 did not start"; }
}
serve "$A" ca.test

seed_template
check_eq "the seed template" 0 "$RC" || { last_diag; bail_out "no seed template"; }

ENVS='echo "$SSL_CERT_FILE|$REQUESTS_CA_BUNDLE|$NODE_EXTRA_CA_CERTS"'
WANT_ENV='/etc/ssl/certs/ca-certificates.crt|/etc/ssl/certs/ca-certificates.crt|/etc/space/ca.pem'
PYCA='import ssl; print(sorted(dict(x[0] for x in c["subject"]).get("commonName", "") for c in ssl.create_default_context().get_ca_certs() if "space" in str(c["subject"])))'
PYGET='import urllib.request; print(urllib.request.urlopen("https://ca.test:8443/", timeout=60).read().decode().strip())'
BUNDLE='import sys; b = open("/etc/ssl/certs/ca-certificates.crt").read(); c = open("/etc/space/ca.pem").read(); print(c in b, b.count("BEGIN CERTIFICATE") > 100)'
gx() { run timeout -k 5 300 "$SPACECTL_BIN" exec -u root "$@"; }

# trusts ID WHAT: the checks of one sandbox's trust of the daemon's CA of now
trusts() {
        local id=$1 what=$2
        gx "$id" -- cat /etc/space/ca.pem
        check_eq "$what: /etc/space/ca.pem is \$state/tls/ca.pem" "$(cat "$TLS/ca.pem")" "$(cat "$OUT")"
        gx "$id" -- python3 -c "$BUNDLE"
        check_eq "$what: the system bundle holds it, and Debian's CAs still" "True True" "$(cat "$OUT")"
        run timeout -k 5 300 "$SPACECTL_BIN" exec "$id" -- sh -c "$ENVS"
        check_eq "$what: SSL_CERT_FILE, REQUESTS_CA_BUNDLE, NODE_EXTRA_CA_CERTS for the template's user" "$WANT_ENV" "$(cat "$OUT")"
        run timeout -k 5 300 "$SPACECTL_BIN" exec "$id" -- python3 -c "$PYCA"
        check_eq "$what: python's default context lists space local CA" "['space local CA']" "$(cat "$OUT")"
}

create_sandbox SB seed --egress catest
check_match "a seed sandbox" "$ID_RE" "$SB" || bail_out "no sandbox"
trusts "$SB" "a new sandbox"
gx "$SB" -- sh -c "$ENVS"
check_eq "... and for root" "$WANT_ENV" "$(cat "$OUT")"
run timeout -k 5 300 "$SPACECTL_BIN" exec "$SB" -- curl -sS --max-time 60 https://ca.test:8443/
check_eq "curl reaches an HTTPS server whose certificate the CA signed, with no flag" "hello over tls" "$(cat "$OUT")" || last_diag
run timeout -k 5 300 "$SPACECTL_BIN" exec "$SB" -- python3 -c "$PYGET"
check_eq "... and so does python's urllib" "hello over tls" "$(cat "$OUT")" || last_diag
gx "$SB" -- ls -l /etc/space/ca.pem /usr/local/share/ca-certificates/space-local-ca.crt
check_match "the guest's copies are root's, 0644, update-ca-certificates's included" \
        '^-rw-r--r-- 1 root root .*ca.pem.*-rw-r--r-- 1 root root .*space-local-ca.crt$' "$(tr '\n' ' ' <"$OUT" | sed 's/ $//')"

# ---- a process E2B's envd starts (Connect's JSON envelopes over the TCP listener), in a sandbox E2B made
python3 - "$API_PORT" "$API_KEY" "$ENVS" >"$OUT" 2>"$ERR" <<'EOF'
import base64, json, struct, sys, urllib.request
port, key, cmd = sys.argv[1:]
def post(path, body, headers):
    req = urllib.request.Request("http://127.0.0.1:%s%s" % (port, path), data=body, headers=headers, method="POST")
    return urllib.request.urlopen(req, timeout=300).read()
sb = json.loads(post("/sandboxes", json.dumps({"templateID": "seed"}).encode(),
                     {"X-API-KEY": key, "Content-Type": "application/json"}))
print(sb["sandboxID"])
msg = json.dumps({"process": {"cmd": "/bin/sh", "args": ["-c", cmd]}}).encode()
out = post("/process.Process/Start", struct.pack(">BI", 0, len(msg)) + msg,
           {"E2b-Sandbox-Id": sb["sandboxID"], "X-Access-Token": sb["envdAccessToken"],
            "Content-Type": "application/connect+json"})
i, stdout = 0, b""
while i + 5 <= len(out):
    flags, n = struct.unpack(">BI", out[i:i + 5])
    ev = json.loads(out[i + 5:i + 5 + n]).get("event", {})
    stdout += base64.b64decode(ev.get("data", {}).get("stdout", ""))
    i += 5 + n
print(stdout.decode().strip())
EOF
E2B_SB=$(head -n1 "$OUT")
[ -n "$E2B_SB" ] && track_sandbox "$E2B_SB"
check_eq "a process started over E2B's envd has the three variables" "$WANT_ENV" "$(sed -n 2p "$OUT")" || diag_file "$ERR"
[ -n "$E2B_SB" ] && sc rm -f "$E2B_SB" >/dev/null 2>&1

# ---- a user's own SSL_CERT_FILE at create wins; the others stay
create_sandbox SBX seed -e SSL_CERT_FILE=/x
run timeout -k 5 300 "$SPACECTL_BIN" exec "$SBX" -- sh -c "$ENVS"
check_eq "SSL_CERT_FILE=/x at create wins, the other two are ours" \
        '/x|/etc/ssl/certs/ca-certificates.crt|/etc/space/ca.pem' "$(cat "$OUT")"
run timeout -k 5 300 "$SPACECTL_BIN" exec -e REQUESTS_CA_BUNDLE=/y "$SBX" -- sh -c "$ENVS"
check_eq "... and an exec's own env wins too" '/x|/y|/etc/space/ca.pem' "$(cat "$OUT")"
check_rc "remove it" 0 sc rm -f "$SBX"

# ---- nothing of the CA's key in the guest. The pattern goes in rot13 and is decoded into a shell variable,
# so that no file of the guest holds it because we sent it; /proc, /sys and /dev are not files.
rot13() { tr 'A-Za-z' 'N-ZA-Mn-za-m'; }
# guest_grep ID LINE: the files under the guest's / that hold LINE, then rc=N (grep's: 1 is none)
guest_grep() {
        gx "$1" -- sh -c "p=\$(printf %s '$(printf %s "$2" | rot13)' | tr 'A-Za-z' 'N-ZA-Mn-za-m'); grep -rlsF -e \"\$p\" / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev; echo rc=\$?"
}
guest_grep "$SB" "$(sed -n 2p "$TLS/ca.pem")"
check_contains "a line of ca.pem is found under the guest's / (the search works)" /etc/space/ca.pem "$(cat "$OUT")"
KEYLINES=$(grep -v -- ----- "$TLS/ca.key" | wc -l)
FOUND=""
for n in $(seq 1 "$KEYLINES"); do
        line=$(grep -v -- ----- "$TLS/ca.key" | sed -n "${n}p")
        [ ${#line} -ge 16 ] || continue
        guest_grep "$SB" "$line"
        grep -qx 'rc=1' "$OUT" || FOUND="$FOUND line $n: $(tr '\n' ' ' <"$OUT")"
done
check_eq "no line of ca.key's body is anywhere under the guest's / ($KEYLINES lines)" "" "$FOUND"

# ---- a fork, a checkpoint's restore, a warm pool's member
run sc fork "$SB"
check_eq "fork it" 0 "$RC" || last_diag
KID=$(grep -E "$ID_RE" "$OUT" | head -n1)
track_sandbox "$KID"
trusts "$KID" "a fork"
check_rc "checkpoint it" 0 sc checkpoint "$SB" --name t51-cp
check_rc "restore the checkpoint" 0 sc restore "$SB" t51-cp
trusts "$SB" "a restored checkpoint"
check_rc "a warm pool of one" 0 sc pool set seed 1
pool_ready() { sc pool ls --json >"$TEST_TMP/pool.json" 2>/dev/null && [ "$(json "$TEST_TMP/pool.json" 'd["pools"][0]["ready"]')" = 1 ]; }
wait_for 300 pool_ready
check "... is ready" pool_ready
create_sandbox SBP seed
trusts "$SBP" "a pool's member"
check_rc "no pool" 0 sc pool set seed 0

# ---- a new CA: $state/tls removed, the daemon started again
OLD_FP=$(openssl x509 -in "$TLS/ca.pem" -noout -fingerprint -sha256 | cut -d= -f2 | tr -d : | tr A-F a-f | cut -c1-16)
OLD_PEM=$(cat "$TLS/ca.pem")
check "the base is named by the CA's fingerprint" ls -d "$SPACE_STATE_DIR"/base/*-ca"$OLD_FP"-pvpanic
PID=$(daemon_pid)
kill -TERM "$PID"
wait_for 30 pid_gone "$PID" || bail_out "spaced did not stop"
rm -rf "$TLS"
start_daemon_tcp
check "a new CA" test "$(cat "$TLS/ca.pem" 2>/dev/null)" != "$OLD_PEM"
NEW_FP=$(openssl x509 -in "$TLS/ca.pem" -noout -fingerprint -sha256 | cut -d= -f2 | tr -d : | tr A-F a-f | cut -c1-16)
serve "$B" ca2.test
create_sandbox SB2 seed --egress catest
check_match "a sandbox after the restart" "$ID_RE" "$SB2" || bail_out "no sandbox"
trusts "$SB2" "a sandbox of the new CA"
check "... made from a base named by the new CA" ls -d "$SPACE_STATE_DIR"/base/*-ca"$NEW_FP"-pvpanic
gx "$SB2" -- sh -c "grep -c BEGIN /etc/ssl/certs/ca-certificates.crt; grep -cF '$(sed -n 2p <<<"$OLD_PEM")' /etc/ssl/certs/ca-certificates.crt"
check_eq "... whose bundle no longer holds the old CA" 0 "$(sed -n 2p "$OUT")"
run timeout -k 5 300 "$SPACECTL_BIN" exec "$SB2" -- curl -sS --max-time 60 https://ca2.test:8443/
check_eq "curl trusts a certificate of the new CA" "hello over tls" "$(cat "$OUT")" || last_diag
run timeout -k 5 300 "$SPACECTL_BIN" exec "$SB2" -- curl -sS --max-time 60 https://ca.test:8443/
check_eq "... and no longer one of the old (curl: 60, the peer's certificate is not trusted)" 60 "$RC"
trusts "$SB" "the sandbox that ran on, after the new daemon's INIT"

# ---- gc: the old CA's base goes once nothing of its template stands on it, the new one stays
check_rc "remove the checkpoint" 0 sc checkpoint rm t51-cp
check_rc "remove the sandboxes" 0 sc rm -f "$SB" "$KID" "$SBP" "$SB2"
check_rc "template gc" 0 sc template gc
check "... removed the old CA's base" sh -c "! ls -d '$SPACE_STATE_DIR'/base/*-ca$OLD_FP-pvpanic 2>/dev/null"
check "... kept the new one's" ls -d "$SPACE_STATE_DIR"/base/*-ca"$NEW_FP"-pvpanic

done_testing
