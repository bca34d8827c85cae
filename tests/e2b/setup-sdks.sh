#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# setup-sdks.sh DIR [PY_VERSION] [JS_VERSION]: the unmodified E2B SDKs, from PyPI and npm, in DIR/py-VERSION (a
# venv) and DIR/js-VERSION (node_modules). Kept between runs; "latest" asks the registries for the newest
# release each time. Prints the two directories.
set -euo pipefail

dir=$1
py=${2:-2.21.1}
js=${3:-2.20.1}
mkdir -p "$dir"

if [ "$py" = latest ]; then
        pydir=$dir/py-latest
        [ -x "$pydir/bin/python" ] || python3 -m venv "$pydir" >&2
        "$pydir/bin/pip" install -q --disable-pip-version-check --upgrade e2b pytest >&2
else
        pydir=$dir/py-$py
        if ! "$pydir/bin/python" -c "import e2b, pytest" 2>/dev/null; then
                python3 -m venv "$pydir" >&2
                "$pydir/bin/pip" install -q --disable-pip-version-check "e2b==$py" pytest >&2
        fi
fi

jsdir=$dir/js-$js
if [ "$js" = latest ] || [ ! -d "$jsdir/node_modules/e2b" ]; then
        mkdir -p "$jsdir"
        [ -f "$jsdir/package.json" ] || echo '{"name": "space-e2b-tests", "private": true, "type": "module"}' >"$jsdir/package.json"
        (cd "$jsdir" && npm install --no-audit --no-fund --loglevel=error "e2b@$js" >&2)
fi
echo "$pydir"
echo "$jsdir"
