#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Only spaced/sandbox/ writes a Sandbox (ARCHITECTURE.md): the others ask it through named functions. Every
# other file of spaced is compiled as the build compiles it, but with SPACE_CHECK_SANDBOX_WRITERS defined, which
# makes every field of a Sandbox const (sandbox/sandbox.h): an assignment, ++ or --, or the address of a field
# handed on to be filled is then a compile error. TAP: one "not ok" per such write, naming the file and the
# line; then the same check of a planted file with writes in it, which must be caught, and whose read must not.
#
# make check passes the compiler and the build's preprocessor flags (AM_TESTS_ENVIRONMENT in Makefile.am):
# SANDBOX_CHECK_CC and SANDBOX_CHECK_CPPFLAGS, run from the build directory. SANDBOX_WRITERS_TODO (empty under
# make check) may name path prefixes, such as "spaced/channel/ spaced/core/", whose writes are then reported as
# TODO instead of failing: for work on one part while another is being moved; the tree must need none.

top=${srcdir:-$(dirname "$0")/../..}

if [ -z "$SANDBOX_CHECK_CC" ] || [ -z "$SANDBOX_CHECK_CPPFLAGS" ]; then
        echo "1..0 # SKIP SANDBOX_CHECK_CC and SANDBOX_CHECK_CPPFLAGS are not set: run it through make check"
        exit 0
fi

# The flags are words as the shell gave them to printf (Makefile.am): split them again, without globbing.
set -f

# Prints "FILE:LINE: MESSAGE" for each write to a Sandbox field in the C file $1 (or "FILE: MESSAGE" when it does
# not compile for another reason). Errors in sandbox/'s own headers are its own.
writes() {
        # shellcheck disable=SC2086
        out=$($SANDBOX_CHECK_CC $SANDBOX_CHECK_CPPFLAGS -DSPACE_CHECK_SANDBOX_WRITERS -fsyntax-only \
                -ftrack-macro-expansion=0 -Werror=discarded-qualifiers -Werror=incompatible-pointer-types "$1" 2>&1)
        rc=$?
        found=$(printf '%s\n' "$out" | sed -n 's/^\([^: ]*\):\([0-9]*\):[0-9]*: error: \(.*\)$/\1:\2: \3/p' |
                sed 's|^[^:]*/spaced/|spaced/|' | grep -v '^spaced/sandbox/')
        if [ -n "$found" ]; then
                printf '%s\n' "$found"
        elif [ "$rc" != 0 ] && ! printf '%s\n' "$out" | grep -q '^[^: ]*spaced/sandbox/[^:]*:[0-9]*:[0-9]*: error:'; then
                echo "${1#"$top"/}: does not compile: $(printf '%s\n' "$out" | grep -m1 'error' )"
        fi
}

n=0
bad=0
files=0
for f in $(cd "$top" && find spaced -name '*.c' ! -path 'spaced/sandbox/*' | sort); do
        files=$((files + 1))
        found=$(writes "$top/$f")
        [ -z "$found" ] && continue
        while read -r l; do
                n=$((n + 1))
                todo=
                for p in $SANDBOX_WRITERS_TODO; do
                        case "$l" in "$p"*) todo=" # TODO $p is listed in SANDBOX_WRITERS_TODO" ;; esac
                done
                [ -z "$todo" ] && bad=$((bad + 1))
                echo "not ok $n - $l (only spaced/sandbox/ writes a Sandbox)$todo"
        done <<EOF2
$found
EOF2
done
n=$((n + 1))
if [ "$bad" = 0 ] && [ "$files" -gt 0 ]; then
        echo "ok $n - no write to a Sandbox in the $files files of spaced/ outside spaced/sandbox/"
else
        echo "not ok $n - $bad writes to a Sandbox outside spaced/sandbox/ (in $files files)"
fi

# The check must not pass vacuously: of a planted file's four uses, the three writes are caught, the read is not.
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/planted.c" <<'EOF2'
#include "sandbox/sandbox.h"
#include "string-util.h"
#include "macro.h"
int planted_read(Sandbox *s) { return (int) s->vcpu + (s->name != NULL); }
void planted_assign(Sandbox *s) { s->vcpu++; }
int planted_fill(Sandbox *s) { return strv_extend(&s->env, "A=1"); }
char *planted_take(Sandbox *s) { return TAKE_PTR(s->error); }
EOF2
planted=$(writes "$tmp/planted.c" | sed 's|^.*planted\.c:\([0-9]*\): .*|\1|' | sort -u | tr '\n' ' ')
n=$((n + 1))
if [ "$planted" = "5 6 7 " ]; then
        echo "ok $n - a planted increment, fill and TAKE_PTR of fields are caught, a planted read is not"
else
        echo "not ok $n - of the planted writes on lines 5, 6 and 7 (a read on line 4), the check found: ${planted:-none}"
        bad=$((bad + 1))
fi
echo "1..$n"
[ "$bad" = 0 ]
