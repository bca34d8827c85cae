#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Lifecycle (issue 5): a process that counts in memory keeps counting across pause/resume (and stands still
# while paused), suspend/wake (QEMU gone while suspended) and a daemon kill -9 while suspended; exec wakes a
# suspended sandbox; checkpoint + fork -n 3 give forks that diverge and differ in hostname, sandbox id and
# random bytes; restore brings a file back; checkpoint rm; idle suspend; a time to live removes a sandbox.
# A checkpoint's RAM is a file of its own that forks and restores map (their QEMU's maps show it), with the guest's
# memory as it was (a tmpfs file, a process still running), across a daemon restart too; one whose memory file
# is gone or whose device state was tampered with fails clearly and leaves nothing behind.
. "$(dirname "$0")/lib.sh"

space_env_setup
start_daemon

# The counter: a shell loop in the guest writing i to /tmp/cnt ten times a second, detached from the exec.
# write-then-rename: a reader must never see the file empty between the truncation and the write
COUNTER='mkdir -p /tmp; (i=0; while :; do i=$((i+1)); echo $i >/tmp/cnt.new; mv /tmp/cnt.new /tmp/cnt; sleep 0.1; done) </dev/null >/dev/null 2>&1 &'

count_of() {
        sc exec "$1" -- cat /tmp/cnt 2>/dev/null | tr -dc 0-9
}

qemu_pid_of() {
        local f=$TEST_TMP/qp.json
        sc inspect "$1" --json >"$f" 2>/dev/null || return 1
        json "$f" 'd["qemu_pid"]'
}

is_state() {
        [ "$(state_of "$1")" = "$2" ]
}

# The state from `ls --json`: naming a sandbox (inspect) counts as using it and would keep it from idling.
ls_state() {
        local f=$TEST_TMP/ls-state.json
        sc ls --json >"$f" 2>/dev/null || return 1
        json "$f" '([s["state"] for s in S(d) if s["id"] == "'"$1"'"] + ["gone"])[0]'
}

ls_is_state() {
        [ "$(ls_state "$1")" = "$2" ]
}

# is_num_gt A B: A and B are numbers and A > B
is_num_gt() {
        [[ $1 =~ ^[0-9]+$ ]] && [[ $2 =~ ^[0-9]+$ ]] && [ "$1" -gt "$2" ]
}

create_sandbox SB --name t11-main
[ -n "$SB" ] || { last_diag; bail_out "create failed"; }
pass "create a sandbox"
check_rc "start a counter in it" 0 sc exec "$SB" -- sh -c "$COUNTER echo started; echo kept > /tmp/kept"
sleep 1
C0=$(count_of "$SB")
if is_num_gt "$C0" 0; then pass "the counter counts ($C0)"; else fail "the counter counts" "got '$C0'"; fi

# ---- pause / resume
C0=$(count_of "$SB")
check_rc "pause" 0 sc pause "$SB"
check_eq "pause prints the sandbox id" "$SB" "$(head -n1 "$OUT")"
check_eq "state is paused" paused "$(state_of "$SB")"
QP=$(qemu_pid_of "$SB")
if pid_alive "$QP"; then pass "QEMU stays while paused"; else fail "QEMU stays while paused" "pid '$QP'"; fi
check_fails "exec into a paused sandbox is refused" sc exec "$SB" -- true
sleep 3
check_rc "resume" 0 sc resume "$SB"
C1=$(count_of "$SB")
# 3 s paused would be ~30 ticks; the exec round trips before and after cost a few.
if [[ $C1 =~ ^[0-9]+$ ]] && [[ $C0 =~ ^[0-9]+$ ]] && [ "$C1" -ge "$C0" ] && [ $((C1 - C0)) -lt 15 ]; then
        pass "the counter did not advance while paused ($C0 -> $C1)"
else
        fail "the counter did not advance while paused" "before pause $C0, after resume $C1"
fi
sleep 1
C2=$(count_of "$SB")
if is_num_gt "$C2" "$C1"; then pass "it counts again after resume ($C1 -> $C2)"; else fail "it counts again after resume" "$C1 -> $C2"; fi
check_rc "pause --async prints an operation id" 0 sc pause --async "$SB"
OPID=$(head -n1 "$OUT")
check_match "  ... that looks like op-..." '^op-' "$OPID"
check_rc "op wait on it" 0 sc op wait "$OPID"
check_rc "resume again" 0 sc resume "$SB"

# ---- suspend / wake
C0=$(count_of "$SB")
QP=$(qemu_pid_of "$SB")
check_rc "suspend" 0 sc suspend "$SB"
check_eq "suspend prints the sandbox id" "$SB" "$(head -n1 "$OUT")"
check_eq "suspend shows no progress when stderr is not a terminal" "" "$(cat "$ERR")"
check_eq "state is suspended" suspended "$(state_of "$SB")"
if wait_for 10 pid_gone "$QP"; then pass "its QEMU ($QP) is gone while suspended"; else fail "its QEMU ($QP) is gone while suspended"; fi
check_eq "qemu_pid is 0 while suspended" 0 "$(qemu_pid_of "$SB")"
check_rc "wake" 0 sc wake "$SB"
check_eq "state is running" running "$(state_of "$SB")"
track_sandbox "$SB"
C1=$(count_of "$SB")
sleep 1
C2=$(count_of "$SB")
if [[ $C1 =~ ^[0-9]+$ ]] && [ "$C1" -ge "$C0" ] && is_num_gt "$C2" "$C1"; then
        pass "the counter goes on after wake ($C0 -> $C1 -> $C2)"
else
        fail "the counter goes on after wake" "$C0 -> $C1 -> $C2"
fi
check_rc "a file survives suspend and wake" 0 sc exec "$SB" -- cat /tmp/kept
check_eq "  ... with its content" kept "$(cat "$OUT")"

# ---- kill -9 the daemon while suspended
check_rc "suspend again" 0 sc suspend "$SB"
C0=$C2 # the last count before this suspend
OLD=$(daemon_pid)
kill -KILL "$OLD"
wait_for 10 pid_gone "$OLD" || fail "spaced died on SIGKILL"
start_daemon
check_eq "after a daemon restart the sandbox is still suspended" suspended "$(state_of "$SB")"
check_rc "wake after the restart" 0 sc wake "$SB"
track_sandbox "$SB"
C1=$(count_of "$SB")
sleep 1
C2=$(count_of "$SB")
if [[ $C1 =~ ^[0-9]+$ ]] && [ "$C1" -ge "$C0" ] && is_num_gt "$C2" "$C1"; then
        pass "the counter goes on after a restart while suspended ($C0 -> $C1 -> $C2)"
else
        fail "the counter goes on after a restart while suspended" "$C0 -> $C1 -> $C2"
fi
check_rc "the file is still there" 0 sc exec "$SB" -- cat /tmp/kept

# ---- exec into a suspended sandbox wakes it
check_rc "suspend for wake-on-demand" 0 sc suspend "$SB"
run sc exec "$SB" -- cat /tmp/kept
if [ "$RC" -eq 0 ] && [ "$(cat "$OUT")" = kept ]; then
        pass "exec into a suspended sandbox wakes it"
else
        fail "exec into a suspended sandbox wakes it"
        last_diag
fi
check_eq "  ... and it is running" running "$(state_of "$SB")"
wait_for 30 is_state "$SB" running || sc wake "$SB" >/dev/null 2>&1
track_sandbox "$SB"

# ---- checkpoint + fork
check_rc "write a file before the checkpoint" 0 sc exec "$SB" -- sh -c 'echo v1 > /tmp/f; echo parent > /tmp/origin'
# guest memory only: a tmpfs file and a process, which a fork must find as they were
check_rc "write a tmpfs file and start a sleeper" 0 sc exec "$SB" -- sh -c \
        'echo in-ram > /dev/shm/t11-shm; sleep 100000 </dev/null >/dev/null 2>&1 & echo $! > /dev/shm/t11-sleeper'
check_rc "checkpoint --name" 0 sc checkpoint "$SB" --name t11-cp
CP=$(head -n1 "$OUT")
check_match "checkpoint prints its id" '^cp-[0-9a-f]+$' "$CP"
check_match "  ... and the pause time on stderr" 'paused for [0-9.]+ ms' "$(cat "$ERR")"
diag "checkpoint: $(cat "$ERR")"
check_rc "checkpoint ls" 0 sc checkpoint ls
check_contains "  ... lists it by name" t11-cp "$OUT"
check_rc "checkpoint ls --json --sandbox" 0 sc checkpoint ls --json --sandbox t11-main
check_eq "  ... has it" "$CP" "$(json "$OUT" '[c["id"] for c in d["checkpoints"] if c.get("name") == "t11-cp"][0]' 2>&1)"
check_eq "  ... ready, with the pause it took" "ready true" \
        "$(json "$OUT" '[c["state"] + " " + str(c["pause_ms"] > 0).lower() for c in d["checkpoints"] if c["id"] == "'"$CP"'"][0]' 2>&1)"
CPDIR=$SPACE_STATE_DIR/checkpoints
CP_MIB=$(json "$OUT" '[c["memory_mib"] for c in d["checkpoints"] if c["id"] == "'"$CP"'"][0]')
CP_SIZE=$(json "$OUT" '[c["size_bytes"] for c in d["checkpoints"] if c["id"] == "'"$CP"'"][0]')
check_eq "its RAM is a memory file of the sandbox's size" "$((CP_MIB << 20))" "$(stat -c %s "$CPDIR/$CP.mem" 2>&1)"
STATE_BYTES=$(stat -c %s "$CPDIR/$CP.state")
if [ "$STATE_BYTES" -lt $((4 << 20)) ]; then pass "  ... and the state file keeps only device state ($STATE_BYTES bytes)"; else
        fail "  ... and the state file keeps only device state" "$STATE_BYTES bytes"; fi
MEM_ALLOC=$(($(stat -c %b "$CPDIR/$CP.mem") * 512))
if [ "$MEM_ALLOC" -lt $((CP_MIB << 20)) ] && [ "$CP_SIZE" -eq $((STATE_BYTES + MEM_ALLOC)) ]; then
        pass "  ... sparse, and size_bytes counts both ($CP_SIZE)"
else
        fail "  ... sparse, and size_bytes counts both" "size_bytes $CP_SIZE, state $STATE_BYTES, memory file $MEM_ALLOC allocated"
fi

check_rc "fork the checkpoint (by name) -n 3" 0 sc fork t11-cp -n 3
mapfile -t FORKS <"$OUT"
check_eq "fork prints 3 ids" 3 "${#FORKS[@]}"
for f in "${FORKS[@]}"; do track_sandbox "$f"; done
if [ "${#FORKS[@]}" -eq 3 ]; then
        for i in 0 1 2; do
                run sc exec "${FORKS[$i]}" -- sh -c "echo fork$i > /tmp/mine-$i; cat /tmp/origin; cat /run/space/sandbox-id; hostname; head -c 16 /dev/urandom | od -x | head -n1"
                cp "$OUT" "$TEST_TMP/fork$i.out"
                [ "$RC" -eq 0 ] || { fail "exec in fork $i" ; last_diag; }
        done
        ok=1
        for i in 0 1 2; do
                [ "$(sed -n 1p "$TEST_TMP/fork$i.out")" = parent ] || ok=0
                [ "$(sed -n 2p "$TEST_TMP/fork$i.out")" = "${FORKS[$i]}" ] || ok=0
        done
        if [ $ok = 1 ]; then pass "forks have the parent's files and their own id in /run/space/sandbox-id"; else
                fail "forks have the parent's files and their own id in /run/space/sandbox-id" "$(cat "$TEST_TMP"/fork*.out)"; fi
        check_rc "a fork has the tmpfs file of the checkpoint" 0 sc exec "${FORKS[1]}" -- cat /dev/shm/t11-shm
        check_eq "  ... with its content" in-ram "$(cat "$OUT")"
        check_rc "  ... and its sleeper still runs" 0 sc exec "${FORKS[1]}" -- sh -c 'kill -0 "$(cat /dev/shm/t11-sleeper)"'
        F0=$(count_of "${FORKS[1]}")
        sleep 1
        F1=$(count_of "${FORKS[1]}")
        if is_num_gt "$F1" "$F0"; then pass "  ... and so does the counter ($F0 -> $F1)"; else
                fail "  ... and so does the counter" "$F0 -> $F1"; fi
        QP=$(qemu_pid_of "${FORKS[1]}")
        if grep -qF "$CPDIR/$CP.mem" "/proc/$QP/maps" 2>/dev/null; then pass "the fork's QEMU maps the checkpoint's memory file"; else
                fail "the fork's QEMU maps the checkpoint's memory file" "pid '$QP'" "$(grep -E 'base|checkpoints' "/proc/$QP/maps" 2>&1 | head -n 3)"; fi
        for field in 2:sandbox-id 3:hostname 4:random-bytes; do
                n=${field%%:*}
                distinct=$( (for i in 0 1 2; do sed -n "${n}p" "$TEST_TMP/fork$i.out"; done; sc exec "$SB" -- sh -c 'cat /run/space/sandbox-id; hostname; head -c 16 /dev/urandom | od -x | head -n1' | sed -n "$((n - 1))p") | sort -u | wc -l)
                check_eq "the ${field#*:} differs pairwise (3 forks and the parent)" 4 "$distinct" ||
                        diag "$(cat "$TEST_TMP"/fork*.out)"
        done
        ok=1
        for i in 0 1 2; do
                for j in 0 1 2; do
                        [ "$i" = "$j" ] && continue
                        sc exec "${FORKS[$j]}" -- test -e "/tmp/mine-$i" && ok=0
                done
                sc exec "$SB" -- test -e "/tmp/mine-$i" && ok=0
        done
        if [ $ok = 1 ]; then pass "forks diverge: a file written in one is absent in the others and in the parent"; else
                fail "forks diverge: a file written in one is absent in the others and in the parent"; fi
fi
check_rc "fork a running sandbox -n 2 --name t11-branch" 0 sc fork "$SB" -n 2 --name t11-branch
mapfile -t FORKS2 <"$OUT"
check_eq "  ... prints 2 ids" 2 "${#FORKS2[@]}"
for f in "${FORKS2[@]}"; do track_sandbox "$f"; done
check_rc "  ... that run" 0 sc exec "${FORKS2[0]}" -- cat /tmp/origin
check_rc "  ... named t11-branch-1 and t11-branch-2" 0 sc exec t11-branch-2 -- cat /run/space/sandbox-id
check_eq "  ... in the order of the ids printed" "${FORKS2[1]}" "$(cat "$OUT")"
N0=$(sandbox_count)
check_rc "a fork whose names are taken fails whole (exit 1)" 1 sc fork "$SB" -n 3 --name t11-branch
check_contains "  ... naming the name in use" "a sandbox named 't11-branch-1' exists already" "$ERR"
check_eq "  ... and makes no sandbox" "$N0" "$(sandbox_count)"
run sc checkpoint ls --json --sandbox "$SB"
check_eq "  ... and the checkpoint the fork took is gone (only t11-cp is left)" "t11-cp" \
        "$(json "$OUT" '" ".join(c.get("name") or c["id"] for c in d["checkpoints"])')"
# --json: one document on stdout, the new sandboxes as inspect gives them (with --async: the operation)
check_rc "fork t11-cp --json --name t11-json" 0 sc fork t11-cp --json --name t11-json
cp "$OUT" "$TEST_TMP/fork.json"
FJ=$(json "$TEST_TMP/fork.json" 'd["sandboxes"][0]["id"]')
[ -n "$FJ" ] && track_sandbox "$FJ"
check_eq "  ... prints {\"sandboxes\": [one sandbox, named t11-json, running]}" "1 t11-json running" \
        "$(json "$TEST_TMP/fork.json" '"%d %s %s" % (len(d["sandboxes"]), d["sandboxes"][0]["name"], d["sandboxes"][0]["state"])')"
run sc inspect t11-json --json
check_eq "  ... whose id is the sandbox named t11-json" "$FJ" "$(json "$OUT" 'd["id"]')"
check_rc "fork t11-cp --async --json" 0 sc fork t11-cp --async --json
FOP=$(json "$OUT" 'd["id"]')
check_contains "  ... prints the operation as JSON" "op-" "$FOP"
check_rc "  ... which finishes" 0 sc op wait "$FOP"
run sc op show "$FOP" --json
FJ2=$(json "$OUT" 'd["sandbox_ids"][0]')
[ -n "$FJ2" ] && track_sandbox "$FJ2"
check_rc "remove the forks" 0 sc rm -f "${FORKS[@]}" "${FORKS2[@]}" $FJ $FJ2

# ---- restore (after a daemon restart: the memory file is in the checkpoint's row)
check_rc "change the file after the checkpoint" 0 sc exec "$SB" -- sh -c 'echo v2 > /tmp/f; echo new > /tmp/after; echo changed > /dev/shm/t11-shm'
OLD=$(daemon_pid)
kill -KILL "$OLD"
wait_for 10 pid_gone "$OLD" || fail "spaced died on SIGKILL"
start_daemon
check_rc "restore the sandbox to the checkpoint" 0 sc restore "$SB" t11-cp
check_eq "restore prints the sandbox id" "$SB" "$(head -n1 "$OUT")"
track_sandbox "$SB"
check_rc "the file is back" 0 sc exec "$SB" -- cat /tmp/f
check_eq "  ... with its checkpoint content" v1 "$(cat "$OUT")"
check_fails "a file made after the checkpoint is gone" sc exec "$SB" -- cat /tmp/after
check_rc "the tmpfs file is back" 0 sc exec "$SB" -- cat /dev/shm/t11-shm
check_eq "  ... with its checkpoint content" in-ram "$(cat "$OUT")"
QP=$(qemu_pid_of "$SB")
if grep -qF "$CPDIR/$CP.mem" "/proc/$QP/maps" 2>/dev/null; then pass "the restored QEMU maps the memory file"; else
        fail "the restored QEMU maps the memory file" "pid '$QP'"; fi
check_fails "restore to an unknown checkpoint fails" sc restore "$SB" no-such-cp

# ---- a checkpoint whose files are damaged: a clear error, nothing half made, the daemon goes on
check_rc "a second checkpoint" 0 sc checkpoint "$SB" --name t11-cp2
CP2=$(head -n1 "$OUT")
N0=$(sandbox_count)
DPID=$(daemon_pid)
mv "$CPDIR/$CP2.mem" "$TEST_TMP/cp2.mem"
check_fails "a fork of it without its memory file fails" sc fork t11-cp2
check_match "  ... saying so" "memory file.*$CP2.mem" "$(cat "$ERR")"
check_fails "a restore to it fails" sc restore "$SB" t11-cp2
check_match "  ... saying so" "memory file" "$(cat "$ERR")"
check_eq "  ... before the sandbox was stopped" running "$(state_of "$SB")"
mv "$TEST_TMP/cp2.mem" "$CPDIR/$CP2.mem"
cp "$CPDIR/$CP2.state" "$TEST_TMP/cp2.state"
head -c "$(($(stat -c %s "$CPDIR/$CP2.state") / 2))" "$TEST_TMP/cp2.state" >"$CPDIR/$CP2.state"
check_fails "a fork of it with its device state cut in half fails" sc fork t11-cp2
check_match "  ... saying why" "loading the snapshot" "$(cat "$ERR")"
printf 'XXXX' | dd of="$CPDIR/$CP2.state" bs=1 seek=0 conv=notrunc status=none
check_fails "a fork of it with a tampered magic fails" sc fork t11-cp2
check_match "  ... saying why" "loading the snapshot" "$(cat "$ERR")"
check_eq "  ... and leaves no sandbox behind" "$N0" "$(sandbox_count)"
check_eq "the daemon goes on (the same one)" "$DPID" "$(daemon_pid)"
check_fails "a restore to it fails" sc restore "$SB" t11-cp2
check_match "  ... saying why" "loading the snapshot" "$(cat "$ERR")"
check_eq "  ... and leaves the sandbox stopped, not half made" stopped "$(state_of "$SB")"
check_eq "  ... and the daemon goes on" "$DPID" "$(daemon_pid)"
check_rc "a restore to the good checkpoint brings it back" 0 sc restore "$SB" t11-cp
track_sandbox "$SB"
check_rc "  ... running" 0 sc exec "$SB" -- cat /dev/shm/t11-shm
check_rc "checkpoint rm of the damaged one" 0 sc checkpoint rm t11-cp2
if [ ! -e "$CPDIR/$CP2.mem" ] && [ ! -e "$CPDIR/$CP2.state" ]; then pass "  ... removes its memory and state files"; else
        fail "  ... removes its memory and state files" "$(ls "$CPDIR")"; fi

# ---- checkpoint rm
check_rc "checkpoint rm by name" 0 sc checkpoint rm t11-cp
check_eq "  ... prints its id" "$CP" "$(head -n1 "$OUT")"
run sc checkpoint ls -q
if grep -qF "$CP" "$OUT"; then fail "checkpoint ls no longer lists it"; else pass "checkpoint ls no longer lists it"; fi
check_fails "checkpoint rm of an unknown one fails" sc checkpoint rm "$CP"
check_fails "fork of a removed checkpoint fails" sc fork "$CP"

# ---- idle suspend and time to live
create_sandbox IDLE --idle-timeout 3
[ -n "$IDLE" ] && pass "create --idle-timeout 3" || { fail "create --idle-timeout 3"; last_diag; }
T0=$(now_ms)
if wait_for 15 ls_is_state "$IDLE" suspended; then
        pass "an idle sandbox is suspended after its idle time ($(($(now_ms) - T0)) ms)"
        check_rc "  ... and wakes on request" 0 sc wake "$IDLE"
        track_sandbox "$IDLE"
else
        fail "an idle sandbox is suspended after its idle time" "state: $(ls_state "$IDLE")"
fi
create_sandbox TTL --timeout 3
[ -n "$TTL" ] && pass "create --timeout 3" || { fail "create --timeout 3"; last_diag; }
T0=$(now_ms)
if wait_for 15 ls_is_state "$TTL" gone; then
        pass "a sandbox past its time to live is removed ($(($(now_ms) - T0)) ms)"
else
        fail "a sandbox past its time to live is removed" "state: $(state_of "$TTL")"
fi
create_sandbox TTLS --timeout 2 --on-timeout suspend
if [ -n "$TTLS" ] && wait_for 15 ls_is_state "$TTLS" suspended; then
        pass "--on-timeout suspend suspends it instead"
else
        fail "--on-timeout suspend suspends it instead" "state: $(state_of "$TTLS")"
fi
check_fails "--on-timeout takes only remove or suspend" sc create --on-timeout never

check_rc "rm -f everything" 0 sc rm -f "$SB" "$IDLE" ${TTLS:+"$TTLS"}
check_eq "no sandbox is left" 0 "$(sandbox_count)"
run sc checkpoint ls -q
for c in $(cat "$OUT"); do sc checkpoint rm "$c" >/dev/null; done
run sc checkpoint ls -q
check_eq "no checkpoint is left" "" "$(cat "$OUT")"

done_testing
