#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Concurrency: 4 execs at once in one sandbox, then 5 sandboxes created at once.
. "$(dirname "$0")/lib.sh"

space_env_setup
start_daemon

create_sandbox SB
[ -n "$SB" ] || { last_diag; bail_out "create failed"; }
pass "create a sandbox"

# ---- 4 execs at once in one sandbox. Each sleeps 3 s, then prints its own 20000 lines: run one after the
# other they would take 12 s or more.
N=4
LINES=20000
t0=$(now_ms)
for i in $(seq $N); do
        (
                sc exec "$SB" -- sh -c "sleep 3; seq 1 $LINES | sed 's/^/job$i-/'; echo job$i-err >&2" \
                        >"$TEST_TMP/par.$i.out" 2>"$TEST_TMP/par.$i.err"
                echo $? >"$TEST_TMP/par.$i.rc"
        ) &
done
wait
took=$(($(now_ms) - t0))
for i in $(seq $N); do
        check_eq "concurrent exec $i exits 0" 0 "$(cat "$TEST_TMP/par.$i.rc")"
        expected=$(seq 1 $LINES | sed "s/^/job$i-/" | sha256sum | cut -d' ' -f1)
        check_eq "concurrent exec $i: its own $LINES lines, complete" "$expected" \
                "$(sha256sum <"$TEST_TMP/par.$i.out" | cut -d' ' -f1)"
        check_eq "concurrent exec $i: its own stderr" "job$i-err" "$(cat "$TEST_TMP/par.$i.err")"
done
if [ "$took" -lt 11000 ]; then
        pass "the $N execs ran at the same time ($took ms for 4 x sleep 3)"
else
        fail "the $N execs ran at the same time" "took $took ms; one after the other would be >= 12000 ms"
fi
check_rc "the sandbox still answers" 0 sc exec "$SB" -- echo still-here
check_rc "rm the first sandbox" 0 sc rm "$SB"

# ---- 5 sandboxes at once
M=5
t0=$(now_ms)
for i in $(seq $M); do
        (
                timeout -k 10 "$CREATE_TIMEOUT" spacectl create --name "t03-$i" \
                        >"$TEST_TMP/create.$i.out" 2>"$TEST_TMP/create.$i.err"
                echo $? >"$TEST_TMP/create.$i.rc"
        ) &
done
wait
diag "$M concurrent creates: $(($(now_ms) - t0)) ms"
IDS=()
for i in $(seq $M); do
        id=$(head -n1 "$TEST_TMP/create.$i.out")
        if [ "$(cat "$TEST_TMP/create.$i.rc")" = 0 ] && grep -qE "$ID_RE" <<<"$id"; then
                pass "concurrent create $i printed an id"
                IDS+=("$id")
                track_sandbox "$id"
        else
                fail "concurrent create $i printed an id" "exit $(cat "$TEST_TMP/create.$i.rc")" \
                        "stderr: $(head -c 400 "$TEST_TMP/create.$i.err")"
        fi
done
check_eq "the $M ids are distinct" "$M" "$(printf '%s\n' "${IDS[@]}" | sort -u | grep -c .)"
check_eq "ls --json lists $M sandboxes" "$M" "$(sandbox_count)"
check_eq "all $M are running" "$M" "$(json "$TEST_TMP/ls.json" 'sum(1 for s in S(d) if s["state"] == "running")' 2>&1)"

# Each answers, by name, at the same time.
for i in $(seq $M); do
        (
                sc exec "t03-$i" -- sh -c "echo answer-$i" >"$TEST_TMP/ans.$i.out" 2>"$TEST_TMP/ans.$i.err"
                echo $? >"$TEST_TMP/ans.$i.rc"
        ) &
done
wait
for i in $(seq $M); do
        check_eq "sandbox t03-$i answers exec" "0 answer-$i" "$(cat "$TEST_TMP/ans.$i.rc") $(cat "$TEST_TMP/ans.$i.out")"
done

# They are separate machines: a file written in one is not in another.
check_rc "write a marker in t03-1" 0 sc exec t03-1 -- sh -c 'mkdir -p /tmp && echo one > /tmp/t03-marker'
check_rc "the marker is not in t03-2" 1 sc exec t03-2 -- test -e /tmp/t03-marker

QPIDS=$(json "$TEST_TMP/ls.json" '" ".join(str(s["qemu_pid"]) for s in S(d))' 2>/dev/null)
check_eq "each sandbox has its own QEMU" "$M" "$(tr ' ' '\n' <<<"$QPIDS" | sort -u | grep -c .)"

check_rc "rm all $M in one call" 0 sc rm "${IDS[@]}"
check_eq "ls --json is empty" 0 "$(sandbox_count)"
gone=1
for p in $QPIDS; do wait_for 20 pid_gone "$p" || gone=0; done
if [ $gone -eq 1 ]; then pass "all their QEMUs are gone"; else fail "all their QEMUs are gone" "pids: $QPIDS"; fi

done_testing
