#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Secret bindings on HTTPS (issue 22; space-egress(5), "Secrets"): the gateway terminates TLS to a bound host with
# a certificate from the daemon's CA, verifies the server against the host's trust and egress_tls_ca, and adds the
# secret to every request. HTTPS recorders on 127.0.52.2 (api.test and other.test, signed by a test CA that
# egress_tls_ca names) and 127.0.52.3 (bad.test, signed by a CA nobody trusts). From a real sandbox (seed): the
# server gets the value; the guest sees the daemon's CA, the sandbox trusting it by default; a host with no
# binding is never intercepted (the guest sees the server's own certificate); a placeholder sent there arrives
# as it is; an untrusted server certificate is refused (the guest reads why, the audit log says
# upstream_certificate) and gets nothing; keep-alive requests and a rotation between them, an HTTP/2 client
# (negotiated down to HTTP/1.1) and a POST with a body each get the value; a forged
# Host on the intercepted connection is refused; the value is nowhere in the guest, inspect, the logs, the audit
# log, or the memory file of a checkpoint.
. "$(dirname "$0")/lib.sh"

space_env_setup
A=127.0.52.2 B=127.0.52.3
printf '%s api.test\n%s other.test\n%s bad.test\n' "$A" "$A" "$B" >"$TEST_TMP/hosts"

# ---- the test CAs and the servers' certificates
pki=$TEST_TMP/pki
mkdir -p "$pki"
mkcert() { # NAME CA-NAME SAN...
        local name=$1 ca=$2 san
        shift 2
        san=$(printf 'DNS:%s,' "$@")
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$pki/$name.key" \
                -out "$pki/$name.csr" -subj "/CN=$1" 2>/dev/null &&
                openssl x509 -req -in "$pki/$name.csr" -CA "$pki/$ca.pem" -CAkey "$pki/$ca.key" -CAcreateserial \
                        -out "$pki/$name.pem" -days 2 -extfile <(printf 'subjectAltName=%s\n' "${san%,}") 2>/dev/null
}
for ca in upca rogue; do
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$pki/$ca.key" -out "$pki/$ca.pem" \
                -days 2 -subj "/CN=space test $ca" 2>/dev/null || bail_out "cannot make the test CA $ca"
done
mkcert srv upca api.test other.test || bail_out "cannot make the server certificate"
mkcert bad rogue bad.test || bail_out "cannot make the rogue certificate"

python3 "$TESTS_DIR/secret-recorder.py" "https://$A:8443=$pki/srv.pem,$pki/srv.key" \
        "https://$B:8443=$pki/bad.pem,$pki/bad.key" >"$TEST_TMP/recorder.out" 2>"$TEST_TMP/recorder.err" &
track_pid $!
wait_for 20 grep -q ready "$TEST_TMP/recorder.out" || { diag_file "$TEST_TMP/recorder.err"; bail_out "recorder did not start"; }
seen() { curl -s --max-time 10 --cacert "$pki/upca.pem" --resolve "api.test:8443:$A" https://api.test:8443/_seen; }
# last_headers SERVER PATH-PREFIX: the headers of the last such request, one "name: value" a line
last_headers() {
        seen | python3 -c 'import json, sys
reqs = [r for r in json.load(sys.stdin) if r["path"].startswith(sys.argv[1])]
print("\n".join("%s: %s" % (k, v) for k, v in reqs[-1]["headers"]) if reqs else "")' "$1"
}

tcp_config \
        "egress_hosts_file = $TEST_TMP/hosts" \
        "egress_resolve = hosts" \
        "egress_tls_ca = $pki/upca.pem" \
        "egress_profile = api: allow api.test:8443, other.test:8443, bad.test:8443, $A:8443, $B:8443" \
        "egress_secret = api: tok api.test:8443, bad.test:8443 header Authorization: Bearer {value}" \
        "egress_secret = api: ph api.test:8443"
start_daemon_tcp

VALUE="tok-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
VALUE2="tok2-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
PHVAL="ph-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
check_rc "secret tok set" 0 sh -c "echo '$VALUE' | '$SPACECTL_BIN' secret set tok"
check_rc "secret ph set" 0 sh -c "echo '$PHVAL' | '$SPACECTL_BIN' secret set ph"

seed_template
check_eq "the seed template" 0 "$RC" || { last_diag; bail_out "no seed template"; }
create_sandbox SB seed --egress api
check_match "a sandbox with the api profile" "$ID_RE" "$SB" || bail_out "no sandbox"
gx() { run timeout -k 5 120 "$SPACECTL_BIN" exec -u root "$SB" -- "$@"; }
# the upstream CA, for the one check that a host with no binding shows its own certificate
run sc exec -i "$SB" -- sh -c "cat >/tmp/upca.pem" <"$pki/upca.pem"

# ---- a header binding over HTTPS
gx curl -fsS --max-time 30 https://api.test:8443/plain
check_contains "an HTTPS request to the bound host goes through, the sandbox trusting the daemon's CA" "ok" "$OUT" ||
        last_diag
check_contains "... and the server got Authorization: Bearer VALUE" "Authorization: Bearer $VALUE" "$(last_headers /plain)"
gx python3 -c '
import socket, ssl
ctx = ssl.create_default_context()
with socket.create_connection(("api.test", 8443), timeout=30) as s, ctx.wrap_socket(s, server_hostname="api.test") as t:
    print(dict(x[0] for x in t.getpeercert()["issuer"])["commonName"])'
check_eq "... whose certificate there is the daemon's CA's" "space local CA" "$(tail -n1 "$OUT")" || last_diag
gx curl -fsS --max-time 30 -H 'Authorization: Bearer forged' https://api.test:8443/forged
check_eq "a forged Authorization is replaced" "Authorization: Bearer $VALUE" \
        "$(last_headers /forged | grep -i '^authorization:')"

# ---- a placeholder, and a host with no binding
gx sh -c 'curl -fsS --max-time 30 -H "X-Api-Key: key=$SPACE_SECRET_PH;" https://api.test:8443/ph'
check_contains "a placeholder in a header value is replaced over HTTPS" "X-Api-Key: key=$PHVAL;" "$(last_headers /ph)"
PH=$(sc exec "$SB" -- sh -c 'echo $SPACE_SECRET_PH')
gx sh -c 'curl -fsS --max-time 30 --cacert /tmp/upca.pem -H "X-Api-Key: $SPACE_SECRET_PH" https://other.test:8443/unbound'
check_contains "a host with no binding is not intercepted: the guest verifies the server's own certificate" "ok" "$OUT" ||
        last_diag
check_contains "... and a placeholder sent there arrives as it is" "X-Api-Key: $PH" "$(last_headers /unbound)"
check_eq "... with no Authorization" "" "$(last_headers /unbound | grep -i '^authorization:')"

# ---- an untrusted server certificate
gx curl -sS --max-time 30 https://bad.test:8443/untrusted
check_contains "a bound host whose certificate the host does not trust is refused: the guest reads why" \
        "the certificate of bad.test is not trusted" "$OUT" || last_diag
check_eq "... and the server got no request" "" "$(last_headers /untrusted)"
run sc egress log --json "$SB"
check_contains "... and the audit log says upstream_certificate" "upstream_certificate" "$(cat "$OUT")"

# ---- keep-alive with a rotation between two requests, HTTP/2, a body
gx python3 -c '
import http.client, subprocess
c = http.client.HTTPSConnection("api.test", 8443, timeout=30)
for i in range(3):
    c.request("GET", "/keepalive/%d" % i)
    print(c.getresponse().read().decode().strip())
    if i == 0:
        open("/tmp/rotate-now", "w").close()
        import time
        for _ in range(600):
            import os
            if os.path.exists("/tmp/rotated"):
                break
            time.sleep(0.1)
' >"$TEST_TMP/ka.out" 2>&1 &
ka=$!
wait_for 60 sc exec "$SB" -- test -e /tmp/rotate-now || diag "the first kept-alive request did not happen"
check_rc "a new version of tok while the connection is open" 0 sh -c "echo '$VALUE2' | '$SPACECTL_BIN' secret set tok"
sc exec "$SB" -- touch /tmp/rotated
wait $ka
seen >"$TEST_TMP/ka.json"
check_eq "three requests on one kept-alive HTTPS connection" 1 \
        "$(json "$TEST_TMP/ka.json" 'len(set(r["client_port"] for r in d if r["path"].startswith("/keepalive")))')"
check_eq "... each with the value, the new version from the request after the rotation" \
        "Bearer $VALUE Bearer $VALUE2 Bearer $VALUE2" \
        "$(json "$TEST_TMP/ka.json" '" ".join(v for r in d if r["path"].startswith("/keepalive") for k, v in r["headers"] if k.lower() == "authorization")')"
gx curl -fsS --max-time 30 --http2 -o /dev/null -o /dev/null -w '%{http_version}\n' https://api.test:8443/h2 https://api.test:8443/h2b
check_eq "an HTTP/2 client is answered in HTTP/1.1 (ALPN)" "1.1 1.1" "$(tr '\n' ' ' <"$OUT" | sed 's/ $//')"
check_eq "... and each of its requests got the value" "Bearer $VALUE2 Bearer $VALUE2" \
        "$(seen | python3 -c 'import json,sys; print(" ".join(v for r in json.load(sys.stdin) if r["path"].startswith("/h2") for k, v in r["headers"] if k.lower() == "authorization"))')"
gx sh -c 'head -c 300000 /dev/zero | curl -fsS --max-time 60 -X POST --data-binary @- https://api.test:8443/post'
check_contains "a POST with a 300 KB body goes through" "ok" "$OUT"
check_contains "... with the value" "Authorization: Bearer $VALUE2" "$(last_headers /post)"

# ---- a forged Host inside the intercepted connection
gx curl -sS --max-time 30 -H 'Host: other.test:8443' https://api.test:8443/forged-host
check "a request naming another Host on the intercepted connection is refused" test "$RC" -ne 0
check_eq "... and never reaches a server" "" "$(last_headers /forged-host)"
run sc egress log --json "$SB"
check_contains "... the audit log says host_mismatch" "host_mismatch" "$(cat "$OUT")"

# ---- what a hostile guest tries on an intercepted connection
gx python3 -c '
import socket, ssl
s = ssl.create_default_context().wrap_socket(socket.create_connection(("api.test", 8443), timeout=30),
                                             server_hostname="api.test")
s.sendall(b"GET /smuggle HTTP/1.1\r\nHost: api.test:8443\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello")
try:
    print(repr(s.recv(100)))
except (ssl.SSLError, OSError) as e:
    print("closed", e)'
check_eq "a request whose framing two servers would read apart (two Content-Lengths) gets no answer" "" \
        "$(grep -F "ok" "$OUT")"
check_eq "... and never reaches the server" "" "$(last_headers /smuggle)"
gx sh -c 'curl -sS --max-time 30 -H "X-Big: $(head -c 20000 /dev/zero | tr "\0" a)" https://api.test:8443/big'
check "a request head over 16 KiB is refused" test "$RC" -ne 0
check_eq "... and never reaches the server" "" "$(last_headers /big)"
gx curl -sS --max-time 30 --cacert /tmp/upca.pem https://api.test:8443/distrust
check "a guest that trusts only the server's own CA cannot be fooled: its TLS to an intercepted host fails" \
        test "$RC" -ne 0
check_eq "... and nothing reaches the server" "" "$(last_headers /distrust)"
run sc egress log --json "$SB"
check_contains "the audit log says why each was refused" "Content-Length that is not one number" "$(cat "$OUT")" || diag_file "$OUT" 5
check_contains "... and that the guest's own handshake failed" "handshake failed" "$(cat "$OUT")"

# ---- the value is nowhere: first in the guest's memory, before any command here names it; a marker the guest
# keeps in RAM shows that the search finds what is there
MARK="mark-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
sc exec "$SB" -- sh -c "echo $MARK >/dev/shm/mark"
run sc checkpoint "$SB" --name mem
check_rc "a checkpoint of the sandbox" 0 test "$RC" -eq 0
mem=$(find "$SPACE_STATE_DIR/checkpoints" -name '*.mem' -type f 2>/dev/null | head -1)
check "the checkpoint has a memory file" test -n "$mem"
check "... which holds no value" sh -c "! grep -qaF -e '$VALUE' -e '$VALUE2' -e '$PHVAL' '$mem'"
check "... where the search finds the marker the guest keeps" grep -qaF "$MARK" "$mem"

gx sh -c "cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -c -e '$VALUE' -e '$VALUE2' -e '$PHVAL' || true"
check_eq "no process's environment holds a value" 0 "$(tr -d ' \n' <"$OUT")"
gx sh -c "grep -rlsF -e '$VALUE' -e '$VALUE2' -e '$PHVAL' / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev | head -5; true"
check_eq "no file in the guest holds a value" "" "$(cat "$OUT")"
run sc inspect --json "$SB"
check "inspect does not show a value" sh -c "! grep -qF -e '$VALUE' -e '$PHVAL' '$OUT'"
run sc egress log --json "$SB"
check_contains "the audit log names the secret used over HTTPS" "(HTTPS): secret tok added" "$(cat "$OUT")"
check "... never a value, nor does the daemon's log" sh -c "! grep -qF -e '$VALUE' -e '$VALUE2' -e '$PHVAL' '$OUT' '$TEST_TMP/spaced.log'"

done_testing
