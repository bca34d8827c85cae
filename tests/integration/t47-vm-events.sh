#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A VM that QEMU stops by itself ends failed, with the reason in inspect (issue 27). Before, a guest kernel
# panic (panic=-1 under -no-reboot) made QEMU exit and the sandbox said only "QEMU exited"; a KVM internal
# error left it "running" for ever. Now each sandbox's QEMU has a second monitor the daemon watches
# (spaced/vm/vm-events-watch.c) and holds a guest that resets (-no-shutdown), so its console still says why:
# root crashes the kernel through sysrq, and the sandbox is `error` within a bounded wait, inspect and
# ls --json say "the guest's kernel panicked: Kernel panic - ...", its QEMU is gone, a neighbour runs on, rm
# removes it and its files, the daemon stays up. A pause, resume and checkpoint (the daemon's own STOPs) fail
# nothing. After a daemon restart a running VM is watched again: one crashed after the restart fails the same
# way. The internal-error path needs KVM: tests/unit/test-vm-events.c feeds QEMU's lines for it.
. "$(dirname "$0")/lib.sh"

space_env_setup
start_daemon
create_sandbox SB --name t47-crash
[ -n "$SB" ] || { last_diag; bail_out "create failed"; }
create_sandbox NB --name t47-neighbour
[ -n "$NB" ] || { last_diag; bail_out "create failed"; }

CRASH='echo 1 >/proc/sys/kernel/sysrq 2>/dev/null; echo c >/proc/sysrq-trigger'

qemu_pid_of() { cat "$SPACE_RUNTIME_DIR/sandboxes/$1/qemu.pid" 2>/dev/null; }
is_error() { [ "$(state_of "$1")" = error ]; }

# crash ID DESC: crashes ID's kernel and checks everything a failed sandbox must show.
crash() {
        local id=$1 what=$2 qpid err
        qpid=$(qemu_pid_of "$id")
        run sc exec --user root "$id" -- sh -c "$CRASH"
        # the exec itself ends with the channel: its status says nothing
        if wait_for 60 is_error "$id"; then pass "$what: the sandbox is failed within 60 s"
        else fail "$what: the sandbox is failed within 60 s" "state: $(state_of "$id")"; fi
        sc inspect "$id" --json >"$TEST_TMP/inspect.json" 2>/dev/null
        err=$(json "$TEST_TMP/inspect.json" 'd.get("error", "")')
        check_match "$what: inspect says the kernel panicked, with the guest's panic line" \
                "^the guest's kernel panicked: Kernel panic - not syncing" "$err"
        run sc inspect "$id"
        check_contains "$what: inspect's text shows it too" "kernel panicked" "$OUT"
        sc ls --json >"$TEST_TMP/ls.json" 2>/dev/null
        check_eq "$what: ls shows it failed, with the reason" "error|$err" \
                "$(json "$TEST_TMP/ls.json" '[s["state"] + "|" + s.get("error", "") for s in S(d) if s["id"] == "'"$id"'"][0]')"
        if [ -n "$qpid" ] && wait_for 10 pid_gone "$qpid"; then pass "$what: its QEMU is gone"
        else fail "$what: its QEMU is gone" "pid ${qpid:-?} still runs"; fi
}

# ---- the daemon's own stops fail nothing
check_rc "pause" 0 sc pause "$SB"
check_rc "resume" 0 sc resume "$SB"
check_rc "checkpoint in place" 0 sc checkpoint "$SB" --name t47-cp
check_rc "... it still runs commands" 0 sc exec "$SB" -- true
check_eq "... and is running, not failed" running "$(state_of "$SB")"

# ---- a kernel panic
crash "$SB" "panic"
check_eq "the neighbour still runs" running "$(state_of "$NB")"
check_rc "... and runs commands" 0 sc exec "$NB" -- true
check_fails "exec in the failed sandbox is refused" sc exec "$SB" -- true
RUN_DIR=$SPACE_RUNTIME_DIR/sandboxes/$SB
DATA_DIR=$(ls -d "$SPACE_STATE_DIR"/sandboxes/"$SB"* 2>/dev/null | head -n1)
check_rc "rm removes it" 0 sc rm "$SB"
if [ ! -e "$RUN_DIR" ] && { [ -z "$DATA_DIR" ] || [ ! -e "$DATA_DIR" ]; }; then pass "... and its files"
else fail "... and its files" "left: $RUN_DIR $DATA_DIR"; fi
if pid_alive "$(daemon_pid)"; then pass "the daemon is still up"; else fail "the daemon is still up"; fi

# ---- after a daemon restart, running VMs are watched again
PID1=$(daemon_pid)
kill -TERM "$PID1"
wait_for 15 pid_gone "$PID1" || { kill -KILL "$PID1"; wait_for 5 pid_gone "$PID1"; }
start_daemon
check_eq "after a restart the neighbour was adopted" running "$(state_of "$NB")"
crash "$NB" "panic after a restart"
check_rc "rm removes it" 0 sc rm "$NB"
grep -q "marked failed" "$TEST_TMP/spaced.log" && pass "the daemon's log says why" || fail "the daemon's log says why"

done_testing
