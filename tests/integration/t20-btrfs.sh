#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The btrfs disk store (issue 5; ARCHITECTURE.md, decision 5): the state dir is a loop-mounted 3 GiB btrfs. Sandboxes'
# disks are raw files alone in subvolumes, reflinked from the base snapshot's disk (shared extents, no qcow2
# anywhere); a checkpoint is a read-only snapshot, forks and restores writable snapshots of it; forks
# diverge; suspend/wake, --disk growth and ENOSPC work on raw disks; a kill -9 while a checkpoint's snapshot
# is not yet recorded leaves nothing the restarted daemon does not clean; rm and checkpoint rm leave no
# subvolume behind.
. "$(dirname "$0")/lib.sh"

space_env_setup
if ! mount_btrfs_state 3G; then
        skip "the btrfs disk store" "$BTRFS_SKIP"
        done_testing
fi
command -v filefrag >/dev/null || bail_out "filefrag is missing (e2fsprogs)"
pass "a 3 GiB btrfs on $BTRFS_LOOP at the state dir"

add_small_template tiny 80
start_daemon
LOG=$TEST_TMP/spaced.log

# volumes: the subvolumes under the state dir, one path a line
volumes() {
        btrfs subvolume list -o "$SPACE_STATE_DIR" 2>/dev/null | sed -n 's/.* path //p' | sort
}
ro_volumes() {
        btrfs subvolume list -r -o "$SPACE_STATE_DIR" 2>/dev/null | sed -n 's/.* path //p' | sort
}
disk_of() {
        readlink -f "$SPACE_STATE_DIR/sandboxes/$1/disk"
}
shared_extents() {
        filefrag -v "$1" 2>/dev/null | grep -c shared
}
no_qcow2() {
        [ -z "$(find "$SPACE_STATE_DIR" -name '*.qcow2' 2>/dev/null)" ]
}
df_total() {
        sc exec "$1" -- df -m / 2>/dev/null | awk 'NR == 2 { print $2 }'
}

# ---- create
create_sandbox SB tiny --disk 128 --name t20-main
[ -n "$SB" ] || { last_diag; bail_out "create on btrfs failed"; }
pass "create a sandbox on btrfs"
D=$(disk_of "$SB")
# The store the daemon chose, seen in what it made (not in its log): a raw disk alone in a subvolume.
check_match "the daemon chose the btrfs store: the disk is a raw file in a volume" "^$SPACE_STATE_DIR/volumes/[0-9a-f]+/disk\.raw$" "$D"
check_eq "  ... which is a subvolume" "volumes/$(basename "$(dirname "$D")")" "$(volumes)"
if no_qcow2; then pass "no qcow2 file under the state dir"; else fail "no qcow2 file under the state dir" "$(find "$SPACE_STATE_DIR" -name '*.qcow2')"; fi
n=$(shared_extents "$D")
if [ "${n:-0}" -gt 0 ]; then pass "its disk shares extents with the base disk (reflink: $n shared extents)"
else fail "its disk shares extents with the base disk" "$(filefrag -v "$D" | head -n 8)"; fi
check_eq "the disk grew to 128 MiB on the host" $((128 << 20)) "$(stat -c %s "$D")"
t=$(df_total "$SB")
if [[ $t =~ ^[0-9]+$ ]] && [ "$t" -le 128 ] && [ "$t" -ge 112 ]; then pass "  ... and in the guest (df: $t MiB)"
else fail "  ... and in the guest" "df total '$t'"; fi
check_rc "write a file" 0 sc exec "$SB" -- sh -c 'echo v1 > /root/f && sync'

# ---- checkpoint: a read-only snapshot
check_rc "checkpoint" 0 sc checkpoint "$SB" --name t20-cp
diag "$(cat "$ERR")"
check_eq "one read-only subvolume" 1 "$(ro_volumes | grep -c .)"
check_eq "two subvolumes in all" 2 "$(volumes | grep -c .)"
check_rc "checkpoint ls --json" 0 sc checkpoint ls --json
check_eq "  ... it is ready, with the pause it took" "ready true" \
        "$(json "$OUT" '[c["state"] + " " + str(c["pause_ms"] > 0).lower() for c in d["checkpoints"] if c.get("name") == "t20-cp"][0]' 2>&1)"
diag "checkpoint: paused $(json "$OUT" '[c["pause_ms"] for c in d["checkpoints"] if c.get("name") == "t20-cp"][0]' 2>&1) ms"

# ---- fork -n 2: writable snapshots that diverge
check_rc "fork -n 2" 0 sc fork t20-cp -n 2
mapfile -t FORKS <"$OUT"
check_eq "fork prints 2 ids" 2 "${#FORKS[@]}"
for f in "${FORKS[@]}"; do track_sandbox "$f"; done
check_eq "four subvolumes now" 4 "$(volumes | grep -c .)"
F1=${FORKS[0]} F2=${FORKS[1]}
check_eq "fork 1 has the file" v1 "$(sc exec "$F1" -- cat /root/f 2>/dev/null)"
check_eq "fork 2 has the file" v1 "$(sc exec "$F2" -- cat /root/f 2>/dev/null)"
n=$(shared_extents "$(disk_of "$F2")")
if [ "${n:-0}" -gt 0 ]; then pass "a fork's disk shares extents ($n)"; else fail "a fork's disk shares extents"; fi
check_rc "write in fork 1" 0 sc exec "$F1" -- sh -c 'echo one > /root/only1 && sync'
check_fails "fork 2 does not see it" sc exec "$F2" -- cat /root/only1
check_fails "the parent does not see it" sc exec "$SB" -- cat /root/only1
check_rc "write in the parent" 0 sc exec "$SB" -- sh -c 'echo v2 > /root/f && sync'
check_eq "fork 2 keeps the checkpoint's content" v1 "$(sc exec "$F2" -- cat /root/f 2>/dev/null)"
run sc exec "$F2" -- dd if=/dev/zero of=/big bs=1M
check_contains "filling fork 2 gives ENOSPC in the guest" "No space left on device" "$ERR"
k=$(du -k "$(disk_of "$F2")" | awk '{ print $1 }')
if [[ $k =~ ^[0-9]+$ ]] && [ "$k" -le $((128 * 1024)) ]; then pass "  ... and its raw file stays within 128 MiB ($((k / 1024)) MiB)"
else fail "  ... and its raw file stays within 128 MiB" "du '$k' KiB"; fi
check_rc "fork 2 still answers" 0 sc exec "$F2" -- echo alive

# ---- restore, suspend, wake
old=$(disk_of "$SB")
check_rc "restore the parent to the checkpoint" 0 sc restore "$SB" t20-cp
check_eq "  ... its file is back" v1 "$(sc exec "$SB" -- cat /root/f 2>/dev/null)"
new=$(disk_of "$SB")
if [ "$new" != "$old" ] && [ ! -e "$(dirname "$old")" ]; then pass "  ... on a new volume; the old one is deleted"
else fail "  ... on a new volume; the old one is deleted" "old $old, new $new"; fi
check_rc "suspend" 0 sc suspend "$SB"
check_rc "wake" 0 sc wake "$SB"
check_eq "  ... the file is there" v1 "$(sc exec "$SB" -- cat /root/f 2>/dev/null)"

# ---- a crash between the snapshot and its record
stop_daemon() {
        local pid
        pid=$(daemon_pid) || return 0
        kill -TERM "$pid"
        wait_for 15 pid_gone "$pid" || kill -KILL "$pid"
}
stop_daemon
SPACE_TEST_CRASH_AT=checkpoint-snapshotted "$SPACED_BIN" >>"$LOG" 2>&1 </dev/null &
CRASH_PID=$!
disown "$CRASH_PID"
SEEN_PIDS+=("$CRASH_PID")
wait_for 30 daemon_answers || bail_out "the crashing daemon did not start"
before=$(volumes | grep -c .)
# over HTTP, not spacectl: a spacectl whose daemon died would start another, which would clean up too soon
ureq POST "/v1/sandboxes/$SB/checkpoints?wait=60" -H 'Content-Type: application/json' -d '{}'
wait_for 15 pid_gone "$CRASH_PID"
after=$(volumes | grep -c .)
check_eq "kill -9 right after a checkpoint's snapshot leaves one unrecorded volume" $((before + 1)) "$after"
start_daemon
check_eq "the restarted daemon deletes it" "$before" "$(volumes | grep -c .)"
check_eq "  ... and the sandbox runs on" v1 "$(sc exec "$SB" -- cat /root/f 2>/dev/null)"

# ---- rm and checkpoint rm leave no subvolume
check_rc "rm -f every sandbox" 0 sc rm -f "$SB" "$F1" "$F2"
check_rc "checkpoint rm" 0 sc checkpoint rm t20-cp
check_eq "no subvolume is left" "" "$(volumes)"
check_eq "  ... and no sandbox directory" "" "$(ls -A "$SPACE_STATE_DIR/sandboxes" 2>/dev/null)"
done_testing
