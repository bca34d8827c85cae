#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# E2B's code interpreter on space (issue 21), driven by the unmodified SDKs from PyPI and npm: the
# code-interpreter template (templates/code-interpreter: seed plus Debian's ipykernel, jupyter-client,
# matplotlib, pandas, numpy and Node.js, with its server on port 49999 started in the base snapshot) is built,
# then the suites run: e2b-code-interpreter 2.11.5 (tests/e2b/ci-py) and @e2b/code-interpreter 2.8.0
# (tests/e2b/ci-js) through E2B_API_URL and E2B_SANDBOX_URL; e2b-code-interpreter 2.6.2 with e2b 2.21.1,
# which always speaks HTTPS to 49999-ID.DOMAIN, through E2B_DOMAIN and TLS alone, set up by
# `spacectl e2b env` (a subset: one of each kind of call; SPACE_T44_TLS_K= runs all). Each test case is one TAP
# line here. The MCP server's run_code cases (issue 23: a PNG as MCP image content) run here too, with the MCP
# SDKs of t46, since this is the test that has the template and its warm base snapshot.
. "$(dirname "$0")/lib.sh"

E2B_DIR=$TOP_SRCDIR/tests/e2b
SDK_DIR=${SPACE_E2B_SDK_DIR:-$TOP_BUILDDIR/tests/e2b/.sdk}

space_env_setup
TLS_PORT=$(free_port) || bail_out "cannot pick a free TCP port"
tcp_config "e2b_tls_listen = 127.0.0.1:$TLS_PORT"
getent ahosts api.space.localhost 2>/dev/null | grep -qE '^(127\.0\.0\.1|::1) ' ||
        bail_out "api.space.localhost does not resolve to loopback: install libnss-myhostname (build-aux/install-deps.sh)"
start_daemon_tcp

run timeout -k 10 900 "$E2B_DIR/setup-ci-sdks.sh" "$SDK_DIR"
check_eq "the code interpreter SDKs install (Python 2.6.2 with e2b 2.21.1, 2.11.5; JS 2.8.0)" 0 "$RC" ||
        { last_diag; bail_out "no SDKs"; }
PY_OLD=$(sed -n 1p "$OUT")
PY_NEW=$(sed -n 2p "$OUT")
JS_ENV=$(sed -n 3p "$OUT")
MCP_DIR=$TOP_SRCDIR/tests/mcp
run timeout -k 10 900 "$MCP_DIR/setup-sdks.sh" "${SPACE_MCP_SDK_DIR:-$TOP_BUILDDIR/tests/mcp/.sdk}"
check_eq "the MCP SDKs install (Python mcp, JS @modelcontextprotocol/sdk)" 0 "$RC" || { last_diag; bail_out "no MCP SDKs"; }
MCP_PY=$(sed -n 1p "$OUT")
MCP_JS=$(sed -n 2p "$OUT")

export TMPDIR=$TEST_TMP/tmp
mkdir -p "$TMPDIR"
chmod 0711 "$TEST_TMP"
chmod 1777 "$TMPDIR"
seed_template
check_eq "the seed template (built, or imported as an earlier test built it)" 0 "$RC" || { last_diag; bail_out "no seed template"; }
t0=$(now_ms)
run timeout -k 10 1800 "$SPACECTL_BIN" template build "$TOP_SRCDIR/templates/code-interpreter"
check_eq "template build templates/code-interpreter" 0 "$RC" || { last_diag; bail_out "no code-interpreter template"; }
diag "code-interpreter built on seed in $((($(now_ms) - t0) / 1000)) s"

# The template's first sandbox builds its base snapshot: a cold boot, the server and its kernels warm, 3 to more
# than 10 minutes under TCG (seconds under KVM), longer than the SDKs wait for a create and than spacectl's own
# 600 s wait. Built here first, as a user does with a create after the build (and `op wait` for its operation,
# as long as the daemon's limit for the service), so that the suites' creates are restores.
t0=$(now_ms)
run sh -c "op=\$(timeout -k 10 60 '$SPACECTL_BIN' create --async code-interpreter --name t44-base) &&
        timeout -k 10 1900 '$SPACECTL_BIN' op wait \"\$op\" --timeout 1850"
check_eq "the first sandbox (it builds the base snapshot, kernels warm)" 0 "$RC" || { last_diag; bail_out "no base"; }
diag "the base snapshot with warm kernels took $((($(now_ms) - t0) / 1000)) s"
check_rc "... and goes" 0 sc rm -f t44-base

KEY=$(mint_key e2b-ci) || bail_out "cannot mint an API key"
export SPACE_TEST_SOCKET=$SPACE_SOCKET SPACECTL=$SPACECTL_BIN

unset E2B_DEBUG E2B_ACCESS_TOKEN E2B_DOMAIN E2B_API_URL E2B_SANDBOX_URL E2B_API_KEY
run_py() { # run_py LABEL VENV K VAR=VALUE...: the Python suite (pytest -k K when K is set) with those variables
        local label=$1 venv=$2 k=$3
        shift 3
        (cd "$E2B_DIR/ci-py" && PYTHONDONTWRITEBYTECODE=1 env "$@" timeout -k 10 "${SPACE_E2B_PY_TIMEOUT:-1500}" \
                "$venv/bin/python" -m pytest -p no:cacheprovider -q --durations=5 --junitxml="$TEST_TMP/$label.xml" \
                ${k:+-k "$k"} . >"$TEST_TMP/$label.log" 2>&1)
}
run_js() { # run_js LABEL SUITE MODULES VAR=VALUE...: a JS suite, from a copy beside its SDK's node_modules (ES
        # modules resolve there)
        local label=$1 suite=$2 modules=$3
        shift 3
        mkdir -p "$TEST_TMP/$label"
        cp "$suite"/*.mjs "$TEST_TMP/$label/"
        ln -sfn "$modules" "$TEST_TMP/$label/node_modules"
        (cd "$TEST_TMP/$label" && env "$@" timeout -k 10 "${SPACE_E2B_JS_TIMEOUT:-900}" \
                node --test --test-concurrency=1 --test-reporter=junit \
                --test-reporter-destination="$TEST_TMP/$label.xml" --test-reporter=spec \
                --test-reporter-destination=stdout ./*.test.mjs >"$TEST_TMP/$label.log" 2>&1)
}
run_mcp_py() { # the MCP suite's run_code cases (a PNG), over stdio and /mcp
        (cd "$MCP_DIR/py" && PYTHONDONTWRITEBYTECODE=1 env "$@" timeout -k 10 600 "$MCP_PY/bin/python" -m pytest \
                -p no:cacheprovider -q --junitxml="$TEST_TMP/mcp-py.xml" -k run_code_png . >"$TEST_TMP/mcp-py.log" 2>&1)
}
tap_suite() { # tap_suite LABEL: its test cases as TAP lines
        local label=$1
        diag "$label: $(grep -E ' (passed|failed)|^. (pass|fail) [0-9]' "$TEST_TMP/$label.log" | tail -n 2 | tr '\n' ' ')" \
                "$(grep -E '^[0-9.]+s (call|setup)' "$TEST_TMP/$label.log")"
        python3 "$E2B_DIR/junit-to-tap.py" "$label" "$TEST_TMP/$label.xml" >"$TEST_TMP/$label.tap"
        tap_from "$TEST_TMP/$label.tap"
        grep -q '^FAIL' "$TEST_TMP/$label.tap" && diag_file "$TEST_TMP/$label.log" 80
}

# ---- E2B's own two variables, over TLS: 2.6.2 with e2b 2.21.1 calls https://49999-ID.DOMAIN for everything
run env -u E2B_API_URL -u E2B_SANDBOX_URL "$SPACECTL_BIN" e2b env
check_eq "spacectl e2b env" 0 "$RC" || last_diag
cp "$OUT" "$TEST_TMP/e2b.env"
check_contains "... exports E2B_DOMAIN (the TLS listener's)" "E2B_DOMAIN='space.localhost:$TLS_PORT'" "$TEST_TMP/e2b.env"
DOMAIN_ENV=()
while IFS= read -r line; do
        [[ $line =~ ^export\ ([A-Z0-9_]+)=\'(.*)\'$ ]] && DOMAIN_ENV+=("${BASH_REMATCH[1]}=${BASH_REMATCH[2]}")
done <"$TEST_TMP/e2b.env"
check_eq "... six variables: the domain, a key and the CA four ways" 6 "${#DOMAIN_ENV[@]}" ||
        diag_file "$TEST_TMP/e2b.env"
# the whole suite through the domain would repeat what the URLs show: the TLS path of every kind of call
TLS_K=${SPACE_T44_TLS_K-last_expression or streams or error_has or dataframe or line_chart or contexts_have or javascript or bash or timeout_interrupts or fork or bad_input or wrong_token or env_vars_reach}
URL_ENV=(E2B_API_KEY="$KEY" E2B_API_URL="$API_URL" E2B_SANDBOX_URL="$API_URL")

# ---- the three suites at once, each with sandboxes of its own: they mostly wait on their guests, and one after
# the other they took twice as long. Through the URLs: 2.11.5 (Python) and 2.8.0 (JS); SPACE_T44_URL=0 leaves
# them out (while working on TLS). Through the domain: 2.6.2.
pids=()
if [ "${SPACE_T44_URL:-1}" != 0 ]; then
        run_py py-2.11.5-url "$PY_NEW" "" "${URL_ENV[@]}" &
        pids+=($!)
        run_js js-2.8.0-url "$E2B_DIR/ci-js" "$JS_ENV/node_modules" "${URL_ENV[@]}" &
        pids+=($!)
fi
run_py py-2.6.2-domain "$PY_OLD" "$TLS_K" "${DOMAIN_ENV[@]}" &
pids+=($!)
wait "${pids[@]}"
# then the MCP suites' run_code cases, the two at once: beside the three above, five suites' guests under TCG
# slowed the kernels enough to lose a chart's output in one run of the E2B suites
MCP_ENV=(SPACECTL="$SPACECTL_BIN" SPACE_MCP_URL="$API_URL/mcp" SPACE_MCP_KEY="$KEY" SPACE_MCP_TEMPLATE=minimal
        SPACE_MCP_CI_TEMPLATE=code-interpreter)
run_mcp_py "${MCP_ENV[@]}" &
pids=($!)
run_js mcp-js "$MCP_DIR/js" "$MCP_JS/node_modules" "${MCP_ENV[@]}" SPACE_MCP_ONLY="run_code gives a PNG" &
pids+=($!)
wait "${pids[@]}"
if [ "${SPACE_T44_URL:-1}" != 0 ]; then
        tap_suite py-2.11.5-url
        tap_suite js-2.8.0-url
fi
tap_suite py-2.6.2-domain
tap_suite mcp-py
tap_suite mcp-js
check_match "the MCP suites ran run_code's PNG over both transports in both SDKs" '^4$' \
        "$(cat "$TEST_TMP/mcp-py.tap" "$TEST_TMP/mcp-js.tap" | grep -c 'run_code')"

# ---- nothing left behind
left=$(curl -s --unix-socket "$SPACE_SOCKET" http://localhost/v1/sandboxes | python3 -c \
        'import json,sys; print(len([s for s in json.load(sys.stdin)["sandboxes"] if s["state"] != "deleting"]))')
check_eq "the suites killed every sandbox they made" 0 "$left"

done_testing
