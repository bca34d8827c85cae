#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# QEMU in its own user and mount namespace (confine = on): from inside, seen through /proc/PID/root, the
# user's home, the state database and another sandbox's run and data directories are not there; its own run
# dir, disk, kernel and /usr are, /usr read-only; QEMU holds no capabilities and keeps its seccomp filter.
# The sandbox still works: exec, suspend and wake, two checkpoints and a fork, a daemon killed and restarted.
# confine = off runs QEMU in the daemon's namespaces, as before.
. "$(dirname "$0")/lib.sh"

space_env_setup
write_config "confine = on"
start_daemon

ns_of() {
        readlink "/proc/$1/ns/$2" 2>/dev/null
}

qemu_pid_of() {
        local f=$TEST_TMP/qp.json
        sc inspect "$1" --json >"$f" 2>/dev/null || return 1
        json "$f" 'd["qemu_pid"]'
}

# The line of /proc/PID/mountinfo for the mount at PATH.
mount_opts() {
        awk -v p="$2" '$5 == p { print $6 }' "/proc/$1/mountinfo" 2>/dev/null | tail -n1
}

create_sandbox A --name t28-a
[ -n "$A" ] || { last_diag; bail_out "create failed"; }
create_sandbox B --name t28-b
[ -n "$B" ] || { last_diag; bail_out "create failed"; }
pass "two sandboxes created with confine = on"
QA=$(qemu_pid_of "$A")
QB=$(qemu_pid_of "$B")
DP=$(daemon_pid)
pid_alive "$QA" && pid_alive "$QB" || bail_out "no QEMU pids ($QA, $QB)"
ROOT=/proc/$QA/root

# ---- namespaces
for ns in mnt user; do
        if [ -n "$(ns_of "$QA" $ns)" ] && [ "$(ns_of "$QA" $ns)" != "$(ns_of "$DP" $ns)" ]; then
                pass "QEMU's $ns namespace is not the daemon's"
        else
                fail "QEMU's $ns namespace is not the daemon's" "$(ns_of "$QA" $ns) vs $(ns_of "$DP" $ns)"
        fi
        if [ "$(ns_of "$QA" $ns)" != "$(ns_of "$QB" $ns)" ]; then
                pass "each QEMU has its own $ns namespace"
        else
                fail "each QEMU has its own $ns namespace" "$(ns_of "$QA" $ns)"
        fi
done
check_eq "QEMU's pid file names the pid the daemon knows" "$QA" "$(cat "$SPACE_RUNTIME_DIR"/sandboxes/"$A"*/qemu.pid)"
check_eq "QEMU runs as the daemon's user" "$(stat -c %u "/proc/$DP")" "$(stat -c %u "/proc/$QA")"

# ---- what it cannot see
if [ -d "$HOME" ] && [ "$HOME" != / ]; then
        check_fails "the user's home ($HOME) is not there" ls "$ROOT$HOME"
else
        skip "the user's home is not there" "HOME is '$HOME'"
fi
[ -e "$SPACE_STATE_DIR/space.db" ] || fail "the state database exists outside" "$SPACE_STATE_DIR/space.db"
check_fails "the state database is not there" ls -d "$ROOT$SPACE_STATE_DIR/space.db"
check_fails "the state dir holds nothing to list but what QEMU needs" ls -d "$ROOT$SPACE_STATE_DIR/sandboxes"
RUN_B=$(echo "$SPACE_RUNTIME_DIR"/sandboxes/"$B"*)
RUN_A=$(echo "$SPACE_RUNTIME_DIR"/sandboxes/"$A"*)
[ -S "$RUN_B/qmp.sock" ] || fail "B's run dir exists outside" "$RUN_B"
check_fails "another sandbox's run dir is not there" ls -d "$ROOT$RUN_B"
DISK_B=$(readlink -f "$SPACE_STATE_DIR/sandboxes/$B/disk")
DISK_A=$(readlink -f "$SPACE_STATE_DIR/sandboxes/$A/disk")
[ -f "$DISK_B" ] || fail "B's disk exists outside" "$DISK_B"
check_fails "another sandbox's data dir is not there" ls -d "$ROOT$SPACE_STATE_DIR/sandboxes/$B"
check_fails "another sandbox's disk is not there" ls -d "$ROOT$DISK_B"
check_fails "the API socket is not there" ls -d "$ROOT$SPACE_SOCKET"
check_fails "the host's /proc is not there" ls -d "$ROOT/proc/1"

# ---- what it needs
check_rc "its own QMP socket is there, at the same path" 0 test -S "$ROOT$RUN_A/qmp.sock"
check_rc "its own disk is there" 0 test -f "$ROOT$DISK_A"
check_rc "the guest kernel is there" 0 test -f "$ROOT$SPACE_LIB_DIR/vmlinux"
check_match "/usr is read-only inside" '(^|,)ro(,|$)' "$(mount_opts "$QA" /usr)"
check_match "the root is read-only inside" '(^|,)ro(,|$)' "$(mount_opts "$QA" /)"
check_match "its run dir is writable" '(^|,)rw(,|$)' "$(mount_opts "$QA" "$RUN_A")"
check_eq "QEMU holds no capabilities" 0000000000000000 "$(awk '/^CapEff/ { print $2 }' "/proc/$QA/status")"
check_eq "QEMU's bounding set is empty" 0000000000000000 "$(awk '/^CapBnd/ { print $2 }' "/proc/$QA/status")"
check_eq "QEMU's seccomp filter (-sandbox on) is in place" 2 "$(awk '/^Seccomp:/ { print $2 }' "/proc/$QA/status")"

# ---- the sandbox works
check_rc "exec" 0 sc exec "$A" -- sh -c 'echo hello > /tmp/f; cat /tmp/f'
check_eq "exec prints what the guest wrote" hello "$(cat "$OUT")"
check_rc "suspend" 0 sc suspend "$A"
check_rc "wake" 0 sc wake "$A"
check_rc "a file survives suspend and wake" 0 sc exec "$A" -- cat /tmp/f
Q2=$(qemu_pid_of "$A")
if [ -n "$(ns_of "$Q2" mnt)" ] && [ "$(ns_of "$Q2" mnt)" != "$(ns_of "$DP" mnt)" ]; then
        pass "the woken QEMU is confined too"
else
        fail "the woken QEMU is confined too" "pid $Q2"
fi
check_rc "write before the first checkpoint" 0 sc exec "$A" -- sh -c 'echo v1 > /root/g; sync'
check_rc "checkpoint" 0 sc checkpoint "$A" --name t28-cp1
check_rc "write after the first checkpoint" 0 sc exec "$A" -- sh -c 'echo v2 > /root/g; sync'
check_rc "a second checkpoint" 0 sc checkpoint "$A" --name t28-cp2
check_rc "write after the second checkpoint" 0 sc exec "$A" -- sh -c 'echo v3 > /root/g; sync; cat /root/g'
check_eq "  ... and read it back" v3 "$(cat "$OUT")"
check_rc "fork the first checkpoint" 0 sc fork t28-cp1
F=$(head -n1 "$OUT")
track_sandbox "$F"
check_rc "exec in the fork" 0 sc exec "$F" -- cat /root/g
check_eq "the fork has the first checkpoint's disk" v1 "$(cat "$OUT")"
QF=$(qemu_pid_of "$F")
if [ -n "$(ns_of "$QF" mnt)" ] && [ "$(ns_of "$QF" mnt)" != "$(ns_of "$DP" mnt)" ]; then
        pass "the fork's QEMU is confined"
else
        fail "the fork's QEMU is confined" "pid $QF"
fi
check_fails "the fork's QEMU does not see its source's disk top" ls -d "/proc/$QF/root$(readlink -f "$SPACE_STATE_DIR/sandboxes/$A/disk")"
check_rc "restore the second checkpoint" 0 sc restore "$A" t28-cp2
check_rc "exec after restore" 0 sc exec "$A" -- cat /root/g
check_eq "  ... reads the second checkpoint's disk" v2 "$(cat "$OUT")"

# ---- the daemon dies; QEMU does not, and the new daemon finds it and talks to it
QB=$(qemu_pid_of "$B")
kill -9 "$DP"
wait_for 10 pid_gone "$DP" || fail "the daemon dies" "$DP"
if pid_alive "$QB"; then pass "QEMU outlives the daemon"; else fail "QEMU outlives the daemon" "pid $QB"; fi
start_daemon
check_rc "exec after the daemon restart (socket reached from outside)" 0 sc exec "$B" -- echo back
check_eq "  ... prints" back "$(cat "$OUT")"
check_eq "the sandbox kept its QEMU" "$QB" "$(qemu_pid_of "$B")"

# ---- confine = off: as before
kill "$(daemon_pid)"
wait_for 10 pid_gone "$(daemon_pid)"
write_config "confine = off"
start_daemon
create_sandbox C --name t28-off
[ -n "$C" ] || { last_diag; fail "create with confine = off"; }
QC=$(qemu_pid_of "$C")
check_eq "with confine = off QEMU shares the daemon's mount namespace" "$(ns_of "$(daemon_pid)" mnt)" "$(ns_of "$QC" mnt)"
check_rc "exec with confine = off" 0 sc exec "$C" -- true

done_testing
