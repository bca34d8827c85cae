#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Who owns what is copied into a sandbox (issue 25), on seed, whose commands run as `user`: the README's build
# example runs as written (cp src/. build:/work, the tests write their report there as user, cp it back);
# without -a what cp makes is user's where user could have made it (its home, /tmp, a new top-level directory)
# and root's elsewhere (/etc), a replaced file keeps its owner; --chown names the owner, -a keeps the archive's;
# the refusals an attacker or a typo would meet (an unknown user, -a with --chown, --chown on a copy out); the
# same rules over /v1 (the default, an explicit owner, owner with uid); cp --json's tally.
. "$(dirname "$0")/lib.sh"

space_env_setup
start_daemon
export PATH="$(dirname "$SPACECTL_BIN"):$PATH"

seed_template
check_eq "the seed template (built, or imported as an earlier test built it)" 0 "$RC" || { last_diag; bail_out "no seed template"; }

# ---- the README's example, read from the README itself
python3 - "$TOP_SRCDIR/README.md" >"$TEST_TMP/readme.sh" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
blocks = [b for b in re.findall(r"^```sh\n(.*?)^```\n", text, re.S | re.M) if "build:/work" in b]
print(blocks[0] if len(blocks) == 1 else "exit 99  # README has %d blocks with build:/work" % len(blocks), end="")
PY
check_contains "the README has the build example" "spacectl cp src/. build:/work" "$TEST_TMP/readme.sh"
mkdir -p "$TEST_TMP/proj/src"
# what a project's test script does: it writes its report where it runs, as the user commands run as
cat >"$TEST_TMP/proj/src/test.sh" <<'SH'
[ "$MODE" = ci ] || exit 3
printf '<testsuite user="%s"/>\n' "$(id -un)" >report.xml
SH
mkdir -p "$TEST_TMP/proj/src/lib" && echo 'x = 1' >"$TEST_TMP/proj/src/lib/mod.py"
cd "$TEST_TMP/proj" || bail_out "no project directory"
run timeout -k 10 300 bash -e -o pipefail "$TEST_TMP/readme.sh"
check_eq "the README's build example runs as written on seed" 0 "$RC" || last_diag
check_eq "... test.sh did not fail" "" "$(grep 'test.sh failed' "$OUT")"
check_eq "... and report.xml came back, written as user" '<testsuite user="user"/>' "$(cat report.xml 2>&1)"
check_eq "... and the sandbox is gone" 0 "$(sandbox_count)"

create_sandbox SB seed --name t38
[ -n "$SB" ] || { last_diag; bail_out "create failed"; }
owner() { sc exec -u root "$SB" -- stat -c '%U:%G' "$@" 2>/dev/null | paste -sd' '; }
echo data >"$TEST_TMP/f"
mkdir -p "$TEST_TMP/tree/sub" && echo t >"$TEST_TMP/tree/sub/t" && ln -sf sub/t "$TEST_TMP/tree/link"

# ---- the default: user where user could have made it, root elsewhere
check_rc "cp a file into /home/user" 0 sc cp "$TEST_TMP/f" "$SB:/home/user/"
check_eq "... is user's" "user:user" "$(owner /home/user/f)"
check_rc "cp a file into /tmp" 0 sc cp "$TEST_TMP/f" "$SB:/tmp/"
check_eq "... is user's (/tmp is everybody's)" "user:user" "$(owner /tmp/f)"
check_rc "cp a tree to a new top-level directory" 0 sc cp "$TEST_TMP/tree" "$SB:/newtop"
check_eq "... the directory, what is in it and the symlink are user's" "user:user user:user user:user user:user" \
        "$(owner /newtop /newtop/sub /newtop/sub/t /newtop/link)"
check_rc "cp a file into /etc" 0 sc cp "$TEST_TMP/f" "$SB:/etc/space-t38.conf"
check_eq "... is root's (user could not have made it there)" "root:root" "$(owner /etc/space-t38.conf)"
check_rc "cp a tree into /opt" 0 sc cp "$TEST_TMP/tree" "$SB:/opt/"
check_eq "... is root's, all of it" "root:root root:root" "$(owner /opt/tree /opt/tree/sub/t)"
sc exec -u root "$SB" -- sh -c 'echo old >/home/user/rootfile' >/dev/null 2>&1
check_rc "cp over a root-owned file in user's home" 0 sc cp "$TEST_TMP/f" "$SB:/home/user/rootfile"
check_eq "... replaces its content" data "$(sc exec "$SB" -- cat /home/user/rootfile 2>&1)"
check_eq "... and keeps its owner" "root:root" "$(owner /home/user/rootfile)"

# ---- --chown and -a
check_rc "cp --chown root into user's home" 0 sc cp --chown root "$TEST_TMP/f" "$SB:/home/user/g"
check_eq "... is root's, with root's group" "root:root" "$(owner /home/user/g)"
check_rc "cp --chown user:root over it" 0 sc cp --chown user:root "$TEST_TMP/f" "$SB:/home/user/g"
check_eq "... a replaced file too" "user:root" "$(owner /home/user/g)"
check_rc "cp --chown 1000 into /etc" 0 sc cp --chown 1000 "$TEST_TMP/tree" "$SB:/etc/t38tree"
check_eq "... everything it made is uid 1000's" "user:user user:user" "$(owner /etc/t38tree /etc/t38tree/sub/t)"
check_rc "cp --chown 4242:4242 (ids the sandbox has no names for)" 0 sc cp --chown 4242:4242 "$TEST_TMP/f" "$SB:/tmp/ids"
check_eq "... gets those ids" "4242:4242" "$(sc exec "$SB" -- stat -c '%u:%g' /tmp/ids 2>&1)"
check_rc "cp -a of a tree the host's tar says is root's, into user's home" 0 sh -c \
        "tar --owner=0 --group=0 -C '$TEST_TMP' -cf - tree | timeout 60 spacectl cp -a - '$SB:/home/user/'"
check_eq "... keeps the archive's owners" "root:root" "$(owner /home/user/tree/sub/t)"
check_rc "cp --chown nosuchuser fails" 1 sc cp --chown nosuchuser "$TEST_TMP/f" "$SB:/tmp/n"
check_contains "... naming the user" "nosuchuser" "$ERR"
check_rc "... and leaves nothing behind" 1 sc exec "$SB" -- test -e /tmp/n
check_rc "cp --chown user:nosuchgroup fails" 1 sc cp --chown user:nosuchgroup "$TEST_TMP/f" "$SB:/tmp/n"
check_contains "... naming the group" "nosuchgroup" "$ERR"
check_rc "cp -a --chown user is a usage error" 2 sc cp -a --chown user "$TEST_TMP/f" "$SB:/tmp/"
check_contains "... saying to choose" "choose one" "$ERR"
check_rc "cp --chown on a copy out is a usage error" 2 sc cp --chown user "$SB:/tmp/f" "$TEST_TMP/out"
check_rc "cp --chown '../x' is a usage error" 2 sc cp --chown ../x "$TEST_TMP/f" "$SB:/tmp/"
check_contains "... saying what the form is" "USER[:GROUP]" "$ERR"

# ---- --json
run sc cp --json "$TEST_TMP/tree" "$SB:/tmp/jt"
check_eq "cp --json exits 0" 0 "$RC"
check_eq "... and prints the tally: 2 entries (a file, a symlink), 2 bytes" '[2, 2, 0]' \
        "$(json "$OUT" '[d["files"], d["bytes"], d["skipped"]]')"
check_rc "cp --json with '-' as DST is a usage error" 2 sc cp --json "$SB:/tmp/jt" -

# ---- the same over /v1
ureq POST "/v1/sandboxes/$SB/files/mkdir" -H 'Content-Type: application/json' -d '{"path": "/home/user/d"}'
check_status "/v1 mkdir in user's home" 201
check_eq "... without an owner: user's" "user:user" "$(owner /home/user/d)"
ureq PUT "/v1/sandboxes/$SB/files?path=/etc/t38-v1" --data-binary @"$TEST_TMP/f"
check_status "/v1 PUT into /etc" 201
check_eq "... without an owner: root's" "root:root" "$(owner /etc/t38-v1)"
ureq PUT "/v1/sandboxes/$SB/files?path=/etc/t38-v1b&owner=user" --data-binary @"$TEST_TMP/f"
check_status "/v1 PUT into /etc with owner=user" 201
check_eq "... user's, as asked" "user:user" "$(owner /etc/t38-v1b)"
ureq POST "/v1/sandboxes/$SB/files/symlink" -H 'Content-Type: application/json' \
        -d '{"path": "/etc/t38-link", "target": "/tmp", "owner": "user:root"}'
check_status "/v1 symlink with owner user:root" 201
check_eq "... is user:root's (stat does not follow it)" "user:root" "$(owner /etc/t38-link)"
ureq POST "/v1/sandboxes/$SB/files/mkdir" -H 'Content-Type: application/json' -d '{"path": "/tmp/x", "owner": "user", "uid": 0}'
check_status "/v1 owner with uid: 400" 400 invalid_argument
ureq POST "/v1/sandboxes/$SB/files/mkdir" -H 'Content-Type: application/json' -d '{"path": "/tmp/x", "owner": "a b"}'
check_status "/v1 an owner that is no user spec: 400" 400 invalid_argument
ureq POST "/v1/sandboxes/$SB/files/mkdir" -H 'Content-Type: application/json' -d '{"path": "/tmp/x", "owner": "ghost"}'
check_status "/v1 an owner the sandbox does not have: 400 unknown_user" 400 unknown_user
ureq PUT "/v1/sandboxes/$SB/files?path=/tmp/y&owner=user:ghosts" --data-binary @"$TEST_TMP/f"
check_status "/v1 PUT with a group the sandbox does not have: 400 unknown_group" 400 unknown_group

done_testing
