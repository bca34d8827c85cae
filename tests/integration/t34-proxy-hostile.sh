#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The port proxy against hostile servers in a sandbox (issue 19). With the deadlines shortened in spaced.conf
# (proxy_head_timeout, proxy_idle_timeout: 4 s): a server that answers one request with 103 heads without end
# gets the client a 502 at once, the daemon's memory stays flat while it is tried again and again for 6 s, and
# each flood ends in the guest once its request ended (its tunnel is closed); garbage without end is a 502;
# a server that never reads nor answers a POST gets the client a 504 after the deadline, naming the port, the
# sandbox and the time (an upgrade's too); a body that stalls is cut short after the idle time; a client that never reads a body
# without end has its connection closed, having got only what the buffers hold, and the server's writes fail.
# Meanwhile the same sandbox's other server answers at once. No API key or token of ours reaches the guest's
# server, whichever header carried it, over TCP, the unix socket or E2B's host form.
. "$(dirname "$0")/lib.sh"

space_env_setup
tcp_config "e2b_domain = sbx.test" "proxy_head_timeout = 4" "proxy_idle_timeout = 4"
start_daemon_tcp
API_KEY=$(mint_key t34) || bail_out "cannot mint an API key"
DPID=$(daemon_pid)

create_sandbox SB --name t34
[ -n "$SB" ] || { last_diag; bail_out "create failed"; }
pass "create a sandbox"

# ---- the guest's servers (busybox nc -e): each writer that ends because its connection closed says so in a
# .done file, a line per connection
cat >"$TEST_TMP/skip-head.sh" <<'SCRIPT'
cr=$(printf '\r')
while read -r h; do
        h=${h%"$cr"}
        [ -z "$h" ] && break
done
SCRIPT
cat >"$TEST_TMP/echo.sh" <<'SCRIPT'
#!/bin/sh
# answers with the header lines it got
cr=$(printf '\r')
read -r line
out=
while read -r h; do
        h=${h%"$cr"}
        [ -z "$h" ] && break
        out="$out$h
"
done
printf 'HTTP/1.1 200 OK\r\nContent-Length: %s\r\n\r\n%s' "${#out}" "$out"
SCRIPT
{ echo '#!/bin/sh'; cat "$TEST_TMP/skip-head.sh"
  echo "yes \"\$(printf 'HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r')\""
  echo 'echo x >>/tmp/h103.done'; } >"$TEST_TMP/h103.sh"
{ echo '#!/bin/sh'; cat "$TEST_TMP/skip-head.sh"; echo 'yes "SSH-2.0-not-http"'; echo 'echo x >>/tmp/garbage.done'; } \
        >"$TEST_TMP/garbage.sh"
printf '#!/bin/sh\nexec sleep 60\n' >"$TEST_TMP/mute.sh"
{ echo '#!/bin/sh'; cat "$TEST_TMP/skip-head.sh"
  echo "printf 'HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\nfirst'"; echo 'exec sleep 60'; } >"$TEST_TMP/stall.sh"
{ echo '#!/bin/sh'; cat "$TEST_TMP/skip-head.sh"
  echo "printf 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n'"; echo 'yes'; echo 'echo x >>/tmp/endless.done'; } \
        >"$TEST_TMP/endless.sh"
chmod +x "$TEST_TMP"/*.sh
tar -C "$TEST_TMP" -cf - echo.sh h103.sh garbage.sh mute.sh stall.sh endless.sh |
        sc exec -i "$SB" -- tar -C /tmp -xf - >/dev/null 2>&1
check_rc "start six servers (nc) on 8010 to 8015 in the guest" 0 sc exec "$SB" -- sh -c \
        '(nc -ll -p 8010 -e /tmp/echo.sh &); (nc -ll -p 8011 -e /tmp/h103.sh &); (nc -ll -p 8012 -e /tmp/garbage.sh &);
         (nc -ll -p 8013 -e /tmp/mute.sh &); (nc -ll -p 8014 -e /tmp/stall.sh &); (nc -ll -p 8015 -e /tmp/endless.sh &)'
echo_serves() { kreq GET "/v1/sandboxes/$SB/ports/8010/" && [ "$STATUS" = 200 ]; }
wait_for 20 echo_serves || bail_out "the echo server does not answer through the proxy"
pass "... the echo server answers through the proxy"

PORTS=/v1/sandboxes/$SB/ports
done_count() { sc exec "$SB" -- sh -c "cat /tmp/$1.done 2>/dev/null | wc -l" 2>/dev/null; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$DPID/stat"; }

# ---- interim heads without end: 502 at once, memory flat, each flood ended in the guest
kreq GET "$PORTS/8011/"
check_status "a server that answers with 103 heads without end: 502 bad_gateway" 502 bad_gateway
check_contains "... saying the heads are over the bound, interim ones counted" "interim 1xx heads count" "$OUT"
RSS0=$(daemon_rss_kib)
# two clients, each asking again and again for 6 s
flood_client() {
        local end=$(($(now_ms) + 6000))
        while [ "$(now_ms)" -lt "$end" ]; do
                curl -s -o /dev/null -w '%{http_code} %{time_total}\n' --max-time 10 \
                        -H "Authorization: Bearer $API_KEY" "$API_URL$PORTS/8011/" >>"$1"
        done
}
: >"$TEST_TMP/flood.codes"
flood_client "$TEST_TMP/flood.codes" &
F1=$!
flood_client "$TEST_TMP/flood.codes" &
F2=$!
sleep 3
RSS_MID=$(daemon_rss_kib)
t0=$(now_ms)
kreq GET "$PORTS/8010/"
check_status "while the floods go on, the same sandbox's echo server answers" 200
check_rc "... at once" 0 test $(($(now_ms) - t0)) -lt 3000
wait "$F1" "$F2"
RSS1=$(daemon_rss_kib)
N=$(wc -l <"$TEST_TMP/flood.codes")
diag "103 floods: $N requests in 6 s; RSS $RSS0 KiB before, $RSS_MID after 3 s, $RSS1 at the end"
check_rc "... every one of them a 502" 0 test "$N" -gt 0 -a "$(grep -c '^502 ' "$TEST_TMP/flood.codes")" -eq "$N"
check_rc "... each within the head's deadline (4 s)" 0 \
        awk '$2 >= 4 { bad = 1 } END { exit bad }' "$TEST_TMP/flood.codes"
check_rc "... the daemon's memory grew by less than 64 MiB" 0 test $((RSS1 - RSS0)) -lt 65536
floods_ended() { [ "$(done_count h103)" -ge $((N + 1)) ]; }
if wait_for 20 floods_ended; then pass "... and every flood ended in the guest: its connection was closed"
else fail "... and every flood ended in the guest: its connection was closed" "$(done_count h103) of $((N + 1))"; fi
C0=$(cpu_ticks)
sleep 1
C1=$(cpu_ticks)
check_rc "... after which they cost the daemon no CPU (under 0.2 s in 1 s: $((C1 - C0)) ticks)" 0 test $((C1 - C0)) -lt 20

# ---- garbage without end
t0=$(now_ms)
kreq GET "$PORTS/8012/"
check_status "a server that answers garbage without end: 502 bad_gateway" 502 bad_gateway
check_rc "... at once" 0 test $(($(now_ms) - t0)) -lt 3000
garbage_ended() { [ "$(done_count garbage)" -ge 1 ]; }
if wait_for 20 garbage_ended; then pass "... and its writes end with the connection"
else fail "... and its writes end with the connection"; fi
kreq GET "$PORTS/8010/"
check_status "... the echo server still answers" 200

# ---- time: a server that never answers nor reads, a body that stalls, a client that never reads
cat >"$TEST_TMP/no-reader.py" <<'SCRIPT'
# no-reader.py PORT PATH KEY GO: sends a GET, reads nothing until the file GO exists (60 s at most), then reads
# what comes until the end (at most 64 MiB or 20 s) and says how much came and how it ended.
import os, socket, sys, time
port, path, key, go = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
s.settimeout(30)
s.connect(("127.0.0.1", port))
s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\n\r\n" % (path, port, key)).encode())
for _ in range(600):
    if os.path.exists(go):
        break
    time.sleep(0.1)
got, end, t0 = 0, "eof", time.time()
try:
    while True:
        d = s.recv(1 << 16)
        if not d:
            break
        got += len(d)
        if got > 64 << 20 or time.time() - t0 > 20:
            end = "endless"
            break
except OSError as e:
    end = type(e).__name__
print("read=%d end=%s" % (got, end))
SCRIPT
head -c 1000000 /dev/zero >"$TEST_TMP/mb"
t0=$(now_ms)
(curl -s -o "$TEST_TMP/mute.out" -w '%{http_code}' --max-time 30 -H "Authorization: Bearer $API_KEY" \
        --data-binary @"$TEST_TMP/mb" "$API_URL$PORTS/8013/" >"$TEST_TMP/mute.code"; echo $(($(now_ms) - t0)) >"$TEST_TMP/mute.ms") &
MUTE=$!
(curl -s -o "$TEST_TMP/stall.out" -w '%{http_code} %{size_download}' --max-time 30 -H "Authorization: Bearer $API_KEY" \
        "$API_URL$PORTS/8014/" >"$TEST_TMP/stall.code"; echo $? >"$TEST_TMP/stall.rc"; echo $(($(now_ms) - t0)) >"$TEST_TMP/stall.ms") &
STALL=$!
(curl -s -o "$TEST_TMP/mute-ws.out" -w '%{http_code}' --max-time 30 -H "Authorization: Bearer $API_KEY" \
        -H 'Connection: Upgrade' -H 'Upgrade: websocket' "$API_URL$PORTS/8013/" >"$TEST_TMP/mute-ws.code") &
MUTE_WS=$!
timeout 90 python3 "$TEST_TMP/no-reader.py" "$API_PORT" "$PORTS/8015/" "$API_KEY" "$TEST_TMP/go" \
        >"$TEST_TMP/no-reader.out" 2>&1 &
NOREAD=$!
track_pid "$NOREAD"
sleep 1
t1=$(now_ms)
kreq GET "$PORTS/8010/"
check_status "while those wait, the echo server answers" 200
check_rc "... at once" 0 test $(($(now_ms) - t1)) -lt 3000
wait "$MUTE" "$STALL" "$MUTE_WS"
check_eq "a server that never reads nor answers a 1 MB POST: 504" 504 "$(cat "$TEST_TMP/mute.code")"
check_eq "... deadline_exceeded" deadline_exceeded "$(json "$TEST_TMP/mute.out" 'd["code"]')"
check_contains "... naming the port, the sandbox and the time" "port 8013 of sandbox $SB sent no answer head within 4 s" \
        "$(cat "$TEST_TMP/mute.out")"
check_rc "... after the deadline, not much later ($(cat "$TEST_TMP/mute.ms") ms)" 0 \
        test "$(cat "$TEST_TMP/mute.ms")" -ge 3500 -a "$(cat "$TEST_TMP/mute.ms")" -lt 12000
check_eq "... and an upgrade it never answers: 504 too" 504 "$(cat "$TEST_TMP/mute-ws.code")"
check_contains "... within the head's deadline, shorter than an upgrade's 30 s" "did not answer the upgrade within 4 s" \
        "$(cat "$TEST_TMP/mute-ws.out")"
check_eq "a body that stalls after 5 bytes: the head and those bytes came" "200 5" "$(cat "$TEST_TMP/stall.code")"
check_eq "... then the transfer is cut short (curl: 18, partial)" 18 "$(cat "$TEST_TMP/stall.rc")"
check_rc "... after the idle time ($(cat "$TEST_TMP/stall.ms") ms)" 0 \
        test "$(cat "$TEST_TMP/stall.ms")" -ge 3500 -a "$(cat "$TEST_TMP/stall.ms")" -lt 12000
# the server's writes fail once the daemon ended the request: only then does the client read
endless_ended() { [ "$(done_count endless)" -ge 1 ]; }
if wait_for 40 endless_ended; then pass "a client that reads nothing of a body without end: the request ends, the server's writes fail"
else fail "a client that reads nothing of a body without end: the request ends, the server's writes fail"; fi
touch "$TEST_TMP/go"
wait "$NOREAD"
diag "... then the client reads: $(cat "$TEST_TMP/no-reader.out")"
check_match "... its connection was closed" 'end=(eof|ConnectionResetError)' "$(cat "$TEST_TMP/no-reader.out")"
check_rc "... having got only what the buffers held (under 16 MiB)" 0 \
        test "$(sed -n 's/^read=\([0-9]*\).*/\1/p' "$TEST_TMP/no-reader.out")" -lt 16777216

# ---- no key or token of ours reaches the guest's server
kreq GET "$PORTS/8010/" -H "X-API-Key: $API_KEY" -H "X-Access-Token: t0ken" -H "E2b-Traffic-Access-Token: t0ken2" \
        -H "x-api-key: $API_KEY" -H "X-Custom: kept"
check_status "TCP with the key in Authorization and X-API-Key, and both access tokens: 200" 200
check_contains "... the client's own headers reach the server" "X-Custom: kept" "$OUT"
check_rc "... none of the four does, nor the key anywhere" 1 \
        grep -qiE "^(Authorization|X-API-Key|X-Access-Token|E2b-Traffic-Access-Token):|$API_KEY|t0ken" "$OUT"
req GET "$PORTS/8010/" -H "X-API-Key: $API_KEY" -H "Authorization: Basic dXNlcjpwYXNz"
check_status "TCP with the key in X-API-Key and the app's own Authorization: 200" 200
check_contains "... the app's own Authorization reaches the server" "Authorization: Basic dXNlcjpwYXNz" "$OUT"
check_rc "... the key does not" 1 grep -qiE "^X-API-Key:|$API_KEY" "$OUT"
ureq GET "$PORTS/8010/" -H "X-API-Key: $API_KEY" -H "Authorization: Bearer $API_KEY"
check_status "the unix socket, with a key in both headers (it needs none): 200" 200
check_rc "... neither header reaches the server" 1 grep -qiE "^(Authorization|X-API-Key):|$API_KEY" "$OUT"
kreq GET / -H "Host: 8010-$SB.sbx.test:$API_PORT" -H "X-API-Key: $API_KEY" -H "E2b-Traffic-Access-Token: t0ken"
check_status "E2B's host form 8010-ID.sbx.test with the key in both headers: 200" 200
check_rc "... no key or token reaches the server" 1 \
        grep -qiE "^(Authorization|X-API-Key|E2b-Traffic-Access-Token):|$API_KEY|t0ken" "$OUT"

check_eq "the daemon served the whole test (it never crashed)" "$DPID" "$(daemon_pid)"
check_rc "... and its log has no sanitizer report" 1 grep -qE "AddressSanitizer|runtime error" "$TEST_TMP/spaced.log"

done_testing
