#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Templates built on templates (issue 25, space-template(5) "from = TEMPLATE"): a recipe from = seed adding jq, a
# file and a run step builds on seed's tree in a fraction of seed's own build (both times are printed), keeps
# seed's python3, user, workdir, environment and shape, gets a digest of its own and the same one twice; a
# parent without apt (minimal) takes file and run steps but refuses packages; an unknown parent fails with the
# message and exit status space-template(5) gives. The export the build starts from (GET
# /v1/templates/{ref}/rootfs) gives back a tree of the same digest, and refuses an unknown reference, an image
# without its manifest (imported by an older daemon) and a manifest that does not hash to the digest.
. "$(dirname "$0")/lib.sh"

space_env_setup
start_daemon

BUILD_TIMEOUT=${SPACE_TEST_BUILD_TIMEOUT:-900}
DIGEST_RE='^sha256:[0-9a-f]{64}$'
export TMPDIR=$TEST_TMP/tmp
mkdir -p "$TMPDIR"
chmod 0711 "$TEST_TMP"
chmod 1777 "$TMPDIR"

build() {
        timeout -k 10 "$BUILD_TIMEOUT" spacectl template build "$@"
}

inspect() { # inspect REF PYEXPR
        sc template inspect "$1" >"$TEST_TMP/inspect.json" 2>/dev/null || return 1
        json "$TEST_TMP/inspect.json" "$2"
}

check_in() { # check_in DESC SANDBOX EXPECTED CMD...
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

seconds_since() { # seconds_since T0_MS: as "12.3"
        local ms=$(($(now_ms) - $1))
        printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100))
}

# ---------------------------------------------------------------- the parent, built in full

t0=$(now_ms)
check_rc "template build templates/seed (the parent, in full)" 0 build "$TOP_SRCDIR/templates/seed"
SEED_S=$(seconds_since "$t0")
SEED=$(cat "$OUT")
check_match "seed's digest" "$DIGEST_RE" "$SEED" || { last_diag; bail_out "no seed to build on"; }

# ---------------------------------------------------------------- seed + jq, the example of space-template(5)

KID=$TEST_TMP/seed-jq
mkdir -p "$KID"
cat >"$KID/template.conf" <<'CONF'
from = seed
description = seed with jq
packages = jq
file = jq-defaults /etc/jq-defaults
run = jq --version > /etc/jq-version
env = JQ_COLORS=0;31
CONF
echo '{"indent": 2}' >"$KID/jq-defaults"

t0=$(now_ms)
check_rc "build a recipe from = seed adding jq, a file and a run step" 0 build "$KID"
KID_S=$(seconds_since "$t0")
KID_D=$(cat "$OUT")
diag "build times: seed in full ${SEED_S} s, seed-jq on top of seed ${KID_S} s"
check_match "stdout is the child's digest" "$DIGEST_RE" "$KID_D" || last_diag
check_eq "stdout is one line, stderr empty when it is no terminal" "1 " "$(wc -l <"$OUT") $(cat "$ERR")"
if [ -n "$KID_D" ] && [ "$KID_D" != "$SEED" ]; then
        pass "the child's digest is not seed's"
else
        fail "the child's digest is not seed's" "seed $SEED, child '$KID_D'"
fi
check_eq "seed-jq:latest points at it" "$KID_D" "$(inspect seed-jq:latest 'd["digest"]')"
check_eq "the recipe's description" "seed with jq" "$(inspect seed-jq 'd["description"]')"
check_eq "seed's user and workdir are inherited" "user /home/user" \
        "$(inspect seed-jq 'd["config"]["user"] + " " + d["config"]["workdir"]')"
check_eq "seed's shape is inherited" "1 512 2048" "$(inspect seed-jq '"%d %d %d" % (d["vcpu"], d["memory_mib"], d["disk_mib"])')"
check_eq "seed's environment, with the child's entry added" \
        "JQ_COLORS=0;31 LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin PIP_BREAK_SYSTEM_PACKAGES=1" \
        "$(inspect seed-jq '" ".join(sorted(d["config"]["env"]))')"
check_eq "nothing left in TMPDIR" "" "$(ls -A "$TMPDIR")"

create_sandbox SB seed-jq
[ -n "$SB" ] || { last_diag; bail_out "create from seed-jq failed"; }
pass "create from seed-jq"
check_in "jq is installed" "$SB" "1" sh -c 'echo "{\"a\": 1}" | jq .a'
run sc exec "$SB" -- python3 -c 'import sys; print(sys.version)'
check_match "seed's python3 is there" '^3\.11\.[0-9]+ ' "$(cat "$OUT")"
check_in "commands run as seed's user, in seed's workdir" "$SB" "user /home/user" sh -c 'echo "$(id -un) $(pwd)"'
check_in "seed's environment and the child's" "$SB" "1 0;31" sh -c 'echo "$PIP_BREAK_SYSTEM_PACKAGES $JQ_COLORS"'
check_in "the file step" "$SB" '{"indent": 2}' cat /etc/jq-defaults
check_in "the run step ran after the packages" "$SB" "jq-1.6" cat /etc/jq-version
check_in "apt's lists and packages are cleaned as in a Debian build" "$SB" "0 0" \
        sh -c 'echo "$(find /var/lib/apt/lists -name "*Packages*" | wc -l) $(find /var/cache/apt -name "*.deb" -o -name "*.bin" | wc -l)"'
check_in "seed's own packages are still installed" "$SB" "install ok installed" \
        dpkg-query -W -f='${Status}' python3-pip
check_rc "remove it" 0 sc rm "$SB"

t0=$(now_ms)
check_rc "build the child again" 0 build "$KID" --tag seed-jq:again
diag "seed-jq, second build: $(seconds_since "$t0") s"
check_eq "building the child twice gives one digest" "$KID_D" "$(cat "$OUT")"

# ---------------------------------------------------------------- a parent without apt

MINI=$TEST_TMP/mini-plus
mkdir -p "$MINI"
printf 'from = minimal:latest\nfile = motd /etc/motd 0600\nrun = echo plus > /etc/plus\nworkdir = /tmp\n' \
        >"$MINI/template.conf"
echo "hello" >"$MINI/motd"
check_rc "a recipe from = minimal with a file and a run step" 0 build "$MINI"
MINI_D=$(cat "$OUT")
check_match "...builds" "$DIGEST_RE" "$MINI_D" || last_diag
create_sandbox SBM mini-plus
[ -n "$SBM" ] || last_diag
check_in "its file and run steps are in the tree" "$SBM" "hello plus" sh -c 'echo "$(cat /etc/motd) $(cat /etc/plus)"'
check_in "the recipe's workdir over the parent's" "$SBM" "/tmp" pwd
check_rc "remove it" 0 sc rm "$SBM"

mkdir -p "$TEST_TMP/mini-jq"
printf 'from = minimal\npackages = jq\n' >"$TEST_TMP/mini-jq/template.conf"
check_rc "packages on a parent without apt: exit status 1" 1 build "$TEST_TMP/mini-jq"
check_contains "...saying so" "packages = needs apt and dpkg in the parent's tree" "$ERR"

# ---------------------------------------------------------------- an unknown parent

TAGS_BEFORE=$(sc template ls --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["templates"]))')
mkdir -p "$TEST_TMP/orphan"
printf 'from = no-such-parent\npackages = jq\n' >"$TEST_TMP/orphan/template.conf"
check_rc "an unknown parent: exit status 1" 1 build "$TEST_TMP/orphan"
check_contains "...names it" "from = no-such-parent: no template 'no-such-parent' to build from" "$ERR"
check_contains "...and says what to do" "see 'spacectl template ls', or build the parent first" "$ERR"
check_eq "...prints nothing on stdout" "" "$(cat "$OUT")"
check_rc "an unknown parent with -o: exit status 1 too" 1 build "$TEST_TMP/orphan" -o "$TEST_TMP/orphan.tar"
check_eq "nothing was imported" "$TAGS_BEFORE" \
        "$(sc template ls --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["templates"]))')"

# ---------------------------------------------------------------- the export

ureq GET /v1/templates/minimal/rootfs
check_status "GET /v1/templates/minimal/rootfs" 200
cp "$OUT" "$TEST_TMP/minimal.tar"
check_rc "its tar imports again" 0 sc template import "$TEST_TMP/minimal.tar" --tag again/minimal:x
check_eq "...as the same tree: the same digest" "$(inspect minimal 'd["digest"]')" "$(inspect again/minimal:x 'd["digest"]')"
ureq GET /v1/templates/no-such-template/rootfs
check_status "an unknown reference: 404" 404 template_not_found
ureq GET /v1/templates/sha256:zz/rootfs
check_status "a malformed reference: 400" 400 invalid_ref

MDIR=$SPACE_STATE_DIR/templates/sha256-${MINI_D#sha256:}
rm -f "$MDIR/manifest"
ureq GET /v1/templates/mini-plus/rootfs
check_status "an image without its manifest (an older daemon's): 409" 409 invalid_state
check_contains "...saying to build or import it again" "build or import it again" "$OUT"
mkdir -p "$TEST_TMP/grandchild"
printf 'from = mini-plus\nrun = true\n' >"$TEST_TMP/grandchild/template.conf"
check_rc "a build on it fails with exit status 1" 1 build "$TEST_TMP/grandchild"
check_contains "...and the daemon's message" "build or import it again" "$ERR"
check_rc "building the template again" 0 build "$MINI"
check "...gives it its manifest back" test -s "$MDIR/manifest"
ureq GET /v1/templates/mini-plus/rootfs
check_status "...and the export works again" 200

echo "/etc/forged	f	0644	0	0	0	0	-" >>"$MDIR/manifest"
ureq GET /v1/templates/mini-plus/rootfs
check_status "a manifest that does not hash to the digest: 500" 500 internal
check_contains "...says so" "does not hash to the template's digest" "$OUT"

done_testing
