#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# t24: the libFuzzer targets of tests/fuzz/ (frames, the FILE protocol, process logs, HTTP bodies, recipes,
# OCI layouts, tar entries, the E2B facade's envelopes, messages, headers and query values, egress profiles,
# IP literals and decisions: Makefile.am's
# FUZZ_TARGETS), each over its seed corpus and then for a short bounded time (FUZZ_SECONDS,
# default 10) under ASan and UBSan. Needs no daemon and no VM; needs clang with libFuzzer (missing: every
# target fails). Longer runs: make fuzz FUZZ_SECONDS=300.

set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec bash "$here/../fuzz/run-fuzz.sh"
