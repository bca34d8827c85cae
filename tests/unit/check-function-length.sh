#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# No function in spaced/, lib/, guest/ or cli/ is over 120 lines unless a comment just above it says why: a
# comment ending within the three lines before the function's first line and containing "long because" (as in
# "/* One flat table of cases, long because ... */"). A function is what starts at column 0 with a name and "("
# and ends at the next "}" at column 0 (the tree's style). TAP: one "not ok" per function over the limit, naming
# file:line, the function and its length; then the same scan of a planted 130-line function, which must be caught,
# and of the same with the comment, which must not.

top=${srcdir:-$(dirname "$0")/../..}
LIMIT=120

scan() {
        python3 - "$LIMIT" "$@" <<'PY'
import os, re, sys
limit = int(sys.argv[1])
start = re.compile(r'^[A-Za-z_][A-Za-z0-9_ \*]*?\b([A-Za-z_][A-Za-z0-9_]*)\(')
for root in sys.argv[2:]:
    paths = [root] if os.path.isfile(root) else sorted(
        os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith('.c'))
    for p in paths:
        lines = open(p, errors='replace').read().split('\n')
        i = 0
        while i < len(lines):
            m = start.match(lines[i])
            if not m or lines[i].rstrip().endswith(';') or lines[i].startswith(('typedef', 'struct ', 'enum ')):
                i += 1
                continue
            j = i
            while j < len(lines) and not lines[j].rstrip().endswith('{') and not lines[j].rstrip().endswith(';'):
                j += 1
            if j >= len(lines) or lines[j].rstrip().endswith(';'):
                i = j + 1
                continue
            k = j + 1
            while k < len(lines) and lines[k] != '}':
                k += 1
            n = k - i + 1
            above = '\n'.join(lines[max(0, i - 3):i])
            if n > limit and 'long because' not in above:
                print('%s:%d: %s() is %d lines (limit %d): split it, or say above it why it is long because ...'
                      % (p, i + 1, m.group(1), n, limit))
            i = k + 1
PY
}

n=0
found=$(cd "$top" && scan spaced lib guest cli)
if [ -n "$found" ]; then
        printf '%s\n' "$found" | while IFS= read -r line; do
                n=$((n + 1))
                echo "not ok $n - $line"
        done
        n=$(printf '%s\n' "$found" | wc -l)
else
        n=1
        echo "ok 1 - no function over $LIMIT lines without a comment saying why, in spaced/, lib/, guest/, cli/"
fi

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
{
        echo "static int planted(int x) {"
        i=0
        while [ $i -lt 130 ]; do echo "        x++;"; i=$((i + 1)); done
        echo "        return x;"
        echo "}"
} >"$tmp/planted.c"
{ echo "/* A planted table, long because it is one. */"; cat "$tmp/planted.c"; } >"$tmp/commented.c"
n=$((n + 1))
if scan "$tmp/planted.c" | grep -q 'planted() is 133 lines'; then
        echo "ok $n - a planted 133-line function is caught"
else
        echo "not ok $n - a planted 133-line function is not caught"
fi
n=$((n + 1))
if [ -z "$(scan "$tmp/commented.c")" ]; then
        echo "ok $n - the same with a comment saying why it is long is let through"
else
        echo "not ok $n - the same with a comment saying why it is long is reported"
fi
echo "1..$n"
