#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# spaced's subsystems are a stack (ARCHITECTURE.md): a file of one may include the headers of its own and of those
# below it, never of one above. TAP: one "not ok" per include that climbs, naming the file, the line and both
# subsystems; then the same scan over a copy with one climbing include planted, which must be caught.

ORDER="core vm disk template channel secret egress volume sandbox http proxy api e2b mcp"

top=${srcdir:-$(dirname "$0")/../..}

# Climbs not yet undone, each "FILE:SUBSYSTEM" with why: reported as TODO, not failed. Keep it empty.
KNOWN=""

rank() {
        i=0
        for s in $ORDER; do
                [ "$s" = "$1" ] && { echo $i; return; }
                i=$((i + 1))
        done
        echo -1
}

# Prints "FILE:LINE: FROM includes TO" for every climbing include under $1 (a spaced/ tree).
scan() {
        ranks=
        for s in $ORDER; do
                ranks="$ranks $s=$(rank "$s")"
        done
        (cd "$1" && find . -mindepth 2 -name '*.[ch]' | sort) | while read -r f; do
                grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[a-z0-9_]*/' "$1/$f"
        done | awk -v ranks="$ranks" -v root="$1/" '
                BEGIN { n = split(ranks, a, " "); for (i = 1; i <= n; i++) { split(a[i], kv, "="); r[kv[1]] = kv[2] } }
                {
                        file = $0; sub(/:[0-9]+:.*/, "", file)
                        line = $0; sub(/^[^:]*:/, "", line); sub(/:.*/, "", line)
                        rel = substr(file, length(root) + 1); sub(/^\.\//, "", rel)
                        from = rel; sub(/\/.*/, "", from)
                        to = $0; sub(/^[^"]*"/, "", to); sub(/\/.*/, "", to)
                        if ((from in r) && (to in r) && r[to] > r[from])
                                printf "spaced/%s:%s: %s includes %s\n", rel, line, from, to
                }'
}

fail=0
out=$(scan "$top/spaced")
n=0
bad=0
if [ -n "$out" ]; then
        while read -r l; do
                n=$((n + 1))
                f=${l#spaced/}; f=${f%%:*}; to=${l##* }
                todo=
                for k in $KNOWN; do
                        [ "$k" = "$f:$to" ] && todo=" # TODO known, see KNOWN"
                done
                [ -z "$todo" ] && bad=$((bad + 1))
                echo "not ok $n - $l (order: $ORDER)$todo"
        done <<EOF2
$out
EOF2
fi
n=$((n + 1))
if [ "$bad" = 0 ]; then
        echo "ok $n - no include climbs the stack ($ORDER) but the known ones"
else
        echo "not ok $n - $bad includes climb the stack"
        fail=1
fi

# The check must not pass vacuously: a copy with one climbing include planted fails it, naming that include.
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
(cd "$top/spaced" && find . -name '*.[ch]') | while read -r f; do
        mkdir -p "$tmp/spaced/$(dirname "$f")" && cp "$top/spaced/$f" "$tmp/spaced/$f"
done
printf '#include "sandbox/sandbox.h"\n' >> "$tmp/spaced/core/util.h"
planted=$(scan "$tmp/spaced" | grep -c '^spaced/core/util\.h:[0-9]*: core includes sandbox$')
n=$((n + 1))
if [ "$planted" = 1 ]; then
        echo "ok $n - a planted climbing include is caught"
else
        echo "not ok $n - a planted climbing include (core/util.h -> sandbox) was not caught"
        fail=1
fi
echo "1..$n"
exit $fail
