#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Inbound ports (issue 11): `spacectl port` forwards 127.0.0.1:HOST_PORT (given, or a free one) to a port in the
# sandbox, in the foreground until interrupted or detached (-d) until `port rm`; `port ls` lists them. The API's
# proxy reaches the same server at /v1/sandboxes/ID/ports/PORT/PATH (with the API key over TCP) and under the
# E2B host name PORT-ID.DOMAIN. A connection wakes a suspended or paused sandbox; a forward goes with its
# sandbox. Detached forwards outlive the daemon (kill -9) on their ports and with their ids, held ones do not;
# one whose port was taken meanwhile, or whose sandbox a restart removed, is dropped with a warning. Bad input:
# port 0 and 70000, a host port in use, an unknown sandbox, dot segments in the proxied path, huge headers, a
# port nothing listens on (502, a reset connection). WebSockets go through the proxy (a bash echo
# server in the guest, a hand-written client here); a server that floods after its 101 is held back by the
# tunnel's credit, one that never answers the handshake gets the client a 504, and neither stalls the daemon.
. "$(dirname "$0")/lib.sh"

space_env_setup
tcp_config "e2b_domain = sbx.test"
start_daemon_tcp
API_KEY=$(mint_key t33) || bail_out "cannot mint an API key"
DPID=$(daemon_pid)

create_sandbox SB --name t33
[ -n "$SB" ] || { last_diag; bail_out "create failed"; }
pass "create a sandbox"

# ---- a web server in the guest: python3 when the template has it, else busybox httpd
sc exec "$SB" -- sh -c 'mkdir -p /tmp/www && echo hello-from-guest >/tmp/www/index.html' >/dev/null 2>&1
if sc exec "$SB" -- sh -c 'command -v python3' >/dev/null 2>&1; then
        SERVER="cd /tmp/www && nohup python3 -m http.server --bind 127.0.0.1 8000 >/dev/null 2>&1 &"
else
        SERVER="busybox httpd -p 127.0.0.1:8000 -h /tmp/www >/dev/null 2>&1"
fi
check_rc "start a web server on 127.0.0.1:8000 in the guest" 0 sc exec "$SB" -- sh -c "$SERVER"
guest_serves() {
        # not through the egress proxy the guest's environment may name
        sc exec "$SB" -- sh -c 'http_proxy= HTTP_PROXY= wget -q -O- http://127.0.0.1:8000/index.html' 2>/dev/null |
                grep -q hello-from-guest
}
wait_for 30 guest_serves || bail_out "the guest's web server does not answer inside the guest"
pass "... it answers inside the guest"

# fetch URL: the body on stdout, exit 0 on 2xx
fetch() {
        curl -sS -f --max-time 30 "$@"
}

# ---- bad input
check_rc "port SB 0: usage error (2)" 2 sc port "$SB" 0
check_contains "... naming GUEST_PORT" "GUEST_PORT" "$ERR"
check_rc "port SB 70000: usage error" 2 sc port "$SB" 70000
check_rc "port SB 8000 0: usage error" 2 sc port -d "$SB" 8000 0
check_contains "... naming HOST_PORT" "HOST_PORT" "$ERR"
check_rc "port nosuch 8000: exit 1" 1 sc port -d nosuch 8000
check_contains "... naming the sandbox" "no sandbox 'nosuch'" "$ERR"
check_rc "port SB 8000 API_PORT (the daemon's own, in use): exit 1" 1 sc port -d "$SB" 8000 "$API_PORT"
check_contains "... saying the port is in use" "$API_PORT on 127.0.0.1 is in use" "$ERR"
check_rc "a foreground port with a host port in use: exit 1 too" 1 sc port "$SB" 8000 "$API_PORT"
check_contains "... saying so" "is in use" "$ERR"
ureq POST "/v1/sandboxes/$SB/ports" -H 'Content-Type: application/json' -d '{"guest_port": 0}'
check_status "API: guest_port 0 is 400 invalid_argument" 400 invalid_argument
check_contains "... naming guest_port" "guest_port" "$OUT"
ureq POST "/v1/sandboxes/$SB/ports" -H 'Content-Type: application/json' -d '{"guest_port": 70000}'
check_status "API: guest_port 70000 is 400" 400 invalid_argument
ureq POST "/v1/sandboxes/$SB/ports" -H 'Content-Type: application/json' -d '{"guest_port": 8000, "host_port": 0}'
check_status "API: host_port 0 is 400" 400 invalid_argument
ureq POST "/v1/sandboxes/$SB/ports" -H 'Content-Type: application/json' -d '{}'
check_status "API: no guest_port is 400" 400 invalid_argument
ureq POST "/v1/sandboxes/$SB/ports" -H 'Content-Type: application/json' -d "{\"guest_port\": 8000, \"host_port\": $API_PORT}"
check_status "API: a host port in use is 409 port_in_use" 409 port_in_use
ureq POST /v1/sandboxes/nosuch/ports -H 'Content-Type: application/json' -d '{"guest_port": 8000}'
check_status "API: an unknown sandbox is 404" 404 sandbox_not_found
ureq DELETE "/v1/sandboxes/$SB/ports/12345"
check_status "API: removing a forward that is not there is 404 forward_not_found" 404 forward_not_found
req POST "/v1/sandboxes/$SB/ports" -H 'Content-Type: application/json' -d '{"guest_port": 8000}'
check_status "API over TCP without a key: 401" 401

# ---- a detached forward on a free port
check_rc "port -d SB 8000 exits 0" 0 sc port -d "$SB" 8000
ADDR=$(head -n1 "$OUT")
check_match "... printing the address" '^127\.0\.0\.1:[0-9]+$' "$ADDR"
check_contains "... and how to remove it" "spacectl port rm $SB" "$ERR"
run fetch "http://$ADDR/index.html"
check_eq "curl through the forward reaches the guest's server" hello-from-guest "$(cat "$OUT")"
check_rc "port ls exits 0" 0 sc port ls
check_match "... has a header" '^ID +SANDBOX +ADDRESS +GUEST PORT' "$(head -n1 "$OUT")"
check_contains "... lists the forward" "$ADDR" "$OUT"
check_match "... under its sandbox's name" "^fw-[0-9a-f]+ +t33 +$ADDR " "$(grep -F "$ADDR" "$OUT")"
check_rc "port ls SB --json" 0 sc port ls "$SB" --json
check_eq "... one forward to 8000 of t33, detached, one connection made" '[8000, "t33", false, 1]' \
        "$(json "$OUT" '[d["forwards"][0][k] for k in ("guest_port", "sandbox_name", "held", "connections")]')"
FW1=$(json "$OUT" 'd["forwards"][0]["id"]')

# ---- a given host port; taken twice
P=$(free_port)
check_rc "port -d SB 8000 $P" 0 sc port -d "$SB" 8000 "$P"
check_eq "... listens on that port" "127.0.0.1:$P" "$(head -n1 "$OUT")"
run fetch "http://127.0.0.1:$P/index.html"
check_eq "... and forwards" hello-from-guest "$(cat "$OUT")"
check_rc "the same host port again: exit 1" 1 sc port -d "$SB" 8000 "$P"
check_contains "... in use" "$P on 127.0.0.1 is in use" "$ERR"
check_rc "port rm SB $P" 0 sc port rm "$SB" "$P"
check_rc "... its port no longer accepts connections" 7 curl -s -o /dev/null --max-time 10 "http://127.0.0.1:$P/"
check_rc "port rm SB $P again: exit 1" 1 sc port rm "$SB" "$P"
check_contains "... no such forward" "no port forward '$P'" "$ERR"

# ---- --json: the forward as the daemon gives it, and nothing else on stdout
P4=$(free_port)
check_rc "port -d --json SB 8000 $P4" 0 sc port -d --json "$SB" 8000 "$P4"
check_eq "... prints one JSON document: the sandbox, the ports, the address" \
        "[\"$SB\", 8000, $P4, \"127.0.0.1:$P4\"]" \
        "$(json "$OUT" '[d[k] for k in ("sandbox_id", "guest_port", "host_port", "address")]')"
FW4=$(json "$OUT" 'd["id"]')
sc port ls "$SB" --json >"$TEST_TMP/ls4.json" 2>/dev/null
check_eq "... whose id port ls --json lists" 1 "$(json "$TEST_TMP/ls4.json" 'len([f for f in d["forwards"] if f["id"] == "'"$FW4"'"])')"
check_rc "port rm SB FW4" 0 sc port rm "$SB" "$FW4"

# ---- in the foreground until interrupted
P2=$(free_port)
spacectl port "$SB" 8000 "$P2" >"$TEST_TMP/fg.out" 2>"$TEST_TMP/fg.err" &
FG=$!
track_pid "$FG"
fg_listening() { grep -q "127.0.0.1:$P2" "$TEST_TMP/fg.out"; }
if wait_for 30 fg_listening; then pass "port SB 8000 $P2 (foreground) prints its address"
else fail "port SB 8000 $P2 (foreground) prints its address" "$(cat "$TEST_TMP/fg.err")"; fi
run fetch "http://127.0.0.1:$P2/index.html"
check_eq "... and forwards while it runs" hello-from-guest "$(cat "$OUT")"
check_rc "port ls shows it" 0 sc port ls "$SB" --json
check_eq "... held (foreground)" true "$(json "$OUT" '[f["held"] for f in d["forwards"] if f["host_port"] == '"$P2"'][0]')"
kill -INT "$FG"
wait "$FG"
check_eq "SIGINT ends it with exit 0" 0 "$?"
check_rc "... and removes the forward" 7 curl -s -o /dev/null --max-time 10 "http://127.0.0.1:$P2/"
sc port ls "$SB" --json >"$OUT" 2>/dev/null
check_eq "... port ls no longer has it" 0 "$(json "$OUT" 'len([f for f in d["forwards"] if f["host_port"] == '"$P2"'])')"

# a foreground client killed outright: the daemon sees its connection gone and drops the forward
P3=$(free_port)
spacectl port "$SB" 8000 "$P3" >"$TEST_TMP/fg3.out" 2>"$TEST_TMP/fg3.err" &
FG3=$!
track_pid "$FG3"
fg3_listening() { grep -q "127.0.0.1:$P3" "$TEST_TMP/fg3.out"; }
wait_for 30 fg3_listening || fail "a second foreground forward starts" "$(cat "$TEST_TMP/fg3.err")"
kill -KILL "$FG3"
wait "$FG3" 2>/dev/null
p3_closed() { ! curl -s -o /dev/null --max-time 5 "http://127.0.0.1:$P3/"; }
if wait_for 40 p3_closed; then pass "a foreground forward whose client was killed (-9) goes away"
else fail "a foreground forward whose client was killed (-9) goes away" "127.0.0.1:$P3 still answers"; fi

# ---- a port nothing listens on
check_rc "port -d SB 8001 (nothing listens there)" 0 sc port -d "$SB" 8001
ADDR_REFUSED=$(head -n1 "$OUT")
t0=$(now_ms)
run curl -sS -o /dev/null --max-time 20 "http://$ADDR_REFUSED/"
check_rc "... a connection to it fails (reset or closed), not a hang" 0 test "$RC" -ne 0 -a "$RC" -ne 28
check_rc "... at once" 0 test $(($(now_ms) - t0)) -lt 15000

# ---- the HTTP proxy: /v1/sandboxes/ID/ports/PORT/PATH
kreq GET "/v1/sandboxes/$SB/ports/8000/index.html"
check_status "GET .../ports/8000/index.html over TCP with the key: 200" 200
check_eq "... the guest's page" hello-from-guest "$(cat "$OUT")"
kreq GET "/v1/sandboxes/t33/ports/8000/index.html?a=1&b=two%20words"
check_status "... by name, with a query: 200" 200
req GET "/v1/sandboxes/$SB/ports/8000/index.html"
check_status "... without a key: 401" 401
ureq GET "/v1/sandboxes/$SB/ports/8000/index.html"
check_status "... over the unix socket: 200" 200
kreq HEAD "/v1/sandboxes/$SB/ports/8000/index.html" -I
check_status "HEAD: 200" 200
kreq GET "/v1/sandboxes/$SB/ports/8000/nosuch.html"
check_status "a page the server does not have: its own 404 comes through" 404
kreq GET "/v1/sandboxes/$SB/ports/8001/"
check_status "a port nothing listens on: 502 port_unreachable" 502 port_unreachable
check_contains "... naming the port" "port 8001" "$OUT"
kreq GET "/v1/sandboxes/$SB/ports/0/"
check_status "port 0: 400" 400 invalid_argument
kreq GET "/v1/sandboxes/$SB/ports/70000/"
check_status "port 70000: 400" 400 invalid_argument
kreq GET "/v1/sandboxes/nosuch/ports/8000/"
check_status "an unknown sandbox: 404" 404 sandbox_not_found
kreq GET "/v1/sandboxes/$SB/ports/8000/../../../../v1/keys" --path-as-is
check_status "'..' in the proxied path: 400 invalid_path" 400 invalid_path
kreq GET "/v1/sandboxes/$SB/ports/8000/a/%2e%2e/%2E%2E/etc/passwd" --path-as-is
check_status "... also percent-encoded" 400 invalid_path
kreq GET "/v1/sandboxes/$SB/ports/8000/index.html%0d%0aX-Injected:%20yes"
check_rc "CR LF in the path does not split the request line (no 2xx, the daemon answers)" 0 \
        test "$STATUS" != 000 -a "${STATUS:0:1}" != 2
kreq GET "/v1/sandboxes/$SB/ports/8000/index.html" -H 'Connection: Upgrade' -H 'Upgrade: websocket'
check_status "an upgrade the server does not take: its plain answer comes back (200)" 200
check_eq "... with its body" hello-from-guest "$(cat "$OUT")"
kreq GET "/v1/sandboxes/$SB/ports/8000/index.html" -H 'Connection: Upgrade' -H "Upgrade: $(printf 'w%.0s' $(seq 300))"
check_status "an Upgrade over 256 bytes: 400" 400 invalid_argument
BIG=$(head -c 300000 /dev/zero | tr '\0' a)
kreq GET "/v1/sandboxes/$SB/ports/8000/index.html" -H "X-Big: $BIG"
check_rc "a 300 KB header is refused (no 2xx)" 0 test "${STATUS:0:1}" != 2
kreq GET "/v1/sandboxes/$SB/ports/8000/index.html"
check_status "... and the daemon still serves" 200

# ---- what goes through: a server that echoes the request, one that answers chunked, one that answers garbage
cat >"$TEST_TMP/echo.sh" <<'SCRIPT'
#!/bin/sh
# answers with the request line, the header names and the body it got
cr=$(printf '\r')
read -r line
line=${line%"$cr"}
len=0
names=
while read -r h; do
        h=${h%"$cr"}
        [ -z "$h" ] && break
        names="$names ${h%%:*}"
        case "$h" in [Cc]ontent-[Ll]ength:*) len=${h#*: } ;; esac
done
body=$(head -c "$len")
out="$line|$names|$body"
printf 'HTTP/1.1 201 Created\r\nContent-Length: %s\r\nX-Echo: yes\r\nConnection: keep-alive\r\n\r\n%s' "${#out}" "$out"
SCRIPT
cat >"$TEST_TMP/chunked.sh" <<'SCRIPT'
#!/bin/sh
printf 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n7;ext=1\r\n-chunks\r\n0\r\nX-Trailer: t\r\n\r\n'
sleep 1
SCRIPT
cat >"$TEST_TMP/garbage.sh" <<'SCRIPT'
#!/bin/sh
printf 'SSH-2.0-not-http\r\n\r\n'
sleep 1
SCRIPT
for s in echo chunked garbage; do
        sc exec -i "$SB" -- sh -c "cat >/tmp/$s.sh && chmod +x /tmp/$s.sh" <"$TEST_TMP/$s.sh" >/dev/null 2>&1
done
check_rc "start three small servers (busybox nc) on 8002, 8003, 8004" 0 sc exec "$SB" -- sh -c \
        '(nc -ll -p 8002 -e /tmp/echo.sh &); (nc -ll -p 8003 -e /tmp/chunked.sh &); (nc -ll -p 8004 -e /tmp/garbage.sh &)'
sleep 1
kreq POST "/v1/sandboxes/$SB/ports/8002/a%20b/c?x=1&y=two%20words" -H 'Content-Type: text/plain' \
        -H 'X-Custom: kept' -H 'Keep-Alive: timeout=5' --data-binary 'the body'
check_status "POST through the proxy: the server's own status (201)" 201
check_match "... the method, the path and the query are passed on, re-encoded" \
        '^POST /a%20b/c\?x=1&y=two%20words HTTP/1.1\|' "$(cat "$OUT")"
check_match "... and the body" '\|the body$' "$(cat "$OUT")"
check_contains "... and the client's own headers" "X-Custom" "$OUT"
check_rc "... but not the API key's header, nor hop-by-hop ones" 1 grep -qiE ' (Authorization|Keep-Alive)( |\|)' "$OUT"
kreq GET "/v1/sandboxes/$SB/ports/8003/"
check_status "a chunked answer: 200" 200
check_eq "... decoded, its trailer dropped" hello-chunks "$(cat "$OUT")"
kreq GET "/v1/sandboxes/$SB/ports/8004/"
check_status "an answer that is not HTTP: 502 bad_gateway" 502 bad_gateway
sc exec "$SB" -- sh -c 'head -c 3000000 /dev/urandom >/tmp/www/big.bin' >/dev/null 2>&1
GUEST_SUM=$(sc exec "$SB" -- md5sum /tmp/www/big.bin 2>/dev/null | cut -d' ' -f1)
kreq GET "/v1/sandboxes/$SB/ports/8000/big.bin"
check_eq "3 MB through the proxy arrive whole" "$GUEST_SUM" "$(md5sum <"$OUT" | cut -d' ' -f1)"
check_eq "... and through the forward" "$GUEST_SUM" "$(curl -s --max-time 60 "http://$ADDR/big.bin" | md5sum | cut -d' ' -f1)"

# ---- E2B's host form: PORT-ID.DOMAIN
kreq GET /index.html -H "Host: 8000-$SB.sbx.test:$API_PORT"
check_status "Host 8000-ID.sbx.test with the key: 200" 200
check_eq "... the guest's page" hello-from-guest "$(cat "$OUT")"
req GET /index.html -H "Host: 8000-$SB.sbx.test:$API_PORT"
check_status "... without a key or the sandbox's token: 401" 401
req GET /index.html -H "Host: 8000-$SB.sbx.test:$API_PORT" -H "E2b-Traffic-Access-Token: $(printf 'f%.0s' $(seq 32))"
check_status "... with a traffic token that is not its own: 404" 404
kreq GET / -H "Host: 8001-$SB.sbx.test:$API_PORT"
check_status "Host 8001-ID.sbx.test (nothing there): 502" 502 port_unreachable

# ---- WebSockets through the proxy
# The guest's servers (busybox nc -e, bash): an echo server that does the handshake and unmasks frames, one that
# answers 101 and then floods (counting the 64 KiB blocks it got out), one that never answers.
cat >"$TEST_TMP/ws-echo.sh" <<'SCRIPT'
#!/bin/bash
# A WebSocket echo server on stdin and stdout: the handshake, with the names of the headers it got in X-Seen;
# then each frame (payloads under 64 KiB) comes back unmasked; a close frame is answered and ends it.
cr=$'\r'
key=
seen=
read -r line || exit 0
while read -r h; do
        h=${h%"$cr"}
        [ -z "$h" ] && break
        seen="$seen ${h%%:*}"
        case "${h,,}" in sec-websocket-key:*) key=${h#*:} && key=${key# } ;; esac
done
hex=$(printf '%s' "${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11" | sha1sum | cut -d' ' -f1)
accept=$(printf '%s' "$hex" | xxd -r -p | base64)
printf 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\nX-Seen:%s\r\n\r\n' \
        "$accept" "$seen"
bytes() { dd bs=1 count="$1" 2>/dev/null | od -An -v -tu1; }
while :; do
        set -- $(bytes 2)
        [ $# -eq 2 ] || exit 0
        b0=$1
        len=$(($2 & 127))
        if [ "$len" -eq 126 ]; then
                set -- $(bytes 2)
                len=$(($1 * 256 + $2))
        fi
        mask=($(bytes 4))
        data=($(bytes "$len"))
        out=
        for ((i = 0; i < len; i++)); do
                printf -v x '\\x%02x' $((data[i] ^ mask[i % 4]))
                out+=$x
        done
        if [ "$len" -lt 126 ]; then
                printf -v hdr '\\x%02x\\x%02x' "$b0" "$len"
        else
                printf -v hdr '\\x%02x\\x7e\\x%02x\\x%02x' "$b0" $((len >> 8)) $((len & 255))
        fi
        printf "$hdr$out"
        [ $((b0 & 15)) -eq 8 ] && exit 0
done
SCRIPT
cat >"$TEST_TMP/ws-flood.sh" <<'SCRIPT'
#!/bin/bash
# 101 to anything, then zeros as fast as the connection takes them
while read -r h; do
        h=${h%$'\r'}
        [ -z "$h" ] && break
done
printf 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n'
i=0
while head -c 65536 /dev/zero; do
        i=$((i + 1))
        echo "$i" >/tmp/flood.count
done
echo done >/tmp/flood.done
SCRIPT
printf '#!/bin/sh\nexec sleep 120\n' >"$TEST_TMP/ws-mute.sh"
for s in ws-echo ws-flood ws-mute; do
        sc exec -i "$SB" -- sh -c "cat >/tmp/$s.sh && chmod +x /tmp/$s.sh" <"$TEST_TMP/$s.sh" >/dev/null 2>&1
done
check_rc "start a WebSocket echo server, a flooder and a mute server (nc) on 8005, 8006, 8007" 0 sc exec "$SB" -- \
        sh -c '(nc -ll -p 8005 -e /tmp/ws-echo.sh &); (nc -ll -p 8006 -e /tmp/ws-flood.sh &); (nc -ll -p 8007 -e /tmp/ws-mute.sh &)'
sleep 1

# The client: the handshake, the frames (masked) and their reading, by hand.
cat >"$TEST_TMP/ws-client.py" <<'SCRIPT'
#!/usr/bin/env python3
# ws-client.py MODE PORT PATH KEY [HOST]: a WebSocket client written out by hand (stdlib only).
#   echo   the handshake with one frame sent along; then a text frame, a 200-byte binary frame and a close
#   hold   the handshake; reads nothing for HOLD seconds (env), then READ bytes (env), then closes
#   hang   the handshake; prints the status of whatever comes back, and how long it took
#   wait   the handshake; then reads until the connection ends
import base64, hashlib, os, socket, struct, sys, time

mode, port, path, key = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
host = sys.argv[5] if len(sys.argv) > 5 else "127.0.0.1:%d" % port
sock = socket.create_connection(("127.0.0.1", port), timeout=90)
wskey = base64.b64encode(os.urandom(16)).decode()
head = ("GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
        "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nOrigin: http://test\r\n\r\n" % (path, host, key, wskey))
buf = b""


def fill():
    global buf
    d = sock.recv(65536)
    if not d:
        raise EOFError
    buf += d


def take(n):
    global buf
    while len(buf) < n:
        fill()
    out, buf = buf[:n], buf[n:]
    return out


def read_head():
    global buf
    while b"\r\n\r\n" not in buf:
        fill()
    h, buf = buf.split(b"\r\n\r\n", 1)
    lines = h.decode("latin-1").split("\r\n")
    return lines[0], {l.split(":", 1)[0].strip().lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}


def frame(opcode, payload):
    mask = os.urandom(4)
    n = len(payload)
    hdr = bytes([0x80 | opcode]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack(">H", n))
    return hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def read_frame():
    b0, b1 = take(2)
    if b1 & 0x80:
        raise ValueError("a masked frame from the server")
    n = b1 & 127
    if n == 126:
        n = struct.unpack(">H", take(2))[0]
    elif n == 127:
        n = struct.unpack(">Q", take(8))[0]
    return b0 & 15, take(n)


t0 = time.time()
sock.sendall(head.encode() + (frame(1, b"sent-with-the-handshake") if mode == "echo" else b""))
try:
    status, headers = read_head()
except (EOFError, OSError) as e:
    print("status=none (%r) after=%d" % (e, time.time() - t0))
    sys.exit(0)
code = status.split(" ")[1]
print("status=" + code)
print("after=%d" % (time.time() - t0))
if mode == "hang" or code != "101":
    sys.exit(0)
want = base64.b64encode(hashlib.sha1((wskey + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
print("accept=" + ("ok" if headers.get("sec-websocket-accept") == want else "bad"))
print("upgrade=" + headers.get("upgrade", ""))
print("connection=" + headers.get("connection", ""))
print("seen=" + headers.get("x-seen", ""))
if mode == "echo":
    op, data = read_frame()
    print("early=%d:%s" % (op, data.decode()))
    sock.sendall(frame(1, b"hello-ws"))
    op, data = read_frame()
    print("text=%d:%s" % (op, data.decode()))
    blob = bytes(range(200))
    sock.sendall(frame(2, blob))
    op, data = read_frame()
    print("binary=%d:%s" % (op, "same" if data == blob else "differs"))
    sock.sendall(frame(8, struct.pack(">H", 1000)))
    op, data = read_frame()
    print("close=%d:%d" % (op, struct.unpack(">H", data)[0] if len(data) == 2 else -1))
    try:
        sock.settimeout(30)
        print("eof=" + ("yes" if sock.recv(1) == b"" else "no"))
    except OSError as e:
        print("eof=%r" % e)
elif mode == "wait":
    sock.settimeout(60)
    try:
        while sock.recv(65536):
            pass
        print("eof=yes")
    except OSError as e:
        print("eof=%r" % e)
elif mode == "hold":
    time.sleep(float(os.environ.get("HOLD", "5")))
    want_bytes, got = int(os.environ.get("READ", "0")), len(buf)
    while got < want_bytes:
        d = sock.recv(65536)
        if not d:
            break
        got += len(d)
    print("read=%d" % min(got, want_bytes))
    sock.close()
SCRIPT
# ws MODE PORT PATH KEY [HOST]: the client's answers in $WS_OUT (check_rc would overwrite $OUT)
WS_OUT=$TEST_TMP/ws.out
ws() {
        timeout 120 python3 "$TEST_TMP/ws-client.py" "$@" >"$WS_OUT" 2>"$TEST_TMP/ws.err"
}
wsval() {
        sed -n "s/^$1=//p" "$WS_OUT" | head -n1
}

# a server that never answers the handshake: the client gets 504 after 30 s; meanwhile everything else goes on
timeout 120 python3 "$TEST_TMP/ws-client.py" hang "$API_PORT" "/v1/sandboxes/$SB/ports/8007/" "$API_KEY" \
        >"$TEST_TMP/ws-hang.out" 2>&1 &
WS_HANG=$!
track_pid "$WS_HANG"

ws echo "$API_PORT" "/v1/sandboxes/$SB/ports/8005/chat?room=1" "$API_KEY"
check_eq "WebSocket through /v1/sandboxes/ID/ports/8005/: 101" 101 "$(wsval status)"
check_eq "... Sec-WebSocket-Accept is right for the client's key" ok "$(wsval accept)"
check_eq "... Upgrade: websocket" websocket "$(wsval upgrade)"
check_match "... Connection: Upgrade" '^[Uu]pgrade$' "$(wsval connection)"
for h in Connection Upgrade Sec-WebSocket-Key Sec-WebSocket-Version Origin; do
        check_match "... the server got the client's $h" " $h( |\$)" "$(wsval seen)"
done
check_rc "... but not the API key's header" 1 grep -qi 'Authorization' <<<"$(wsval seen)"
check_eq "... a frame sent along with the handshake is echoed" "1:sent-with-the-handshake" "$(wsval early)"
check_eq "... a text frame is echoed" "1:hello-ws" "$(wsval text)"
check_eq "... a 200-byte binary frame too" "2:same" "$(wsval binary)"
check_eq "... a close frame is answered" "8:1000" "$(wsval close)"
check_eq "... and the server's end reaches the client" yes "$(wsval eof)"
[ "$(wsval eof)" = yes ] || diag_file "$TEST_TMP/ws.err"
ws echo "$API_PORT" / "$API_KEY" "8005-$SB.sbx.test:$API_PORT"
check_eq "E2B's host form 8005-ID.sbx.test: the same echo" "101 1:hello-ws" "$(wsval status) $(wsval text)"
kreq GET "/v1/sandboxes/$SB/ports/8001/" -H 'Connection: Upgrade' -H 'Upgrade: websocket' \
        -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' -H 'Sec-WebSocket-Version: 13'
check_status "an upgrade to a port nothing listens on: 502" 502 port_unreachable
req GET "/v1/sandboxes/$SB/ports/8005/" -H 'Connection: Upgrade' -H 'Upgrade: websocket' \
        -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' -H 'Sec-WebSocket-Version: 13'
check_status "... without a key: 401" 401

# a flood after the 101: what the server gets out is what the sockets and the tunnel's window hold, not more
sc exec "$SB" -- rm -f /tmp/flood.count /tmp/flood.done >/dev/null 2>&1
HOLD=8 READ=8000000 timeout 120 python3 "$TEST_TMP/ws-client.py" hold "$API_PORT" "/v1/sandboxes/$SB/ports/8006/" \
        "$API_KEY" >"$TEST_TMP/ws-flood.out" 2>&1 &
WS_FLOOD=$!
track_pid "$WS_FLOOD"
sleep 5
flood_count() { sc exec "$SB" -- cat /tmp/flood.count 2>/dev/null || echo 0; }
C1=$(flood_count)
t0=$(now_ms)
kreq GET /v1/version
check_status "while a client does not read a flood, the daemon answers /v1/version" 200
check_rc "... at once" 0 test $(($(now_ms) - t0)) -lt 5000
sleep 2
C2=$(flood_count)
diag "flood: $C1 then $C2 blocks of 64 KiB out of the guest's server"
check_rc "... the server is held back: under 32 MiB got out" 0 test "${C2:-0}" -lt 512
check_rc "... and no more gets out while the client does not read" 0 test "${C2:-0}" -le $((${C1:-0} + 1))
wait "$WS_FLOOD"
check_eq "... then the client reads 8 MB of the flood" 8000000 "$(sed -n 's/^read=//p' "$TEST_TMP/ws-flood.out")"
flood_done() { sc exec "$SB" -- test -e /tmp/flood.done >/dev/null 2>&1; }
if wait_for 30 flood_done; then pass "... and when the client goes, the server's writes fail: it ends"
else fail "... and when the client goes, the server's writes fail: it ends" "$(flood_count) blocks"; fi

wait "$WS_HANG"
check_eq "a server that never answers the handshake: 504 for the client" 504 \
        "$(sed -n 's/^status=//p' "$TEST_TMP/ws-hang.out")"
check_match "... after the 30 s deadline" '^(29|3[0-9])$' "$(sed -n 's/^after=//p' "$TEST_TMP/ws-hang.out")"
kreq GET /v1/version
check_status "... and the daemon still serves" 200

# ---- wake on demand; a neighbour (another local uid, made up here) is refused before anything wakes
check_rc "suspend SB" 0 sc suspend "$SB"
check_eq "... it is suspended" suspended "$(state_of "$SB")"
NEIGHBOUR_UID=$((40000 + RANDOM % 20000))
as_neighbour() {
        setpriv --reuid="$NEIGHBOUR_UID" --regid="$NEIGHBOUR_UID" --clear-groups -- "$@"
}
run as_neighbour curl -sS --max-time 10 "http://$ADDR/index.html"
check "another local user (uid $NEIGHBOUR_UID) gets no answer from the forward" test "$RC" -ne 0 -a ! -s "$OUT"
check_eq "... and the sandbox was not woken for it" suspended "$(state_of "$SB")"
check_rc "... port ls --json" 0 sc port ls "$SB" --json
check_eq "... counts it as refused" 1 "$(json "$OUT" '[f["refused"] for f in d["forwards"] if f["id"] == "'"$FW1"'"][0]')"
check_contains "... and the daemon's log says whose connection it closed" "uid $NEIGHBOUR_UID" "$(cat "$TEST_TMP/spaced.log")"
run fetch "http://$ADDR/index.html"
check_eq "a connection through the forward wakes it and is served" hello-from-guest "$(cat "$OUT")"
check_eq "... it runs again" running "$(state_of "$SB")"
check_rc "suspend SB again" 0 sc suspend "$SB"
kreq GET "/v1/sandboxes/$SB/ports/8000/index.html"
check_status "the proxy wakes it too: 200" 200
check_rc "pause SB" 0 sc pause "$SB"
run fetch "http://$ADDR/index.html"
check_eq "a connection resumes a paused sandbox" hello-from-guest "$(cat "$OUT")"
check_eq "... it runs" running "$(state_of "$SB")"
check_rc "port -d --any-user SB 8000" 0 sc port -d --any-user "$SB" 8000
ADDR_ANY=$(head -n1 "$OUT")
check_contains "... saying every local user can connect" "Every local user can connect to $ADDR_ANY" "$ERR"
run as_neighbour curl -sS -f --max-time 30 "http://$ADDR_ANY/index.html"
check_eq "... which serves another local user too" hello-from-guest "$(cat "$OUT")"
check_rc "port ls" 0 sc port ls "$SB"
check_contains "... shows it open to any user" "detached, any user" "$OUT"
check_rc "port rm SB ADDR_ANY" 0 sc port rm "$SB" "${ADDR_ANY#127.0.0.1:}"

# ---- background forwards outlive the daemon, killed with -9 (held ones do not); one whose port was taken
# meanwhile, or whose sandbox went, is dropped with a warning
P_TAKEN=$(free_port)
check_rc "port -d SB 8000 P_TAKEN (its port is taken while the daemon is down)" 0 sc port -d "$SB" 8000 "$P_TAKEN"
create_sandbox SB2 --name t33-gone
[ -n "$SB2" ] || { last_diag; bail_out "create of a second sandbox failed"; }
check_rc "port -d SB2 8000 (its sandbox is removed by a restart)" 0 sc port -d "$SB2" 8000
ADDR_GONE=$(head -n1 "$OUT")
P5=$(free_port)
spacectl port "$SB" 8000 "$P5" >"$TEST_TMP/fg5.out" 2>"$TEST_TMP/fg5.err" &
FG5=$!
track_pid "$FG5"
fg5_listening() { grep -q "127.0.0.1:$P5" "$TEST_TMP/fg5.out"; }
wait_for 30 fg5_listening || fail "a foreground forward starts" "$(cat "$TEST_TMP/fg5.err")"
sc port ls --json >"$TEST_TMP/ports-before.json" 2>/dev/null
fw_of() { json "$1" '[f["id"] for f in d["forwards"] if f["address"] == "'"$2"'"][0]'; }
FW_REFUSED=$(fw_of "$TEST_TMP/ports-before.json" "$ADDR_REFUSED")
FW_TAKEN=$(fw_of "$TEST_TMP/ports-before.json" "127.0.0.1:$P_TAKEN")
FW_GONE=$(fw_of "$TEST_TMP/ports-before.json" "$ADDR_GONE")
check_eq "five forwards before the crash" 5 "$(json "$TEST_TMP/ports-before.json" 'len(d["forwards"])')"

kill -KILL "$DPID"
if wait_for 10 pid_gone "$DPID"; then pass "spaced died on SIGKILL"; else fail "spaced died on SIGKILL"; fi
fg5_done() { ! pid_alive "$FG5"; }
wait_for 30 fg5_done || fail "the foreground forward's spacectl ends with the daemon"
wait "$FG5" 2>/dev/null
# something else takes P_TAKEN while no daemon runs
python3 -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); print("listening", flush=True); time.sleep(600)' \
        "$P_TAKEN" >"$TEST_TMP/taker.out" 2>&1 &
TAKER=$!
track_pid "$TAKER"
taker_listening() { grep -q listening "$TEST_TMP/taker.out"; }
wait_for 10 taker_listening || bail_out "cannot take 127.0.0.1:$P_TAKEN: $(cat "$TEST_TMP/taker.out")"
# the next daemon kills itself as it removes a sandbox (just after journaling the removal)
LOG_MARK=$(wc -l <"$TEST_TMP/spaced.log")
SPACE_TEST_CRASH_AT=delete-journaled "$SPACED_BIN" >>"$TEST_TMP/spaced.log" 2>&1 </dev/null &
CRASHING=$!
disown "$CRASHING"
SEEN_PIDS+=("$CRASHING")
wait_for 60 daemon_answers && wait_for 20 tcp_answers || { diag_file "$TEST_TMP/spaced.log" 40; bail_out "spaced did not start again"; }
SEEN_PIDS+=("$(daemon_pid)")

check_rc "port ls --json after the restart" 0 sc port ls --json
cp "$OUT" "$TEST_TMP/ports-after.json"
check_eq "... the detached forwards are back, with their ids, ports and guest ports" \
        "$(json "$TEST_TMP/ports-before.json" 'sorted([f["id"], f["address"], f["guest_port"], f["created_at"]] for f in d["forwards"] if f["id"] in ("'"$FW1"'", "'"$FW_REFUSED"'", "'"$FW_GONE"'"))')" \
        "$(json "$TEST_TMP/ports-after.json" 'sorted([f["id"], f["address"], f["guest_port"], f["created_at"]] for f in d["forwards"])')"
check_eq "... FW1 listens where it did" "$ADDR" "$(json "$TEST_TMP/ports-after.json" '[f["address"] for f in d["forwards"] if f["id"] == "'"$FW1"'"][0]')"
check_eq "... detached still" false "$(json "$TEST_TMP/ports-after.json" '[f["held"] for f in d["forwards"] if f["id"] == "'"$FW1"'"][0]')"
check_rc "... the held forward is not back" 7 curl -s -o /dev/null --max-time 10 "http://127.0.0.1:$P5/"
run fetch "http://$ADDR/index.html"
check_eq "... a connection through FW1 reaches the guest's server again" hello-from-guest "$(cat "$OUT")"
check_rc "... the forward whose port was taken is gone from port ls" 1 grep -q "$FW_TAKEN" "$TEST_TMP/ports-after.json"
check_match "... the log names it, its port and why" \
        "forward $FW_TAKEN: dropped after the restart \(127\.0\.0\.1:$P_TAKEN to port 8000 .*\): the port is in use" \
        "$(tail -n +"$((LOG_MARK + 1))" "$TEST_TMP/spaced.log" | grep dropped | head -n 5)"
check_rc "... and what took the port still has it" 0 pid_alive "$TAKER"

run sc rm -f "$SB2"
if wait_for 30 pid_gone "$CRASHING"; then pass "rm SB2: the daemon is killed as it removes SB2 (crash point)"
else fail "rm SB2: the daemon is killed as it removes SB2 (crash point)"; fi
LOG_MARK=$(wc -l <"$TEST_TMP/spaced.log")
start_daemon_tcp
DPID=$(daemon_pid)
check_eq "... the restart finishes the removal: SB2 is gone" "" "$(state_of "$SB2")"
check_rc "... its forward's port is closed" 7 curl -s -o /dev/null --max-time 10 "http://$ADDR_GONE/"
sc port ls --json >"$OUT" 2>/dev/null
check_eq "... port ls lists FW1 and the forward to 8001, no more" \
        "$(printf '%s\n' "$FW1" "$FW_REFUSED" | sort | tr '\n' ' ')" \
        "$(json "$OUT" '"\n".join(sorted(f["id"] for f in d["forwards"]))' | tr '\n' ' ')"
check_match "... the log names the dropped forward, its port and why" \
        "forward $FW_GONE: dropped after the restart \($(sed 's/\./\\./g' <<<"$ADDR_GONE") to port 8000 of sandbox $SB2\): its sandbox is gone" \
        "$(tail -n +"$((LOG_MARK + 1))" "$TEST_TMP/spaced.log" | grep dropped | head -n 5)"
run fetch "http://$ADDR/index.html"
check_eq "FW1 serves after a second restart too" hello-from-guest "$(cat "$OUT")"
kill "$TAKER"
wait "$TAKER" 2>/dev/null

# ---- a forward goes with its sandbox
spacectl port "$SB" 8000 >"$TEST_TMP/fg4.out" 2>"$TEST_TMP/fg4.err" &
FG4=$!
track_pid "$FG4"
fg4_listening() { grep -q "127.0.0.1:" "$TEST_TMP/fg4.out"; }
wait_for 30 fg4_listening || fail "a foreground forward starts" "$(cat "$TEST_TMP/fg4.err")"
timeout 120 python3 "$TEST_TMP/ws-client.py" wait "$API_PORT" "/v1/sandboxes/$SB/ports/8005/" "$API_KEY" \
        >"$TEST_TMP/ws-wait.out" 2>&1 &
WS_WAIT=$!
track_pid "$WS_WAIT"
ws_open() { grep -q '^status=' "$TEST_TMP/ws-wait.out"; }
wait_for 30 ws_open
check_eq "a WebSocket is open when its sandbox is removed" 101 "$(sed -n 's/^status=//p' "$TEST_TMP/ws-wait.out")"
check_rc "rm SB" 0 sc rm -f "$SB"
wait "$WS_WAIT"
check_eq "... the WebSocket's connection ends with it" yes "$(sed -n 's/^eof=//p' "$TEST_TMP/ws-wait.out")"
check_rc "the detached forward's port is closed" 7 curl -s -o /dev/null --max-time 10 "http://$ADDR/"
check_rc "port ls has none left" 0 sc port ls --json
check_eq "... empty" 0 "$(json "$OUT" 'len(d["forwards"])')"
fg4_done() { ! pid_alive "$FG4"; }
wait_for 30 fg4_done
wait "$FG4"
check_eq "the foreground forward of the removed sandbox ends with exit 1" 1 "$?"
check_contains "... saying why" "its sandbox was removed" "$(cat "$TEST_TMP/fg4.err")"
check_rc "FW1 is gone with it" 1 grep -q "$FW1" <(sc port ls 2>/dev/null)
check_eq "the daemon started last served the rest of the test (it never crashed)" "$DPID" "$(daemon_pid)"
check_rc "... and its log has no sanitizer report" 1 grep -qE "AddressSanitizer|runtime error" "$TEST_TMP/spaced.log"

done_testing
