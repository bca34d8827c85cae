#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A VM that QEMU stops by itself ends failed, with the reason in inspect (issue 27). Before, a guest kernel
# panic (panic=-1 under -no-reboot) made QEMU exit and the sandbox said only "QEMU exited"; a KVM internal
# error left it "running" for ever. Now each sandbox's QEMU has a second monitor the daemon watches
# (spaced/vm/vm-events-watch.c), a pvpanic device, and holds a guest that resets (-no-shutdown), so its console
# still says why. Root crashes the kernel through sysrq: the sandbox is `error` within a bounded wait, inspect
# and ls --json say "the guest's kernel panicked: Kernel panic - ...", its QEMU is gone, a neighbour runs on,
# rm removes it and its files, the daemon stays up. With kernel.panic=0 (the kernel spins instead of
# resetting) pvpanic still tells. A pause, resume and checkpoint (the daemon's own STOPs) fail nothing.
#
# Snapshots made before (an older daemon's QEMU, played by a wrapper that drops pvpanic, the events monitor and
# -no-shutdown, and its base renamed as that daemon named it): a sandbox running under it is adopted quietly,
# unwatched; a new base is built for today's device set; a suspended sandbox and a checkpoint saved without
# pvpanic restore under the new command line; a woken guest, which never saw pvpanic, panics through the reset
# path and fails the same way. After a daemon restart a running VM is watched again. The
# internal-error path needs KVM: tests/unit/test-vm-events.c feeds QEMU's lines for it.
. "$(dirname "$0")/lib.sh"

space_env_setup

QEMU=$(command -v qemu-system-x86_64)
OLD_QEMU=$TEST_TMP/old-qemu
cat >"$OLD_QEMU" <<EOF
#!/usr/bin/sh
# QEMU as a daemon from before the events monitor started it
n=\$#
while [ "\$n" -gt 0 ]; do
        a=\$1; shift; n=\$((n - 1))
        case \$a in
        -no-shutdown) continue ;;
        -device|-chardev|-mon)
                v=\$1; shift; n=\$((n - 1))
                case \$v in pvpanic|*id=qmp1,*|chardev=qmp1,*) continue ;; esac
                set -- "\$@" "\$a" "\$v"; continue ;;
        esac
        set -- "\$@" "\$a"
done
exec $QEMU "\$@"
EOF
chmod 0755 "$OLD_QEMU"

CRASH='echo 1 >/proc/sys/kernel/sysrq 2>/dev/null; echo c >/proc/sysrq-trigger'

qemu_pid_of() { cat "$SPACE_RUNTIME_DIR/sandboxes/$1/qemu.pid" 2>/dev/null; }
qemu_args_of() { tr '\0' ' ' <"/proc/$(qemu_pid_of "$1")/cmdline" 2>/dev/null; }
is_error() { [ "$(state_of "$1")" = error ]; }

stop_daemon() {
        local pid
        pid=$(daemon_pid)
        kill -TERM "$pid"
        wait_for 15 pid_gone "$pid" || { kill -KILL "$pid"; wait_for 5 pid_gone "$pid"; }
}

# crash ID DESC [SETUP]: crashes ID's kernel (after the shell code SETUP) and checks everything a failed
# sandbox must show.
crash() {
        local id=$1 what=$2 setup=${3:-} qpid err
        qpid=$(qemu_pid_of "$id")
        # the exec itself ends with the channel: its status says nothing
        run sc exec --user root "$id" -- sh -c "$setup $CRASH"
        if wait_for 60 is_error "$id"; then pass "$what: the sandbox is failed within 60 s"
        else fail "$what: the sandbox is failed within 60 s" "state: $(state_of "$id")"; fi
        sc inspect "$id" --json >"$TEST_TMP/inspect.json" 2>/dev/null
        err=$(json "$TEST_TMP/inspect.json" 'd.get("error", "")')
        check_match "$what: inspect says the kernel panicked, with the guest's panic line" \
                "^the guest's kernel panicked: Kernel panic - not syncing: sysrq triggered crash$" "$err"
        run sc inspect "$id"
        check_contains "$what: inspect's text shows it too" "kernel panicked" "$OUT"
        sc ls --json >"$TEST_TMP/ls.json" 2>/dev/null
        check_eq "$what: ls shows it failed, with the reason" "error|$err" \
                "$(json "$TEST_TMP/ls.json" '[s["state"] + "|" + s.get("error", "") for s in S(d) if s["id"] == "'"$id"'"][0]')"
        if [ -n "$qpid" ] && wait_for 10 pid_gone "$qpid"; then pass "$what: its QEMU is gone"
        else fail "$what: its QEMU is gone" "pid ${qpid:-?} still runs"; fi
}

# ---- an older daemon's QEMU makes the base snapshot, a checkpoint and a suspended sandbox
write_config "qemu = $OLD_QEMU"
start_daemon
create_sandbox OLD --name t47-old
[ -n "$OLD" ] || { last_diag; bail_out "create under the old QEMU failed"; }
case $(qemu_args_of "$OLD") in
*"-device pvpanic"* | *events.sock* | *-no-shutdown*) fail "the old QEMU runs without pvpanic, events monitor and -no-shutdown" "$(qemu_args_of "$OLD")" ;;
*) pass "the old QEMU runs without pvpanic, events monitor and -no-shutdown" ;;
esac
check_rc "a file in it" 0 sc exec "$OLD" -- sh -c 'echo kept >/tmp/f'
check_rc "checkpoint it" 0 sc checkpoint "$OLD" --name t47-old-cp
create_sandbox SUSP --name t47-suspended
[ -n "$SUSP" ] || { last_diag; bail_out "create under the old QEMU failed"; }
check_rc "suspend another" 0 sc suspend "$SUSP"
stop_daemon
# and an older daemon named its base without the device set (nor the CA its guest trusts)
for d in "$SPACE_STATE_DIR"/base/*-pvpanic; do mv "$d" "${d%-ca*-pvpanic}"; done

write_config
start_daemon
check_eq "a sandbox an older daemon started is adopted" running "$(state_of "$OLD")"
check_rc "... and runs commands, unwatched" 0 sc exec "$OLD" -- true
if grep -q "cannot watch" "$TEST_TMP/spaced.log"; then fail "... without a warning about its missing monitor"
else pass "... without a warning about its missing monitor"; fi
create_sandbox SB --name t47-crash
[ -n "$SB" ] || { last_diag; bail_out "create failed"; }
case $(qemu_args_of "$SB") in
*"-device pvpanic"*events.sock*-no-shutdown*) pass "a create runs with pvpanic, events monitor and -no-shutdown" ;;
*) fail "a create runs with pvpanic, events monitor and -no-shutdown" "$(qemu_args_of "$SB")" ;;
esac
check_eq "... from a base of its own, the old one kept for what stands on it" 2 \
        "$(ls -d "$SPACE_STATE_DIR"/base/*-tcg "$SPACE_STATE_DIR"/base/*-tcg-ca*-pvpanic 2>/dev/null | wc -l)"
create_sandbox NB --name t47-neighbour
[ -n "$NB" ] || { last_diag; bail_out "create failed"; }
check_rc "wake the sandbox suspended under the old QEMU" 0 sc wake "$SUSP"
check_rc "... it runs commands" 0 sc exec "$SUSP" -- true
run sc restore "$OLD" t47-old-cp
check_eq "restore the old QEMU's checkpoint" 0 "$RC" || last_diag
check_eq "... it has its file" kept "$(sc exec "$OLD" -- cat /tmp/f 2>/dev/null)"

# ---- the daemon's own stops fail nothing
check_rc "pause" 0 sc pause "$SB"
check_rc "resume" 0 sc resume "$SB"
check_rc "checkpoint in place" 0 sc checkpoint "$SB" --name t47-cp
check_rc "... it still runs commands" 0 sc exec "$SB" -- true
check_eq "... and is running, not failed" running "$(state_of "$SB")"

# ---- kernel panics
crash "$SB" "panic"
check_eq "the neighbour still runs" running "$(state_of "$NB")"
check_rc "... and runs commands" 0 sc exec "$NB" -- true
check_fails "exec in the failed sandbox is refused" sc exec "$SB" -- true
RUN_DIR=$SPACE_RUNTIME_DIR/sandboxes/$SB
check_rc "rm removes it" 0 sc rm "$SB"
if [ ! -e "$RUN_DIR" ] && ! ls -d "$SPACE_STATE_DIR"/sandboxes/"$SB"* >/dev/null 2>&1; then pass "... and its files"
else fail "... and its files" "left: $(ls -d "$RUN_DIR" "$SPACE_STATE_DIR"/sandboxes/"$SB"* 2>/dev/null)"; fi
if pid_alive "$(daemon_pid)"; then pass "the daemon is still up"; else fail "the daemon is still up"; fi

crash "$SUSP" "a panic in a guest that never saw pvpanic (woken from the old QEMU's state)"
crash "$OLD" "a panic in the old QEMU's restored checkpoint"

create_sandbox SP0 --name t47-panic0
[ -n "$SP0" ] || { last_diag; bail_out "create failed"; }
crash "$SP0" "kernel.panic=0 (no reset: pvpanic tells)" 'echo 0 >/proc/sys/kernel/panic;'

# ---- after a daemon restart, running VMs are watched again
stop_daemon
start_daemon
check_eq "after a restart the neighbour was adopted" running "$(state_of "$NB")"
crash "$NB" "panic after a restart"
for id in "$SUSP" "$OLD" "$SP0" "$NB"; do run sc rm "$id"; done
check_eq "rm removes them all" 0 "$(sandbox_count)"
grep -q "marked failed" "$TEST_TMP/spaced.log" && pass "the daemon's log says why" || fail "the daemon's log says why"

done_testing
