#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Disk full during suspend: the state dir is a small tmpfs that the test fills; the suspend fails with a clear
# error, the sandbox keeps running with its processes and files, and once space is back it suspends and wakes.
. "$(dirname "$0")/lib.sh"

space_env_setup
if [ "$(id -u)" -ne 0 ]; then
        skip "disk full during suspend" "mounting a small tmpfs needs root"
        done_testing
fi
mkdir -p "$SPACE_STATE_DIR"
mount -t tmpfs -o size=900m,mode=0700 tmpfs "$SPACE_STATE_DIR" || bail_out "cannot mount a tmpfs on $SPACE_STATE_DIR"
unmount_state() { umount -l "$SPACE_STATE_DIR" 2>/dev/null; }
start_daemon

create_sandbox SB
[ -n "$SB" ] || { last_diag; unmount_state; bail_out "create failed"; }
pass "create a sandbox on a 900 MiB state dir"
check_rc "write a file in it" 0 sc exec "$SB" -- sh -c 'echo kept > /root/kept'
check_rc "start a counter" 0 sc exec "$SB" -- sh -c \
        '(i=0; while :; do i=$((i+1)); echo $i >/tmp/c.new; mv /tmp/c.new /tmp/c; sleep 0.1; done) </dev/null >/dev/null 2>&1 &'

# Leave 8 MiB: far less than the ~70 MiB a suspend writes.
avail_kib=$(df --output=avail -k "$SPACE_STATE_DIR" | tail -n 1)
run dd if=/dev/zero of="$SPACE_STATE_DIR/filler" bs=1M count=$((avail_kib / 1024 - 8)) status=none
left_kib=$(df --output=avail -k "$SPACE_STATE_DIR" | tail -n 1)
if [ "$RC" -eq 0 ] && [ "$left_kib" -lt $((16 * 1024)) ]; then
        pass "filled the state dir (left $left_kib KiB)"
else
        fail "filled the state dir" "dd exit $RC, $left_kib KiB left (want under 16 MiB)"
        last_diag
        unmount_state
        bail_out "the state dir could not be filled: the rest would not test a full disk"
fi

check_fails "suspend on a full disk fails" sc suspend "$SB"
# The operation the daemon recorded, not the CLI's words: every CLI error starts with "spacectl: ". Its code is
# the generic operation_failed today (QEMU's migration error is not mapped to no_space), so the check is on
# ENOSPC's text, which QEMU's error carries into the operation's message.
check_rc "op ls --json --sandbox" 0 sc op ls --json --sandbox "$SB"
check_eq "  ... the suspend operation failed with ENOSPC" "suspend failed ENOSPC" \
        "$(json "$OUT" '[o["kind"] + " " + o["state"] + " " + ("ENOSPC" if "No space left on device" in ((o["error"] or {}).get("message") or "") else str(o["error"])) for o in d["operations"] if o["kind"] == "suspend"][0]' 2>&1)"
check_rc "inspect" 0 sc inspect "$SB" --json
check_eq "the sandbox is still running" running "$(json "$OUT" 'd["state"]')"
c1=$(sc exec "$SB" -- cat /tmp/c 2>/dev/null | tr -dc 0-9)
sleep 1
c2=$(sc exec "$SB" -- cat /tmp/c 2>/dev/null | tr -dc 0-9)
if [ -n "$c1" ] && [ -n "$c2" ] && [ "$c2" -gt "$c1" ]; then pass "its process goes on counting ($c1 -> $c2)"
else fail "its process goes on counting" "$c1 -> $c2"; fi
check_rc "its file is there" 0 sc exec "$SB" -- cat /root/kept
check_eq "  ... with its content" kept "$(cat "$OUT")"
# suspend.state and suspend.done live in the sandbox's data dir, which must be there for this to mean anything
SBDIR=$SPACE_STATE_DIR/sandboxes/$SB
if [ -d "$SBDIR" ] && ! ls -A "$SBDIR" | grep -q suspend; then pass "no partial state file is left"
else fail "no partial state file is left" "$(ls -A "$SBDIR" 2>&1 | head -c 300)"; fi

rm -f "$SPACE_STATE_DIR/filler"
check_rc "with space back, suspend works" 0 sc suspend "$SB"
check_eq "  ... it is suspended" suspended "$(state_of "$SB")"
check_rc "wake" 0 sc wake "$SB"
check_eq "  ... it is running" running "$(state_of "$SB")"
check_rc "the file survived" 0 sc exec "$SB" -- cat /root/kept
check_rc "rm -f" 0 sc rm -f "$SB"
unmount_state
done_testing
