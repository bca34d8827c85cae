#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A template's service (space-template(5), start and ready; issue 21): the agent starts it when the base
# snapshot is built and keeps it running; the base is saved only once the ready command exits 0, so every
# sandbox has it running and ready from its first instant, started once (in the base), not again by a
# restore. It runs as the template's user, in its workdir, with its environment. Killed, it is started again;
# one that exits at once is retried without taking the agent down. Kept across suspend and wake, in a fork,
# and a sandbox's own (killing it in one sandbox leaves another's). A changed start line is a new base. A stop
# ends it with the other processes, and a start (a cold boot) starts it again.
. "$(dirname "$0")/lib.sh"

space_env_setup
start_daemon

REC=$TEST_TMP/svc
mkdir -p "$REC"
cat >"$REC/svc.sh" <<'SH'
#!/bin/sh
echo "$$" >>/tmp/svc-starts
echo "$SVC_GREETING $(id -u) $(pwd)" >/tmp/svc-env
sleep 2
touch /tmp/svc-ready
i=0; while :; do i=$((i+1)); echo $i >/tmp/svc-beat; sleep 0.2; done
SH
cat >"$REC/template.conf" <<'CONF'
name = svc
from = minimal
file = svc.sh /usr/local/bin/svc.sh 0755
start = /usr/local/bin/svc.sh
ready = test -e /tmp/svc-ready
env = SVC_GREETING=hello
workdir = /tmp
CONF

check_rc "build a recipe with start and ready" 0 timeout -k 10 600 spacectl template build "$REC"
sc template inspect svc >"$TEST_TMP/inspect.json" 2>/dev/null
check_eq "inspect shows start" /usr/local/bin/svc.sh "$(json "$TEST_TMP/inspect.json" 'd["config"]["start"]')"
check_eq "inspect shows ready" "test -e /tmp/svc-ready" "$(json "$TEST_TMP/inspect.json" 'd["config"]["ready"]')"

create_sandbox SB svc --name t42
[ -n "$SB" ] || { last_diag; bail_out "create from svc failed"; }
in_sb() { sc exec "$1" -- sh -c "$2" 2>>"$TEST_TMP/in_sb.err"; }

check_eq "the service was ready before the snapshot: its marker is there at once" yes \
        "$(in_sb "$SB" 'test -e /tmp/svc-ready && echo yes')"
check_eq "it was started once, in the base (the restore did not start another)" 1 \
        "$(in_sb "$SB" 'wc -l </tmp/svc-starts')"
check_eq "it runs as the template's user, in its workdir, with its env" "hello 0 /tmp" "$(in_sb "$SB" 'cat /tmp/svc-env')"
B1=$(in_sb "$SB" 'cat /tmp/svc-beat'); sleep 1; B2=$(in_sb "$SB" 'cat /tmp/svc-beat')
if [[ $B1 =~ ^[0-9]+$ && $B2 =~ ^[0-9]+$ ]] && [ "$B2" -gt "$B1" ]; then pass "it runs in the sandbox (its beat goes on)"
else fail "it runs in the sandbox (its beat goes on)" "beats '$B1' then '$B2'"; fi

create_sandbox SB2 svc --name t42-b
[ -n "$SB2" ] || { last_diag; bail_out "a second create failed"; }
P1=$(in_sb "$SB" 'head -n1 /tmp/svc-starts')
check_rc "kill -9 the service" 0 sc exec "$SB" -- kill -9 "$P1"
if wait_for 10 sh -c "[ \"\$(spacectl exec $SB -- sh -c 'wc -l </tmp/svc-starts' 2>/dev/null)\" = 2 ]"; then
        pass "... it is started again"
else
        fail "... it is started again" "starts: $(in_sb "$SB" 'cat /tmp/svc-starts' | tr '\n' ' ')"
fi
P2=$(in_sb "$SB" 'tail -n1 /tmp/svc-starts')
check_eq "... as a new process that runs" yes "$(in_sb "$SB" "[ '$P2' != '$P1' ] && kill -0 '$P2' && echo yes")" ||
        diag "P1 $P1 P2 $P2: $(in_sb "$SB" 'cat /tmp/svc-starts; ps -o pid,ppid,args | grep -v "\["')"
check_eq "the other sandbox's service was not touched" 1 "$(in_sb "$SB2" 'wc -l </tmp/svc-starts')"

check_rc "suspend" 0 sc suspend "$SB"
check_rc "wake" 0 sc wake "$SB"
check_eq "... the service still runs, not started again" "2 yes" \
        "$(in_sb "$SB" "echo \$(wc -l </tmp/svc-starts) \$(kill -0 '$P2' && echo yes)")"
run sc fork "$SB" --name t42-fork
FORK=$(cat "$OUT")
track_sandbox "$FORK"
F1=$(in_sb "$FORK" 'cat /tmp/svc-beat'); sleep 2; F2=$(in_sb "$FORK" 'cat /tmp/svc-beat')
# (a new count when the service started again since: the beat is the restarted one's)
if [[ $F1 =~ ^[0-9]+$ && $F2 =~ ^[0-9]+$ ]] && [ "$F2" != "$F1" ]; then pass "a fork has the service running"
else fail "a fork has the service running" "beats '$F1' then '$F2'" \
        "fork: $(in_sb "$FORK" 'cat /tmp/svc-beat /tmp/svc-starts /var/log/space-service.log; ps -o pid,ppid,stat,args | grep -v "\["' | tr '\n' ' ')" \
        "parent: $(in_sb "$SB" 'cat /tmp/svc-beat; ps -o pid,ppid,stat,args | grep -v "\["' | tr '\n' ' ')"; fi

# stop and start: the service went with the processes, and the cold boot starts it again (as the base's INIT)
check_rc "stop the other sandbox" 0 sc stop "$SB2"
check_rc "... and start it from its disk" 0 sc start "$SB2"
S1=$(in_sb "$SB2" 'cat /tmp/svc-beat'); sleep 2; S2=$(in_sb "$SB2" 'cat /tmp/svc-beat')
if [[ $S1 =~ ^[0-9]+$ && $S2 =~ ^[0-9]+$ ]] && [ "$S2" != "$S1" ]; then pass "after a start the service runs again"
else fail "after a start the service runs again" "beats '$S1' then '$S2'" \
        "$(in_sb "$SB2" 'cat /tmp/svc-starts /var/log/space-service.log; ps -o pid,ppid,stat,args | grep -v "\["' | tr '\n' ' ')"; fi
check_eq "... as its user, in its workdir, with its env" "hello 0 /tmp" "$(in_sb "$SB2" 'cat /tmp/svc-env')"

# a service that exits at once: retried with a growing delay; the agent goes on serving
cat >"$REC/template.conf" <<'CONF'
name = svc-bad
from = minimal
start = echo started >>/tmp/bad-starts; exit 3
ready = test -e /tmp/bad-starts
CONF
check_rc "build a recipe whose service exits at once" 0 timeout -k 10 600 spacectl template build "$REC"
create_sandbox BAD svc-bad --name t42-bad
[ -n "$BAD" ] || { last_diag; bail_out "create from svc-bad failed"; }
sleep 3
N=$(in_sb "$BAD" 'wc -l </tmp/bad-starts')
if [[ $N =~ ^[0-9]+$ ]] && [ "$N" -ge 2 ] && [ "$N" -le 8 ]; then pass "it is started again, with a growing delay ($N starts in the first seconds)"
else fail "it is started again, with a growing delay" "starts: '$N'"; fi
check_eq "... and the agent still runs commands" ok "$(sc exec "$BAD" -- echo ok 2>/dev/null)"

# the API's template config: start and ready are checked like the other fields, with the reason
mkdir -p "$TEST_TMP/imp"
printf 'hi\n' >"$TEST_TMP/imp/hello"
tar -C "$TEST_TMP/imp" -cf "$TEST_TMP/imp.tar" hello
for bad in '{"start": ""}' '{"start": 5}' '{"ready": ["x"]}'; do
        ureq POST /v1/templates/import -H 'Content-Type: application/json' \
                -d "{\"source\": \"$TEST_TMP/imp.tar\", \"tag\": \"t42/bad\", \"config\": $bad}"
        check_status "import with config $bad is refused" 400 invalid_argument &&
                check_contains "... naming the field" "config.${bad:2:5}" "$(cat "$OUT")"
done
[ -s "$TEST_TMP/in_sb.err" ] && diag_file "$TEST_TMP/in_sb.err"
done_testing
