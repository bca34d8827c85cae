#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# setup-ci-sdks.sh DIR: the unmodified E2B code interpreter SDKs, from PyPI and npm, as a user installs them:
# DIR/ci-py-2.6.2 (e2b-code-interpreter 2.6.2 with e2b 2.21.1, Perplexity SPACE's tested pair), DIR/ci-py-2.11.5
# and DIR/ci-js-2.8.0 (@e2b/code-interpreter). Kept between runs. Prints the three directories.
set -euo pipefail

dir=$1
mkdir -p "$dir"

py_env() { # py_env NAME PIP-SPEC...
        local d=$dir/$1
        shift
        if ! "$d/bin/python" -c "import e2b_code_interpreter, pytest, httpx" 2>/dev/null; then
                python3 -m venv "$d" >&2
                "$d/bin/pip" install -q --disable-pip-version-check "$@" pytest >&2
        fi
        echo "$d"
}
py_env ci-py-2.6.2 "e2b-code-interpreter==2.6.2" "e2b==2.21.1"
py_env ci-py-2.11.5 "e2b-code-interpreter==2.11.5"

jsdir=$dir/ci-js-2.8.0
if [ ! -d "$jsdir/node_modules/@e2b/code-interpreter" ]; then
        mkdir -p "$jsdir"
        [ -f "$jsdir/package.json" ] || echo '{"name": "space-ci-tests", "private": true, "type": "module"}' >"$jsdir/package.json"
        (cd "$jsdir" && npm install --no-audit --no-fund --loglevel=error "@e2b/code-interpreter@2.8.0" >&2)
fi
echo "$jsdir"
