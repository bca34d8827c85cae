#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Benchmarks (run by `make bench`): time to interactive and exec round trip through spaced, each next to a raw
# baseline measured in the same run. Writes JSON to $BENCH_OUT (default: $TOP_BUILDDIR/bench-results.json) and
# prints a table. The environment is the integration tests' (own daemon, own state, cleaned up at exit).
#
# Knobs: BENCH_CREATES (>= 20, default 20), BENCH_EXECS (>= 50, default 50), BENCH_PINGS (default 200),
#        BENCH_RAW_RESTORE_CMD (see tests/bench/bench.py), SPACE_TEST_ACCEL, TOP_BUILDDIR.
# Numbers from a --enable-sanitizers build are slower than a release build: configure without it for figures
# worth quoting.

. "$(dirname "$0")/../integration/lib.sh"

export BENCH_OUT=${BENCH_OUT:-$TOP_BUILDDIR/bench-results.json}
space_env_setup >&2
start_daemon >&2
export TEST_TMP TOP_BUILDDIR SPACECTL_BIN

python3 "$TESTS_DIR/../bench/bench.py"
rc=$?
# QEMUs the baseline left running (bench.py kills them itself; this is the safety net).
for pid in $(cat "$TEST_TMP/extra.pids" 2>/dev/null); do track_pid "$pid"; done
exit $rc
