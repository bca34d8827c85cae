#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# dev-daemon.sh DIR [start|stop]: for working on the E2B facade, a daemon of the build tree that stays up, with
# its state in DIR, a TCP listener on a free port, the seed template (built once per DIR) and an API key.
# `start` (the default) prints the environment to source: E2B_* for the SDKs, SPACE_* for the suites' helpers.
# Then run one suite file, e.g.:
#   . DIR/env && tests/e2b/setup-sdks.sh ~/.cache/space-e2b-sdk && (cd tests/e2b/py && PY/bin/python -m pytest test_smoke.py)
# `stop` kills that daemon and its QEMUs (by the PIDs they wrote) and leaves DIR.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mkdir -p "$1" && cd "$1" && pwd)
what=${2:-start}
export SPACE_STATE_DIR=$dir/state SPACE_RUNTIME_DIR=$dir/run SPACE_SOCKET=$dir/run/api.sock
export SPACE_LIB_DIR=$top/stage/lib/space SPACE_CONFIG=$dir/spaced.conf XDG_RUNTIME_DIR=$dir/xdg
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0}
mkdir -m 0700 -p "$XDG_RUNTIME_DIR"

stop() {
        local pid f
        if read -r pid <"$SPACE_RUNTIME_DIR/spaced.pid" 2>/dev/null; then
                kill "$pid" 2>/dev/null || true
                for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        fi
        for f in "$SPACE_RUNTIME_DIR"/sandboxes/*/qemu.pid "$SPACE_RUNTIME_DIR"/base-*/qemu.pid; do
                [ -e "$f" ] && read -r pid <"$f" && kill -9 "$pid" 2>/dev/null || true
        done
}

if [ "$what" = stop ]; then
        stop
        exit 0
fi
if [ -S "$SPACE_SOCKET" ] && curl -s --unix-socket "$SPACE_SOCKET" http://localhost/v1/version >/dev/null; then
        cat "$dir/env"
        exit 0
fi
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
printf 'accel = auto\nlisten = 127.0.0.1:%s\ne2b_tls_listen = off\n' "$port" >"$SPACE_CONFIG"
"$top/spaced/spaced" >>"$dir/spaced.log" 2>&1 </dev/null &
for _ in $(seq 100); do
        curl -s --unix-socket "$SPACE_SOCKET" http://localhost/v1/version >/dev/null && break
        sleep 0.1
done
ctl=$top/cli/spacectl
if ! "$ctl" template inspect seed >/dev/null 2>&1; then
        "$ctl" template build "$top/templates/seed" >&2
fi
key=$(curl -s --unix-socket "$SPACE_SOCKET" -H 'Content-Type: application/json' -d '{"name": "dev"}' \
        http://localhost/v1/keys | python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')
cat >"$dir/env" <<EOT
export E2B_API_KEY=$key E2B_API_URL=http://127.0.0.1:$port E2B_SANDBOX_URL=http://127.0.0.1:$port
export SPACE_TEST_SOCKET=$SPACE_SOCKET SPACE_SOCKET=$SPACE_SOCKET SPACECTL=$ctl
EOT
cat "$dir/env"
