#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The everyday path with one sandbox: version, templates, create, ls/inspect, exec exit codes, stdout and stderr
# kept apart, env and cwd, naming by id/prefix/name, rm.
. "$(dirname "$0")/lib.sh"

space_env_setup
start_daemon

# ---- version and templates
check_rc "spacectl version exits 0" 0 sc version
check_match "version prints a version number" '[0-9]+\.[0-9]+' "$(cat "$OUT")"

check_rc "template ls exits 0" 0 sc template ls
check_contains "template ls lists minimal" minimal "$OUT"
check_rc "template ls --json exits 0" 0 sc template ls --json
check_eq "template ls --json has minimal" true \
        "$(json "$OUT" 'any(t["name"] == "minimal" for t in T(d))' 2>&1)"
check_eq "template ls --json prints an object with \"templates\" (API.md)" true "$(json "$OUT" 'isinstance(d, dict) and "templates" in d' 2>&1)" ||
        diag "it printed: $(head -c 80 "$OUT" | tr '\n\t' '  ')"

# ---- create (the first one builds the base snapshot with a cold boot)
t0=$(now_ms)
check_rc "create --name --env exits 0" 0 sc_create --name t01box --env T01VAR=hello-env
diag "first create (builds the base snapshot): $(($(now_ms) - t0)) ms"
check_eq "create prints exactly one line" 1 "$(wc -l <"$OUT")"
SB=$(head -n1 "$OUT")
check_match "create prints only an id (32 lowercase hex)" "$ID_RE" "$SB"
[ -n "$SB" ] && grep -qE "$ID_RE" <<<"$SB" || bail_out "create failed, nothing else can be tested"
track_sandbox "$SB"
# Under TCG the daemon runs one unseen command after a create (ARCHITECTURE.md, Create): it is no process of
# the user's, so ps lists nothing yet.
check_rc "ps right after the create exits 0" 0 sc ps "$SB" --json
check_eq "ps right after the create lists no process" 0 "$(json "$OUT" 'len(d["processes"])' 2>&1)"

check_rc "create --json" 0 sc_create --name t01json --json
check_eq "... prints the new sandbox, running, as inspect --json does" "t01json running 32" \
        "$(json "$OUT" 'd["name"] + " " + d["state"] + " " + str(len(d["id"]))')"
J=$(json "$OUT" 'd["id"]')
track_sandbox "$J"
check_rc "... and it is removed again" 0 sc rm -f "$J"

# ---- ls and inspect
check_rc "ls exits 0" 0 sc ls
check_contains "ls shows the sandbox's name" t01box "$OUT"
check_contains "ls shows the sandbox's id (first 12 hex)" "${SB:0:12}" "$OUT"
check_rc "ls --json exits 0" 0 sc ls --json
check_eq "ls --json lists the sandbox as running" running \
        "$(json "$OUT" '[s["state"] for s in S(d) if s["id"] == "'"$SB"'"][0]' 2>&1)"
check_eq "ls --json prints an object with \"sandboxes\" (API.md)" true "$(json "$OUT" 'isinstance(d, dict) and "sandboxes" in d' 2>&1)" ||
        diag "it printed: $(head -c 80 "$OUT" | tr '\n\t' '  ')"

check_rc "inspect exits 0" 0 sc inspect "$SB"
check_contains "inspect shows the name" t01box "$OUT"
check_rc "inspect --json exits 0" 0 sc inspect "$SB" --json
cp "$OUT" "$TEST_TMP/sb.json"
check_eq "inspect --json: id" "$SB" "$(json "$TEST_TMP/sb.json" 'd["id"]' 2>&1)"
check_eq "inspect --json: name" t01box "$(json "$TEST_TMP/sb.json" 'd["name"]' 2>&1)"
check_eq "inspect --json: template" minimal "$(json "$TEST_TMP/sb.json" 'd["template"]' 2>&1)"
check_eq "inspect --json: state" running "$(json "$TEST_TMP/sb.json" 'd["state"]' 2>&1)"
check_eq "inspect --json: memory_mib is the template's 256" 256 "$(json "$TEST_TMP/sb.json" 'd["memory_mib"]' 2>&1)"
check_eq "inspect --json: env kept" hello-env "$(json "$TEST_TMP/sb.json" 'd["env"]["T01VAR"]' 2>&1)"
QEMU_PID=$(json "$TEST_TMP/sb.json" 'd["qemu_pid"]' 2>/dev/null)
if pid_alive "$QEMU_PID"; then pass "inspect --json: qemu_pid is a live process"; else fail "inspect --json: qemu_pid is a live process" "qemu_pid=$QEMU_PID"; fi

# ---- exec: output and exit codes
check_rc "exec echo exits 0" 0 sc exec "$SB" -- echo hello
check_eq "exec echo prints hello" hello "$(cat "$OUT")"
check_rc "exec true exits 0" 0 sc exec "$SB" -- true
check_rc "exec false exits 1" 1 sc exec "$SB" -- false
check_rc "exec exit 7 exits 7" 7 sc exec "$SB" -- sh -c 'exit 7'
check_rc "exec of a missing command exits 127" 127 sc exec "$SB" -- no-such-command-t01
check_contains "missing command: stderr names it" no-such-command-t01 "$ERR"
check_contains "... says it is the sandbox that lacks it, naming the template" \
        "no-such-command-t01: command not found in sandbox ${SB:0:12} (template minimal)" "$ERR"
check_rc "exec killed by SIGKILL exits 137" 137 sc exec "$SB" -- sh -c 'kill -9 $$'
check_rc "exec killed by SIGTERM exits 143" 143 sc exec "$SB" -- sh -c 'kill -15 $$'

t0=$(now_ms)
check_rc "exec --timeout 1 of sleep 30 exits 124" 124 sc exec --timeout 1 "$SB" -- sleep 30
took=$(($(now_ms) - t0))
if [ "$took" -lt 10000 ]; then pass "--timeout 1 returns within 10 s ($took ms)"; else fail "--timeout 1 returns within 10 s" "took $took ms"; fi
check_eq "... and says so in one line on stderr" "spacectl: the command ran past --timeout and was killed (exit status 124)" \
        "$(cat "$ERR")"
check_rc "a command that itself exits 124" 124 sc exec --timeout 60 "$SB" -- sh -c 'exit 124'
check_eq "... leaves stderr to the command" "" "$(cat "$ERR")"
check_rc "the sandbox still works after a timeout" 0 sc exec "$SB" -- true

# stdout and stderr kept apart
check_rc "exec writing to both streams exits 0" 0 sc exec "$SB" -- sh -c 'echo out; echo err >&2; echo out2; echo err2 >&2'
check_eq "stdout holds only stdout" "$(printf 'out\nout2')" "$(cat "$OUT")"
check_eq "stderr holds only stderr" "$(printf 'err\nerr2')" "$(cat "$ERR")"
check_rc "output without a trailing newline" 0 sc exec "$SB" -- printf abc
check_eq "exactly 3 bytes come back" 3 "$(wc -c <"$OUT")"

# env and cwd
check_rc "exec -e K=V exits 0" 0 sc exec -e T01A=alpha -e T01B='with space' "$SB" -- sh -c 'echo "$T01A|$T01B"'
check_eq "exec -e sets the variables" "alpha|with space" "$(cat "$OUT")"
check_rc "create --env reaches exec" 0 sc exec "$SB" -- sh -c 'echo "$T01VAR"'
check_eq "create --env value" hello-env "$(cat "$OUT")"
check_rc "exec -w /tmp exits 0" 0 sc exec -w /tmp "$SB" -- pwd
check_eq "exec -w sets the working directory" /tmp "$(cat "$OUT")"
check_rc "exec without -w runs in /" 0 sc exec "$SB" -- pwd
check_eq "default working directory is /" / "$(cat "$OUT")"

# arguments arrive intact (no shell re-splitting)
check_rc "arguments with spaces and quotes" 0 sc exec "$SB" -- printf '[%s]' 'a b' "c'd" '$HOME' ''
check_eq "arguments are passed as given" "[a b][c'd][\$HOME][]" "$(cat "$OUT")"

# ---- naming: by name and by unique prefix
check_rc "exec by name" 0 sc exec t01box -- echo by-name
check_eq "exec by name runs in the sandbox" by-name "$(cat "$OUT")"
check_rc "exec by unique id prefix" 0 sc exec "${SB:0:6}" -- echo by-prefix
check_eq "exec by prefix runs in the sandbox" by-prefix "$(cat "$OUT")"
check_rc "inspect by name" 0 sc inspect t01box --json
check_eq "inspect by name finds the same id" "$SB" "$(json "$OUT" 'd["id"]' 2>&1)"

# ---- rm
check_rc "rm by name exits 0" 0 sc rm t01box
check_fails "inspect of a removed sandbox fails" sc inspect "$SB"
check_contains "the message names the sandbox" "$SB" "$ERR"
check_rc "exec in a removed sandbox exits 125" 125 sc exec "$SB" -- true
check_eq "ls --json is empty again" 0 "$(sandbox_count)"
if [ -n "$QEMU_PID" ] && wait_for 20 pid_gone "$QEMU_PID"; then
        pass "the sandbox's QEMU is gone after rm"
else
        fail "the sandbox's QEMU is gone after rm" "qemu pid $QEMU_PID still alive"
fi

done_testing
