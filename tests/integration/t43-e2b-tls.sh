#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# E2B's own two-variable set-up over TLS (issue 21): the TLS listener (e2b_tls_listen) serves the same API as the
# TCP one, under a certificate for DOMAIN and *.DOMAIN (space.localhost:PORT by default) signed by a local CA the
# daemon makes once in $state/tls (key 0600, kept across restarts; the server certificate is remade for a new
# domain). curl with --cacert reaches api.DOMAIN and 49983-ID.DOMAIN (envd) with verification on, a foreign
# name fails verification, plain HTTP and garbage on the TLS port are closed while the daemon serves on, and a
# WebSocket goes through the port proxy over TLS. `eval "$(spacectl e2b env)"` is the whole client set-up: the
# SDKs (Python e2b 2.21.1, JS e2b@2.20.1) work through E2B_DOMAIN and E2B_API_KEY alone, and t29's suites run
# so (SPACE_E2B_MODE=domain; SPACE_T43_SUITES=0 leaves them out). `--url` prints the plain listener's URLs. A
# symlink planted at the CA key's path, or a second daemon on the same TLS port, stops the daemon from starting.
# Traffic goes to loopback only.
. "$(dirname "$0")/lib.sh"

E2B_DIR=$TOP_SRCDIR/tests/e2b
SDK_DIR=${SPACE_E2B_SDK_DIR:-$TOP_BUILDDIR/tests/e2b/.sdk}

space_env_setup
TLS_PORT=$(free_port) || bail_out "cannot pick a free TCP port"
DOMAIN=space.localhost:$TLS_PORT
tcp_config "e2b_tls_listen = 127.0.0.1:$TLS_PORT"
TLS=$SPACE_STATE_DIR/tls
CA=$TLS/ca.pem

if ! getent ahosts api.space.localhost 2>/dev/null | grep -qE '^(127\.0\.0\.1|::1) '; then
        bail_out "api.space.localhost does not resolve to loopback: install libnss-myhostname and add myhostname" \
                "to the hosts line of /etc/nsswitch.conf (build-aux/install-deps.sh does both)"
fi
pass "api.space.localhost resolves to loopback (nss-myhostname)"

# ---- a symlink planted where the CA key goes is refused, and what it points at is left alone
mkdir -p -m 0700 "$SPACE_STATE_DIR" "$TLS"
echo precious >"$TEST_TMP/precious"
ln -s "$TEST_TMP/precious" "$TLS/ca.key"
run timeout -k 5 60 "$SPACED_BIN"
cp "$ERR" "$TEST_TMP/refused.err"
check "a symlink at \$state/tls/ca.key: spaced refuses to start" test "$RC" -ne 0 -a "$RC" -ne 124
check_contains "... and says why (a symlink, refused)" "a symlink: refused" "$TEST_TMP/refused.err"
check_eq "... the file it points at is untouched" precious "$(cat "$TEST_TMP/precious")"
check "... and stays a symlink" test -L "$TLS/ca.key"
rm -f "$TLS/ca.key"

# ---- first start: the CA and the server's certificate
start_daemon_tcp
DPID=$(daemon_pid)
wait_for 20 curl -s -o /dev/null --cacert "$CA" "https://api.$DOMAIN/v1/version" ||
        { diag_file "$TEST_TMP/spaced.log" 30; bail_out "the TLS listener does not answer"; }
check_eq "the CA key is 0600" 600 "$(stat -c %a "$TLS/ca.key" 2>&1)"
check_eq "the server key is 0600" 600 "$(stat -c %a "$TLS/server.key" 2>&1)"
check_contains "the daemon says it made a local CA" "made a local CA" "$TEST_TMP/spaced.log"
CA_SUM=$(sha256sum <"$CA" | cut -d' ' -f1)
CERT_SUM=$(sha256sum <"$TLS/server.pem" | cut -d' ' -f1)
check_match "the certificate names DOMAIN and *.DOMAIN" "DNS:space.localhost, DNS:\*\.space\.localhost" \
        "$(openssl x509 -in "$TLS/server.pem" -noout -ext subjectAltName 2>&1)"
check_rc "... and is signed by the CA" 0 openssl verify -CAfile "$CA" "$TLS/server.pem"
check_contains "the bundle (SSL_CERT_FILE) holds our CA" "$(sed -n 2p "$CA")" "$TLS/ca-bundle.pem"
if [ -s /etc/ssl/certs/ca-certificates.crt ]; then
        check_contains "... and the host's CAs" "$(sed -n 2p /etc/ssl/certs/ca-certificates.crt)" "$TLS/ca-bundle.pem"
fi

# /v1/info says where E2B's SDKs find the daemon
ureq GET /v1/info
cp "$OUT" "$TEST_TMP/info.json"
check_eq "/v1/info e2b.domain: space.localhost:PORT" "$DOMAIN" "$(json "$TEST_TMP/info.json" 'd["e2b"]["domain"]' 2>&1)"
check_eq "... e2b.tls_url" "https://127.0.0.1:$TLS_PORT" "$(json "$TEST_TMP/info.json" 'd["e2b"]["tls_url"]' 2>&1)"
check_eq "... e2b.api_url and sandbox_url: the plain listener" "$API_URL $API_URL" \
        "$(json "$TEST_TMP/info.json" 'd["e2b"]["api_url"] + " " + d["e2b"]["sandbox_url"]' 2>&1)"
check_eq "... e2b.ca_file and ca_bundle" "$CA $TLS/ca-bundle.pem" \
        "$(json "$TEST_TMP/info.json" 'd["e2b"]["ca_file"] + " " + d["e2b"]["ca_bundle"]' 2>&1)"

# ---- the same API over TLS, verified
API_KEY=$(mint_key t43) || bail_out "cannot mint an API key"
tls() { # tls METHOD URL [CURL-ARGS...]: a verified request with our CA; status in $STATUS, curl's exit in $RC
        local m=$1 u=$2
        shift 2
        STATUS=$(curl -sS -o "$OUT" -w '%{http_code}' --max-time 60 --cacert "$CA" -X "$m" "$@" "$u" 2>"$ERR")
        RC=$?
        [ -n "$STATUS" ] || STATUS=000
}
tls GET "https://api.$DOMAIN/v1/version"
check_status "https://api.DOMAIN/v1/version without a key: 401, as over TCP" 401 unauthorized
tls GET "https://api.$DOMAIN/v1/version" -H "Authorization: Bearer $API_KEY"
check_status "... with the key: 200, the certificate verified" 200
tls GET "https://127.0.0.1:$TLS_PORT/v1/version" -H "Authorization: Bearer $API_KEY"
check_eq "https://127.0.0.1:PORT: the certificate does not name the address (curl exit 60)" 60 "$RC"
STATUS=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 30 "https://api.$DOMAIN/v1/version" 2>"$ERR")
check_eq "without --cacert the system's CAs do not know ours (curl exit 60): verification is on" 60 "$?"
tls GET "https://evil.test:$TLS_PORT/v1/version" --resolve "evil.test:$TLS_PORT:127.0.0.1" \
        -H "Authorization: Bearer $API_KEY"
check_eq "a name outside the domain fails verification (curl exit 60)" 60 "$RC"
check_contains "... for the name" "evil.test" "$ERR"
tls GET "https://other.localhost:$TLS_PORT/v1/version" -H "Authorization: Bearer $API_KEY"
check_eq "... so does another .localhost name" 60 "$RC"
tls GET "https://x.evil.test:$TLS_PORT/v1/version" -k --resolve "x.evil.test:$TLS_PORT:127.0.0.1" \
        -H "Authorization: Bearer $API_KEY"
check_status "unverified, a foreign Host is refused as over TCP: 421" 421 invalid_host

# E2B's control plane at api.DOMAIN, envd at 49983-ID.DOMAIN
tls POST "https://api.$DOMAIN/sandboxes" -H "X-API-KEY: $API_KEY" -H 'Content-Type: application/json' \
        -d '{"templateID": "minimal", "timeout": 300}'
check_status "POST https://api.DOMAIN/sandboxes: 201" 201
SB=$(json "$OUT" 'd["sandboxID"]' 2>/dev/null)
TOKEN=$(json "$OUT" 'd["envdAccessToken"]' 2>/dev/null)
check_eq "... its domain is DOMAIN" "$DOMAIN" "$(json "$OUT" 'd["domain"]' 2>&1)"
track_sandbox "$SB"
tls GET "https://49983-$SB.$DOMAIN/health" -H "X-Access-Token: $TOKEN"
check_status "https://49983-ID.DOMAIN/health (envd), verified: 204" 204
tls POST "https://49983-$SB.$DOMAIN/process.Process/List" -H "X-Access-Token: $TOKEN" \
        -H 'Content-Type: application/json' -H 'Connect-Protocol-Version: 1' -d '{}'
check_status "... envd's Connect RPC (process.Process/List) over TLS: 200" 200
req POST /sandboxes -H "X-API-KEY: $API_KEY" -H 'Content-Type: application/json' -d '{"templateID": "minimal"}'
check_eq "over plain TCP, create answers the same domain (getHost names the TLS listener)" "$DOMAIN" \
        "$(json "$OUT" 'd["domain"]' 2>&1)"
SB2=$(json "$OUT" 'd["sandboxID"]' 2>/dev/null)
track_sandbox "$SB2"
req DELETE "/sandboxes/$SB2" -H "X-API-KEY: $API_KEY"

# ---- what is not TLS on the TLS port is closed, and the daemon serves on
# raw.py PORT KIND: connects, sends plain HTTP, a ClientHello of zeros, or 4 KiB of random bytes and
# then its end (a record may claim to be longer than what came: the server waits for the rest, up to its idle
# timeout, as for any slow client), and prints how the connection ended
cat >"$TEST_TMP/raw.py" <<'EOF'
import os, socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
kind = sys.argv[2]
data = {"http": b"GET /v1/version HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        "record": b"\x16\x03\x01\x00\x40" + b"\x01\x00\x00\x3c" + bytes(60),  # a ClientHello of version 0.0
        "random": os.urandom(4096)}[kind]
t = time.time()
try:
    s.sendall(data)
    if kind == "random":
        s.shutdown(socket.SHUT_WR)
    got = b""
    while True:
        d = s.recv(4096)
        if not d:
            break
        got += d
    print("closed", "http-answer" if got.startswith(b"HTTP/") else "no-http-answer", round(time.time() - t))
except socket.timeout:
    print("open after 20 s")
except (ConnectionResetError, BrokenPipeError, OSError):  # closed while we still sent
    print("closed", "reset", round(time.time() - t))
EOF
run python3 "$TEST_TMP/raw.py" "$TLS_PORT" http
check_match "plain HTTP to the TLS port: closed without an HTTP answer" '^closed (no-http-answer|reset) [0-9]+$' "$(cat "$OUT")"
run python3 "$TEST_TMP/raw.py" "$TLS_PORT" record
check_match "a ClientHello of garbage: closed at once" '^closed (no-http-answer|reset) [0-9]+$' "$(cat "$OUT")"
run python3 "$TEST_TMP/raw.py" "$TLS_PORT" random
check_match "4 KiB of random bytes, then the end: closed" '^closed (no-http-answer|reset) [0-9]+$' "$(cat "$OUT")"
for i in $(seq 20); do python3 "$TEST_TMP/raw.py" "$TLS_PORT" random >/dev/null 2>&1 & done
wait
check "... twenty more at once: the daemon still runs" pid_alive "$DPID"
tls GET "https://api.$DOMAIN/v1/version" -H "Authorization: Bearer $API_KEY"
check_status "... and serves TLS: 200" 200
req GET /v1/version -H "Authorization: Bearer $API_KEY"
check_status "... and plain TCP: 200" 200

# ---- a WebSocket through the port proxy over TLS (MHD carries the upgraded bytes through the TLS session)
printf '%s\n' '#!/bin/sh' 'while read -r h; do h=$(printf %s "$h" | tr -d "\r"); [ -z "$h" ] && break; done' \
        'printf "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"' \
        'exec cat' >"$TEST_TMP/up.sh"
sc exec -i "$SB" -- sh -c 'cat >/tmp/up.sh && chmod +x /tmp/up.sh' <"$TEST_TMP/up.sh" >/dev/null 2>&1
check_rc "an upgrading echo server (nc) on 8005 in the sandbox" 0 sc exec "$SB" -- sh -c '(nc -ll -p 8005 -e /tmp/up.sh &)'
cat >"$TEST_TMP/ws.py" <<'EOF'
import socket, ssl, sys, time
sb, key, port, domain, ca, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], int(sys.argv[6])
host = "8005-%s.%s" % (sb, domain)
s = socket.create_connection(("127.0.0.1", port), timeout=60)
s = ssl.create_default_context(cafile=ca).wrap_socket(s, server_hostname=host.split(":")[0])
s.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
           "\r\n" % (host, key)).encode())
buf = b""
while b"\r\n\r\n" not in buf:
    d = s.recv(4096)
    if not d:
        break
    buf += d
head, _, rest = buf.partition(b"\r\n\r\n")
print(head.split(b"\r\n")[0].decode())
msg = bytes(range(256)) * (size // 256)
s.sendall(msg)
got = bytearray(rest)
t = time.time()
while len(got) < len(msg) and time.time() - t < 60:
    d = s.recv(65536)
    if not d:
        break
    got += d
print("echoed" if bytes(got) == msg else "short %d of %d" % (len(got), len(msg)))
EOF
ws_ok() { sc exec "$SB" -- sh -c 'netstat -ltn 2>/dev/null | grep -q ":8005 "'; }
wait_for 10 ws_ok
run timeout -k 5 120 python3 "$TEST_TMP/ws.py" "$SB" "$API_KEY" "$TLS_PORT" "$DOMAIN" "$CA" 65536
check_eq "a WebSocket to 8005-ID.DOMAIN over TLS: 101, and 64 KiB echoed" "HTTP/1.1 101 Switching Protocols
echoed" "$(cat "$OUT")"

# ---- spacectl e2b env: the whole client set-up
run "$SPACECTL_BIN" e2b env
cp "$OUT" "$TEST_TMP/env.sh"
check_eq "spacectl e2b env exits 0" 0 "$RC"
check_match "... values are single-quoted" "^export E2B_DOMAIN='space\.localhost:$TLS_PORT'$" "$(cat "$TEST_TMP/env.sh")"
ENV_OUT=$(E2B_API_URL=http://stale.invalid E2B_SANDBOX_URL=x E2B_DEBUG=true bash -c '
        eval "$(cat "$1")"
        echo "domain=${E2B_DOMAIN:-}"
        echo "key=${E2B_API_KEY:-}"
        echo "ssl=${SSL_CERT_FILE:-}"
        echo "node=${NODE_EXTRA_CA_CERTS:-}"
        echo "curl=${CURL_CA_BUNDLE:-} requests=${REQUESTS_CA_BUNDLE:-}"
        echo "curl-status $(curl -s -o /dev/null -w "%{http_code}" -H "X-API-KEY: $E2B_API_KEY" "https://api.$E2B_DOMAIN/sandboxes")"
        echo "stale=${E2B_API_URL:-}${E2B_SANDBOX_URL:-}${E2B_DEBUG:-}"
        # the default context of Python reads SSL_CERT_FILE (curl keeps its own bundle)
        python3 -c "import os, urllib.request as u
r = u.Request(\"https://api.\" + os.environ[\"E2B_DOMAIN\"] + \"/sandboxes\", headers={\"X-API-KEY\": os.environ[\"E2B_API_KEY\"]})
print(\"status\", u.urlopen(r, timeout=30).status)"
        ' _ "$TEST_TMP/env.sh" 2>&1)
check_contains "eval'd: E2B_DOMAIN" "domain=$DOMAIN" "$ENV_OUT"
check "... E2B_API_KEY, a new key" grep -qxE 'key=e2b_[0-9a-f]+' <<<"$ENV_OUT"
check_contains "... SSL_CERT_FILE, the bundle" "ssl=$TLS/ca-bundle.pem" "$ENV_OUT"
check_contains "... NODE_EXTRA_CA_CERTS, the CA" "node=$CA" "$ENV_OUT"
check_contains "... CURL_CA_BUNDLE and REQUESTS_CA_BUNDLE, the bundle" \
        "curl=$TLS/ca-bundle.pem requests=$TLS/ca-bundle.pem" "$ENV_OUT"
check "... and curl, with no option, lists sandboxes at api.DOMAIN: 200" grep -qx 'curl-status 200' <<<"$ENV_OUT"
check "... E2B_API_URL, E2B_SANDBOX_URL and E2B_DEBUG unset" grep -qx 'stale=' <<<"$ENV_OUT"
check "... and Python, trusting SSL_CERT_FILE alone, lists sandboxes at api.DOMAIN: 200" grep -qx 'status 200' <<<"$ENV_OUT"

run "$SPACECTL_BIN" e2b env --url
cp "$OUT" "$TEST_TMP/env-url.sh"
check_eq "spacectl e2b env --url exits 0" 0 "$RC"
URL_OUT=$(E2B_DOMAIN=stale bash -c 'eval "$(cat "$1")"
        echo "api=$E2B_API_URL sandbox=$E2B_SANDBOX_URL domain=${E2B_DOMAIN:-}"
        curl -s -o /dev/null -w "%{http_code}" -H "X-API-KEY: $E2B_API_KEY" "$E2B_API_URL/sandboxes"' _ \
        "$TEST_TMP/env-url.sh" 2>&1)
check_contains "--url: E2B_API_URL and E2B_SANDBOX_URL are the plain listener, E2B_DOMAIN unset" \
        "api=$API_URL sandbox=$API_URL domain=" "$URL_OUT"
check_match "... and its key works there: 200" '200$' "$URL_OUT"

# ---- the SDKs with E2B_DOMAIN and E2B_API_KEY alone
run timeout -k 10 900 "$E2B_DIR/setup-sdks.sh" "$SDK_DIR" 2.21.1 2.20.1
check_eq "the E2B SDKs install" 0 "$RC" || { last_diag; bail_out "no SDKs"; }
PY_ENV=$(sed -n 1p "$OUT")
JS_ENV=$(sed -n 2p "$OUT")
cat >"$TEST_TMP/sdk.py" <<'EOF'
from e2b import Sandbox
s = Sandbox.create("minimal", timeout=300)
print("host", s.get_host(49999))
print("out", s.commands.run("echo py-over-tls", user="root").stdout.strip())
s.files.write("/tmp/f", "py-file")
print("file", s.files.read("/tmp/f"))
s.kill()
EOF
mkdir -p "$TEST_TMP/js"
ln -s "$JS_ENV/node_modules" "$TEST_TMP/js/node_modules"
cat >"$TEST_TMP/js/sdk.mjs" <<'EOF'
import { Sandbox } from 'e2b'
const s = await Sandbox.create('minimal', { timeoutMs: 300000 })
console.log('host', s.getHost(49999))
console.log('out', (await s.commands.run('echo js-over-tls', { user: 'root' })).stdout.trim())
await s.files.write('/tmp/f', 'js-file')
console.log('file', await s.files.read('/tmp/f'))
await s.kill()
EOF
SDK_OUT=$(env -u E2B_API_URL -u E2B_SANDBOX_URL -u E2B_DOMAIN -u E2B_API_KEY bash -c '
        eval "$(cat "$1")"
        timeout -k 5 300 "$2/bin/python" "$3/sdk.py" 2>&1
        cd "$3/js" && timeout -k 5 300 node sdk.mjs 2>&1' _ "$TEST_TMP/env.sh" "$PY_ENV" "$TEST_TMP" 2>&1)
check_contains "Python SDK by domain: a command runs" "out py-over-tls" "$SDK_OUT"
check_contains "... a file is written and read" "file py-file" "$SDK_OUT"
check_contains "... getHost names PORT-ID.DOMAIN" "host 49999-" "$SDK_OUT"
check_contains "JS SDK by domain: a command runs" "out js-over-tls" "$SDK_OUT"
check_contains "... a file is written and read" "file js-file" "$SDK_OUT"
grep -q "out js-over-tls" <<<"$SDK_OUT" || diag "$SDK_OUT"

# ---- a restart keeps the CA and the certificate; a new domain gets a new certificate from the same CA
kill -TERM "$DPID"
wait_for 20 pid_gone "$DPID" || bail_out "spaced did not exit on SIGTERM"
start_daemon_tcp
DPID=$(daemon_pid)
wait_for 20 curl -s -o /dev/null --cacert "$CA" "https://api.$DOMAIN/v1/version"
check_eq "after a restart: the same CA" "$CA_SUM" "$(sha256sum <"$CA" | cut -d' ' -f1)"
check_eq "... and the same certificate" "$CERT_SUM" "$(sha256sum <"$TLS/server.pem" | cut -d' ' -f1)"
check_eq "... no second 'made a local CA'" 1 "$(grep -c 'made a local CA' "$TEST_TMP/spaced.log")"
tls GET "https://api.$DOMAIN/v1/version" -H "Authorization: Bearer $API_KEY"
check_status "... the CA the clients have still verifies: 200" 200

kill -TERM "$DPID"
wait_for 20 pid_gone "$DPID" || bail_out "spaced did not exit on SIGTERM"
write_config "listen = 127.0.0.1:$API_PORT" "e2b_tls_listen = 127.0.0.1:$TLS_PORT" "e2b_domain = other.localhost:$TLS_PORT"
start_daemon_tcp
DPID=$(daemon_pid)
wait_for 20 curl -s -o /dev/null --cacert "$CA" "https://api.other.localhost:$TLS_PORT/v1/version"
check_eq "e2b_domain = other.localhost:PORT: the same CA" "$CA_SUM" "$(sha256sum <"$CA" | cut -d' ' -f1)"
check "... a new certificate" test "$CERT_SUM" != "$(sha256sum <"$TLS/server.pem" | cut -d' ' -f1)"
tls GET "https://api.other.localhost:$TLS_PORT/v1/version" -H "Authorization: Bearer $API_KEY"
check_status "... which verifies for api.other.localhost: 200" 200
tls GET "https://api.$DOMAIN/v1/version" -H "Authorization: Bearer $API_KEY"
check_eq "... and no longer for space.localhost (curl exit 60)" 60 "$RC"

# ---- the TLS port taken: a second daemon refuses to start, as for 'listen'
mkdir -m 0700 -p "$TEST_TMP/st2" "$TEST_TMP/run2"
printf 'listen = off\ne2b_tls_listen = 127.0.0.1:%s\n' "$TLS_PORT" >"$TEST_TMP/c2.conf"
run env SPACE_STATE_DIR="$TEST_TMP/st2" SPACE_RUNTIME_DIR="$TEST_TMP/run2" SPACE_SOCKET="$TEST_TMP/run2/api.sock" \
        SPACE_CONFIG="$TEST_TMP/c2.conf" timeout -k 5 60 "$SPACED_BIN"
cp "$ERR" "$TEST_TMP/clash.err"
check "a second daemon on the same TLS port refuses to start" test "$RC" -ne 0 -a "$RC" -ne 124
check_contains "... saying the port is taken" "taken by another process" "$TEST_TMP/clash.err"
check "... and the first one serves on" pid_alive "$DPID"

# ---- no sandbox reaches the TLS listener
run sc egress test "$SB" "127.0.0.1:$TLS_PORT"
check_contains "egress test: the TLS port is the daemon's own, never reachable from a sandbox" "daemon's own" \
        "$(cat "$OUT" "$ERR")"

# ---- t29's suites through E2B_DOMAIN and E2B_API_KEY alone (the JS suite too)
if [ "${SPACE_T43_SUITES:-1}" = 1 ]; then
        SPACE_E2B_MODE=domain SPACE_TEST_KEEP= timeout -k 10 "${SPACE_T43_SUITES_TIMEOUT:-3600}" \
                bash "$(dirname "$0")/t29-e2b.sh" >"$TEST_TMP/t29.tap" 2>"$TEST_TMP/t29.err"
        grep -q '^ok ' "$TEST_TMP/t29.tap" || { diag_file "$TEST_TMP/t29.err" 20; diag_file "$TEST_TMP/t29.tap" 20; }
        while IFS= read -r line; do
                case $line in
                "ok "*" # SKIP"*) skip "t29 by domain: ${line#ok * - }" "skipped there" ;;
                "ok "*) pass "t29 by domain: ${line#ok * - }" ;;
                "not ok "*) # with t29's own diagnostics of it, which the summary of a failed run shows
                        fail "t29 by domain: ${line#not ok * - }" "$(awk -v l="$line" 'f && /^#/ { print; if (++n >= 20) exit; next }
                                f { exit } $0 == l { f = 1 }' "$TEST_TMP/t29.tap" | sed 's/^# \{0,1\}//')" ;;
                "Bail out!"*) fail "t29 by domain bailed out" "$line" ;;
                esac
        done <"$TEST_TMP/t29.tap"
        grep -q '^not ok\|^Bail out' "$TEST_TMP/t29.tap" && diag_file "$TEST_TMP/t29.tap" 60
        check "t29 by domain ran its Python and JS suites" sh -c "grep -q '^ok [0-9]* - py ' '$TEST_TMP/t29.tap' &&
                grep -q '^ok [0-9]* - js ' '$TEST_TMP/t29.tap'"
fi

done_testing
