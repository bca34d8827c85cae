#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Benchmarks (run by `make bench`): time to interactive and exec round trip through spaced (bench.py), the
# HTTP API's stream throughput and session latency (bench_api.py), then pause, suspend, wake, checkpoint, fork
# and idle memory (bench_lifecycle.py), each next to a raw baseline measured in the same run. Writes JSON to
# $BENCH_OUT (default: $TOP_BUILDDIR/bench-results.json) and prints tables. The environment is the integration
# tests' (own daemon on a free TCP port, own state, cleaned up at exit).
# bench_cp.py: spacectl cp in and out next to a raw read of the same file on the host.
# bench_volume.py (BENCH_ONLY=volume): a mounted volume's dd write and read and file creates next to the guest's
# own disk; knobs BENCH_VOLUME_MIB (default 32), BENCH_VOLUME_RUNS (>= 3), BENCH_VOLUME_FILES (default 200).
# bench_ci.py (BENCH_ONLY=ci): E2B's code interpreter, create -> first run_code and its round trip next to the same
# SDK's commands.run, and an idle code-interpreter sandbox's private memory; BENCH_CI_CREATES, BENCH_CI_RUNS.
# bench_cli.py (BENCH_ONLY=cli): spacectl's start-up, --help and version, next to /bin/true: wall time and page
# faults over BENCH_CLI_RUNS (>= 200) runs; BENCH_CLI_BASELINE=/path/to/an/older/spacectl puts it side by side.
# bench_scale.py (BENCH_ONLY=scale): how the cost grows with 1, 10, 50 and 100 idle sandboxes, one table row per size.
# bench_egress.py (BENCH_ONLY=egress): connect latency and MB/s from a sandbox through its proxy and the egress
# gateway to tests/integration/egress-servers.py on the host, next to the same client on the host and in the guest.
# bench_mcp.py (BENCH_ONLY=mcp): `spacectl mcp`'s tools/call exec true round trip on stdio next to `spacectl exec SB
# true` on the same sandbox; BENCH_MCP_CALLS (>= 30), BENCH_MCP_TEMPLATE (default minimal).
# bench_secret.py (BENCH_ONLY=secret): HTTPS from a sandbox to a host a secret is bound to, which the gateway
# intercepts (space-egress(5), "SECRETS"), next to the same request to a name with no binding on the same server
# and to the same client on the host: connect to first byte and MB/s; it checks first that the bound name is
# intercepted (the daemon's CA, the value arrives) and the other is not.
#
# Knobs: BENCH_CREATES (>= 20, default 20), BENCH_EXECS (>= 50, default 50), BENCH_PINGS (default 200),
#        BENCH_RAW_RESTORE_CMD (see tests/bench/bench.py), BENCH_STREAM_MIB (default 64), BENCH_STREAM_RUNS
#        (>= 3), BENCH_SESSIONS (>= 50), BENCH_PAUSES (default 30), BENCH_SUSPENDS (default 5),
#        BENCH_FORKS (default 3), BENCH_ONLY=core|api|lifecycle|storage|templates|build|cp|volume|cli|e2b|ci|scale|egress|mcp|
#        secret (one part alone; storage: checkpoint pause and fork on qcow2 and on a loop-mounted btrfs, side by side),
#        BENCH_STORAGE=0 (no storage part), SPACE_TEST_ACCEL, TOP_BUILDDIR; templates: BENCH_IMPORT_MIB (default
#        64,512,1024), BENCH_IMPORT_RUNS (default 3), BENCH_TEMPLATE_CREATES (default 10); build (template recipes,
#        tests/bench/bench_build.py): BENCH_BUILD_RUNS (default 2), BENCH_BUILD_RAW (default 1); cp: BENCH_CP_MIB
#        (default 256), BENCH_CP_RUNS (>= 3); e2b (the E2B facade with the Python SDK next to the native API,
#        tests/bench/bench_e2b.py; and E2B's fork into N next to spacectl fork, tests/bench/bench_e2b_fork.py):
#        BENCH_E2B_CREATES, BENCH_E2B_RUNS (>= 20), BENCH_E2B_TEMPLATE, BENCH_E2B_FORK_N (default 10),
#        BENCH_E2B_FORK_RUNS (>= 5); scale (N idle
#        sandboxes: create -> first exec, spacectl ls, spaced's CPU and RSS, the QEMUs' CPU, private memory per
#        sandbox at each N, tests/bench/bench_scale.py): BENCH_SCALE_SIZES (default 1,10,50,100; a size that
#        memory does not allow is skipped, with the reason), BENCH_SCALE_LS_RUNS (>= 20), BENCH_SCALE_WINDOW
#        (idle window in s, default 10), BENCH_SCALE_MEMORY_LIMIT_MIB (the daemon's memory_limit_mib for this
#        part; default max(RAM - 2 GiB, 80% of RAM); more than RAM overcommits, idle guests touch little of theirs);
#        egress (tests/bench/bench_egress.py): BENCH_EGRESS_CONNECTS (>= 50, default 200), BENCH_EGRESS_MIB (default
#        64), BENCH_EGRESS_RUNS (>= 3), BENCH_EGRESS_VIA (default proxy,transparent), BENCH_EGRESS_TEMPLATE
#        (default seed, built when missing), BENCH_EGRESS_ADDR (default 127.0.0.2) and BENCH_EGRESS_NAME (default
#        allowed.test), which the profile bench-egress below allows; BENCH_EGRESS_DENIED (default 127.0.0.3);
#        secret (tests/bench/bench_secret.py): BENCH_SECRET_CONNECTS (>= 30, default 100, to each name),
#        BENCH_SECRET_MIB (default 32), BENCH_SECRET_RUNS (>= 3), BENCH_SECRET_TEMPLATE (default seed, imported
#        from the tests' seed cache or built when missing), BENCH_SECRET_ADDR (default 127.0.0.5) and
#        BENCH_SECRET_PORT (default 8443), where its server listens and which the profile bench-secret below allows
#        with bound.test and unbound.test.
# Numbers from a --enable-sanitizers build are slower than a release build: configure without it for figures
# worth quoting.

. "$(dirname "$0")/../integration/lib.sh"

export BENCH_OUT=${BENCH_OUT:-$TOP_BUILDDIR/bench-results.json}
space_env_setup >&2
# The egress part's profile (space-egress(5)): the address its servers listen on, every port, and the name the
# captured path connects to, which the daemon's hosts file maps there.
export BENCH_EGRESS_NAME=${BENCH_EGRESS_NAME:-allowed.test}
printf '%s\t%s\n' "${BENCH_EGRESS_ADDR:-127.0.0.2}" "$BENCH_EGRESS_NAME" "${BENCH_EGRESS_DENIED:-127.0.0.3}" \
        denied.test >"$TEST_TMP/egress-bench.hosts"
egress_conf=("egress_profile = bench-egress: allow ${BENCH_EGRESS_ADDR:-127.0.0.2}, $BENCH_EGRESS_NAME"
        "egress_hosts_file = $TEST_TMP/egress-bench.hosts")
# The secret part's (bench_secret.py): a test CA that egress_tls_ca names and a certificate from it for
# bound.test and unbound.test (openssl), both names in the hosts file above at one address, a profile that
# allows them, and the secret bench-secret-token bound to bound.test alone. Only when the part runs.
if [ -z "${BENCH_ONLY:-}" ] || [ "$BENCH_ONLY" = secret ]; then
        export BENCH_SECRET_PKI=$TEST_TMP/secret-pki
        saddr=${BENCH_SECRET_ADDR:-127.0.0.5}
        sport=${BENCH_SECRET_PORT:-8443}
        if mkdir -p "$BENCH_SECRET_PKI" && (
                cd "$BENCH_SECRET_PKI" &&
                        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout upca.key \
                                -out upca.pem -days 2 -subj "/CN=space bench upstream CA" &&
                        openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout srv.key -out srv.csr \
                                -subj /CN=bound.test &&
                        openssl x509 -req -in srv.csr -CA upca.pem -CAkey upca.key -CAcreateserial -out srv.pem \
                                -days 2 -extfile <(echo subjectAltName=DNS:bound.test,DNS:unbound.test)
        ) >"$TEST_TMP/secret-pki.log" 2>&1; then
                printf '%s\t%s %s\n' "$saddr" bound.test unbound.test >>"$TEST_TMP/egress-bench.hosts"
                sbound=bound.test:$sport
                egress_conf+=("egress_tls_ca = $BENCH_SECRET_PKI/upca.pem"
                        "egress_profile = bench-secret: allow $sbound, unbound.test:$sport, $saddr:$sport"
                        "egress_secret = bench-secret: bench-secret-token $sbound header Authorization: Bearer {value}")
        else
                echo "bench: cannot make the secret part's test PKI with openssl:" \
                        "$(tail -n 3 "$TEST_TMP/secret-pki.log")" >&2
        fi
fi
# The scale part's memory_limit_mib (bench_scale.py): the daemon's default is 80% of RAM in guest memory.
scale_limit_mib=${BENCH_SCALE_MEMORY_LIMIT_MIB:-$(awk '/^MemTotal:/ { t = int($2 / 1024); r = t - 2048;
        d = int(t * 8 / 10); print (r > d ? r : d) }' /proc/meminfo)}
if [ "${BENCH_ONLY:-}" = scale ]; then
        tcp_config "memory_limit_mib = $scale_limit_mib" "${egress_conf[@]}"
else
        tcp_config "${egress_conf[@]}"
fi
start_daemon_tcp >&2
export TEST_TMP TOP_BUILDDIR SPACECTL_BIN

rc=0
if [ -z "${BENCH_ONLY:-}" ] || [ "$BENCH_ONLY" = core ]; then
        python3 "$TESTS_DIR/../bench/bench.py" || rc=1
fi
if [ -z "${BENCH_ONLY:-}" ] || [ "$BENCH_ONLY" = api ]; then
        # bench.py may have killed the daemon for its raw baseline: the next spacectl call starts it again.
        daemon_answers || spacectl version >/dev/null 2>&1
        SEEN_PIDS+=("$(daemon_pid)")
        wait_for 20 tcp_answers || echo "bench: the TCP listener $API_URL does not answer" >&2
        API_KEY=$(mint_key bench)
        export API_URL API_KEY
        python3 "$TESTS_DIR/../bench/bench_api.py" || rc=1
        SEEN_PIDS+=("$(daemon_pid)")
fi
if [ -z "${BENCH_ONLY:-}" ] || [ "$BENCH_ONLY" = lifecycle ]; then
        # bench_api.py kills the daemon for its raw baseline too.
        daemon_answers || spacectl version >/dev/null 2>&1
        SEEN_PIDS+=("$(daemon_pid)")
        python3 "$TESTS_DIR/../bench/bench_lifecycle.py" || rc=1
        SEEN_PIDS+=("$(daemon_pid)")
fi
if [ -z "${BENCH_ONLY:-}" ] || [ "$BENCH_ONLY" = templates ]; then
        daemon_answers || spacectl version >/dev/null 2>&1
        SEEN_PIDS+=("$(daemon_pid)")
        python3 "$TESTS_DIR/../bench/bench_templates.py" || rc=1
fi
if [ -z "${BENCH_ONLY:-}" ] || [ "$BENCH_ONLY" = build ]; then
        daemon_answers || spacectl version >/dev/null 2>&1
        SEEN_PIDS+=("$(daemon_pid)")
        python3 "$TESTS_DIR/../bench/bench_build.py" || rc=1
fi
if [ -z "${BENCH_ONLY:-}" ] || [ "$BENCH_ONLY" = cp ]; then
        # spacectl cp in and out next to a raw read of the same file (bench_cp.py)
        daemon_answers || spacectl version >/dev/null 2>&1
        SEEN_PIDS+=("$(daemon_pid)")
        python3 "$TESTS_DIR/../bench/bench_cp.py" || rc=1
fi
if [ -z "${BENCH_ONLY:-}" ] || [ "$BENCH_ONLY" = volume ]; then
        # a mounted volume's writes, reads and creates next to the guest's own disk (bench_volume.py)
        daemon_answers || spacectl version >/dev/null 2>&1
        SEEN_PIDS+=("$(daemon_pid)")
        python3 "$TESTS_DIR/../bench/bench_volume.py" || rc=1
fi
if [ -z "${BENCH_ONLY:-}" ] || [ "$BENCH_ONLY" = cli ]; then
        # spacectl's own start-up cost: no VM, only the daemon for `spacectl version` (bench_cli.py)
        daemon_answers || spacectl version >/dev/null 2>&1
        SEEN_PIDS+=("$(daemon_pid)")
        python3 "$TESTS_DIR/../bench/bench_cli.py" || rc=1
fi
if [ -z "${BENCH_ONLY:-}" ] || [ "$BENCH_ONLY" = scale ]; then
        # N idle sandboxes (bench_scale.py). In a full run the daemon is restarted with the scale part's
        # memory_limit_mib and again with the config as it was afterwards, so that the other parts keep theirs.
        daemon_answers || spacectl version >/dev/null 2>&1
        if [ -z "${BENCH_ONLY:-}" ]; then
                cp "$SPACE_CONFIG" "$SPACE_CONFIG.pre-scale"
                echo "memory_limit_mib = $scale_limit_mib" >>"$SPACE_CONFIG"
                restart_pid=$(daemon_pid) && kill -TERM "$restart_pid" && wait_for 20 pid_gone "$restart_pid"
                spacectl version >/dev/null 2>&1
        fi
        wait_for 10 daemon_pid && SEEN_PIDS+=("$(daemon_pid)")
        python3 "$TESTS_DIR/../bench/bench_scale.py" || rc=1
        if [ -z "${BENCH_ONLY:-}" ]; then
                mv "$SPACE_CONFIG.pre-scale" "$SPACE_CONFIG"
                restart_pid=$(daemon_pid) && kill -TERM "$restart_pid" && wait_for 20 pid_gone "$restart_pid"
                spacectl version >/dev/null 2>&1
                wait_for 10 daemon_pid && SEEN_PIDS+=("$(daemon_pid)")
        fi
fi
if [ -z "${BENCH_ONLY:-}" ] || [ "$BENCH_ONLY" = lifecycle ] || [ "$BENCH_ONLY" = storage ]; then
        # Checkpoint pause and fork on each disk store: this daemon's (qcow2 on most machines), then a second
        # daemon whose state dir is a loop-mounted btrfs (root only; skipped with the reason otherwise).
        daemon_answers || spacectl version >/dev/null 2>&1
        if [ "${BENCH_STORAGE:-1}" != 0 ] && [ "$(stat -f -c %T "$SPACE_STATE_DIR")" != btrfs ]; then
                BENCH_STORAGE=qcow2 python3 "$TESTS_DIR/../bench/bench_lifecycle.py" || rc=1
                wait_for 10 daemon_pid && SEEN_PIDS+=("$(daemon_pid)")
                qcow2_pid=$(daemon_pid) && kill -TERM "$qcow2_pid" && wait_for 20 pid_gone "$qcow2_pid"
                export SPACE_STATE_DIR=$TEST_TMP/state-btrfs
                if mount_btrfs_state 3G; then
                        spacectl version >/dev/null 2>&1
                        wait_for 10 daemon_pid && SEEN_PIDS+=("$(daemon_pid)")
                        BENCH_STORAGE=btrfs python3 "$TESTS_DIR/../bench/bench_lifecycle.py" || rc=1
                else
                        echo "bench: btrfs disk store skipped: $BTRFS_SKIP" >&2
                fi
        fi
fi
if [ -z "${BENCH_ONLY:-}" ] || [ "$BENCH_ONLY" = e2b ]; then
        # The E2B facade with the unmodified Python SDK next to the native API (bench_e2b.py).
        daemon_answers || spacectl version >/dev/null 2>&1
        SEEN_PIDS+=("$(daemon_pid)")
        wait_for 20 tcp_answers || echo "bench: the TCP listener $API_URL does not answer" >&2
        if sdks=$("$TESTS_DIR/../e2b/setup-sdks.sh" "$TOP_BUILDDIR/tests/e2b/.sdk"); then
                E2B_API_KEY=$(mint_key bench-e2b) E2B_API_URL=$API_URL E2B_SANDBOX_URL=$API_URL \
                        "$(sed -n 1p <<<"$sdks")/bin/python" "$TESTS_DIR/../bench/bench_e2b.py" || rc=1
        else
                echo "bench: cannot install the E2B SDKs" >&2
                rc=1
        fi
        # E2B's fork (the newest SDK: the pinned one has none) next to spacectl fork (bench_e2b_fork.py)
        if sdks=$("$TESTS_DIR/../e2b/setup-sdks.sh" "$TOP_BUILDDIR/tests/e2b/.sdk" latest); then
                E2B_API_KEY=$(mint_key bench-e2b-fork) E2B_API_URL=$API_URL E2B_SANDBOX_URL=$API_URL \
                        "$(sed -n 1p <<<"$sdks")/bin/python" "$TESTS_DIR/../bench/bench_e2b_fork.py" || rc=1
        else
                echo "bench: cannot install the newest E2B SDK" >&2
                rc=1
        fi
fi
if [ -z "${BENCH_ONLY:-}" ] || [ "$BENCH_ONLY" = ci ]; then
        # E2B's code interpreter with the unmodified SDK, next to the same SDK's commands (bench_ci.py).
        daemon_answers || spacectl version >/dev/null 2>&1
        SEEN_PIDS+=("$(daemon_pid)")
        wait_for 20 tcp_answers || echo "bench: the TCP listener $API_URL does not answer" >&2
        ci_ok=1
        for t in seed code-interpreter; do
                spacectl template inspect "$t" >/dev/null 2>&1 ||
                        spacectl template build "$TESTS_DIR/../../templates/$t" >/dev/null || ci_ok=0
        done
        if [ $ci_ok = 1 ] && sdks=$("$TESTS_DIR/../e2b/setup-ci-sdks.sh" "$TOP_BUILDDIR/tests/e2b/.sdk"); then
                E2B_API_KEY=$(mint_key bench-ci) E2B_API_URL=$API_URL E2B_SANDBOX_URL=$API_URL \
                        "$(sed -n 2p <<<"$sdks")/bin/python" "$TESTS_DIR/../bench/bench_ci.py" || rc=1
        else
                echo "bench: cannot build the code-interpreter template or install its SDKs" >&2
                rc=1
        fi
fi
if [ -z "${BENCH_ONLY:-}" ] || [ "$BENCH_ONLY" = mcp ]; then
        # The MCP server on stdio: tools/call exec true next to spacectl exec on the same sandbox (bench_mcp.py).
        daemon_answers || spacectl version >/dev/null 2>&1
        SEEN_PIDS+=("$(daemon_pid)")
        SPACECTL_BIN=$SPACECTL_BIN python3 "$TESTS_DIR/../bench/bench_mcp.py" || rc=1
fi
if [ -z "${BENCH_ONLY:-}" ] || [ "$BENCH_ONLY" = egress ]; then
        # Egress through the gateway (bench_egress.py), with the profile bench-egress of the config above. It
        # starts tests/integration/egress-servers.py itself (its PID goes to extra.pids) and fails, saying why,
        # when this daemon does not enforce egress.
        daemon_answers || spacectl version >/dev/null 2>&1
        SEEN_PIDS+=("$(daemon_pid)")
        python3 "$TESTS_DIR/../bench/bench_egress.py" || rc=1
fi
if [ -z "${BENCH_ONLY:-}" ] || [ "$BENCH_ONLY" = secret ]; then
        # HTTPS to a bound host, intercepted, next to an unbound one (bench_secret.py), with the PKI, profile and
        # binding of the config above. Its HTTPS server's PID goes to extra.pids. The seed template from the
        # tests' cache when the daemon has none (seed_template builds it when the cache has none either).
        daemon_answers || spacectl version >/dev/null 2>&1
        SEEN_PIDS+=("$(daemon_pid)")
        if [ "${BENCH_SECRET_TEMPLATE:-seed}" = seed ] && ! spacectl template inspect seed >/dev/null 2>&1; then
                seed_template
        fi
        python3 "$TESTS_DIR/../bench/bench_secret.py" || rc=1
fi
# QEMUs the baseline left running (bench.py kills them itself; this is the safety net).
for pid in $(cat "$TEST_TMP/extra.pids" 2>/dev/null); do track_pid "$pid"; done
exit $rc
