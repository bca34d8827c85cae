#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Crash injection (issue 5): spaced is started with SPACE_TEST_CRASH_AT=<point> and SIGKILLs itself there during
# a create (also one that builds a base snapshot), suspend, wake, checkpoint or fork. Then a daemon without it starts and the invariants must hold:
#   - every sandbox is listed in a state the user can see and use or remove: running ones answer exec,
#     suspended ones wake, stopped ones can be removed; none stays creating/suspending/waking/deleting;
#   - no QEMU process (command line naming our temp dir) that no sandbox owns;
#   - no data lost: a file written before a crashed suspend or checkpoint is still there after recovery;
#   - after rm -f of every sandbox and checkpoint rm of every checkpoint, the sandboxes dirs (state and run),
#     the checkpoints dir and the disk store (qcow2 layers, btrfs volumes) are empty, but for the blank
#     overlays of the base snapshots' disks that new layers are copied from.
# SPACE_TEST_STATE_FS=btrfs runs it all on a loop-mounted btrfs state dir (t21), whose checkpoints take a
# snapshot instead of switching layers.
# One state dir for the whole test, so the base snapshot is made once; the daemon restarts between cases.
# Each failure names the case and shows what the daemon logged during it.
. "$(dirname "$0")/lib.sh"

CREATE_POINTS="create-journaled create-layer create-spawned create-restored create-before-done"
SUSPEND_POINTS="suspend-journaled suspend-saved suspend-marked suspend-before-done"
WAKE_POINTS="wake-journaled wake-restored wake-before-done"
CHECKPOINT_POINTS="checkpoint-prepared checkpoint-stopped checkpoint-layer-switched checkpoint-linked checkpoint-saved checkpoint-before-done"
[ "${SPACE_TEST_STATE_FS:-}" = btrfs ] &&
        CHECKPOINT_POINTS="checkpoint-prepared checkpoint-stopped checkpoint-snapshotted checkpoint-saved checkpoint-before-done"
FORK_POINTS="create-layer create-spawned create-restored create-before-done"
[ -n "${SPACE_TEST_CRASH_ONLY:-}" ] && diag "only: $SPACE_TEST_CRASH_ONLY"

space_env_setup
if [ "${SPACE_TEST_STATE_FS:-}" = btrfs ] && ! mount_btrfs_state 3G; then
        skip "crash injection on a btrfs state dir" "$BTRFS_SKIP"
        done_testing
fi
start_daemon
LOG=$TEST_TMP/spaced.log

DATA='mkdir -p /root && echo precious > /root/data && sync && echo counted > /tmp/mem'

# ---------------------------------------------------------------- helpers

log_mark() {
        wc -l <"$LOG"
}

# diag_log_since LINE: what the daemon logged in this case.
diag_log_since() {
        diag "--- spaced.log during this case:"
        tail -n +"$(($1 + 1))" "$LOG" | tail -n 30 | cut -c1-260 | sed 's/^/#   /'
}

stop_daemon() {
        local pid
        pid=$(daemon_pid) || return 0
        pid_alive "$pid" || return 0
        kill -TERM "$pid"
        wait_for 15 pid_gone "$pid" || { kill -KILL "$pid"; wait_for 5 pid_gone "$pid"; }
}

# start_crashing POINT: a daemon that kills itself at POINT (only it gets the variable, not spacectl).
start_crashing() {
        SPACE_TEST_CRASH_AT=$1 "$SPACED_BIN" >>"$LOG" 2>&1 </dev/null &
        CRASH_PID=$!
        disown "$CRASH_PID"
        SEEN_PIDS+=("$CRASH_PID")
        wait_for 30 daemon_answers
}

# Our QEMUs that are alive (not zombies), one pid a line.
live_qemus() {
        python3 - "$TEST_TMP" <<'EOF'
import os, sys
tmp = sys.argv[1].encode()
for p in os.listdir("/proc"):
    if not p.isdigit():
        continue
    try:
        cmd = open("/proc/%s/cmdline" % p, "rb").read()
        stat = open("/proc/%s/stat" % p).read()
    except OSError:
        continue
    if stat.rsplit(")", 1)[1].split()[0] == "Z":
        continue
    argv0 = cmd.split(b"\0")[0]
    if b"qemu-system" in os.path.basename(argv0) and tmp in cmd:
        print(p)
EOF
}

# spacectl for the checks after a crash: a sandbox left stopped by the crash must fail a check, not hang the test.
scq() {
        timeout -k 2 20 spacectl "$@"
}

ls_json() {
        sc ls --json >"$TEST_TMP/ls.json" 2>/dev/null
}

transitional_left() {
        ls_json || return 0
        [ "$(json "$TEST_TMP/ls.json" 'len([s for s in S(d) if s["state"] in ("creating","suspending","waking","deleting")])')" != 0 ]
}

remove_all() {
        local ids c
        ls_json && ids=$(json "$TEST_TMP/ls.json" '" ".join(s["id"] for s in S(d))')
        [ -n "${ids:-}" ] && sc rm -f $ids >/dev/null 2>&1
        for c in $(sc checkpoint ls -q 2>/dev/null); do sc checkpoint rm "$c" >/dev/null 2>&1; done
        return 0
}

dir_empty() {
        [ ! -d "$1" ] || [ -z "$(ls -A "$1" 2>/dev/null)" ]
}

# The layers dir may keep its cache of blank overlays (layers/.blank, copied for each new layer), but only of the
# base snapshots' disks, which stay: a blank whose backing is a layer goes with that layer.
layers_clean() {
        local f
        [ -z "$(ls -A "$SPACE_STATE_DIR/layers" 2>/dev/null | grep -vx .blank)" ] || return 1
        for f in "$SPACE_STATE_DIR"/layers/.blank/*; do
                [ -e "$f" ] || continue
                case $f in */.new-*) return 1 ;; esac
                grep -q "$SPACE_STATE_DIR/layers/" "$f" && return 1
        done
        return 0
}

all_clean() {
        dir_empty "$SPACE_STATE_DIR/sandboxes" && dir_empty "$SPACE_RUNTIME_DIR/sandboxes" &&
                dir_empty "$SPACE_STATE_DIR/checkpoints" && layers_clean &&
                dir_empty "$SPACE_STATE_DIR/volumes" && [ -z "$(live_qemus)" ]
}

# A running sandbox with data on its disk and in memory; prints its id.
prepare_running() {
        local id
        id=$(sc_create 2>/dev/null) || return 1
        track_sandbox "$id"
        sc exec "$id" -- sh -c "$DATA" >/dev/null 2>&1 || return 1
        echo "$id"
}

# check_invariants CASE MARK [DATA_SANDBOX]: the checks after the restart, then the cleanup check.
check_invariants() {
        local case=$1 mark=$2 data_sb=${3:-} ok=1 why=() id state qp owned q hung=" "
        # a create or fork the crash interrupted may be finished or rolled back in the background
        for _ in $(seq 120); do transitional_left || break; sleep 0.5; done
        if ! ls_json; then
                fail "$case: ls works after the restart"
                diag_log_since "$mark"
                return 1
        fi
        cp "$TEST_TMP/ls.json" "$TEST_TMP/ls-case.json"
        owned=" $(json "$TEST_TMP/ls-case.json" '" ".join(str(s["qemu_pid"]) for s in S(d) if s.get("qemu_pid"))') "
        for q in $(live_qemus); do
                case $owned in *" $q "*) ;; *) ok=0; why+=("QEMU $q runs but no sandbox owns it: $(tr '\0' ' ' </proc/"$q"/cmdline | head -c 200)") ;; esac
        done
        while read -r id state; do
                [ -n "$id" ] || continue
                track_sandbox "$id"
                case $state in
                running)
                        scq exec "$id" -- true >/dev/null 2>"$TEST_TMP/inv.err"
                        q=$?
                        if [ $q != 0 ]; then
                                ok=0
                                why+=("$id is running but exec fails (exit $q; 124 or 137: no answer in 20 s): $(head -c 200 "$TEST_TMP/inv.err" | grep -v Killed)")
                                hung+="$id "
                        fi
                        ;;
                paused)
                        scq resume "$id" >/dev/null 2>"$TEST_TMP/inv.err" || { ok=0; why+=("$id is paused but resume fails: $(head -c 200 "$TEST_TMP/inv.err")"); }
                        ;;
                suspended)
                        if scq wake "$id" >/dev/null 2>"$TEST_TMP/inv.err"; then
                                track_sandbox "$id"
                                scq exec "$id" -- true >/dev/null 2>&1 || { ok=0; why+=("$id woke but exec fails"); }
                        else
                                ok=0
                                why+=("$id is suspended but wake fails: $(head -c 200 "$TEST_TMP/inv.err")")
                        fi
                        ;;
                stopped | error)
                        if [ "$id" = "$data_sb" ]; then
                                ok=0
                                why+=("$id, which held data, is $state after the crash: its memory is lost ($(json "$TEST_TMP/ls-case.json" '[s.get("error") for s in S(d) if s["id"] == "'"$id"'"][0]'))")
                        fi
                        ;;
                *)
                        ok=0
                        why+=("$id is left in state '$state'")
                        ;;
                esac
        done < <(json "$TEST_TMP/ls-case.json" '"\n".join(s["id"] + " " + s["state"] for s in S(d))')
        if [ -n "$data_sb" ]; then
                state=$(json "$TEST_TMP/ls-case.json" '([s["state"] for s in S(d) if s["id"] == "'"$data_sb"'"] + ["gone"])[0]')
                if [ "$state" = gone ]; then
                        ok=0
                        why+=("the sandbox $data_sb that held data is gone")
                elif [[ $hung == *" $data_sb "* ]]; then
                        why+=("(its data could not be checked: it does not answer)")
                elif [ "$(scq exec "$data_sb" -- cat /root/data 2>/dev/null)" != precious ]; then
                        ok=0
                        why+=("the file written before the crash is not there in $data_sb (state $state)")
                elif [ "$(scq exec "$data_sb" -- cat /tmp/mem 2>/dev/null)" != counted ]; then
                        ok=0
                        why+=("the disk file is there but /tmp/mem (written just before) is not in $data_sb")
                fi
        fi
        if [ $ok = 1 ]; then
                pass "$case: after the restart every sandbox is usable or removable, no stray QEMU, no data lost"
        else
                fail "$case: after the restart every sandbox is usable or removable, no stray QEMU, no data lost" "${why[@]}"
                diag "sandboxes: $(json "$TEST_TMP/ls-case.json" '[(s["id"][:12], s["state"], s.get("qemu_pid"), s.get("error")) for s in S(d)]')"
                diag_log_since "$mark"
        fi

        remove_all
        for _ in $(seq 50); do all_clean && break; sleep 0.2; done
        if all_clean; then
                pass "$case: after rm -f and checkpoint rm of everything nothing is left"
        else
                fail "$case: after rm -f and checkpoint rm of everything nothing is left" \
                        "state/sandboxes: $(ls -A "$SPACE_STATE_DIR/sandboxes" 2>/dev/null | tr '\n' ' ')" \
                        "run/sandboxes: $(ls -A "$SPACE_RUNTIME_DIR/sandboxes" 2>/dev/null | tr '\n' ' ')" \
                        "checkpoints: $(ls -A "$SPACE_STATE_DIR/checkpoints" 2>/dev/null | tr '\n' ' ')" \
                        "disks: $(ls -A "$SPACE_STATE_DIR/layers" "$SPACE_STATE_DIR/layers/.blank" "$SPACE_STATE_DIR/volumes" 2>/dev/null | tr '\n' ' ')" \
                        "qemus: $(live_qemus | tr '\n' ' ')" "left in ls: $(sc ls -q 2>/dev/null | tr '\n' ' ')"
                diag_log_since "$mark"
                # start the next case clean
                for q in $(live_qemus); do kill -KILL "$q" 2>/dev/null; done
                rm -rf "${SPACE_STATE_DIR:?}/sandboxes/"* "${SPACE_RUNTIME_DIR:?}/sandboxes/"* "${SPACE_STATE_DIR:?}/checkpoints/"* \
                        "${SPACE_STATE_DIR:?}/layers/"*
                for q in "$SPACE_STATE_DIR"/volumes/*; do
                        [ -d "$q" ] && btrfs subvolume delete "$q" >/dev/null 2>&1
                done
        fi
}

# run_case OP POINT: the whole case.
run_case() {
        local op=$1 point=$2 case="$1 killed at $2" mark sb="" cp="" died
        if [ -n "${SPACE_TEST_CRASH_ONLY:-}" ] && [[ " $SPACE_TEST_CRASH_ONLY " != *" $point "* ]]; then
                return 0
        fi
        mark=$(log_mark)
        echo "# ---- $case" >>"$LOG"
        daemon_answers || start_daemon
        case $op in
        suspend | checkpoint)
                sb=$(prepare_running) || { fail "$case: prepare a running sandbox with data"; diag_log_since "$mark"; return; }
                ;;
        wake)
                sb=$(prepare_running) && sc suspend "$sb" >/dev/null 2>&1 ||
                        { fail "$case: prepare a suspended sandbox with data"; diag_log_since "$mark"; return; }
                ;;
        fork)
                sb=$(prepare_running) && cp=$(sc checkpoint -q "$sb" 2>/dev/null) ||
                        { fail "$case: prepare a checkpoint"; diag_log_since "$mark"; return; }
                ;;
        esac
        stop_daemon
        if ! start_crashing "$point"; then
                fail "$case: start spaced with SPACE_TEST_CRASH_AT"
                diag_log_since "$mark"
                return
        fi
        case $op in
        create) run timeout -k 5 60 spacectl create ;;
        # a shape no sandbox had: the create boots a base snapshot first
        create-base) run timeout -k 5 120 spacectl create --memory 320 ;;
        suspend) run timeout -k 5 60 spacectl suspend "$sb" ;;
        wake) run timeout -k 5 60 spacectl wake "$sb" ;;
        checkpoint) run timeout -k 5 60 spacectl checkpoint "$sb" ;;
        fork) run timeout -k 5 60 spacectl fork "$cp" -n 2 ;;
        esac
        if wait_for 30 pid_gone "$CRASH_PID"; then died=1; else died=0; fi
        if [ $died = 1 ]; then
                pass "$case: spaced died there"
        else
                fail "$case: spaced died there" "the operation ran to its end with the crash daemon (exit $RC): the point was not reached"
                diag_log_since "$mark"
                kill -KILL "$CRASH_PID" 2>/dev/null
                wait_for 5 pid_gone "$CRASH_PID"
        fi
        # The autostart of a spacectl still polling may have started a daemon (without the variable): fine.
        daemon_answers || start_daemon
        # The sandbox of a crashed create or fork is not known to us: pick up every QEMU for cleanup.
        for q in $(live_qemus); do SEEN_PIDS+=("$q"); done
        case $op in
        suspend | checkpoint | wake) check_invariants "$case" "$mark" "$sb" ;;
        *) check_invariants "$case" "$mark" ;;
        esac
}

START=$(date +%s)
for p in $CREATE_POINTS; do run_case create "$p"; done
run_case create-base base-booting
for p in $SUSPEND_POINTS; do run_case suspend "$p"; done
for p in $WAKE_POINTS; do run_case wake "$p"; done
for p in $CHECKPOINT_POINTS; do run_case checkpoint "$p"; done
for p in $FORK_POINTS; do run_case fork "$p"; done
diag "all cases in $(($(date +%s) - START)) s"

done_testing
