#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The template store (issue 4): imports of a rootfs tarball (plain, gzip, xz, zstd: one digest), of an OCI
# layout and of its archive (layers with whiteouts and an opaque directory; the image's Env, WorkingDir and User
# become defaults), checked from inside sandboxes; hostile archives leave the host untouched; references,
# tag, ls, inspect, rm (refused while a sandbox, a checkpoint or a pool uses the template), gc; an import
# killed in the middle leaves nothing behind; builtins are imported once. One sandbox at a time.
. "$(dirname "$0")/lib.sh"

space_env_setup
start_daemon
MK=$TESTS_DIR/mkimage.py
BASE=$SPACE_LIB_DIR/templates/minimal/rootfs.tar
IMG=$TEST_TMP/img
mkdir -p "$IMG"
DIGEST_RE='^sha256:[0-9a-f]{64}$'

# inspect REF EXPR: a field of `template inspect REF`
inspect() {
        sc template inspect "$1" >"$TEST_TMP/inspect.json" 2>/dev/null || return 1
        json "$TEST_TMP/inspect.json" "$2"
}

# in_image REF PATH: `debugfs ls -l` of PATH inside the template's image (no VM needed)
in_image() {
        local rootfs
        rootfs=$(inspect "$1" 'd["rootfs"]') || return 1
        debugfs -R "ls -l $2" "$rootfs" 2>/dev/null
}

# ---- builtins
check_rc "template ls" 0 sc template ls
check_contains "minimal:latest is listed" "minimal:latest" "$OUT"
check_eq "minimal is imported from its rootfs.tar" "$BASE" "$(inspect minimal 'd["source"]')"

# ---- rootfs tarballs: one tree, four encodings, one digest
check "make a rootfs tarball" python3 "$MK" rootfs "$BASE" "$IMG/r.tar"
gzip -k "$IMG/r.tar" && xz -k -T1 "$IMG/r.tar" && zstd -q -k "$IMG/r.tar" || bail_out "compressing failed"
DIGESTS=()
for f in r.tar r.tar.gz r.tar.xz r.tar.zst; do
        tag=t17/rootfs:${f//./-}
        check_rc "import $f" 0 sc template import "$IMG/$f" --tag "$tag"
        check_match "import $f prints the digest" "$DIGEST_RE" "$(cat "$OUT")"
        check_contains "import $f says the device node and the fifo were left out" "2 device nodes" "$ERR"
        DIGESTS+=("$(cat "$OUT")")
done
check_eq "plain, gzip, xz and zstd give one digest" 1 "$(printf '%s\n' "${DIGESTS[@]}" | sort -u | wc -l)"
RDIGEST=${DIGESTS[0]}
check_eq "the image has the four tags" 4 "$(inspect "$RDIGEST" 'len(d["tags"])')"
check_eq "a 12-digit digest prefix resolves" "$RDIGEST" "$(inspect "sha256:${RDIGEST:7:12}" 'd["digest"]')"
check_eq "the image file is read-only" 444 "$(stat -c %a "$(inspect "$RDIGEST" 'd["rootfs"]')")"

create_sandbox SB t17/rootfs:r-tar-zst
check_match "create from the imported tarball" "$ID_RE" "$SB"
check_rc "exec in it" 0 sc exec "$SB" -- sh -c 'cat /srv/link; stat -c "%a %u:%g %h %Y" /srv/data/hello.txt /srv/setuid /srv/data;
        [ "$(stat -c %i /srv/hard)" = "$(stat -c %i /srv/data/hello.txt)" ] && echo hardlinked;
        ls /srv | tr "\n" " "'
check_eq "the tree: symlink, owners, modes (setuid), mtimes, hard link; no device, no fifo" \
        "hello from t17
640 1000:1000 2 1234567890
4755 0:0 1 1234567890
750 1000:1000 2 1234567890
hardlinked
data hard link setuid " "$(cat "$OUT")"
check_rc "a file of the minimal layer is there too (busybox)" 0 sc exec "$SB" -- /bin/busybox true
check_rc "rm the sandbox" 0 sc rm -f "$SB"

# ---- OCI: a layout directory and its archive
check "make an OCI layout and its archive" python3 "$MK" oci "$BASE" "$IMG/layout" "$IMG/oci.tar"
check_rc "import the OCI layout directory" 0 sc template import "$IMG/layout" --tag t17/oci:dir --quiet
ODIGEST=$(cat "$OUT")
check_eq "a clean import with --quiet prints nothing on stderr" "" "$(cat "$ERR")"
check_rc "import the OCI archive, with --env over the image's" 0 \
        sc template import "$IMG/oci.tar" --tag t17/oci:archive --env T17_OVER=request
check_eq "layout and archive give one digest" "$ODIGEST" "$(cat "$OUT")"
check_eq "not stdout's business: stderr is empty when it is not a terminal" "" "$(cat "$ERR")"
check_eq "the image's WorkingDir is the default workdir" /opt/keep "$(inspect t17/oci:archive 'd["config"]["workdir"]')"
check_eq "the image's User is recorded" 1000:1000 "$(inspect t17/oci:archive 'd["config"]["user"]')"
check_eq "Entrypoint + Cmd are the default command" '["/bin/sh", "-c", "echo hi"]' \
        "$(inspect t17/oci:archive 'd["config"]["entrypoint"]')"
check_eq "env: the image's, with the request's over it" "from-image request" \
        "$(inspect t17/oci:archive '" ".join(e.split("=",1)[1] for e in d["config"]["env"] if e.startswith("T17_"))')"

create_sandbox SB t17/oci:archive
check_match "create from the OCI image" "$ID_RE" "$SB"
check_rc "exec without -u runs as the image's User" 0 sc exec "$SB" -- sh -c 'echo "$(id -u):$(id -g)"'
check_eq "... 1000:1000" 1000:1000 "$(cat "$OUT")"
# As root: the tree has directories (0700 0:0) that the image's user may not read.
check_rc "exec: pwd, env, the layered tree" 0 sc exec -u root "$SB" -- sh -c 'pwd; echo "$T17_OCI $T17_OVER"; ls /opt | tr "\n" " ";
        echo; ls -A /opt/opq | tr "\n" " "; echo; stat -c "%a %u:%g" /opt/opq /opt/keep/k2; cat /opt/keep/k1'
check_eq "workdir default, env defaults, whiteouts (file, dir), opaque dir, later layers' owners" "/opt/keep
from-image request
keep opq 
upper 
700 0:0
600 1000:1000
k1" "$(cat "$OUT")"
check_rc "an explicit --workdir still wins" 0 sc exec -w /tmp "$SB" -- pwd
check_eq "exec -w /tmp runs in /tmp" /tmp "$(cat "$OUT")"

# ---- in use: a sandbox, a checkpoint, a pool
check_fails "rm of the image by digest while a sandbox uses it" sc template rm "$ODIGEST"
check_contains "the refusal names the sandbox" "in use by sandbox $SB" "$ERR"
check_rc "rm of one of two tags works while in use" 0 sc template rm t17/oci:dir
check_eq "it says what it untagged" "untagged t17/oci:dir" "$(head -n1 "$OUT")"
check_fails "rm of the last tag of an image in use is refused" sc template rm t17/oci:archive
check_contains "... as template_in_use naming the sandbox" "$SB" "$ERR"
check_rc "checkpoint the sandbox" 0 sc checkpoint "$SB" --name t17-cp
CP=$(cat "$OUT")
check_rc "rm the sandbox" 0 sc rm -f "$SB"
check_fails "rm while a checkpoint uses it" sc template rm t17/oci:archive
check_contains "the refusal names the checkpoint" "checkpoint $CP" "$ERR"
check_rc "checkpoint rm" 0 sc checkpoint rm "$CP"
check_rc "pool set t17/oci:archive 1" 0 sc pool set t17/oci:archive 1
check_fails "rm while a pool uses it" sc template rm t17/oci:archive
check_contains "the refusal names the pool" "pool t17/oci:archive" "$ERR"
check_rc "pool set t17/oci:archive 0" 0 sc pool set t17/oci:archive 0
SZ=$(sc template ls | awk '$1 == "t17/oci:archive" { print $3, $4 }')
if wait_for 120 sh -c 'spacectl template rm t17/oci:archive >"$0"' "$TEST_TMP/rm.out"; then pass "rm works once nothing uses it"; else
        fail "rm works once nothing uses it" "$(sc template rm t17/oci:archive 2>&1)"; fi
check_match "... saying the SIZE template ls showed ($SZ), and what the disk got back" \
        "^removed t17/oci:archive \(SIZE $SZ; [0-9.]+ [KMGT]?i?B freed on disk with its image file and base snapshots\)$" \
        "$(cat "$TEST_TMP/rm.out")"
check_fails "the image is gone with its last tag" sc template inspect "$ODIGEST"
check_contains "... template_not_found" "does not exist" "$ERR"
check_eq "its directory is gone" "" "$(ls -d "$SPACE_STATE_DIR"/templates/sha256-"${ODIGEST:7}" 2>/dev/null)"

# ---- hostile archives: refused or neutralised, the host untouched
HOST=$TEST_TMP/host
mkdir -p "$HOST"
echo original >"$HOST/victim"
for kind in dotdot absolute symlink hardlink hardlink-dotdot; do
        python3 "$MK" hostile "$kind" "$IMG/h-$kind.tar" "$HOST" || bail_out "mkimage hostile $kind"
        check_fails "hostile $kind: the import fails" sc template import "$IMG/h-$kind.tar" --tag "t17/h:$kind"
        case $kind in
        dotdot) why="'..' components are refused" ;;
        absolute) why="absolute paths are refused" ;;
        symlink) why="entries through symlinks are refused" ;;
        hardlink) why="hard link target '$HOST/victim' is refused" ;;
        hardlink-dotdot) why="hard link target" ;;
        esac
        check_contains "hostile $kind: the message names the entry and why" "$why" "$ERR"
        check_eq "hostile $kind: the host dir holds only the victim, unchanged" "victim original 1" \
                "$(ls -A "$HOST" | tr '\n' ' ')$(cat "$HOST/victim") $(stat -c %h "$HOST/victim")"
        check_fails "hostile $kind: no tag was made" sc template inspect "t17/h:$kind"
done
python3 "$MK" hostile device "$IMG/h-device.tar" "$HOST" || bail_out "mkimage hostile device"
check_rc "device nodes are neutralised: the import succeeds" 0 sc template import "$IMG/h-device.tar" --tag t17/h:device
check_contains "... and says they were left out" "2 device nodes" "$ERR"
check_eq "the image has no device node" "" "$(in_image t17/h:device /dev | grep -e -evil)"
check_eq "but the rest" "ok" "$(in_image t17/h:device /etc | grep -o ' ok$' | tr -d ' ')"
check_eq "no staging directory is left" "" "$(ls -A "$SPACE_STATE_DIR/templates" | grep -v '^sha256-')"

# ---- references and tags
check_fails "an uppercase name is not a reference" sc template inspect Bad/Name
check_contains "... invalid reference, lowercase" "lowercase" "$ERR"
check_fails "an 8-digit digest prefix is too short" sc template inspect sha256:0123abcd
check_fails "an unknown template" sc template inspect t17/no-such:1
check_contains "... says it does not exist" "does not exist" "$ERR"
check_fails "import without --tag" sc template import "$IMG/r.tar"
check_fails "import of a relative path that does not exist" sc template import no-such.tar --tag t17/x
check_fails "import of a file that is no archive" sc template import "$MK" --tag t17/x
check_contains "... says so" "not a tar archive" "$ERR"
check_rc "tag" 0 sc template tag t17/rootfs:r-tar team/python:3.12
check_eq "tag points the new name at the image" "$RDIGEST" "$(inspect team/python:3.12 'd["digest"]')"
check_rc "the HTTP API takes a %2F in a reference" 0 api_get "/v1/templates/team%2Fpython:3.12"
check_rc "ls -q" 0 sc template ls -q
check_contains "ls -q lists the namespaced tag" "team/python:3.12" "$OUT"
check_rc "create with a namespaced tag" 0 sc_create team/python:3.12 --name t17-ns
check_eq "the sandbox records the template as asked" team/python:3.12 "$(sc inspect t17-ns --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["template"])')"
check_rc "rm it" 0 sc rm -f t17-ns

# ---- gc: untagged images and stale base snapshots
printf 'other\n' >"$IMG/other.txt"
tar -C "$IMG" -cf "$IMG/other.tar" other.txt
check_rc "import a tree as t17/gc:1" 0 sc template import "$IMG/other.tar" --tag t17/gc:1
check_rc "import another tree with the same tag: the first image loses it" 0 \
        sc template import "$IMG/h-device.tar" --tag t17/gc:1
check_rc "ls" 0 sc template ls
check_contains "ls shows the untagged image as <none>" "<none>" "$OUT"
STALE=$SPACE_STATE_DIR/base/0123456789ab-k0123456789ab-i0123456789ab-m256-c1-tcg
mkdir -p "$STALE" && head -c 1048576 /dev/urandom >"$STALE/base.mem"
check_rc "template gc" 0 sc template gc
check_match "gc says what it removed and freed" "removed 1 images and [1-9][0-9]* base snapshots, [0-9.]+ MiB freed" "$(cat "$OUT")"
check_eq "the stale base snapshot is gone" "" "$(ls -d "$STALE" 2>/dev/null)"
check_rc "ls" 0 sc template ls
check_eq "no untagged image is left" 0 "$(grep -c '<none>' "$OUT")"

# ---- an import killed before it renames its image into place
stop_daemon() {
        local pid
        pid=$(daemon_pid) || return 0
        kill -TERM "$pid"
        wait_for 15 pid_gone "$pid" || kill -KILL "$pid"
}
# An import rewrites the image's config.json, even of a tree the store has: the next two starts must not.
MIN_CONF=$(dirname "$(inspect minimal 'd["rootfs"]')")/config.json
MIN_BEFORE=$(stat -c '%y %s' "$MIN_CONF" 2>&1)
stop_daemon
SPACE_TEST_CRASH_AT=import-before-rename "$SPACED_BIN" >>"$TEST_TMP/spaced.log" 2>&1 </dev/null &
CRASH_PID=$!
disown "$CRASH_PID"
SEEN_PIDS+=("$CRASH_PID")
wait_for 30 daemon_answers || bail_out "the crashing daemon did not start"
printf 'crash\n' >"$IMG/crash.txt"
tar -C "$IMG" -cf "$IMG/crash.tar" crash.txt
check_fails "an import while the daemon dies fails" sc template import "$IMG/crash.tar" --tag t17/crash:1
wait_for 10 pid_gone "$CRASH_PID"
check_eq "it left a staging directory behind" 1 "$(ls -A "$SPACE_STATE_DIR/templates" | grep -c '^\.tmp-')"
start_daemon
check_eq "the next start removed it" "" "$(ls -A "$SPACE_STATE_DIR/templates" | grep -v '^sha256-')"
check_fails "no tag was made" sc template inspect t17/crash:1
check_eq "builtins are imported once, not at every start (minimal's config.json untouched)" "$MIN_BEFORE" \
        "$(stat -c '%y %s' "$MIN_CONF" 2>&1)"
check_rc "the import works after the restart" 0 sc template import "$IMG/crash.tar" --tag t17/crash:1 -q
check_match "... and prints its digest" "$DIGEST_RE" "$(cat "$OUT")"

# ---- the API: 202 with an operation that reports progress, then its result
cat >"$TEST_TMP/body.json" <<EOF
{"source": "$IMG/r.tar.xz", "tag": "t17/api:1", "config": {"env": ["A=1"], "disk_mib": 2048}}
EOF
python3 - "$SPACE_SOCKET" "$TEST_TMP/body.json" >"$TEST_TMP/api.out" 2>&1 <<'PYEOF'
import json, socket, sys, time
def req(method, path, body=None):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
    data = json.dumps(body).encode() if body is not None else b""
    s.sendall(("%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
               "Content-Length: %d\r\n\r\n" % (method, path, len(data))).encode() + data)
    buf = b""
    while True:
        b = s.recv(65536)
        if not b: break
        buf += b
    head, _, body = buf.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)
st, o = req("POST", "/v1/templates/import", json.load(open(sys.argv[2])))
print("status", st)
op = o["operation"]
print("kind", op["kind"])
print("progress" if "progress" in op or op["state"] == "succeeded" else "no-progress")
st, op = req("GET", "/v1/operations/%s?wait=120" % op["id"])
print("state", op["state"])
print("result", sorted(op["result"].keys()))
print("tags", op["result"]["tags"])
st, t = req("GET", "/v1/templates/t17/api:1")
print("disk", t["disk_mib"], t["config"]["env"])
st, e = req("POST", "/v1/templates/import", {"source": "relative.tar"})
print("relative", st, e["code"])
st, e = req("POST", "/v1/templates/import", {"source": "/no/such.tar", "tag": "Bad:Tag"})
print("badtag", st, e["code"])
st, e = req("POST", "/v1/templates/import", {"source": sys.argv[2], "config": {"vcpu": 0}})
print("badconfig", st, e["code"])
st, e = req("DELETE", "/v1/templates/t17/no-such")
print("unknown", st, e["code"])
PYEOF
check_eq "POST /v1/templates/import: 202, an import operation with progress, a result, the defaults" \
"status 202
kind import
progress
state succeeded
result ['digest', 'dropped', 'existed', 'files', 'image_bytes', 'size_bytes', 'tags']
tags ['t17/api:1', 't17/rootfs:r-tar', 't17/rootfs:r-tar-gz', 't17/rootfs:r-tar-xz', 't17/rootfs:r-tar-zst', 'team/python:3.12']
disk 2048 ['A=1']
relative 400 invalid_argument
badtag 400 invalid_ref
badconfig 400 invalid_argument
unknown 404 template_not_found" "$(cat "$TEST_TMP/api.out")"

done_testing
