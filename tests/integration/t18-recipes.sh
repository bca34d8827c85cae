#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Template recipes (issue 4, space-template(5)): `spacectl template build` of templates/minimal gives the
# builtin's tree; templates/seed (Debian 12 from Debian's archive, with mmdebstrap) boots and runs python3 with
# its defaults (workdir /home/user, user `user` uid 1000, ca-certificates, curl and pip) and builds to the same
# digest twice; a scratch recipe's files, run commands, owners and times land in the tarball, byte for byte the
# same twice;
# bad recipes fail with file:line: key messages and exit 1, imports nothing and leave no files behind.
# Downloads from Debian's archive; the packages are cached in ~/.cache/space/apt between runs.
. "$(dirname "$0")/lib.sh"

space_env_setup
start_daemon

BUILD_TIMEOUT=${SPACE_TEST_BUILD_TIMEOUT:-900}
DIGEST_RE='^sha256:[0-9a-f]{64}$'
# Builds put their temporary files here, so the test can see that nothing is left. As a user other than root a
# build runs as a subordinate id, which must reach it as it reaches /tmp.
export TMPDIR=$TEST_TMP/tmp
mkdir -p "$TMPDIR"
chmod 0711 "$TEST_TMP"
chmod 1777 "$TMPDIR"

build() {
        timeout -k 10 "$BUILD_TIMEOUT" spacectl template build "$@"
}

digest_of() {
        local f=$TEST_TMP/inspect-t.json
        sc template inspect "$1" >"$f" 2>/dev/null || return 1
        json "$f" 'd["digest"]'
}

tags_now() {
        local f=$TEST_TMP/tags.json
        sc template ls --json >"$f" 2>/dev/null || { echo "(ls failed)"; return 1; }
        json "$f" '" ".join(sorted(t for x in T(d) for t in (x.get("tags") or [x.get("tag") or x.get("name")])))'
}

check_no_leftovers() {
        local left
        left=$(ls -A "$TMPDIR")
        check_eq "$1: nothing left in TMPDIR" "" "$left"
}

# check_in DESC SANDBOX EXPECTED CMD...: the command's stdout in the sandbox is EXPECTED
check_in() {
        local desc=$1 sb=$2 want=$3
        shift 3
        run sc exec "$sb" -- "$@"
        if [ "$RC" -ne 0 ]; then
                fail "$desc" "exec failed"
                last_diag
                return 1
        fi
        check_eq "$desc" "$want" "$(cat "$OUT")"
}

# ---------------------------------------------------------------- minimal, from its recipe

BUILTIN=$(digest_of minimal:latest)
check_match "the daemon imported the builtin minimal" "$DIGEST_RE" "$BUILTIN"
t0=$(now_ms)
check_rc "template build templates/minimal" 0 build "$TOP_SRCDIR/templates/minimal" --tag recipe/minimal:t18
diag "minimal: built and imported in $(($(now_ms) - t0)) ms"
MIN=$(cat "$OUT")
check_match "stdout is the digest" "$DIGEST_RE" "$MIN"
check_eq "stdout is one line" 1 "$(wc -l <"$OUT")"
check_eq "stderr stays empty when it is no terminal" "" "$(cat "$ERR")"
check_eq "the recipe gives the builtin's tree, hence its digest" "$BUILTIN" "$MIN"
check_eq "the tag points at it" "$MIN" "$(digest_of recipe/minimal:t18)"
check_no_leftovers "minimal"
create_sandbox SBM recipe/minimal:t18
[ -n "$SBM" ] || { last_diag; bail_out "create from recipe/minimal:t18 failed"; }
check_in "a sandbox of the built minimal runs commands" "$SBM" "hi" echo hi
check_rc "remove it" 0 sc rm "$SBM"

# ---------------------------------------------------------------- seed

t0=$(now_ms)
check_rc "template build templates/seed" 0 build "$TOP_SRCDIR/templates/seed"
SEED_MS=$(($(now_ms) - t0))
diag "seed: built and imported in $SEED_MS ms"
SEED=$(cat "$OUT")
check_match "seed: stdout is the digest" "$DIGEST_RE" "$SEED"
check_eq "seed: stderr stays empty" "" "$(cat "$ERR")"
check_eq "seed:latest points at it" "$SEED" "$(digest_of seed:latest)"
sc template inspect seed >"$TEST_TMP/seed.json"
check_eq "seed: the recipe's description" "Debian 12 minbase with bash, coreutils, procps, python3, pip, curl, ca-certificates and sudo" \
        "$(json "$TEST_TMP/seed.json" 'd["description"]')"
check_eq "seed: the recipe's shape" "1 512 2048" \
        "$(json "$TEST_TMP/seed.json" '"%d %d %d" % (d["vcpu"], d["memory_mib"], d["disk_mib"])')"
diag "seed: $(json "$TEST_TMP/seed.json" 'd["size_bytes"]') bytes in $(json "$TEST_TMP/seed.json" 'd["files"]') files"
check_no_leftovers "seed"

create_sandbox SBS seed
[ -n "$SBS" ] || { last_diag; bail_out "create from seed failed"; }
pass "create from seed"
run sc exec "$SBS" -- python3 -c 'import sys; print(sys.version)'
check_match "python3 -c runs in seed" '^3\.11\.[0-9]+ ' "$(cat "$OUT")"
check_in "the default working directory is /home/user" "$SBS" "/home/user" pwd
check_in "user is uid 1000 with home /home/user and bash" "$SBS" "user:x:1000:1000::/home/user:/bin/bash" \
        getent passwd user
check_in "/home/user belongs to user" "$SBS" "user:user 755" stat -c '%U:%G %a' /home/user
# The recipe's `user = user`: a plain exec runs as uid 1000 with its home; -u root still gets root.
check_in "commands run as the template's user, uid 1000" "$SBS" "1000 1000 user /home/user" \
        sh -c 'echo "$(id -u) $(id -g) $(id -un) $HOME"'
run sc exec -u root "$SBS" -- id -u
check_eq "exec -u root overrides the template's user" "0" "$(cat "$OUT")"
check_in "the recipe's environment" "$SBS" "C.UTF-8" printenv LANG
check_in "ca-certificates is installed" "$SBS" "install ok installed" \
        dpkg-query -W -f='${Status}' ca-certificates
check_in "procps is there: ps lists the sandbox's PID 1" "$SBS" "1" sh -c 'ps -e -o pid= | head -n 1 | tr -d " "'
check_in "curl and pip are installed (for egress)" "$SBS" "curl ok, pip ok" \
        sh -c 'curl --version >/dev/null && echo -n "curl ok, " && python3 -m pip --version >/dev/null && echo "pip ok"'
check_in "pip may install for the user (PEP 668 lifted by the recipe's environment)" "$SBS" "1" \
        printenv PIP_BREAK_SYSTEM_PACKAGES
run sc exec "$SBS" -- sh -c 'grep -c "BEGIN CERTIFICATE" /etc/ssl/certs/ca-certificates.crt'
if [ "$RC" -eq 0 ] && [ "$(cat "$OUT")" -ge 100 ]; then
        pass "the CA bundle holds $(cat "$OUT") certificates"
else
        fail "the CA bundle holds 100+ certificates" "got '$(cat "$OUT")'"
fi
run sc exec "$SBS" -- python3 -c 'import ssl; print(len(ssl.create_default_context().get_ca_certs()) >= 0 and ssl.get_default_verify_paths().capath)'
check_eq "python3's ssl finds the system CA directory" "/usr/lib/ssl/certs" "$(cat "$OUT")"
check_in "no documentation but copyright files" "$SBS" "copyright" ls /usr/share/doc/bash
check_in "no manual pages" "$SBS" "0" sh -c 'find /usr/share/man -type f 2>/dev/null | wc -l'
check_in "bash, coreutils" "$SBS" "ok" bash -c 'type -p ls >/dev/null && [ "$(ls --version | head -c 11)" = "ls (GNU cor" ] && echo ok'
check_in "the recipe's /etc/hosts" "$SBS" "127.0.1.1	space" grep 127.0.1.1 /etc/hosts
# the agent mounts its DNS stub's resolv.conf over the image's: under it, the image's is empty
check_in "the guest's resolver is the agent's DNS stub alone" "$SBS" "nameserver 127.0.0.53" grep nameserver /etc/resolv.conf
run sc exec -u root "$SBS" -- sh -c 'umount /etc/resolv.conf && stat -c %s /etc/resolv.conf'
check_eq "the host's resolv.conf is not in the image" "0" "$(cat "$OUT")"

check_rc "remove it" 0 sc rm "$SBS"

# The same recipe from the same packages: the same tree. Debian's archive may publish an update in between,
# which would change the packages (rare; the diagnostics say which files differ then).
t0=$(now_ms)
check_rc "build seed again as seed:again" 0 build "$TOP_SRCDIR/templates/seed" --tag seed:again
diag "seed, second build (packages cached): $(($(now_ms) - t0)) ms"
check_eq "building seed twice gives one digest" "$SEED" "$(cat "$OUT")"

# ---------------------------------------------------------------- a scratch recipe: files, run, owners, times

TINY=$TEST_TMP/tiny
mkdir -p "$TINY"
cat >"$TINY/template.conf" <<'EOF'
# a tree from a script
name = t18/tiny
from = scratch
build = make-tree.sh
file = files/motd /etc/motd 0600
file = files/tool.sh /usr/local/bin/tool
run = echo built > /etc/built && chown 1000:1000 /etc/built
run = mkdir -p /home/user && chown 1000:1000 /home/user
env = GREETING=hello world
workdir = /home/user
EOF
cat >"$TINY/make-tree.sh" <<'EOF'
#!/bin/sh
set -e
mkdir -p "$1/bin" "$1/etc" "$1/proc" "$1/sys" "$1/dev" "$1/tmp" "$1/run" "$1/usr/local/bin"
cp /bin/busybox "$1/bin/busybox"
for a in sh mkdir cat chown chmod echo; do ln -s busybox "$1/bin/$a"; done
touch -d @2000000000 "$1/etc/future"
EOF
chmod +x "$TINY/make-tree.sh"
mkdir -p "$TINY/files"
echo "welcome" >"$TINY/files/motd"
printf '#!/bin/sh\necho tool\n' >"$TINY/files/tool.sh"
chmod 0750 "$TINY/files/tool.sh"

check_rc "build a scratch recipe to a file (-o)" 0 build "$TINY" -o "$TEST_TMP/tiny.tar"
check_eq "-o prints nothing" "" "$(cat "$OUT")"
tar -tvf "$TEST_TMP/tiny.tar" >"$TEST_TMP/tiny.lst" 2>&1
tar_line() { awk -v p="$1" '$6 == p { print $1, $2; exit }' "$TEST_TMP/tiny.lst"; }
check_eq "file = with a mode, owned by root" "-rw------- 0/0" "$(tar_line ./etc/motd)"
check_eq "file = keeps the source's mode" "-rwxr-x--- 0/0" "$(tar_line ./usr/local/bin/tool)"
check_eq "run = may give files other owners" "-rw-r--r-- 1000/1000" "$(tar_line ./etc/built)"
check_eq "directories the build script made" "drwxr-xr-x 0/0" "$(tar_line ./usr/local/bin/)"
check_eq "every time is clamped to SOURCE_DATE_EPOCH (default 1970-01-02)" "1970-01-02" \
        "$(awk '{ print $4 }' "$TEST_TMP/tiny.lst" | sort -u | tr '\n' ' ' | sed 's/ $//')"
check_eq "the file's content" "welcome" "$(tar -xOf "$TEST_TMP/tiny.tar" ./etc/motd)"
check_rc "build it again" 0 build "$TINY" -o "$TEST_TMP/tiny2.tar"
check "the same recipe gives the same bytes" cmp "$TEST_TMP/tiny.tar" "$TEST_TMP/tiny2.tar"
check_rc "build it with SOURCE_DATE_EPOCH=1700000000" 0 env SOURCE_DATE_EPOCH=1700000000 \
        spacectl template build "$TINY" -o "$TEST_TMP/tiny3.tar"
check_eq "SOURCE_DATE_EPOCH sets the times" "2023-11-14" \
        "$(tar -tvf "$TEST_TMP/tiny3.tar" | awk '{ print $4 }' | sort -u | tr '\n' ' ' | sed 's/ $//')"
check_rc "build and import it" 0 build "$TINY"
TINYD=$(cat "$OUT")
sc template inspect t18/tiny:latest >"$TEST_TMP/tiny.json"
check_eq "the recipe's defaults are the template's" "GREETING=hello world | /home/user" \
        "$(json "$TEST_TMP/tiny.json" '" ".join(d["config"]["env"]) + " | " + d["config"]["workdir"]')"
check_match "tagged t18/tiny:latest" "$DIGEST_RE" "$TINYD"
check_no_leftovers "scratch"

# Interrupted: the build's processes end and its files go. The build script says when it runs, then waits.
SLOW=$TEST_TMP/slow
mkdir -p "$SLOW"
printf 'from = scratch\nbuild = slow.sh\n' >"$SLOW/template.conf"
SLEEP_MARK=4$$ # a sleep whose command line nothing else has
printf '#!/bin/sh\ntouch "$1/started"\nexec sleep %s\n' "$SLEEP_MARK" >"$SLOW/slow.sh"
chmod +x "$SLOW/slow.sh"
build_started() {
        compgen -G "$TMPDIR/space-tree.*/root/started" >/dev/null
}
spacectl template build "$SLOW" -o "$TEST_TMP/slow.tar" >"$TEST_TMP/slow.out" 2>"$TEST_TMP/slow.err" &
SLOW_PID=$!
if wait_for 60 build_started; then
        pass "a slow build is running"
else
        fail "a slow build is running"
fi
kill -INT "$SLOW_PID"
wait "$SLOW_PID"
check_eq "SIGINT ends the build with status 1" 1 "$?"
check_contains "...and says so" "building slow was interrupted" "$TEST_TMP/slow.err"
check_eq "no tarball was written" "no" "$([ -e "$TEST_TMP/slow.tar" ] && echo yes || echo no)"
slow_gone() {
        ! pgrep -x -f "sleep $SLEEP_MARK" >/dev/null
}
wait_for 10 slow_gone
check_eq "the build script was stopped" "" "$(pgrep -x -f "sleep $SLEEP_MARK")"
check_no_leftovers "interrupted build"

# ---------------------------------------------------------------- bad recipes

TAGS_BEFORE=$(tags_now)
bad_recipe() { # bad_recipe NAME CONF: a recipe directory with this template.conf (and make-tree.sh)
        mkdir -p "$TEST_TMP/bad/$1"
        printf '%s' "$2" >"$TEST_TMP/bad/$1/template.conf"
        cp "$TINY/make-tree.sh" "$TEST_TMP/bad/$1/"
        echo "$TEST_TMP/bad/$1"
}
# check_bad DESC EXPECTED-IN-STDERR DIR [ARGS]: exit status 1, the message, nothing on stdout
check_bad() {
        local desc=$1 want=$2
        shift 2
        check_rc "$desc: exit status 1" 1 build "$@" && check_contains "$desc: says so" "$want" "$ERR" &&
                check_eq "$desc: nothing on stdout" "" "$(cat "$OUT")"
}

D=$(bad_recipe typo $'from = debian:bookworm\npacakges = bash\n')
check_bad "an unknown key" "typo/template.conf:2: unknown key 'pacakges'" "$D"
D=$(bad_recipe nobuild $'from = scratch\nbuild = nope.sh\n')
check_bad "a missing build script" "nobuild/template.conf:2: build: nope.sh: No such file or directory" "$D"
D=$(bad_recipe badpkg $'from = debian:bookworm\npackages = python3 Bad_Name\n')
check_bad "a malformed package name" "badpkg/template.conf:2: packages: 'Bad_Name' is not a Debian package name" "$D"
D=$(bad_recipe nofrom $'name = x\n')
check_bad "no from" "nofrom/template.conf: no 'from'" "$D"
check_bad "no template.conf" "a recipe is a directory with a template.conf" "$TEST_TMP"
D=$(bad_recipe nopkg $'from = debian:bookworm\npackages = no-such-package-t18\n')
check_bad "a package Debian does not have" "Unable to locate package no-such-package-t18" "$D"
check_contains "...after saying which build failed" "building nopkg failed: mmdebstrap exited with status" "$ERR"
D=$(bad_recipe runfails $'from = scratch\nbuild = make-tree.sh\nrun = echo partial > /etc/x; exit 3\n')
check_bad "a run command that fails" "run = echo partial > /etc/x; exit 3: failed with status 3" "$D"
D=$(bad_recipe buildfails $'from = scratch\nbuild = fail.sh\n')
printf '#!/bin/sh\necho "cannot make the tree" >&2\nexit 4\n' >"$D/fail.sh"
chmod +x "$D/fail.sh"
check_bad "a build script that fails" "build = fail.sh: failed with status 4" "$D"
check_rc "a bad --tag is a usage error" 2 build "$TINY" --tag 'Bad Tag:x'
check_eq "failed builds imported nothing" "$TAGS_BEFORE" "$(tags_now)"
check_no_leftovers "failed builds"

# As a user other than root a build needs subordinate ids; one without them is told what to do.
if [ "$(id -u)" -eq 0 ]; then
        PUB=$(mktemp -d /tmp/spt-pub.XXXXXX)
        chmod 0755 "$PUB"
        cp -r "$TINY" "$PUB/tiny"
        chmod -R a+rX "$PUB"
        run setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/nonexistent TMPDIR=/tmp \
                "$SPACECTL_BIN" template build "$PUB/tiny" -o /dev/null
        rm -rf "$PUB"
        if [ "$RC" -eq 1 ] && grep -qE 'subordinate ids|uidmap|user namespaces' "$ERR" && grep -q 'build as root' "$ERR"; then
                pass "a user without subordinate ids is told what to do"
        else
                fail "a user without subordinate ids is told what to do"
                last_diag
        fi
else
        skip "a user without subordinate ids is told what to do" "needs root to switch to such a user"
fi

done_testing
