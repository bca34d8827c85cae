#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Warm pools: a pool of 3 hands out 3 sandboxes (each a working sandbox with its own identity), members stay
# hidden from ls, and the pool refills in the background.
. "$(dirname "$0")/lib.sh"

space_env_setup
start_daemon

pool_ready() {
        run sc pool ls --json
        [ "$RC" -eq 0 ] || return 1
        [ "$(json "$OUT" '[p["ready"] for p in d["pools"] if p["template"] == "minimal"][0]' 2>/dev/null)" = "$1" ]
}

check_rc "pool set minimal 3" 0 sc pool set minimal 3
if wait_for 180 pool_ready 3; then pass "the pool fills to 3 ready sandboxes"; else fail "the pool fills to 3" "$(cat "$OUT")"; fi
check_rc "ls --json" 0 sc ls --json
check_eq "pool members are not listed" 0 "$(json "$OUT" 'len(S(d))')"
# Members are hidden from ls, but each one's create operation is listed: with no sandbox of the user's yet,
# the sandboxes of the create operations are the pool's members.
check_rc "op ls --json" 0 sc op ls --json
MEMBERS=$(json "$OUT" '" ".join(sorted(set(o["sandbox_id"] for o in d["operations"] if o["kind"] == "create" and o["state"] == "succeeded")))')
check_eq "the operations show 3 pool members" 3 "$(wc -w <<<"$MEMBERS")"

IDS=()
for i in 1 2 3; do
        check_rc "create $i is served" 0 sc create --env "N=$i"
        IDS+=("$(cat "$OUT")")
done
# The pool refills at once, so its counters cannot tell: a handout is the member itself, with its id.
check_eq "the 3 creates handed out the 3 warm members" "$MEMBERS" "$(printf '%s\n' "${IDS[@]}" | sort | paste -sd' ')"
for i in 1 2 3; do
        id=${IDS[$((i - 1))]}
        check_rc "op ls --json --sandbox (sandbox $i)" 0 sc op ls --json --sandbox "$id"
        check_eq "  ... two creates, both succeeded: the pool's and the user's" "create:succeeded create:succeeded" \
                "$(json "$OUT" '" ".join(o["kind"] + ":" + o["state"] for o in d["operations"])')"
        check_eq "  ... the pool's create was made, the user's was served from the pool" "False True" \
                "$(json "$OUT" '" ".join(sorted(str(o.get("from_pool")) for o in d["operations"]))')"
        check_eq "  ... and it is running" running "$(state_of "$id")"
done
# Not the template's default shape: made, not served from the pool.
check_rc "create --memory 320" 0 sc create --memory 320
BIG=$(cat "$OUT")
check_rc "op ls --json --sandbox (memory 320)" 0 sc op ls --json --sandbox "$BIG"
check_eq "  ... one create, not from the pool" "create:False" \
        "$(json "$OUT" '" ".join(o["kind"] + ":" + str(o.get("from_pool")) for o in d["operations"])')"
check_eq "  ... and it is not one of the warm members" 0 "$(grep -cw -- "$BIG" <<<"$MEMBERS")"
check_rc "rm the 320 MiB sandbox" 0 sc rm -f "$BIG"
seen=""
for i in 1 2 3; do
        id=${IDS[$((i - 1))]}
        check_rc "sandbox $i answers exec" 0 sc exec "$id" -- sh -c 'echo $N $(hostname) $(cat /run/space/sandbox-id)'
        check_eq "sandbox $i has its env and its own identity" "$i sb-${id:0:12} $id" "$(cat "$OUT")"
        run sc exec "$id" -- sh -c 'head -c 16 /dev/urandom | od -An -tx1 | tr -d " \n"'
        seen="$seen $(cat "$OUT")"
done
check_eq "random bytes differ between the handed-out sandboxes" 3 "$(echo $seen | tr ' ' '\n' | sort -u | wc -l)"
check_rc "ls --json" 0 sc ls --json
check_eq "the handed-out sandboxes are listed" 3 "$(json "$OUT" 'len(S(d))')"
if wait_for 180 pool_ready 3; then pass "the pool refills to 3"; else fail "the pool refills to 3" "$(cat "$OUT")"; fi
check_rc "pool set minimal 0" 0 sc pool set minimal 0
check_rc "pool ls --json" 0 sc pool ls --json
check_eq "the pool is gone" 0 "$(json "$OUT" 'len(d["pools"])')"
check_fails "pool set of an unknown template fails" sc pool set no-such-template 2
for id in "${IDS[@]}"; do sc rm -f "$id" >/dev/null 2>&1; done

# Eviction takes what a create needs, no more: with 1024 MiB for all and 3 members of 256 MiB, a 512 MiB
# create evicts one member. Members being deleted still hold memory, which once made it evict all three.
members_ready() {
        pool_ready 3 && run sc op ls --json &&
                [ "$(json "$OUT" 'sum(1 for o in d["operations"] if o["state"] in ("pending", "running"))')" = 0 ]
}
deletes() {
        run sc op ls --json
        json "$OUT" 'sum(1 for o in d["operations"] if o["kind"] == "delete")'
}
check_eq "every sandbox is gone before the restart" 0 "$(sandbox_count)"
OLD=$(daemon_pid)
kill -TERM "$OLD"
wait_for 20 pid_gone "$OLD" || fail "spaced stopped on SIGTERM"
write_config "memory_limit_mib = 1024"
start_daemon
check_rc "pool set minimal 3 (1024 MiB for all)" 0 sc pool set minimal 3
if wait_for 180 members_ready; then pass "3 members of 256 MiB are ready"; else fail "3 members are ready" "$(cat "$OUT")"; fi
D0=$(deletes)
check_rc "create --memory 512 makes room" 0 sc create --memory 512
BIG=$(cat "$OUT")
check_eq "  ... by evicting one member, not more" 1 "$(($(deletes) - D0))"
check_eq "  ... and it runs" running "$(state_of "$BIG")"
check_rc "pool set minimal 0" 0 sc pool set minimal 0
check_rc "rm the 512 MiB sandbox" 0 sc rm -f "$BIG"
done_testing
