#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Inbound ports (issue 11): `spacectl port` forwards 127.0.0.1:HOST_PORT (given, or a free one) to a port in the
# sandbox, in the foreground until interrupted or detached (-d) until `port rm`; `port ls` lists them. The API's
# proxy reaches the same server at /v1/sandboxes/ID/ports/PORT/PATH (with the API key over TCP) and under the
# E2B host name PORT-ID.DOMAIN. A connection wakes a suspended or paused sandbox; a forward goes with its
# sandbox. Bad input: port 0 and 70000, a host port in use, an unknown sandbox, dot segments in the proxied path,
# huge headers, an upgrade (not proxied yet: 501), a port nothing listens on (502, a reset connection).
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
check_rc "port ls SB --json" 0 sc port ls "$SB" --json
check_eq "... one forward to 8000, detached, one connection made" '[8000, false, 1]' \
        "$(json "$OUT" '[d["forwards"][0]["guest_port"], d["forwards"][0]["held"], d["forwards"][0]["connections"]]')"
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
kreq GET "/v1/sandboxes/$SB/ports/8000/" -H 'Connection: Upgrade' -H 'Upgrade: websocket'
check_status "an upgrade (WebSocket): 501, saying so" 501 not_supported
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
req GET /index.html -H "Host: 8000-$SB.sbx.test:$API_PORT" -H "X-Access-Token: $(printf 'f%.0s' $(seq 32))"
check_status "... with a token that is not its own: 404" 404
kreq GET / -H "Host: 8001-$SB.sbx.test:$API_PORT"
check_status "Host 8001-ID.sbx.test (nothing there): 502" 502 port_unreachable

# ---- wake on demand
check_rc "suspend SB" 0 sc suspend "$SB"
check_eq "... it is suspended" suspended "$(state_of "$SB")"
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

# ---- a forward goes with its sandbox
spacectl port "$SB" 8000 >"$TEST_TMP/fg4.out" 2>"$TEST_TMP/fg4.err" &
FG4=$!
track_pid "$FG4"
fg4_listening() { grep -q "127.0.0.1:" "$TEST_TMP/fg4.out"; }
wait_for 30 fg4_listening || fail "a foreground forward starts" "$(cat "$TEST_TMP/fg4.err")"
check_rc "rm SB" 0 sc rm -f "$SB"
check_rc "the detached forward's port is closed" 7 curl -s -o /dev/null --max-time 10 "http://$ADDR/"
check_rc "port ls has none left" 0 sc port ls --json
check_eq "... empty" 0 "$(json "$OUT" 'len(d["forwards"])')"
fg4_done() { ! pid_alive "$FG4"; }
wait_for 30 fg4_done
wait "$FG4"
check_eq "the foreground forward of the removed sandbox ends with exit 1" 1 "$?"
check_contains "... saying why" "its sandbox was removed" "$(cat "$TEST_TMP/fg4.err")"
check_rc "FW1 is gone with it" 1 grep -q "$FW1" <(sc port ls 2>/dev/null)
check_eq "one daemon served the whole test (it never crashed)" "$DPID" "$(daemon_pid)"
check_rc "... and its log has no sanitizer report" 1 grep -qE "AddressSanitizer|runtime error" "$TEST_TMP/spaced.log"

done_testing
