#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Runs the whole test suite and ends with exactly one line: "N passed, N failed" (", N skipped" when some were).
#   1. unit tests: `make check` (TAP through build-aux/tap-driver.sh), counted from the tests/unit/*.trs files;
#      a unit test that was not built or did not run counts as a failure;
#   2. every tests/integration/t*.sh (TAP shell scripts against a real daemon and real VMs), one after the other;
#      the few that share nothing and mostly wait (BESIDE below: the fuzzers, the clock's minute) run beside them,
#      and so does the longest, the code interpreter's t44 (EARLY below), which the other E2B scripts wait for.
# A script that dies early, has no plan, or runs fewer tests than planned counts as one more failure.
# The exit status is 1 when anything failed (or nothing ran), 0 otherwise.
#
# Usage: tests/run-tests.sh [--no-unit] [--no-integration] [--no-make] [tNN...]
#   tNN...          run only the integration scripts whose names start with these (e.g. t01 t04)
#   --no-make       do not run `make check`; use the .trs files or unit test binaries already there
# Environment: TOP_BUILDDIR (default: the source tree), TEST_LOG_DIR (default: $TOP_BUILDDIR/tests/logs),
#   SPACE_TEST_SCRIPT_TIMEOUT (seconds per integration script, default 900), and the SPACE_TEST_* knobs of
#   tests/integration/lib.sh.

set -uo pipefail

SRCDIR=$(cd "$(dirname "$0")/.." && pwd)
BUILDDIR=$(cd "${TOP_BUILDDIR:-$SRCDIR}" && pwd)
export TOP_BUILDDIR=$BUILDDIR
LOGDIR=${TEST_LOG_DIR:-$BUILDDIR/tests/logs}
SCRIPT_TIMEOUT=${SPACE_TEST_SCRIPT_TIMEOUT:-900}

do_unit=1
do_integration=1
do_make=1
only=()
for a in "$@"; do
        case $a in
        --no-unit) do_unit=0 ;;
        --no-integration) do_integration=0 ;;
        --no-make) do_make=0 ;;
        -h | --help)
                sed -n '3,18p' "$0" | sed 's/^# \{0,1\}//'
                exit 0
                ;;
        -*)
                echo "run-tests.sh: unknown option $a" >&2
                exit 2
                ;;
        *) only+=("$a") ;;
        esac
done
[ ${#only[@]} -gt 0 ] && do_unit=0

mkdir -p "$LOGDIR"
passed=0
failed=0
skipped=0
failures=() # "what|log file" for the summary

add_failure() {
        failed=$((failed + 1))
        failures+=("$1|$2")
}

# tap_counts FILE: prints "pass fail skip ran plan bail" for the top-level TAP lines of FILE, and the failing
# lines on fd 3.
tap_counts() {
        awk '
        /^ok( |$)/      { n++; if (tolower($0) ~ /#[ \t]*skip/) s++; else p++; next }
        /^not ok( |$)/  { n++; if (tolower($0) ~ /#[ \t]*todo/) s++; else { f++; print > "/dev/fd/3" }; next }
        /^1\.\.[0-9]+/  { plan = $0; sub(/^1\.\./, "", plan); sub(/[^0-9].*$/, "", plan)
                          if (plan == 0 && tolower($0) ~ /#[ \t]*skip/) allskip = 1; next }
        /^Bail out!/    { bail = 1 }
        END { if (plan == "") plan = "-"; print p + 0, f + 0, s + allskip, n + 0, plan, bail + 0 }' "$1"
}

# ---------------------------------------------------------------- unit tests

unit_from_trs() {
        local trs=$1 name=$2 r
        while read -r r; do
                case $r in
                PASS | XFAIL) passed=$((passed + 1)) ;;
                SKIP) skipped=$((skipped + 1)) ;;
                *) add_failure "unit $name: $(grep -m1 -F ":test-result: $r" "$trs" | sed 's/^:test-result: //') ($r)" \
                        "${trs%.trs}.log" ;;
                esac
        done < <(sed -n 's/^:test-result: \([A-Z]*\).*/\1/p' "$trs")
        # tap-driver reports missing plans and bad exit statuses as ERROR results itself; a .trs without any
        # result line means the test never produced TAP.
        grep -q '^:test-result:' "$trs" || add_failure "unit $name: no results" "${trs%.trs}.log"
}

unit_from_binary() {
        local bin=$1 name=$2 log=$LOGDIR/$2.log rc counts p f s n plan bail
        { (cd "$BUILDDIR" && exec timeout -k 5 300 "$bin") >"$log" 2>&1; } 2>/dev/null
        rc=$?
        counts=$(tap_counts "$log" 3>"$log.failed")
        read -r p f s n plan bail <<<"$counts"
        passed=$((passed + p))
        skipped=$((skipped + s))
        while IFS= read -r line; do add_failure "unit $name: $line" "$log"; done <"$log.failed"
        if [ "$plan" = - ] || { [ "$plan" != "$n" ] && [ "$plan" != 0 ]; } || [ "$bail" = 1 ] || { [ $rc -ne 0 ] && [ "$f" = 0 ]; }; then
                add_failure "unit $name: crashed or incomplete (exit $rc, planned $plan, ran $n)" "$log"
        fi
        rm -f "$log.failed"
}

run_unit() {
        local mk_rc=0 src base cand bin found before=$failed ran_make=0
        local -a srcs=()
        if [ $do_make = 1 ] && [ -f "$BUILDDIR/Makefile" ]; then
                ran_make=1
                echo "== make check"
                make -C "$BUILDDIR" -j2 check >"$LOGDIR/make-check.log" 2>&1
                mk_rc=$?
        fi
        for src in "$SRCDIR"/tests/unit/*.c; do
                # Helpers and fuzz targets have no main(): not test programs.
                [ -e "$src" ] && grep -q 'main(' "$src" && srcs+=("$src")
        done
        for src in "${srcs[@]}"; do
                base=$(basename "$src" .c)
                found=
                for cand in "$base" "test-$base"; do
                        bin=$BUILDDIR/tests/unit/$cand
                        # make check removes the old results before running, so a .trs here is from this run.
                        if [ $ran_make = 1 ] && [ -f "$bin.trs" ]; then
                                unit_from_trs "$bin.trs" "$cand"
                        elif [ $ran_make = 0 ] && [ -x "$bin" ]; then
                                unit_from_binary "$bin" "$cand"
                        elif [ $ran_make = 0 ] && [ -f "$bin.trs" ]; then
                                unit_from_trs "$bin.trs" "$cand"
                        else
                                continue
                        fi
                        found=1
                        break
                done
                if [ -z "$found" ] && [ $ran_make = 1 ]; then
                        add_failure "unit ${base}: not built or not run (see make-check.log)" "$LOGDIR/make-check.log"
                elif [ -z "$found" ]; then
                        add_failure "unit ${base}: not built (no binary for tests/unit/$base.c in $BUILDDIR)" /dev/null
                fi
        done
        if [ $mk_rc -ne 0 ] && [ $failed -eq "$before" ]; then
                add_failure "make check exited with status $mk_rc" "$LOGDIR/make-check.log"
        fi
        echo "   unit tests: ${#srcs[@]} programs, $((failed - before)) failures"
}

# ---------------------------------------------------------------- integration tests

# Scripts that share nothing with the others and mostly wait run beside them: the fuzzers (no daemon, no VM, in
# their own work directory) and t39, whose minute is a suspended sandbox's (its clock checks bracket the
# guest's reading with the host's, so load does not change them). The suite then takes the VMs' time, not the
# sum of both.
BESIDE=(t24-fuzz t39-clock)
# t44 (the code interpreter: its template built, its base booted with warm kernels, three SDK suites; eleven
# minutes alone, a fifth of the suite) runs beside the others from the start too, but the other E2B scripts use
# the same loopback names and ports as it does: each of them waits for it to end first.
EARLY=(t44-code-interpreter)
E2B_SHARED=(t29-e2b t43-e2b-tls t45-e2b-latest)
declare -A beside_pid=() beside_t0=()

selected() { # selected NAME: whether the command line's tNN... (or none) picks the script
        local want
        [ ${#only[@]} -eq 0 ] && return 0
        for want in "${only[@]}"; do
                case $1 in "$want"*) return 0 ;; esac
        done
        return 1
}

is_beside() {
        local b
        for b in "${BESIDE[@]}" "${EARLY[@]}"; do [ "$1" = "$b" ] && return 0; done
        return 1
}

in_list() { # in_list NAME ITEM...
        local want=$1 b
        shift
        for b in "$@"; do [ "$want" = "$b" ] && return 0; done
        return 1
}

# wait_beside NAME: waits for a script started beside the others and counts it.
wait_beside() {
        local name=$1 rc
        [ -n "${beside_pid[$name]:-}" ] || return 0
        echo "== $name (beside the others)"
        wait "${beside_pid[$name]}"
        rc=$?
        unset "beside_pid[$name]"
        tally "$name" "$rc" $(($(date +%s) - beside_t0[$name]))
}

# script_timeout NAME: its SCRIPT_TIMEOUT. t44 builds the code-interpreter template and boots its base snapshot
# with the kernels warm under TCG (the base alone took 180 s to more than 600 s here, depending on the load),
# then runs three SDK suites: three times the others' bound.
script_timeout() {
        case $1 in
        t44-*) echo $((SCRIPT_TIMEOUT * 3)) ;;
        *) echo "$SCRIPT_TIMEOUT" ;;
        esac
}

# tally NAME RC SECS: counts a finished script's log into the totals and prints its line.
tally() {
        local name=$1 rc=$2 secs=$3 log=$LOGDIR/$1.log counts p f s n plan bail line
        counts=$(tap_counts "$log" 3>"$log.failed")
        read -r p f s n plan bail <<<"$counts"
        passed=$((passed + p))
        skipped=$((skipped + s))
        while IFS= read -r line; do add_failure "$name: $line" "$log"; done <"$log.failed"
        rm -f "$log.failed"
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
                add_failure "$name: timed out after $(script_timeout "$name")s (ran $n tests)" "$log"
        elif [ "$bail" = 1 ]; then
                add_failure "$name: $(grep -m1 '^Bail out!' "$log")" "$log"
        elif [ "$plan" = - ]; then
                add_failure "$name: died without a plan (exit $rc, ran $n tests)" "$log"
        elif [ "$plan" != 0 ] && [ "$plan" != "$n" ]; then
                add_failure "$name: planned $plan tests but ran $n (exit $rc)" "$log"
        elif [ "$rc" -ne 0 ] && [ "$f" = 0 ]; then
                add_failure "$name: exited with status $rc" "$log"
        fi
        printf '   %s: %d ok, %d not ok, %d skipped, %d s\n' "$name" "$p" "$f" "$s" "$secs"
}

run_integration() {
        local t name rc t0 b
        for t in "$SRCDIR"/tests/integration/t[0-9]*.sh; do
                name=$(basename "$t" .sh)
                if [ -e "$t" ] && selected "$name" && is_beside "$name"; then
                        echo "== $name (beside the others)"
                        beside_t0[$name]=$(date +%s)
                        timeout -k 15 "$(script_timeout "$name")" bash "$t" </dev/null >"$LOGDIR/$name.log" 2>&1 &
                        beside_pid[$name]=$!
                fi
        done
        for t in "$SRCDIR"/tests/integration/t[0-9]*.sh; do
                [ -e "$t" ] || continue
                name=$(basename "$t" .sh)
                selected "$name" && ! is_beside "$name" || continue
                if in_list "$name" "${E2B_SHARED[@]}"; then
                        for b in "${EARLY[@]}"; do wait_beside "$b"; done
                fi
                echo "== $name"
                t0=$(date +%s)
                # In the background, so that a signal to us reaches the script (timeout has its own process
                # group) and the script's cleanup kills its daemon and VMs.
                timeout -k 15 "$(script_timeout "$name")" bash "$t" </dev/null >"$LOGDIR/$name.log" 2>&1 &
                CHILD=$!
                wait "$CHILD"
                rc=$?
                CHILD=
                tally "$name" "$rc" $(($(date +%s) - t0))
        done
        for name in "${!beside_pid[@]}"; do
                wait_beside "$name"
        done
}

CHILD=
on_signal() {
        trap - INT TERM
        for pid in $CHILD "${beside_pid[@]}"; do
                kill -TERM "$pid" 2>/dev/null
                wait "$pid" 2>/dev/null
        done
        add_failure "interrupted" /dev/null
        finish
}
trap on_signal INT TERM

finish() {
        if [ $((passed + failed + skipped)) -eq 0 ]; then
                add_failure "no tests ran" /dev/null
        fi

        if [ $failed -gt 0 ]; then
                echo
                echo "== failures"
                declare -A shown=()
                for entry in "${failures[@]}"; do
                        echo "FAIL: ${entry%%|*}"
                done
                for entry in "${failures[@]}"; do
                        log=${entry#*|}
                        [ -s "$log" ] && [ -z "${shown[$log]:-}" ] || continue
                        shown[$log]=1
                        echo
                        # Each failing test with its diagnostics, then how the log ends.
                        if grep -q '^not ok' "$log"; then
                                echo "--- $log (failing tests)"
                                awk '/^not ok/ { on = 1; n = 0; print; next }
                                     on && /^#/ && n < 12 { print; n++; next }
                                     { on = 0 }' "$log"
                        fi
                        echo "--- $log (last 25 lines)"
                        tail -n 25 "$log"
                done
                echo
        fi
        echo "logs: $LOGDIR"

        if [ $skipped -gt 0 ]; then
                echo "$passed passed, $failed failed, $skipped skipped"
        else
                echo "$passed passed, $failed failed"
        fi
        [ $failed -eq 0 ] && exit 0
        exit 1
}

[ $do_unit = 1 ] && run_unit
[ $do_integration = 1 ] && run_integration
finish
