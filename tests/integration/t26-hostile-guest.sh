#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A hostile guest against the real daemon and a real VM: root in the guest floods output that nobody reads
# (the log on disk stays bounded, the process is held by flow control, not buffered), its process's streams are
# opened until the per-sandbox bound (a clear too_many_streams after that), and the daemon keeps answering
# meanwhile (latency of GET /v1/sandboxes printed). Its own log file stays under its cap.
#
# A guest that writes garbage on the channel is not tried here: the agent (PID 1) holds the only virtio port, so
# nothing else in the guest can write frames, and the daemon only connects to QEMU's agent.sock. That attack
# (30 s of frames and garbage, backoff, failed state, event-loop latency) runs in tests/unit/test-channel.c
# with the real spaced/channel/agent.c on a socketpair.
. "$(dirname "$0")/lib.sh"

space_env_setup
start_daemon

create_sandbox SB --name t26
[ -n "$SB" ] || { last_diag; bail_out "create failed"; }
pass "create a sandbox"

# py ARGS... <SCRIPT: python over the unix socket, with helpers req() (send one request) and head().
PY_HELPERS='
import json, socket, sys, time
SOCK = sys.argv[1]
def head(s):
    buf = b""
    while b"\r\n\r\n" not in buf:
        b = s.recv(4096)
        if not b:
            break
        buf += b
    h, _, rest = buf.partition(b"\r\n\r\n")
    return int(h.split(b" ")[1]), rest
def req(method, path, body=None):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(60)
    s.connect(SOCK)
    data = json.dumps(body).encode() if body is not None else b""
    s.sendall(("%s %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
               "Connection: close\r\n\r\n" % (method, path, len(data))).encode() + data)
    return s
'
py() {
        python3 -c "$PY_HELPERS$(cat)" "$SPACE_SOCKET" "$@"
}

# ---- output nobody reads: exec, read the first event for the pid, hang up; the guest writes on
OUT_PID=$(py "/v1/sandboxes/$SB/processes" <<'EOF'
s = req("POST", sys.argv[2], {"argv": ["sh", "-c", "yes hostile-guest-output-line | head -c 400000000; sleep 600"]})
st, rest = head(s)
while rest.count(b"\n\n") < 1 or b"process_started" not in rest:
    rest += s.recv(4096)
ev = rest.split(b"process_started", 1)[1].split(b"data:", 1)[1].split(b"\n", 1)[0]
print(json.loads(ev)["pid"])
s.close()
EOF
)
check_match "exec a flood of output and hang up (pid $OUT_PID)" '^[0-9]+$' "$OUT_PID"
LOGDIR=$SPACE_STATE_DIR/sandboxes/$SB/processes
log_bytes() { du -sb "$LOGDIR" 2>/dev/null | cut -f1; }
prev=-1
for _ in $(seq 1 90); do
        sleep 2
        cur=$(log_bytes)
        [ "$cur" = "$prev" ] && [ "${cur:-0}" -gt $((16 << 20)) ] && break
        prev=$cur
done
cur=$(log_bytes)
diag "the process logs of the sandbox hold $cur bytes once the guest is held"
check "the log stopped growing below the per-process cap (64 MiB, 2 files)" test "${cur:-0}" -le $((128 << 20))
run sc ps "$SB" --json
check_contains "the flooding process is still running (held by flow control, nothing dropped)" '"running"' "$OUT"

# ---- streams: readers of that process until the bound, then one more
RES=$(py "/v1/sandboxes/$SB/processes/$OUT_PID/logs?follow=1" <<'EOF'
socks, code, status = [], "", 0
for i in range(200):
    s = req("GET", sys.argv[2])
    st, rest = head(s)
    if st != 200:
        status = st
        while b"}" not in rest:
            b = s.recv(4096)
            if not b:
                break
            rest += b
        try:
            code = json.loads(rest[rest.index(b"{"):rest.rindex(b"}") + 1].decode())["code"]
        except Exception:
            code = rest[:100].decode(errors="replace").replace(" ", "_")
        break
    socks.append(s)
# the daemon answers while they stay open
lat, good = [], 0
for i in range(20):
    t = time.time()
    s = req("GET", "/v1/sandboxes")
    st, rest = head(s)
    while True:
        b = s.recv(65536)
        if not b:
            break
        rest += b
    s.close()
    lat.append((time.time() - t) * 1000)
    good += st == 200 and b"sandboxes" in rest
lat.sort()
print(len(socks), status, code, "%.1f" % lat[len(lat) // 2], "%.1f" % lat[-1], good)
for s in socks:
    s.close()
EOF
)
read -r N_OPEN ST CODE P50 PMAX GOOD <<<"$RES"
diag "streams: $N_OPEN opened, then HTTP $ST $CODE; GET /v1/sandboxes with them open: p50 $P50 ms, max $PMAX ms"
check_eq "128 streams open on the sandbox, then the next is refused" "128 503 too_many_streams" "$N_OPEN $ST $CODE"
check_eq "the daemon answered all 20 GET /v1/sandboxes meanwhile" 20 "${GOOD:-0}"
check "... each within 2 s" python3 -c "import sys; sys.exit(0 if float('${PMAX:-9999}') < 2000 else 1)"

check_eq "the sandbox is still running" running "$(state_of "$SB")"
size=$(stat -c %s "$TEST_TMP/spaced.log")
check "the daemon's log is under its cap ($size bytes)" test "$size" -le $((16 << 20))
check "remove the sandbox" sc rm -f "$SB"
done_testing
