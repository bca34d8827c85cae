#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SSE streams over TCP at volume: 50 MiB read by a client that drops the connection twice mid-stream and resumes
# with Last-Event-ID (byte-exact, ids without gaps or repeats); a resume from an id no longer kept gives the
# events_lost error; a stalled reader on one sandbox does not slow another sandbox's stream, pauses only its own
# process (flow control reaches the guest), keeps the daemon's memory bounded and loses nothing.
. "$(dirname "$0")/lib.sh"

# ASan keeps freed memory in a quarantine (256 MiB by default), which would read as growth; keep it small so that
# VmRSS shows what the daemon holds.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0}:quarantine_size_mb=16
space_env_setup
tcp_config
start_daemon_tcp
API_KEY=$(mint_key t08) || bail_out "cannot mint an API key over the unix socket (POST /v1/keys: $STATUS)"
SSE_TIMEOUT=600

MIB=$((1024 * 1024))
SIZE=$((50 * MIB))
DATA=$TEST_TMP/data.bin
python3 -c 'import random, sys; random.seed(20250308); sys.stdout.buffer.write(random.randbytes(50 << 20))' >"$DATA"
SHA=$(sha256sum <"$DATA" | cut -d' ' -f1)

create_sandbox SB1 --name t08-a
create_sandbox SB2 --name t08-b
[ -n "$SB1" ] && [ -n "$SB2" ] || { last_diag; bail_out "create failed"; }
pass "create two sandboxes"
for sb in "$SB1" "$SB2"; do
        check_rc "copy the 50 MiB file into $sb" 0 timeout 120 spacectl exec -i "$sb" -- sh -c 'mkdir -p /tmp && cat > /tmp/f && sha256sum /tmp/f' <"$DATA"
        check_eq "... the guest has the same sha256" "$SHA" "$(cut -d' ' -f1 <"$OUT")"
done

# ---- 50 MiB, dropped at ~10 MiB and ~20 MiB, resumed with Last-Event-ID each time
sse session "$SB1" --argv '["cat", "/tmp/f"]' --out "$TEST_TMP/resume.out" --drop-after $((10 * MIB)) --drops 2 --gap 1
cp "$OUT" "$TEST_TMP/resume.json"
R() { json "$TEST_TMP/resume.json" "$1" 2>&1; }
check_eq "the resume client ran" 0 "$RC" || diag "$(head -c 600 "$TEST_TMP/resume.json")"
diag "50 MiB with 2 drops: $(R 'd["secs"]') s, $(R 'd["mbps"]') MB/s, $(R 'd["events"]') events, dropped at $(R 'd.get("dropped_at")')"
check_eq "it dropped and reconnected twice" 2 "$(R 'd["reconnects"]')"
check_eq "every attach answered 200" 200 "$(R 'd["status"]')"
check_eq "ids: none lost, none twice, across both reconnects" true "$(R 'd["ids_ok"]')" || diag "$(R 'd["id_problems"]')"
check_eq "50 MiB arrived" "$SIZE" "$(R 'd["stdout_bytes"]')"
check_eq "the reassembled bytes' sha256 equals the file's" "$SHA" "$(sha256sum <"$TEST_TMP/resume.out" | cut -d' ' -f1)"
check_eq "process_exited with 0, no error event" "0 []" "$(R 'str(d["exit_code"]) + " " + str(d["errors"])')"
RPID=$(R 'd["session"]["pid"]')

# ---- a resume from an id that is no longer kept: events_lost. The process writes more than the log keeps
# (three times the 50 MiB file, more than the 64 MiB cap even at two files), read by a client that keeps up.
LOST_ARGV=${SPACE_TEST_LOST_ARGV:-'["sh", "-c", "cat /tmp/f /tmp/f /tmp/f"]'}
sse session "$SB1" --argv "$LOST_ARGV"
cp "$OUT" "$TEST_TMP/big.json"
check_eq "a 150 MiB stream completes with exit 0" "0 True" "$(json "$TEST_TMP/big.json" 'str(d["exit_code"]) + " " + str(d["ids_ok"])' 2>&1)" ||
        diag "$(head -c 600 "$TEST_TMP/big.json")"
diag "150 MiB, one attach: $(json "$TEST_TMP/big.json" 'd["secs"]' 2>&1) s, $(json "$TEST_TMP/big.json" 'd["mbps"]' 2>&1) MB/s"
BPID=$(json "$TEST_TMP/big.json" 'd["session"]["pid"]' 2>/dev/null)
BLAST=$(json "$TEST_TMP/big.json" 'd["last_id"]' 2>/dev/null)
run timeout 60 python3 "$SSE_PY" --url "$API_URL" --key "$API_KEY" stream "/v1/sandboxes/$SB1/processes/$BPID/stream" --last-event-id 1
cp "$OUT" "$TEST_TMP/lost.json"
check_eq "Last-Event-ID 1 long after: an events_lost error event" events_lost "$(json "$TEST_TMP/lost.json" 'd["errors"][0]["code"]' 2>&1)" ||
        diag "$(head -c 600 "$TEST_TMP/lost.json")"
check_eq "... that names the first event still kept" true \
        "$(json "$TEST_TMP/lost.json" 'isinstance(d["errors"][0]["first_available"], int) and d["errors"][0]["first_available"] > 2' 2>&1)"
check_eq "... and ends the stream: nothing else after it" "0 1" "$(json "$TEST_TMP/lost.json" 'str(d["stdout_bytes"]) + " " + str(d["events"])' 2>&1)"
FIRST=$(json "$TEST_TMP/lost.json" 'd["errors"][0]["first_available"]' 2>/dev/null)
if [ -n "$FIRST" ]; then
        run timeout 120 python3 "$SSE_PY" --url "$API_URL" --key "$API_KEY" stream "/v1/sandboxes/$SB1/processes/$BPID/stream" --last-event-id $((FIRST - 1))
        check_eq "resuming right before first_available works: ids $FIRST..$BLAST, no error" "$FIRST $BLAST True []" \
                "$(json "$OUT" 'str(d["first_id"]) + " " + str(d["last_id"]) + " " + str(d["ids_ok"]) + " " + str(d["errors"])' 2>&1)"
else
        fail "resuming right before first_available works" "no first_available"
fi
run timeout 120 python3 "$SSE_PY" --url "$API_URL" --key "$API_KEY" stream "/v1/sandboxes/$SB1/processes/$RPID/stream" --last-event-id 0 --out "$TEST_TMP/replay.out"
check_eq "the 50 MiB process can still be replayed whole from its log (after 150 MiB more in the sandbox)" "$SHA" \
        "$(sha256sum <"$TEST_TMP/replay.out" | cut -d' ' -f1)"

# ---- a stalled reader on SB1 while SB2 streams at full speed
sse session "$SB2" --argv '["cat", "/tmp/f"]'
cp "$OUT" "$TEST_TMP/base.json"
B0=$(json "$TEST_TMP/base.json" 'd["mbps"]' 2>/dev/null)
check_eq "baseline: SB2 streams 50 MiB alone, intact" "$SHA 0" "$(json "$TEST_TMP/base.json" 'd["stdout_sha256"] + " " + str(d["exit_code"])' 2>&1)"
RSS0=$(daemon_rss_kib)

HOLD=$TEST_TMP/stall.hold
timeout -k 5 600 python3 "$SSE_PY" --url "$API_URL" --key "$API_KEY" stall "$SB1" --argv '["cat", "/tmp/f"]' \
        --hold-file "$HOLD" --out "$TEST_TMP/stall.out" >"$TEST_TMP/stall.json" 2>"$TEST_TMP/stall.err" &
STALL=$!
if wait_for 60 test -e "$HOLD.ready"; then pass "a client attached to SB1 and stopped reading"; else fail "a client attached to SB1 and stopped reading" "$(cat "$TEST_TMP/stall.err")"; fi
SPID=$(json "$HOLD.ready" 'd["pid"]' 2>/dev/null)
LOG=$SPACE_STATE_DIR/sandboxes/$SB1/processes/$SPID.log
sleep 4
RSS1=$(daemon_rss_kib)
logsize() { du -cb "$LOG"* 2>/dev/null | tail -n1 | cut -f1; }
L1=$(logsize)
check_eq "the stalled process is still running (a stall is not a disconnect)" running \
        "$( (kreq GET "/v1/sandboxes/$SB1/processes/$SPID"; json "$OUT" 'd["state"]') 2>&1)"

sse session "$SB2" --argv '["cat", "/tmp/f"]'
cp "$OUT" "$TEST_TMP/during.json"
B1=$(json "$TEST_TMP/during.json" 'd["mbps"]' 2>/dev/null)
# Other load on a 2-core machine can dip one run: a second run while still stalled, and the better one counts.
if ! python3 -c "import sys; sys.exit(0 if float('$B1') >= 0.5 * float('$B0') else 1)" 2>/dev/null; then
        diag "SB2 with the stall: $B1 MB/s on the first run, running it once more"
        sse session "$SB2" --argv '["cat", "/tmp/f"]'
        B1=$(python3 -c "print(max(float('$B1' or 0), float('$(json "$OUT" 'd["mbps"]' 2>/dev/null)' or 0)))" 2>/dev/null)
fi
check_eq "SB2 streams 50 MiB intact while SB1's reader is stalled" "$SHA 0" "$(json "$TEST_TMP/during.json" 'd["stdout_sha256"] + " " + str(d["exit_code"])' 2>&1)"
RSS2=$(daemon_rss_kib)
sleep 3
RSS3=$(daemon_rss_kib)
L2=$(logsize)
diag "SB2 throughput: alone $B0 MB/s, with SB1's reader stalled $B1 MB/s"
diag "daemon VmRSS: before the stall ${RSS0} KiB, stalled ${RSS1} KiB, after SB2's 50 MiB ${RSS2} KiB, 3 s later ${RSS3} KiB"
diag "SB1's log while stalled: ${L1:-?} -> ${L2:-?} bytes ($LOG)"
if python3 -c "import sys; sys.exit(0 if float('$B1') >= 0.5 * float('$B0') else 1)" 2>/dev/null; then
        pass "the stalled reader does not slow the other sandbox's stream ($B1 vs $B0 MB/s, >= 50%)"
else
        fail "the stalled reader does not slow the other sandbox's stream" "with the stall $B1 MB/s, alone $B0 MB/s (want >= 50%)"
fi
if [ -n "$RSS0" ] && [ -n "$RSS3" ] && [ $((RSS3 - RSS0)) -lt $((48 * 1024)) ] && [ $((RSS2 - RSS0)) -lt $((48 * 1024)) ]; then
        pass "the daemon's memory stays bounded: VmRSS +$(((RSS3 - RSS0) / 1024)) MiB (< 48)"
else
        fail "the daemon's memory stays bounded" "VmRSS $RSS0 -> $RSS1 -> $RSS2 -> $RSS3 KiB"
fi
if [ -n "$L1" ] && [ -n "$L2" ] && [ $((L2 - L1)) -lt $MIB ] && [ "$L2" -lt $((45 * MIB)) ]; then
        pass "flow control reaches the guest: the stalled process stopped writing (log $L1 -> $L2 bytes over 7 s)"
else
        fail "flow control reaches the guest: the stalled process stopped writing" "log $L1 -> $L2 bytes; 50 MiB is $SIZE"
fi

# Release the reader: it gets everything, nothing dropped while it stalled.
touch "$HOLD"
if wait_for 180 pid_gone "$STALL"; then pass "the released reader reads to the end"; else fail "the released reader reads to the end"; fi
check_eq "the stalled stream is intact: sha256 of 50 MiB, exit 0, ids without gaps" "$SHA 0 True" \
        "$(json "$TEST_TMP/stall.json" 'd["stdout_sha256"] + " " + str(d["exit_code"]) + " " + str(d["ids_ok"])' 2>&1)" ||
        diag "$(head -c 600 "$TEST_TMP/stall.json")"
check_eq "... byte for byte" "$SHA" "$(sha256sum <"$TEST_TMP/stall.out" | cut -d' ' -f1)"

check_rc "rm both" 0 sc rm "$SB1" "$SB2"
done_testing
