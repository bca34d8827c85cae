# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# Shared helpers for the integration tests (sourced, not run):
#   - TAP output: plan, pass, fail, check, check_rc, check_eq, check_contains, skip, diag, bail_out, done_testing
#   - an isolated environment per test file under one mktemp -d (state, runtime dir, socket, config)
#   - a daemon of our own (start_daemon), and cleanup at exit that asks nothing of the daemon: it kills spaced
#     and every QEMU by the PIDs they wrote, never by name, then removes the temp dir.
#
# Knobs (environment):
#   TOP_BUILDDIR              build tree (default: the source tree)
#   SPACE_TEST_LIB_DIR        guest files (default: $TOP_BUILDDIR/stage/lib/space)
#   SPACE_TEST_ACCEL          accel for the test config: auto|kvm|tcg (default auto)
#   SPACE_TEST_CONFINE        confine for the test config: auto|on|off (default auto)
#   SPACE_TEST_CMD_TIMEOUT    safety net for one spacectl call, seconds (default 180)
#   SPACE_TEST_CREATE_TIMEOUT safety net for a create, which may build the base snapshot (default 300)
#   SPACE_TEST_KEEP=1         keep the temp dir (its path is printed as a diagnostic)

set -u
set -o pipefail

TESTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP_SRCDIR=$(cd "$TESTS_DIR/../.." && pwd)
TOP_BUILDDIR=${TOP_BUILDDIR:-$TOP_SRCDIR}
SPACED_BIN=${SPACED_BIN:-$TOP_BUILDDIR/spaced/spaced}
SPACECTL_BIN=${SPACECTL_BIN:-$TOP_BUILDDIR/cli/spacectl}
STAGE_LIB_DIR=${SPACE_TEST_LIB_DIR:-$TOP_BUILDDIR/stage/lib/space}
CMD_TIMEOUT=${SPACE_TEST_CMD_TIMEOUT:-180}
CREATE_TIMEOUT=${SPACE_TEST_CREATE_TIMEOUT:-300}
TEST_NAME=$(basename "$0" .sh)

# ---------------------------------------------------------------- TAP

_tap_n=0
_tap_failed=0
_tap_planned=

plan() {
        _tap_planned=$1
        echo "1..$1"
}

diag() {
        printf '%s\n' "$@" | sed 's/^/# /'
}

# Print a file's last lines as diagnostics.
diag_file() {
        local f=$1 n=${2:-20}
        [ -s "$f" ] || return 0
        diag "--- $f (last $n lines):"
        tail -n "$n" "$f" | cut -c1-300 | tr -c '[:print:]\n' '?' | sed 's/^/#   /'
}

pass() {
        _tap_n=$((_tap_n + 1))
        echo "ok $_tap_n - $1"
}

# fail DESC [DIAG...]: returns 1, as every check_* does when it fails, so a caller can add diagnostics.
fail() {
        _tap_n=$((_tap_n + 1))
        _tap_failed=$((_tap_failed + 1))
        echo "not ok $_tap_n - $1"
        shift
        [ $# -gt 0 ] && diag "$@"
        return 1
}

# skip DESC REASON: only for missing hardware; the reason is printed.
skip() {
        _tap_n=$((_tap_n + 1))
        echo "ok $_tap_n - $1 # SKIP $2"
}

bail_out() {
        echo "Bail out! $TEST_NAME: $*"
        exit 1
}

# Print the trailing plan (unless plan was called) and exit 0 only when every test passed. Call it last: a
# script that dies before reaching it leaves no plan, and tests/run-tests.sh counts that as a failure.
done_testing() {
        if [ -z "$_tap_planned" ]; then
                echo "1..$_tap_n"
        elif [ "$_tap_planned" -ne "$_tap_n" ]; then
                diag "planned $_tap_planned tests but ran $_tap_n"
                exit 1
        fi
        [ "$_tap_failed" -eq 0 ] && exit 0
        exit 1
}

# ---------------------------------------------------------------- running commands

# run CMD...: runs CMD with stdout in $OUT and stderr in $ERR (files, so a daemon that inherits them can never
# hold a pipe open), and the exit status in $RC. Stdin is the caller's.
OUT=/dev/null
ERR=/dev/null
RC=0
run() {
        "$@" >"$OUT" 2>"$ERR"
        RC=$?
        return 0
}

# Diagnostics for the last run: status, stdout and stderr heads.
last_diag() {
        diag "exit status $RC" "stdout: $(head -c 400 "$OUT" | tr -c '[:print:]\n' '?' | head -n 5)" \
                "stderr: $(head -c 600 "$ERR" | tr -c '[:print:]\n' '?' | head -n 8)"
}

# check DESC CMD...: passes when CMD exits 0.
check() {
        local desc=$1
        shift
        run "$@"
        if [ "$RC" -eq 0 ]; then
                pass "$desc"
        else
                fail "$desc" "command: $*"
                last_diag
                return 1
        fi
}

# check_rc DESC EXPECTED CMD...: passes when CMD exits with EXPECTED. $OUT, $ERR, $RC stay for more checks.
check_rc() {
        local desc=$1 want=$2
        shift 2
        run "$@"
        if [ "$RC" -eq "$want" ]; then
                pass "$desc"
        else
                fail "$desc" "command: $*" "expected exit status $want"
                last_diag
                return 1
        fi
}

# check_fails DESC CMD...: passes when CMD exits non-zero and says something on stderr.
check_fails() {
        local desc=$1
        shift
        run "$@"
        if [ "$RC" -ne 0 ] && [ -s "$ERR" ]; then
                pass "$desc"
        else
                fail "$desc" "command: $*" "expected a non-zero exit status and a message on stderr"
                last_diag
                return 1
        fi
}

# check_eq DESC EXPECTED ACTUAL
check_eq() {
        if [ "$2" = "$3" ]; then
                pass "$1"
        else
                fail "$1" "expected: $(printf '%s' "$2" | head -c 300)" "got:      $(printf '%s' "$3" | head -c 300)"
        fi
}

# check_contains DESC NEEDLE FILE-OR-STRING: case-insensitive fixed-string match.
check_contains() {
        local hay
        if [ -f "$3" ]; then hay=$(cat "$3"); else hay=$3; fi
        if grep -qiF -- "$2" <<<"$hay"; then
                pass "$1"
        else
                fail "$1" "expected to find: $2" "in: $(printf '%s' "$hay" | head -c 400)"
        fi
}

# check_match DESC ERE STRING
check_match() {
        if grep -qE -- "$2" <<<"$3"; then
                pass "$1"
        else
                fail "$1" "expected to match: $2" "got: $(printf '%s' "$3" | head -c 300)"
        fi
}

# wait_for SECONDS CMD...: polls CMD every 0.1 s until it succeeds (0) or the time is up (1).
wait_for() {
        local secs=$1 deadline
        shift
        deadline=$(($(date +%s%N) + secs * 1000000000))
        while :; do
                "$@" >/dev/null 2>&1 && return 0
                [ "$(date +%s%N)" -ge "$deadline" ] && return 1
                sleep 0.1
        done
}

now_ms() {
        echo $(($(date +%s%N) / 1000000))
}

# spacectl with a safety net, so that a hang fails one test instead of the suite. A safety-net expiry shows
# as 124 after CMD_TIMEOUT seconds; tests that expect 124 from --timeout also check how long it took.
sc() {
        timeout -k 10 "$CMD_TIMEOUT" spacectl "$@"
}

sc_create() {
        timeout -k 10 "$CREATE_TIMEOUT" spacectl create "$@"
}

# json FILE PYEXPR: evaluates a Python expression over the JSON document `d` in FILE and prints it (strings raw,
# anything else as JSON). Exit 1 when the file is not JSON or the expression fails. S(d) and T(d) are the
# sandbox and template lists of `ls --json` and `template ls --json`: the contract is {"sandboxes": [...]} and
# {"templates": [...]}, checked once by t01; the helpers also take a bare list so one deviation fails one test.
json() {
        python3 - "$1" "$2" <<'EOF'
import json, sys
try:
    with open(sys.argv[1], "rb") as f:
        d = json.load(f)
    S = lambda d: d["sandboxes"] if isinstance(d, dict) else d
    T = lambda d: d["templates"] if isinstance(d, dict) else d
    v = eval(sys.argv[2], {"d": d, "S": S, "T": T, "len": len, "any": any, "all": all, "sorted": sorted,
                           "sum": sum, "str": str, "isinstance": isinstance, "dict": dict, "list": list})
except Exception as e:
    print("json: %s" % e, file=sys.stderr)
    sys.exit(1)
print(v if isinstance(v, str) else json.dumps(v))
EOF
}

# api_get PATH: GET over the unix socket with no autostart; prints the body, exit 0 on 2xx.
api_get() {
        python3 - "$SPACE_SOCKET" "$1" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall(("GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n" % sys.argv[2]).encode())
buf = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    buf += b
head, _, body = buf.partition(b"\r\n\r\n")
status = int(head.split(b" ")[1])
if b"transfer-encoding: chunked" in head.lower():
    out, rest = b"", body
    while rest:
        n, _, rest = rest.partition(b"\r\n")
        n = int(n.split(b";")[0], 16)
        if n == 0:
            break
        out, rest = out + rest[:n], rest[n + 2:]
    body = out
sys.stdout.write(body.decode(errors="replace"))
sys.exit(0 if 200 <= status < 300 else 1)
EOF
}

# ---------------------------------------------------------------- environment

TEST_TMP=
DAEMON_PID=
EXTRA_PIDS=()
SEEN_PIDS=()

space_env_setup() {
        TEST_TMP=$(mktemp -d /tmp/spt.XXXXXX) || bail_out "mktemp failed"
        trap _space_cleanup EXIT
        trap 'exit 130' INT TERM
        OUT=$TEST_TMP/out
        ERR=$TEST_TMP/err

        export SPACE_STATE_DIR=$TEST_TMP/state
        export SPACE_RUNTIME_DIR=$TEST_TMP/run
        export SPACE_SOCKET=$TEST_TMP/run/api.sock
        export SPACE_LIB_DIR=$STAGE_LIB_DIR
        export SPACE_CONFIG=$TEST_TMP/spaced.conf
        export SPACED=$SPACED_BIN
        # Nothing of the user's: no systemd user manager to hand the start to, no files under $HOME.
        export XDG_RUNTIME_DIR=$TEST_TMP/xdg XDG_STATE_HOME=$TEST_TMP/xdg-state XDG_CONFIG_HOME=$TEST_TMP/xdg-config
        unset DBUS_SESSION_BUS_ADDRESS
        mkdir -m 0700 -p "$XDG_RUNTIME_DIR"
        export PATH=$(dirname "$SPACED_BIN"):$(dirname "$SPACECTL_BIN"):$PATH
        # ASan: report, but do not let leak reports of killed processes fail anything here.
        export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0}
        write_config

        [ -x "$SPACED_BIN" ] || bail_out "$SPACED_BIN is missing: build first (./autogen.sh && ./configure && make)"
        [ -x "$SPACECTL_BIN" ] || bail_out "$SPACECTL_BIN is missing: build first"
        [ -s "$SPACE_LIB_DIR/vmlinux" ] || bail_out "$SPACE_LIB_DIR/vmlinux is missing: the guest files are built by make"
        [ -s "$SPACE_LIB_DIR/initramfs.cpio" ] || bail_out "$SPACE_LIB_DIR/initramfs.cpio is missing"
        [ -s "$SPACE_LIB_DIR/templates/minimal/rootfs.tar" ] || bail_out "the minimal template is missing in $SPACE_LIB_DIR"
        command -v python3 >/dev/null || bail_out "python3 is needed by the tests"
        if ! command -v qemu-system-x86_64 >/dev/null; then
                echo "1..0 # SKIP qemu-system-x86_64 is not installed"
                exit 0
        fi
        [ "$(command -v spacectl)" = "$SPACECTL_BIN" ] || bail_out "PATH does not find the build's spacectl first"
        [ -n "${SPACE_TEST_KEEP:-}" ] && diag "temp dir: $TEST_TMP"
        return 0
}

# write_config [LINE...]: the daemon's config file; extra lines are added after the defaults.
write_config() {
        {
                echo "accel = ${SPACE_TEST_ACCEL:-auto}"
                echo "confine = ${SPACE_TEST_CONFINE:-auto}"
                # No TCP listener unless the test asks for one (tcp_config; a later line wins): the default
                # port 7070 may be someone else's.
                echo "listen = off"
                printf '%s\n' "$@"
                # Nor a TLS one unless asked (t43, t44, t29's domain mode): the default port 7443 is the same for
                # every run. After the test's lines, so that theirs keep the numbers tests of bad lines expect.
                case " $* " in *e2b_tls_listen*) ;; *) echo "e2b_tls_listen = off" ;; esac
        } >"$SPACE_CONFIG"
}

daemon_answers() {
        api_get /v1/version >/dev/null 2>&1
}

daemon_pid() {
        local pid
        read -r pid <"$SPACE_RUNTIME_DIR/spaced.pid" 2>/dev/null || return 1
        case $pid in '' | *[!0-9]*) return 1 ;; esac
        echo "$pid"
}

pid_alive() {
        [ -n "$1" ] && kill -0 "$1" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

# Start our own spaced in the background, logging to $TEST_TMP/spaced.log, and wait until it answers.
start_daemon() {
        "$SPACED_BIN" >>"$TEST_TMP/spaced.log" 2>&1 </dev/null &
        DAEMON_PID=$!
        disown "$DAEMON_PID" # no job-control chatter when cleanup kills it
        SEEN_PIDS+=("$DAEMON_PID")
        if ! wait_for 60 daemon_answers; then
                diag_file "$TEST_TMP/spaced.log" 40
                bail_out "spaced did not answer on $SPACE_SOCKET within 60 s"
        fi
        wait_for 10 daemon_pid || bail_out "spaced did not write $SPACE_RUNTIME_DIR/spaced.pid"
        SEEN_PIDS+=("$(daemon_pid)")
}

# Remember a PID for cleanup (e.g. systemd-socket-activate).
track_pid() {
        EXTRA_PIDS+=("$1")
}

# Remember the QEMU of a sandbox while it is known, so cleanup finds it even if its run dir is gone.
track_sandbox() {
        local f
        for f in "$SPACE_RUNTIME_DIR"/sandboxes/"$1"*/qemu.pid; do
                [ -r "$f" ] && SEEN_PIDS+=("$(cat "$f")")
        done
        return 0
}

# Is PID one of ours? It must mention the temp dir in its command line or environment, so that a stale pid
# file whose PID was reused is never acted on.
_is_ours() {
        local pid=$1
        case $pid in '' | *[!0-9]* | 0 | 1) return 1 ;; esac
        [ "$pid" = "$$" ] && return 1
        [ -d "/proc/$pid" ] || return 1
        tr '\0' '\n' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF "$TEST_TMP" && return 0
        tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" | grep -qF "$TEST_TMP" && return 0
        # Our own children (the daemon we started, the activator) qualify too.
        [ "$(awk '{print $4}' "/proc/$pid/stat" 2>/dev/null)" = "$$" ]
}

_kill_pids() {
        local pid left i
        local -a victims=()
        for pid in "$@"; do
                _is_ours "$pid" && victims+=("$pid")
        done
        [ ${#victims[@]} -eq 0 ] && return 0
        kill -TERM "${victims[@]}" 2>/dev/null
        for i in $(seq 50); do
                left=0
                for pid in "${victims[@]}"; do pid_alive "$pid" && left=1; done
                [ $left -eq 0 ] && return 0
                sleep 0.1
        done
        kill -KILL "${victims[@]}" 2>/dev/null
        sleep 0.2
}

_space_cleanup() {
        local rc=$? f pid
        local -a pids=()
        set +e
        trap - EXIT
        [ -n "$TEST_TMP" ] || exit "$rc"

        # Logs first: what the daemon says when it is killed (e.g. ASan leak reports) would hide the story.
        if [ "$rc" -ne 0 ] || [ "$_tap_failed" -gt 0 ]; then
                diag_file "$TEST_TMP/spaced.log" 40
                for f in "$TEST_TMP"/*.log "$SPACE_STATE_DIR"/*.log "$SPACE_RUNTIME_DIR"/*.log \
                        "$SPACE_RUNTIME_DIR"/sandboxes/*/*.log; do
                        [ "$f" = "$TEST_TMP/spaced.log" ] || diag_file "$f" 20
                done
        fi
        # Background jobs of the test first (spacectl calls left running), then the daemon(s), then QEMUs.
        for pid in $(jobs -p); do kill -KILL "$pid" 2>/dev/null; done
        pid=$(daemon_pid) && pids+=("$pid")
        [ -n "$DAEMON_PID" ] && pids+=("$DAEMON_PID")
        pids+=("${EXTRA_PIDS[@]}")
        _kill_pids "${pids[@]}"
        pids=("${SEEN_PIDS[@]}")
        # a base snapshot being built when the test ended has a QEMU of its own, and so has the accelerator's probe
        for f in "$SPACE_RUNTIME_DIR"/sandboxes/*/qemu.pid "$SPACE_RUNTIME_DIR"/base-*/qemu.pid \
                "$SPACE_RUNTIME_DIR"/accel-probe/qemu.pid; do
                [ -r "$f" ] && read -r pid <"$f" && pids+=("$pid")
        done
        _kill_pids "${pids[@]}"
        # a loop-mounted state dir, once nothing uses it
        _unmount_btrfs_state
        # guest files a test put under /usr (an installed layout)
        [ -n "${USR_LIB_DIR:-}" ] && case $USR_LIB_DIR in /usr/local/lib/space-t*) rm -rf "$USR_LIB_DIR" ;; esac

        if [ -n "${SPACE_TEST_KEEP:-}" ]; then
                diag "kept $TEST_TMP"
        else
                rm -rf "$TEST_TMP"
        fi
        exit "$rc"
}

# add_small_template NAME MIB: before start_daemon, a lib dir of the test's own (exported as SPACE_LIB_DIR)
# with the stage's guest files and templates, plus builtin template NAME: the minimal template's tree and one
# file naming it (so its digest is its own), with disk_mib MIB, which makes its image MIB MiB. Offline: GNU
# tar only.
add_small_template() {
        local name=$1 mib=$2 lib=$TEST_TMP/lib f dir
        dir=$lib/templates/$name
        mkdir -p "$dir" "$TEST_TMP/add-$name/etc"
        if [ ! -L "$lib/vmlinux" ]; then
                for f in vmlinux vmlinux.sha256 initramfs.cpio initramfs.cpio.sha256; do
                        [ -e "$STAGE_LIB_DIR/$f" ] && ln -s "$(readlink -f "$STAGE_LIB_DIR/$f")" "$lib/$f"
                done
                for f in "$STAGE_LIB_DIR"/templates/*; do
                        ln -s "$(readlink -f "$f")" "$lib/templates/$(basename "$f")"
                done
        fi
        cp "$STAGE_LIB_DIR/templates/minimal/rootfs.tar" "$dir/rootfs.tar" || bail_out "cannot copy the minimal tree"
        echo "$name" >"$TEST_TMP/add-$name/etc/space-test-template"
        tar -C "$TEST_TMP/add-$name" --owner=0 --group=0 --numeric-owner --mtime=@86400 -rf "$dir/rootfs.tar" \
                ./etc/space-test-template || bail_out "cannot add to the tree of template $name"
        sed -e "s/^name = .*/name = $name/" -e "s/^disk_mib = .*/disk_mib = $mib/" \
                "$STAGE_LIB_DIR/templates/minimal/template.conf" >"$dir/template.conf"
        export SPACE_LIB_DIR=$lib
}

# mount_btrfs_state [SIZE]: before start_daemon, a loop-mounted btrfs (default 3G) at $SPACE_STATE_DIR, undone
# by the cleanup (by the loop device losetup gave us, never any other). Returns 1 with the reason in
# $BTRFS_SKIP when this machine cannot: not root, no btrfs-progs, no btrfs in the kernel, no loop device.
BTRFS_LOOP=
BTRFS_SKIP=
mount_btrfs_state() {
        local size=${1:-3G} tool
        export PATH=$PATH:/sbin:/usr/sbin
        if [ "$(id -u)" -ne 0 ]; then BTRFS_SKIP="mounting a loop device needs root"; return 1; fi
        for tool in mkfs.btrfs btrfs losetup; do
                command -v "$tool" >/dev/null || { BTRFS_SKIP="$tool is missing (btrfs-progs, util-linux)"; return 1; }
        done
        if ! grep -qw btrfs /proc/filesystems && ! modprobe btrfs 2>/dev/null; then
                BTRFS_SKIP="the kernel has no btrfs"
                return 1
        fi
        truncate -s "$size" "$TEST_TMP/btrfs.img" || bail_out "cannot make $TEST_TMP/btrfs.img"
        mkfs.btrfs -q "$TEST_TMP/btrfs.img" >"$TEST_TMP/mkfs.log" 2>&1 ||
                { diag_file "$TEST_TMP/mkfs.log"; bail_out "mkfs.btrfs failed"; }
        if ! BTRFS_LOOP=$(losetup --show -f "$TEST_TMP/btrfs.img" 2>"$TEST_TMP/losetup.err"); then
                BTRFS_LOOP=
                BTRFS_SKIP="no loop device: $(head -c 200 "$TEST_TMP/losetup.err")"
                return 1
        fi
        mkdir -p "$SPACE_STATE_DIR"
        mount "$BTRFS_LOOP" "$SPACE_STATE_DIR" || bail_out "cannot mount $BTRFS_LOOP on $SPACE_STATE_DIR"
        # a new file system's root is 0755: the daemon wants its state directory private
        chmod 0700 "$SPACE_STATE_DIR"
        return 0
}

_unmount_btrfs_state() {
        [ -n "$BTRFS_LOOP" ] || return 0
        umount "$SPACE_STATE_DIR" 2>/dev/null || umount -l "$SPACE_STATE_DIR" 2>/dev/null
        losetup -d "$BTRFS_LOOP" 2>/dev/null
        BTRFS_LOOP=
}

# ---------------------------------------------------------------- sandbox helpers

ID_RE='^[0-9a-f]{32}$'

# create_sandbox VAR [create args...]: creates, checks nothing, stores the id (or "") in VAR.
create_sandbox() {
        local var=$1
        shift
        run sc_create "$@"
        if [ "$RC" -eq 0 ] && grep -qE "$ID_RE" "$OUT"; then
                printf -v "$var" '%s' "$(head -n1 "$OUT")"
                track_sandbox "${!var}"
        else
                printf -v "$var" '%s' ""
        fi
}

# state_of REF: the sandbox's state from inspect --json ("" when unknown).
state_of() {
        local f=$TEST_TMP/inspect.json
        sc inspect "$1" --json >"$f" 2>/dev/null || return 1
        json "$f" 'd["state"]'
}

sandbox_count() {
        local f=$TEST_TMP/ls.json
        sc ls --json >"$f" 2>/dev/null || return 1
        json "$f" 'len(S(d))'
}

# The sorted ids from ls --json, one line ("" when none): used to show that a bad input changed nothing.
sandbox_ids() {
        local f=$TEST_TMP/ls-ids.json
        sc ls --json >"$f" 2>/dev/null || { echo "(ls failed)"; return 1; }
        json "$f" '" ".join(sorted(s["id"] for s in S(d)))'
}

pid_gone() {
        ! pid_alive "$1"
}

# ---------------------------------------------------------------- the TCP API, keys and sessions (issue 3)

SSE_PY=$TESTS_DIR/sse.py
API_PORT=
API_URL=
API_KEY=
STATUS=

# free_port: a TCP port on 127.0.0.1 that nobody listens on now.
free_port() {
        python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# tcp_config [LINE...]: picks a free port for this run and writes the config with `listen = 127.0.0.1:PORT` (and
# the extra lines); sets API_PORT and API_URL.
tcp_config() {
        API_PORT=$(free_port) || bail_out "cannot pick a free TCP port"
        API_URL=http://127.0.0.1:$API_PORT
        write_config "listen = 127.0.0.1:$API_PORT" "$@"
}

# The TCP listener answers at all (any status).
tcp_answers() {
        [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$API_URL/v1/openapi.json")" != 000 ]
}

# req METHOD PATH [CURL-ARGS...]: one request over TCP, with only the auth the caller passes. The body is in
# $OUT, the status in $STATUS ("000": no answer).
req() {
        local m=$1 p=$2
        shift 2
        STATUS=$(curl -sS -o "$OUT" -w '%{http_code}' --max-time 60 -X "$m" "$@" "$API_URL$p" 2>"$ERR")
        [ -n "$STATUS" ] || STATUS=000
        return 0
}

# kreq METHOD PATH [CURL-ARGS...]: req with the API key ($API_KEY) as a bearer token.
kreq() {
        local m=$1 p=$2
        shift 2
        req "$m" "$p" -H "Authorization: Bearer $API_KEY" "$@"
}

# ureq METHOD PATH [CURL-ARGS...]: the same over the unix socket (no key).
ureq() {
        local m=$1 p=$2
        shift 2
        STATUS=$(curl -sS -o "$OUT" -w '%{http_code}' --max-time 60 -X "$m" --unix-socket "$SPACE_SOCKET" "$@" \
                "http://localhost$p" 2>"$ERR")
        [ -n "$STATUS" ] || STATUS=000
        return 0
}

# check_status DESC STATUS [CODE]: the last request's status, and the "code" of its JSON error body.
check_status() {
        local desc=$1 want=$2 code=${3:-} got
        if [ "$STATUS" != "$want" ]; then
                fail "$desc" "expected HTTP $want${code:+ $code}, got $STATUS" "body: $(head -c 300 "$OUT" | tr -c '[:print:]\n' '?')"
                return 1
        fi
        if [ -n "$code" ]; then
                got=$(json "$OUT" 'd["code"]' 2>&1)
                if [ "$got" != "$code" ]; then
                        fail "$desc" "HTTP $STATUS as expected, but code '$got', expected '$code'" \
                                "body: $(head -c 300 "$OUT" | tr -c '[:print:]\n' '?')"
                        return 1
                fi
                if [ -z "$(json "$OUT" 'd["message"]' 2>/dev/null)" ]; then
                        fail "$desc" "the error has no message" "body: $(head -c 300 "$OUT")"
                        return 1
                fi
        fi
        pass "$desc"
}

# seed_template: the seed template in this test's daemon, as `spacectl template build templates/seed` makes it,
# with RC and OUT as run sets them (OUT: its digest). The first build of a suite run leaves its tarball and
# config in SPACE_TEST_SEED_CACHE (default tests/.seed-cache of the build tree), keyed by the recipe's files;
# later tests import those (the same tree and config, in seconds instead of the build's half minute). t18 and
# t37, which test the build itself, always build.
seed_template() {
        local cache=${SPACE_TEST_SEED_CACHE:-$TOP_BUILDDIR/tests/.seed-cache} key dir
        key=$(cat "$TOP_SRCDIR"/templates/seed/* | sha256sum | cut -c1-16)
        dir=$cache/$key
        if [ -s "$dir/rootfs.tar" ] && [ -s "$dir/config.json" ]; then
                ureq POST "/v1/templates/import?wait=600" -H 'Content-Type: application/json' \
                        -d "{\"source\": \"$dir/rootfs.tar\", \"tag\": \"seed:latest\", \"config\": $(cat "$dir/config.json")}"
                if [ "$STATUS" = 200 ] || [ "$STATUS" = 201 ]; then
                        RC=0
                        sc template inspect seed >"$TEST_TMP/seed.json" 2>"$ERR" &&
                                json "$TEST_TMP/seed.json" 'd["digest"]' >"$OUT" || RC=1
                        return 0
                fi
                diag "importing the cached seed failed (HTTP $STATUS: $(head -c 200 "$OUT")); building it"
        fi
        run timeout -k 10 900 "$SPACECTL_BIN" template build "$TOP_SRCDIR/templates/seed"
        [ "$RC" -eq 0 ] || return 0
        # its tree back as the export gives it (GET /v1/templates/REF/rootfs: the same digest again, t37)
        mkdir -p "$dir"
        curl -sf --max-time 300 --unix-socket "$SPACE_SOCKET" -o "$dir/rootfs.tar.new" \
                http://localhost/v1/templates/seed/rootfs &&
                sc template inspect seed >"$TEST_TMP/seed.json" 2>/dev/null &&
                json "$TEST_TMP/seed.json" 'd["config"]' >"$dir/config.json.new" &&
                mv "$dir/rootfs.tar.new" "$dir/rootfs.tar" && mv "$dir/config.json.new" "$dir/config.json"
        rm -f "$dir/rootfs.tar.new" "$dir/config.json.new"
        return 0
}

# tap_from FILE: one TAP line per line of tests/e2b/junit-to-tap.py's output (the SDK suites' test cases).
tap_from() {
        local kind name msg
        while IFS=$'\t' read -r kind name msg; do
                case $kind in
                PASS) pass "$name" ;;
                SKIP) skip "$name" "$msg" ;;
                *) fail "$name" "$msg" ;;
                esac
        done <"$1"
}

# mint_key NAME: creates an API key over the unix socket (POST /v1/keys) and prints it.
mint_key() {
        ureq POST /v1/keys -H 'Content-Type: application/json' -d "{\"name\": \"$1\"}"
        [ "$STATUS" = 201 ] || [ "$STATUS" = 200 ] || return 1
        json "$OUT" 'd["key"]'
}

# sse ARGS...: tests/integration/sse.py over TCP with $API_KEY; its JSON result is in $OUT, status in $RC.
sse() {
        run timeout -k 5 "${SSE_TIMEOUT:-300}" python3 "$SSE_PY" --url "$API_URL" --key "$API_KEY" "$@"
}

# start_daemon_tcp: start_daemon, then wait for the TCP listener too.
start_daemon_tcp() {
        start_daemon
        wait_for 20 tcp_answers || { diag_file "$TEST_TMP/spaced.log" 40; bail_out "spaced does not answer on $API_URL"; }
}

# daemon_rss_kib: VmRSS of our spaced, in KiB.
daemon_rss_kib() {
        local pid
        pid=$(daemon_pid) || return 1
        awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status"
}
