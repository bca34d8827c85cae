#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Bad input gets a clear error, a non-zero exit, and changes nothing. Also run (create + exec + rm).
. "$(dirname "$0")/lib.sh"

space_env_setup
# 2 x 256 MiB fit in 640 MiB, a third does not.
LIMIT=640
write_config "memory_limit_mib = $LIMIT"
start_daemon

create_sandbox SB --name t05-a
[ -n "$SB" ] || { last_diag; bail_out "create failed"; }
pass "create a sandbox"
BEFORE=$(sandbox_ids)

# expect_refused DESC CMD...: non-zero, a message on stderr, nothing on stdout, and ls unchanged.
expect_refused() {
        local desc=$1
        shift
        check_fails "$desc: refused with a message" "$@"
        if [ -s "$OUT" ] && [ "$1" = sc_create ]; then
                fail "$desc: prints no id" "stdout: $(head -c 200 "$OUT")"
        elif [ "$1" = sc_create ]; then
                pass "$desc: prints no id"
        fi
        check_eq "$desc: ls unchanged" "$BEFORE" "$(sandbox_ids)"
}

# ---- create
expect_refused "unknown template" sc_create no-such-template-t05
check_contains "unknown template: the message names it" no-such-template-t05 "$ERR"

expect_refused "--memory 1" sc_create --memory 1
check_contains "--memory 1: the message names the lower bound" 64 "$ERR"
check_contains "--memory 1: the message names the upper bound" 65536 "$ERR"
expect_refused "--memory 99999999" sc_create --memory 99999999
check_contains "--memory 99999999: the message names the upper bound" 65536 "$ERR"
check_contains "--memory 99999999: the message names the field" memory "$ERR"
expect_refused "--memory abc" sc_create --memory abc
expect_refused "--disk 0" sc_create --disk 0
check_contains "--disk 0: the message names the field" disk "$ERR"
check_contains "--disk 0: the message names the range" 1048576 "$ERR"
expect_refused "--vcpu 0" sc_create --vcpu 0
check_contains "--vcpu 0: the message names the field" vcpu "$ERR"
expect_refused "--vcpu 4096" sc_create --vcpu 4096
expect_refused "--env without =" sc_create --env NOEQUALS
check_contains "--env without =: the message shows the bad value" NOEQUALS "$ERR"
expect_refused "a name already in use" sc_create --name t05-a

# ---- the memory limit: the second fits, the third is refused up front with the figures
create_sandbox SB2 --name t05-b
if [ -n "$SB2" ]; then pass "a second 256 MiB sandbox fits in $LIMIT MiB"; else fail "a second 256 MiB sandbox fits in $LIMIT MiB"; last_diag; fi
BEFORE=$(sandbox_ids)
t0=$(now_ms)
expect_refused "a third 256 MiB sandbox over the $LIMIT MiB limit" sc_create --name t05-c
took=$(($(now_ms) - t0))
check_contains "memory limit: the message gives the request (256)" 256 "$ERR"
check_contains "memory limit: the message gives the memory in use (512)" 512 "$ERR"
check_contains "memory limit: the message gives the limit ($LIMIT)" "$LIMIT" "$ERR"
if [ "$took" -lt 5000 ]; then pass "memory limit: refused up front ($took ms)"; else fail "memory limit: refused up front" "took $took ms"; fi
check_rc "rm the second sandbox" 0 sc rm "$SB2"
BEFORE=$(sandbox_ids)

# ---- unknown sandboxes
check_rc "exec in an unknown sandbox exits 125" 125 sc exec no-such-sandbox-t05 -- true
check_contains "exec: the message names the sandbox" no-such-sandbox-t05 "$ERR"
expect_refused "inspect of an unknown sandbox" sc inspect no-such-sandbox-t05
check_contains "inspect: the message names the sandbox" no-such-sandbox-t05 "$ERR"
expect_refused "rm of an unknown sandbox" sc rm no-such-sandbox-t05
check_contains "rm: the message names the sandbox" no-such-sandbox-t05 "$ERR"
expect_refused "rm -f of an unknown sandbox" sc rm -f no-such-sandbox-t05
expect_refused "exec in a sandbox given by a wrong full id" sc exec 0123456789abcdef0123456789abcdef -- true
check_eq "exec with a wrong full id exits 125" 125 "$RC"

# ---- commands in the guest
check_rc "a command that does not exist exits 127" 127 sc exec "$SB" -- /no/such/binary
check_contains "127: stderr names the command" /no/such/binary "$ERR"
check_rc "a command on PATH that does not exist exits 127" 127 sc exec "$SB" -- nosuchcommand-t05
if [ -s "$ERR" ]; then pass "127: a message on stderr"; else fail "127: a message on stderr"; fi
check_rc "make a file that is not executable" 0 sc exec "$SB" -- sh -c 'mkdir -p /tmp && echo x > /tmp/notexec && chmod 644 /tmp/notexec'
check_rc "a file that is not executable exits 126" 126 sc exec "$SB" -- /tmp/notexec
check_fails "exec -w into a missing directory fails" sc exec -w /no/such/dir "$SB" -- true
check_eq "ls unchanged after failing commands" "$BEFORE" "$(sandbox_ids)"

# ---- the CLI itself
check_rc "an unknown verb exits 2" 2 sc no-such-verb
if [ -s "$ERR" ]; then pass "unknown verb: a message on stderr"; else fail "unknown verb: a message on stderr"; fi
check_rc "exec without a command exits 2 or 125" 0 bash -c 'spacectl exec "$0"; rc=$?; [ $rc = 2 ] || [ $rc = 125 ]' "$SB"
check_fails "exec -e without = is refused" sc exec -e NOEQUALS "$SB" -- true
check_eq "ls unchanged after CLI errors" "$BEFORE" "$(sandbox_ids)"

# ---- run: create + exec + rm
check_rc "run -- true exits 0" 0 sc run -- true
check_eq "run leaves no sandbox behind" "$BEFORE" "$(sandbox_ids)"
check_rc "run -- sh -c 'exit 3' exits 3" 3 sc run -- sh -c 'exit 3'
check_eq "run with a failing command leaves no sandbox behind" "$BEFORE" "$(sandbox_ids)"
check_rc "run minimal -e K=V -- echo prints" 0 sc run minimal -e T05=run-env -- sh -c 'echo "$T05"'
check_eq "run passes output and env" run-env "$(cat "$OUT")"
check_rc "run of a missing command exits 127" 127 sc run -- nosuchcommand-t05
expect_refused "run with an unknown template" sc run no-such-template-t05 -- true
check_eq "run with an unknown template exits 125" 125 "$RC"

check_rc "rm the sandbox" 0 sc rm "$SB"
check_eq "nothing left" 0 "$(sandbox_count)"
done_testing
