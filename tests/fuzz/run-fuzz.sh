#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Runs every libFuzzer target of tests/fuzz/ over its seed corpus and then for FUZZ_SECONDS (default 10) of
# fuzzing each, and prints TAP: "ok N - fuzz-frames: 123456 execs in 10 s, no crash". A crash, a leak, a
# timeout or a target that cannot be built is "not ok", with the reproducer's path. Without a clang that
# links -fsanitize=fuzzer the targets fail, they are not skipped: install clang and libclang-rt-14-dev
# (build-aux/install-deps.sh does) and run configure again.
#
# Environment: TOP_BUILDDIR (default: the source tree), FUZZ_SECONDS, FUZZ_ONLY (target names, space
# separated), FUZZ_WORKDIR (new inputs and crash reproducers; default TOP_BUILDDIR/tests/fuzz/work),
# FUZZ_NO_BUILD=1 (do not run `make fuzz-build` first). Reproduce a crash: tests/fuzz/TARGET FILE.

set -uo pipefail

SRCDIR=$(cd "$(dirname "$0")/../.." && pwd)
BUILDDIR=$(cd "${TOP_BUILDDIR:-$SRCDIR}" && pwd)
SECONDS_EACH=${FUZZ_SECONDS:-10}
WORK=${FUZZ_WORKDIR:-$BUILDDIR/tests/fuzz/work}
# The targets are Makefile.am's FUZZ_TARGETS (continued lines included): a new one is run once it is listed there.
ALL_TARGETS=$(awk '/^FUZZ_TARGETS = /{on=1; sub(/^FUZZ_TARGETS = /, "")} on{c=sub(/\\$/, ""); print; if (!c) exit}' \
        "$SRCDIR/Makefile.am")
TARGETS=(${FUZZ_ONLY:-$ALL_TARGETS})

mkdir -p "$WORK"
echo "1..${#TARGETS[@]}"

build_error=
if [ "${FUZZ_NO_BUILD:-0}" != 1 ]; then
        if ! grep -q '^FUZZ_CC = .' "$BUILDDIR/Makefile" 2>/dev/null; then
                build_error="no clang with libFuzzer (configure found none: install clang and libclang-rt-14-dev, run configure again)"
        elif ! make -C "$BUILDDIR" -j"$(nproc 2>/dev/null || echo 2)" fuzz-build >"$WORK/build.log" 2>&1; then
                build_error="make fuzz-build failed (see $WORK/build.log)"
                tail -n 20 "$WORK/build.log" | sed 's/^/# /'
        fi
fi

n=0
failed=0
for t in "${TARGETS[@]}"; do
        n=$((n + 1))
        bin=$BUILDDIR/tests/fuzz/$t
        seeds=$SRCDIR/tests/fuzz/corpus/$t
        if [ -n "$build_error" ] || [ ! -x "$bin" ]; then
                echo "not ok $n - $t: not built: ${build_error:-no $bin}"
                failed=$((failed + 1))
                continue
        fi
        # New inputs go to the first directory (scratch); the seeds in the tree are only read.
        mkdir -p "$WORK/corpus-$t"
        rm -f "$WORK/$t-"crash-* "$WORK/$t-"leak-* "$WORK/$t-"timeout-* "$WORK/$t-"oom-*
        log=$WORK/$t.log
        (cd "$WORK" && exec "$bin" -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 -timeout=25 \
                -print_final_stats=1 -artifact_prefix="$WORK/$t-" "$WORK/corpus-$t" "$seeds") >"$log" 2>&1
        rc=$?
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
        artifact=$(ls "$WORK/$t-"crash-* "$WORK/$t-"leak-* "$WORK/$t-"timeout-* "$WORK/$t-"oom-* 2>/dev/null | head -n 1)
        if [ $rc -eq 0 ] && [ -n "$execs" ] && [ -z "$artifact" ]; then
                echo "ok $n - $t: ${execs} execs in ${SECONDS_EACH} s, no crash ($(ls "$seeds" | wc -l) seeds)"
        else
                echo "not ok $n - $t: exit $rc after ${execs:-?} execs${artifact:+; reproduce: $bin $artifact}"
                grep -m1 -E '^==[0-9]+==ERROR|^SUMMARY|deadly signal|timeout' "$log" | sed 's/^/# /'
                grep -m12 -E '^ +#[0-9]+ .* in ' "$log" | sed 's/^/# /'
                echo "# log: $log"
                failed=$((failed + 1))
        fi
done
[ $failed -eq 0 ]
