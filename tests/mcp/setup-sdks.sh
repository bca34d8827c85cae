#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# setup-sdks.sh DIR [PY_VERSION] [JS_VERSION]: the official MCP client SDKs, unmodified, from PyPI and npm:
# Python `mcp` (with pytest) in DIR/py-VERSION (a venv) and TypeScript `@modelcontextprotocol/sdk` (with zod,
# its peer) in DIR/js-VERSION (node_modules). Kept between runs; "latest" asks the registries for the newest
# release each time. Prints the two directories. tests/integration/t46-mcp.sh runs the suites with them.
set -euo pipefail

dir=$1
py=${2:-2.3.0}
js=${3:-1.32.2}
mkdir -p "$dir"

if [ "$py" = latest ]; then
        pydir=$dir/py-latest
        [ -x "$pydir/bin/python" ] || python3 -m venv "$pydir" >&2
        "$pydir/bin/pip" install -q --disable-pip-version-check --upgrade mcp pytest >&2
else
        pydir=$dir/py-$py
        if ! "$pydir/bin/python" -c "import mcp, pytest, importlib.metadata as m; assert m.version('mcp') == '$py'" 2>/dev/null; then
                python3 -m venv "$pydir" >&2
                "$pydir/bin/pip" install -q --disable-pip-version-check "mcp==$py" pytest >&2
        fi
fi

jsdir=$dir/js-$js
if [ "$js" = latest ] || [ ! -d "$jsdir/node_modules/@modelcontextprotocol/sdk" ] || [ ! -d "$jsdir/node_modules/zod" ]; then
        mkdir -p "$jsdir"
        [ -f "$jsdir/package.json" ] || echo '{"name": "space-mcp-tests", "private": true, "type": "module"}' >"$jsdir/package.json"
        (cd "$jsdir" && npm install --no-audit --no-fund --loglevel=error "@modelcontextprotocol/sdk@$js" zod >&2)
fi
echo "$pydir"
echo "$jsdir"
