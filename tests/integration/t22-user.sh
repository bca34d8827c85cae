#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Users (lib/user.h): `exec -u NAME|UID[:GROUP|GID]` runs the command as that user of the sandbox's own
# /etc/passwd and /etc/group (uid, gid, supplementary groups, HOME/USER/LOGNAME, its home as the cwd when
# neither exec nor the template gives one); what it writes is its own, and so are its stdin pipe and its pty;
# root stays the default. An unknown user or group fails with 125 and a message naming it (HTTP 400
# unknown_user for a session), a malformed one is a usage error (HTTP 400 invalid_argument); processes record
# their user (ps, GET process). A template's default user (import --user) applies when exec gives none, and
# -u root overrides it; `run -u` passes it on.
. "$(dirname "$0")/lib.sh"

space_env_setup
start_daemon

create_sandbox SB --name t22
[ -n "$SB" ] || { last_diag; bail_out "create failed"; }
pass "create a sandbox from minimal (user root, workdir /)"

# check_out DESC EXPECTED SPACECTL-ARGS...: spacectl exits 0 and prints EXPECTED (carriage returns of a pty
# dropped).
check_out() {
        local desc=$1 want=$2 got
        shift 2
        run sc "$@"
        got=$(tr -d '\r' <"$OUT")
        if [ "$RC" -eq 0 ] && [ "$got" = "$want" ]; then
                pass "$desc"
        else
                fail "$desc" "command: spacectl $*" "expected exit status 0 and: $(printf '%s' "$want" | tr '\n' '|')" \
                        "got $RC and: $(printf '%s' "$got" | tr '\n' '|')"
                last_diag
        fi
}

# ---- who runs
check_out "without -u the command runs as root" "0 0 /root" exec "$SB" -- sh -c 'echo "$(id -u) $(id -g) $HOME"'
check_out "-u user: uid 1000" 1000 exec -u user "$SB" -- id -u
check_out "-u user: gid 1000" 1000 exec -u user "$SB" -- id -g
check_out "-u user: the supplementary groups are user's own" 1000 exec -u user "$SB" -- id -G
check_out "-u user: HOME, USER, LOGNAME" "/home/user user user" \
        exec -u user "$SB" -- sh -c 'echo "$HOME $USER $LOGNAME"'
check_out "-u user -e HOME=/tmp: the request's env wins" /tmp exec -u user -e HOME=/tmp "$SB" -- sh -c 'echo $HOME'
check_out "-u user: the template's workdir (/) still applies" / exec -u user "$SB" -- pwd
check_out "-u user -w /home/user" /home/user exec -u user -w /home/user "$SB" -- pwd
check_out "-u 1000 is user (name and home from passwd)" "1000 1000 user /home/user" \
        exec -u 1000 "$SB" -- sh -c 'echo "$(id -u) $(id -g) $USER $HOME"'
check_out "-u nobody: 65534, group nogroup, its home" "65534 65534 /nonexistent" \
        exec -u nobody "$SB" -- sh -c 'echo "$(id -u) $(id -g) $HOME"'
check_out "-u user:root: uid 1000, gid 0" "1000 0" exec -u user:root "$SB" -- sh -c 'echo "$(id -u) $(id -g)"'
check_out "-u 4242:4243: numbers that passwd and group do not have, home /" "4242 4243 /" \
        exec -u 4242:4243 "$SB" -- sh -c 'echo "$(id -u) $(id -g) $HOME"'
check_out "-u root: root, with USER set" "0 root" exec -u root "$SB" -- sh -c 'echo "$(id -u) $USER"'

# ---- what it may do
check_rc "-u user writes a file" 0 sc exec -u user "$SB" -- sh -c 'echo hi >/tmp/t22-file'
check_out "... which belongs to 1000:1000" 1000:1000 exec "$SB" -- stat -c %u:%g /tmp/t22-file
check_rc "-u user cannot write to /root" 1 sc exec -u user "$SB" -- touch /root/t22
check_contains "... Permission denied" "permission denied" "$ERR"
check_out "... and nothing was written there" no exec "$SB" -- sh -c '[ -e /root/t22 ] && echo yes || echo no'
check_out "-i -u user: stdin is a pipe the user can reopen" from-stdin \
        exec -i -u user "$SB" -- cat /proc/self/fd/0 <<<"from-stdin"

# ---- a terminal: exec -t goes through a command session
check_out "exec -t -u user: the command runs as 1000, its pty is 1000's and it can open it" "opened
1000 1000" exec -t -u user "$SB" -- sh -c 'echo opened >"$(tty)" && echo "$(id -u) $(stat -c %u "$(tty)")"' </dev/null

# ---- unknown and malformed users
check_rc "-u t22nosuch: exit 125" 125 sc exec -u t22nosuch "$SB" -- id
check_contains "... the message names the user" "unknown user 't22nosuch'" "$ERR"
check_eq "... and nothing on stdout" "" "$(cat "$OUT")"
check_rc "-u user:t22nogroup: exit 125" 125 sc exec -u user:t22nogroup "$SB" -- id
check_contains "... the message names the group" "unknown group 't22nogroup'" "$ERR"
check_rc "exec -t -u t22nosuch (a session): exit 125" 125 sc exec -t -u t22nosuch "$SB" -- id </dev/null
check_contains "... the message names the user" "t22nosuch" "$ERR"
check_rc "-u 'a b': a usage error, 125" 125 sc exec -u 'a b' "$SB" -- id
check_contains "... that says what --user takes" "--user: 'a b' is not USER[:GROUP]" "$ERR"
check_out "the sandbox still runs commands as root by default" 0 exec "$SB" -- id -u

# ---- the record: ps and GET process
check_rc "ps" 0 sc ps "$SB"
check_match "ps has a USER column" '^PID +USER +STATE' "$(head -n1 "$OUT")"
check_match "... showing the user as asked" '^[0-9]+ +user:root +exited' "$(cat "$OUT")"
check_match "... and root for a plain exec" '^[0-9]+ +root +exited' "$(cat "$OUT")"
sc ps "$SB" --json >"$TEST_TMP/ps.json"
check_eq "ps --json: every process has a user" true "$(json "$TEST_TMP/ps.json" 'all(isinstance(p.get("user"), str) for p in d["processes"])')"
check_eq "ps --json: 4242:4243 recorded as given" true \
        "$(json "$TEST_TMP/ps.json" 'any(p["user"] == "4242:4243" for p in d["processes"])')"

# ---- over HTTP (the unix socket)
ureq POST "/v1/sandboxes/$SB/processes" -H 'Content-Type: application/json' \
        -d '{"argv": ["sh", "-c", "id -u"], "user": "nobody"}'
check_eq "POST processes with user: 200, an SSE stream" 200 "$STATUS"
UPID=$(sed -n 's/^data: {"pid": *\([0-9]*\).*/\1/p' "$OUT" | head -n1)
check_match "... that starts the process" '^[0-9]+$' "$UPID"
api_get "/v1/sandboxes/$SB/processes/$UPID" >"$TEST_TMP/p.json"
check_eq "GET process: user nobody, cwd /, exit 0" "nobody / 0" \
        "$(json "$TEST_TMP/p.json" 'd["user"] + " " + d["cwd"] + " " + str(d["exit_code"])' 2>&1)"
ureq POST "/v1/sandboxes/$SB/processes" -H 'Content-Type: application/json' \
        -d '{"argv": ["id"], "user": "t22nosuch"}'
check_contains "POST processes with an unknown user: an error event unknown_user" '"code":"unknown_user"' \
        "$(tr -d ' ' <"$OUT")"
ureq POST "/v1/sandboxes/$SB/sessions" -H 'Content-Type: application/json' -d '{"argv": ["id"], "user": "t22nosuch"}'
check_status "POST sessions with an unknown user: 400 unknown_user" 400 unknown_user
check_contains "... naming the user" "t22nosuch" "$(json "$OUT" 'd["message"]')"
ureq POST "/v1/sandboxes/$SB/sessions" -H 'Content-Type: application/json' \
        -d '{"argv": ["id"], "user": "user:t22nogroup"}'
check_status "POST sessions with an unknown group: 400 unknown_group" 400 unknown_group
for bad in '"a;b"' '""' '"user:"' '"x:y:z"' '5' '"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"'; do
        ureq POST "/v1/sandboxes/$SB/processes" -H 'Content-Type: application/json' -d "{\"argv\": [\"id\"], \"user\": $bad}"
        check_status "POST processes with user $bad: 400 invalid_argument" 400 invalid_argument
done
check_contains "... naming what user takes" "user must be NAME or UID" "$(json "$OUT" 'd["message"]')"
ureq POST "/v1/sandboxes/$SB/sessions" -H 'Content-Type: application/json' -d '{"argv": ["id"], "user": "a b"}'
check_status "POST sessions with user 'a b': 400 invalid_argument" 400 invalid_argument

check_rc "rm the sandbox" 0 sc rm -f "$SB"

# ---- a template's default user
IMG=$TEST_TMP/img
mkdir -p "$IMG/add/etc"
cp "$SPACE_LIB_DIR/templates/minimal/rootfs.tar" "$IMG/r.tar" || bail_out "cannot copy the minimal tree"
echo t22 >"$IMG/add/etc/t22-marker" # a digest of its own: minimal's config stays as it is
tar -C "$IMG/add" --owner=0 --group=0 --numeric-owner --mtime=@86400 -rf "$IMG/r.tar" ./etc/t22-marker ||
        bail_out "tar failed"
check_fails "import --user 'a b' is refused" sc template import "$IMG/r.tar" --tag t22/bad --user 'a b' --quiet
check_contains "... saying what config.user takes" "config.user is not valid" "$ERR"
check_rc "import the tree with --user user and no workdir" 0 \
        sc template import "$IMG/r.tar" --tag t22/user --user user --quiet
sc template inspect t22/user >"$TEST_TMP/t.json"
check_eq "the template's config has user user and no workdir" "user None" \
        "$(json "$TEST_TMP/t.json" 'd["config"]["user"] + " " + str(d["config"].get("workdir"))' 2>&1)"

create_sandbox SB2 t22/user
[ -n "$SB2" ] || { last_diag; bail_out "create from t22/user failed"; }
pass "create a sandbox from it"
check_out "exec without -u runs as the template's user, in its home" "1000 1000 /home/user /home/user" \
        exec "$SB2" -- sh -c 'echo "$(id -u) $(id -g) $HOME $(pwd)"'
check_out "-u root overrides it (home /root)" "0 /root" exec -u root "$SB2" -- sh -c 'echo "$(id -u) $(pwd)"'
check_out "-w /tmp still wins for the cwd" "1000 /tmp" exec -w /tmp "$SB2" -- sh -c 'echo "$(id -u) $(pwd)"'
check_out "-u nobody: its home does not exist, so /" "65534 /" exec -u nobody "$SB2" -- sh -c 'echo "$(id -u) $(pwd)"'
check_out "exec -t (a session) runs as the template's user too" 1000 exec -t "$SB2" -- id -u </dev/null
sc ps "$SB2" --json >"$TEST_TMP/ps2.json"
check_eq "the processes record the default user and the home the agent chose" true \
        "$(json "$TEST_TMP/ps2.json" 'any(p["user"] == "user" and p["cwd"] == "/home/user" for p in d["processes"])' 2>&1)"
check_rc "rm the sandbox" 0 sc rm -f "$SB2"

# ---- run -u
check_out "run -u user minimal -- id -u" 1000 run -u user minimal -- id -u
check_out "run t22/user -- id -u (the template's user)" 1000 run t22/user -- id -u

done_testing
