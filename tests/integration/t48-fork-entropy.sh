#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Identity before the first guest instruction (issue 27): forks and restores of one snapshot never share a
# random byte, and none of them sees the snapshot's clock. A loop in the sandbox prints, without a pause, a
# line of the guest's clock and 16 bytes of /dev/urandom; the sandbox is forked three times, and a checkpoint
# of it is restored twice. The lines all of them have in common are the ones written before the snapshot
# (they match whole, microseconds included); after it, no two of them may print the same random bytes (their
# first lines included), and each copy's lines must be stamped no earlier than the host's clock when its fork
# or restore began, but for the first: the loop may have read the clock for it before the freeze, and its
# random numbers after. The loop is one bash that never sleeps: $SRANDOM is a getrandom() of its own and
# $EPOCHREALTIME the wall clock, so it is on the CPU when the VM is saved and reads the kernel's generator the
# moment it runs again. Before the workload was frozen around the save (ARCHITECTURE.md, "Checkpoint, fork
# and restore"), it did so before the agent had read the new seed and clock.
. "$(dirname "$0")/lib.sh"

space_env_setup
start_daemon
create_sandbox SB --name t48
[ -n "$SB" ] || { last_diag; bail_out "create failed"; }

LOOP='i=0; while :; do echo "$((i++)) $EPOCHREALTIME $SRANDOM$SRANDOM $SRANDOM$SRANDOM"; done'
check_rc "start a loop that prints the guest's random bytes" 0 \
        sc exec "$SB" -- bash -c "($LOOP) </dev/null >>/tmp/r.log 2>/dev/null &"
sleep 1

# mark ID: where the lines of interest start in ID's file (a little before the snapshot)
mark() { FROM=$(sc exec "$1" -- wc -l /tmp/r.log 2>/dev/null | awk '{print $1}'); FROM=${FROM:-1}; }
# grab ID FILE: ID's lines from the mark on, at most 40000, into FILE
grab() { sc exec "$1" -- sh -c "tail -n +$FROM /tmp/r.log | head -n 40000" >"$2" 2>/dev/null; }

# compare LABEL HOSTTIME FILE...: the files' lines past what all of them share never share random bytes, and
# those of each file after the first (the copies) are stamped no earlier than HOSTTIME, but for the line that
# straddles the save.
compare() {
        local label=$1 t0=$2
        shift 2
        python3 - "$t0" "$@" <<'EOF' >"$TEST_TMP/cmp.out" 2>&1
import sys
t0 = float(sys.argv[1])
files = [open(p).read().splitlines() for p in sys.argv[2:]]
n = 0  # the lines all share whole: the snapshot's
while all(len(f) > n for f in files) and len(set(f[n] for f in files)) == 1:
    n += 1
bad = []
seen = {}
for i, f in enumerate(files):
    tail = [l.split(None, 2)[1:] for l in f[n:] if len(l.split(None, 2)) == 3]
    if len(tail) < 3:
        bad.append("copy %d printed %d lines after the snapshot" % (i, len(tail)))
        continue
    old = [ts for ts, _ in tail[1:] if float(ts) < t0]
    if i > 0 and old:
        bad.append("copy %d printed %d lines stamped before the host's %.3f, from %s" % (i, len(old), t0, old[0]))
    for ts, rnd in tail:
        j = seen.setdefault(rnd, i)
        if j != i:
            bad.append("copies %d and %d both printed '%s'" % (j, i, rnd))
print("%d shared lines; after them %s lines" % (n, "/".join(str(len(f) - n) for f in files)))
for b in bad[:8]:
    print(b)
sys.exit(1 if bad else 0)
EOF
        if [ $? -eq 0 ]; then
                pass "$label ($(head -n1 "$TEST_TMP/cmp.out"))"
        else
                fail "$label" "$(cat "$TEST_TMP/cmp.out")"
        fi
}

mark "$SB"
T_FORK=$(date +%s.%N)
run sc fork -n 3 "$SB"
check_eq "fork the sandbox three times" 0 "$RC" || last_diag
mapfile -t KIDS < <(grep -E "$ID_RE" "$OUT")
for k in "${KIDS[@]}"; do track_sandbox "$k"; done
sleep 1
grab "$SB" "$TEST_TMP/parent"
i=0
FILES=()
for k in "${KIDS[@]}"; do
        i=$((i + 1))
        grab "$k" "$TEST_TMP/kid$i"
        FILES+=("$TEST_TMP/kid$i")
done
# the parent first: its own clock went on, only the forks' first lines are checked against the host's
compare "the parent and its forks never print the same random bytes, and no fork saw the old clock" "$T_FORK" \
        "$TEST_TMP/parent" "${FILES[@]}"

mark "$SB"
run sc checkpoint "$SB" --name t48-cp
check_eq "checkpoint it" 0 "$RC" || last_diag
sleep 1
grab "$SB" "$TEST_TMP/cp-parent"
sleep 1
T_R1=$(date +%s.%N)
check_rc "restore the checkpoint" 0 sc restore "$SB" t48-cp
sleep 1
grab "$SB" "$TEST_TMP/cp-r1"
T_R2=$(date +%s.%N)
check_rc "restore it again" 0 sc restore "$SB" t48-cp
sleep 1
grab "$SB" "$TEST_TMP/cp-r2"
compare "a checkpoint restored, and its sandbox that went on, never print the same random bytes" "$T_R1" \
        "$TEST_TMP/cp-parent" "$TEST_TMP/cp-r1"
compare "... restored again: not the bytes of the first restore, nor the old clock" "$T_R2" \
        "$TEST_TMP/cp-r1" "$TEST_TMP/cp-r2"
compare "... nor those of the sandbox that went on" "$T_R2" "$TEST_TMP/cp-parent" "$TEST_TMP/cp-r2"

done_testing
