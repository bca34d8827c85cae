#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Volumes (issue 26, stage 1: the host side): spacectl volume create/ls/rm and /v1/volumes with its file routes,
# over the socket and TCP. Names are checked, a name is taken once, the quota refuses a write whole (nothing
# left behind), whole files are streamed (5 MiB read back; the quota passed mid-stream, a Content-Length over
# it, a client gone mid-upload and a wrong token leave no temporary file), and what an attacker plants in a volume's directory (symlinks to /etc/passwd, to a file or a
# directory outside, relative ones that climb) is never followed out by a read, write, list, mkdir or remove;
# ".." and over-long paths are refused. volume_entries_max bounds the entries of a volume (empty files and
# directories the quota does not count): past it a write or a mkdir is 507, nothing made. A restart keeps the volumes, their files and their usage (counted
# again by a walk). Mounts into sandboxes are checked (t55 mounts them in VMs). E2B's /volumes and
# /volumecontent are tested with the real SDKs in tests/e2b (t45). No VM.
. "$(dirname "$0")/lib.sh"

space_env_setup
tcp_config
start_daemon_tcp
API_KEY=$(mint_key t54)
[ -n "$API_KEY" ] || bail_out "no API key"
JSON=(-H 'Content-Type: application/json')

# ---- create, ls, duplicate and bad names
check_rc "volume create data" 0 sc volume create data
VID=$(cat "$OUT")
check_match "... prints its id, vol-<16 hex>" '^vol-[0-9a-f]{16}$' "$VID"
check_contains "... and says so on stderr" "Created volume data." "$ERR"
check_eq "its directory is in the state directory, 0700" 700 "$(stat -c %a "$SPACE_STATE_DIR/volume-data/$VID" 2>&1)"
check_rc "volume create small --quota 1K" 0 sc volume create small --quota 1K
check_rc "volume ls" 0 sc volume ls
check_match "ls shows NAME ID USED QUOTA CREATED" '^NAME +ID +USED +QUOTA +CREATED' "$(head -n1 "$OUT")"
check_match "... data with the default quota of 1G, nothing used" "^data +$VID +0B +1.0G " "$(sed -n 2p "$OUT")"
check_match "... small with 1K" '^small +vol-[0-9a-f]{16} +0B +1.0K ' "$(sed -n 3p "$OUT")"
run sc volume ls -q
check_eq "volume ls -q prints the names" "data small" "$(tr '\n' ' ' <"$OUT" | sed 's/ $//')"
check_rc "volume ls --json" 0 sc volume ls --json
check_eq "... id, name, quota, usage" "[\"$VID\", \"data\", 1073741824, 0]" \
        "$(json "$OUT" '[d["volumes"][0][k] for k in ("id", "name", "quota", "usage")]')"
check_fails "a second volume named data is refused" sc volume create data
check_contains "... saying the name is taken" "already a volume named 'data'" "$ERR"
ureq POST /v1/volumes "${JSON[@]}" -d '{"name": "data"}'
check_status "POST /v1/volumes with a taken name: 409 name_in_use" 409 name_in_use
for bad in '../x' 'a/b' '' '-x' '.hidden' "$(printf 'x%.0s' $(seq 64))" 'vol-0123456789abcdef' 'a b' 'a%00b'; do
        ureq POST /v1/volumes "${JSON[@]}" -d "{\"name\": \"$bad\"}"
        check_status "volume name '${bad:0:20}' is refused: 400 invalid_argument" 400 invalid_argument
done
check_eq "... and none of them made a directory" 2 "$(ls "$SPACE_STATE_DIR/volume-data" | wc -l)"
ureq POST /v1/volumes "${JSON[@]}" -d '{"name": "q0", "quota": 0}'
check_status "quota 0 is refused" 400 invalid_argument
check_fails "--quota 12Q is refused by spacectl" sc volume create q --quota 12Q
ureq GET /v1/volumes/..%2Fx
check_match "GET /v1/volumes/..%2Fx is refused (400 or 404)" '^40[04]$' "$STATUS"

# ---- files: write, read, ranges, stat, list, mkdir, move, attrs, remove
F=/v1/volumes/data/files
printf 'hello volume\n' >"$TEST_TMP/hello"
ureq PUT "$F?path=/docs/a/hello.txt&parents=1&mode=0640&uid=1000&gid=1000" --data-binary @"$TEST_TMP/hello"
check_status "PUT a file with parents=1" 200
check_eq "... its entry: name, type, path, size, mode, uid, gid" '["hello.txt", "file", "/docs/a/hello.txt", 13, 416, 1000, 1000]' \
        "$(json "$OUT" '[d[k] for k in ("name", "type", "path", "size", "mode", "uid", "gid")]')"
ureq GET "$F?path=docs/a/hello.txt"
check_eq "GET reads it back (a path without its leading slash too)" "hello volume" "$(cat "$OUT")"
ureq GET "$F?path=/docs/a/hello.txt&offset=6&length=6"
check_eq "... a range: offset=6 length=6" "volume" "$(cat "$OUT")"
ureq GET "$F?path=/docs/./a//hello.txt"
check_eq "... '.' and '//' are the same path" "hello volume" "$(cat "$OUT")"
ureq GET "$F?path=/docs"
check_status "GET of a directory: 400 is_a_directory" 400 is_a_directory
ureq GET "$F?path=/nope"
check_status "GET of nothing: 404 not_found" 404 not_found
ureq GET "$F/stat?path=/docs/a"
check_status "stat of a directory" 200
check_eq "... type directory, the default mode 0755" '["directory", 493]' "$(json "$OUT" '[d["type"], d["mode"]]')"
ureq POST "$F/mkdir" "${JSON[@]}" -d '{"path": "/docs/b/c", "parents": true, "mode": 448}'
check_status "mkdir with parents" 201
ureq POST "$F/mkdir" "${JSON[@]}" -d '{"path": "/docs/b"}'
check_status "mkdir of one that exists: 409 exists" 409 exists
ureq GET "$F/list?path=/docs"
check_eq "list: one level, sorted" '["/docs/a", "/docs/b"]' "$(json "$OUT" '[e["path"] for e in d["entries"]]')"
ureq GET "$F/list?path=/docs&depth=3"
check_eq "list depth=3" '["/docs/a", "/docs/a/hello.txt", "/docs/b", "/docs/b/c"]' "$(json "$OUT" '[e["path"] for e in d["entries"]]')"
ureq POST "$F/move" "${JSON[@]}" -d '{"from": "/docs/a/hello.txt", "to": "/docs/b/hi.txt"}'
check_status "move" 204
ureq GET "$F?path=/docs/b/hi.txt"
check_eq "... the file is at its new path" "hello volume" "$(cat "$OUT")"
ureq POST "$F/attrs" "${JSON[@]}" -d '{"path": "/docs/b/hi.txt", "mode": 420, "uid": 0}'
check_eq "attrs sets mode and uid, keeps gid" '[420, 0, 1000]' "$(json "$OUT" '[d["mode"], d["uid"], d["gid"]]')"
check_eq "... on the host the file stays the daemon's, 0600" 600 "$(stat -c %a "$SPACE_STATE_DIR/volume-data/$VID/docs/b/hi.txt")"
ureq PUT "$F?path=/docs/b/hi.txt&exclusive=1" --data-binary x
check_status "exclusive=1 over a file: 409 exists" 409 exists
ureq PUT "$F?path=/log.txt" --data-binary 'abc'
ureq PUT "$F?path=/log.txt&offset=3" --data-binary 'def'
ureq GET "$F?path=/log.txt"
check_eq "a write at an offset appends in place" "abcdef" "$(cat "$OUT")"
ureq DELETE "$F?path=/docs"
check_status "remove a directory and all in it" 204
ureq GET "$F/stat?path=/docs"
check_status "... it is gone" 404 not_found
ureq DELETE "$F?path=/"
check_status "removing the root is refused" 400 invalid_path

# ---- quota: refused whole, nothing left behind
S=/v1/volumes/small/files
head -c 600 /dev/zero >"$TEST_TMP/600"
head -c 900 /dev/zero >"$TEST_TMP/900"
ureq PUT "$S?path=/a" --data-binary @"$TEST_TMP/600"
check_status "600 bytes into a 1K volume" 200
ureq PUT "$S?path=/b" --data-binary @"$TEST_TMP/600"
check_status "600 more: 507 quota_exceeded" 507 quota_exceeded
check_contains "... the message names the volume, its usage and quota" "volume 'small' holds 600 of its quota of 1024 bytes" "$OUT"
SID=$(json <(curl -s --unix-socket "$SPACE_SOCKET" http://localhost/v1/volumes/small) 'd["id"]')
check_eq "... nothing was left in the volume's directory (no file, no temporary)" "a" "$(ls -A "$SPACE_STATE_DIR/volume-data/$SID" | tr '\n' ' ' | sed 's/ $//')"
ureq PUT "$S?path=/a&offset=500" --data-binary @"$TEST_TMP/600"
check_status "a write at an offset past the quota: 507" 507 quota_exceeded
check_eq "... the file kept its size" 600 "$(stat -c %s "$SPACE_STATE_DIR/volume-data/$SID/a")"
ureq PUT "$S?path=/a" --data-binary @"$TEST_TMP/900"
check_status "replacing the 600-byte file with 900 bytes fits (the old size is given back)" 200
ureq GET /v1/volumes/small
check_eq "usage is 900, in 1 entry" "[900, 1]" "$(json "$OUT" '[d["usage"], d["entries"]]')"
ureq DELETE "$S?path=/a"
ureq GET /v1/volumes/small
check_eq "a remove gives it back: usage 0, no entries" "[0, 0]" "$(json "$OUT" '[d["usage"], d["entries"]]')"

# ---- whole files are streamed into the volume: no limit but the quota, nothing left by a failure
head -c $((5 * 1024 * 1024)) /dev/urandom >"$TEST_TMP/big"
ureq PUT "$F?path=/big" --data-binary @"$TEST_TMP/big"
check_status "a 5 MiB file in one PUT (streamed)" 200
check_eq "... its entry says 5242880 bytes" 5242880 "$(json "$OUT" 'd["size"]')"
ureq GET "$F?path=/big"
check_eq "... read back: the same sha256" "$(sha256sum <"$TEST_TMP/big" | cut -d' ' -f1)" "$(sha256sum <"$OUT" | cut -d' ' -f1)"
kreq PUT "$F?path=/big-tcp" --data-binary @"$TEST_TMP/big"
check_status "... and over TCP with a key" 200
ureq GET "$F?path=/big-tcp"
check_eq "... read back: the same sha256" "$(sha256sum <"$TEST_TMP/big" | cut -d' ' -f1)" "$(sha256sum <"$OUT" | cut -d' ' -f1)"
ureq PUT "$F?path=/.space-write-0123456789abcdef" --data-binary x
check_status "the hidden name of a write in progress is the daemon's: 400" 400 invalid_path
head -c $((1024 * 1024 + 1)) /dev/zero >"$TEST_TMP/1m1"
ureq PUT "$F?path=/big&offset=0" --data-binary @"$TEST_TMP/1m1"
check_status "a write at an offset is still at most 1 MiB: 413" 413 payload_too_large
check_rc "volume create mid" 0 sc volume create mid
MID=$(cat "$OUT")
check_rc "volume create mid3 --quota 3M" 0 sc volume create mid3 --quota 3M
MID3=$(cat "$OUT")
MD=$SPACE_STATE_DIR/volume-data/$MID3
ureq PUT "/v1/volumes/mid3/files?path=/small" --data-binary x
ureq PUT "/v1/volumes/mid3/files?path=/f" -H 'Transfer-Encoding: chunked' --data-binary @"$TEST_TMP/big"
check_status "5 MiB without a Content-Length into a 3 MiB volume: refused as it passes the quota" 507 quota_exceeded
check_contains "... saying where it passed it" "passed it at" "$OUT"
check_eq "... nothing left in the volume's directory (no temporary file)" "small" "$(ls -A "$MD" | tr '\n' ' ' | sed 's/ $//')"
ureq GET /v1/volumes/mid3
check_eq "... the usage unchanged: 1" 1 "$(json "$OUT" 'd["usage"]')"

# raw HTTP over TCP, to see what happens before and during a body: early answers, a client that goes away
cat >"$TEST_TMP/rawput.py" <<'PY'
import os, socket, sys, time
port, path, auth, mode, watch = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
size = 5 * 1024 * 1024
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(f"PUT {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {auth}\r\n"
          f"Content-Type: application/octet-stream\r\nContent-Length: {size}\r\n"
          f"{'Expect: 100-continue' + chr(13) + chr(10) if mode == 'early' else ''}\r\n".encode())
def temps():
    return [n for n in os.listdir(watch) if n.startswith(".space-write-")]
if mode == "early":
    # no byte of the body is sent: an answer now was decided from the headers
    print(s.recv(4096).split(b"\r\n")[0].decode())
elif mode == "nobody":
    # the body starts: a request refused from its headers must not have made a file, even while it is sent
    try:
        s.sendall(b"\0" * (1024 * 1024))
    except OSError:
        pass
    time.sleep(0.5)
    print(len(temps()), s.recv(4096).split(b"\r\n")[0].decode())
elif mode == "drop":
    # half the body, then the client goes away
    s.sendall(b"\0" * (size // 2))
    for _ in range(100):
        if temps():
            break
        time.sleep(0.1)
    print("during", len(temps()))
    s.close()
    for _ in range(100):
        if not temps():
            break
        time.sleep(0.1)
    print("after", len(temps()))
PY
raw() { python3 "$TEST_TMP/rawput.py" "$API_PORT" "$@" >"$OUT" 2>"$ERR"; }
raw "/v1/volumes/mid3/files?path=/early" "$API_KEY" early "$MD"
check_eq "a Content-Length over the quota left is refused before the body is sent (Expect: 100-continue)" "HTTP/1.1 507 Insufficient Storage" "$(cat "$OUT")"
raw "/v1/volumes/mid/files?path=/gone" "$API_KEY" drop "$SPACE_STATE_DIR/volume-data/$MID"
check_eq "a client that goes away mid-upload: its temporary file was there, then is gone" "during 1 after 0" "$(tr '\n' ' ' <"$OUT" | sed 's/ $//')"
ureq GET /v1/volumes/mid
check_eq "... the usage is 0" 0 "$(json "$OUT" 'd["usage"]')"
ureq GET "/v1/volumes/mid/files/stat?path=/gone"
check_status "... and there is no file" 404 not_found
raw "/volumecontent/$MID/file?path=/x" "not-the-token" nobody "$SPACE_STATE_DIR/volume-data/$MID"
check_eq "a big PUT to E2B's volume content API with a wrong token: 401, and no file made while it sends" "0 HTTP/1.1 401 Unauthorized" "$(cat "$OUT")"
check_eq "... nothing in the volume's directory" "" "$(ls -A "$SPACE_STATE_DIR/volume-data/$MID")"
check_rc "volume rm mid mid3" 0 sc volume rm mid mid3

# ---- the attacker's tries: links planted in the host directory, '..', huge paths
V=$SPACE_STATE_DIR/volume-data/$VID
echo keep >"$TEST_TMP/outside.txt"
echo state-outside >"$SPACE_STATE_DIR/outside.txt"
ln -s /etc/passwd "$V/passwd-link"
ln -s "$TEST_TMP/outside.txt" "$V/abs-link"
ln -s "$TEST_TMP" "$V/dir-link"
ln -s ../../outside.txt "$V/rel-link"
ln -s ../../../../../../../../.. "$V/up-link"
ln -s /proc/self/root "$V/proc-link"
for l in passwd-link abs-link rel-link dir-link/outside.txt proc-link/etc/passwd; do
        ureq GET "$F?path=/$l"
        check_status "read through $l stays in the volume: 404" 404 not_found
done
check_eq "... and no answer held /etc/passwd or the outside files" "" \
        "$(grep -l -e 'root:' -e keep -e state-outside "$OUT" 2>/dev/null)"
ureq GET "$F/list?path=/up-link"
check_status "list through a link that climbs: the volume's own root at most" 200
check_eq "... it lists the volume, not the host's /" true "$(json "$OUT" 'any(e["name"] == "passwd-link" for e in d["entries"]) and not any(e["name"] in ("etc", "usr") for e in d["entries"])')"
ureq GET "$F/list?path=/dir-link"
check_status "list through a link to a directory outside: 404" 404 not_found
ureq GET "$F/stat?path=/abs-link"
check_eq "stat shows the link itself, with its target" "[\"symlink\", \"$TEST_TMP/outside.txt\"]" "$(json "$OUT" '[d["type"], d["target"]]')"
ureq PUT "$F?path=/abs-link" --data-binary owned
check_status "a write to a planted link is refused" 400 invalid_path
ureq PUT "$F?path=/rel-link" --data-binary owned
check_status "... a relative one too" 400 invalid_path
ureq PUT "$F?path=/dir-link/new.txt" --data-binary owned
check_status "a write under a link to a directory outside: 404" 404 not_found
ureq PUT "$F?path=/dir-link/deep/new.txt&parents=1" --data-binary owned
check_match "... with parents=1 too (refused)" '^4' "$STATUS"
ureq POST "$F/mkdir" "${JSON[@]}" -d '{"path": "/dir-link/made", "parents": true}'
check_match "mkdir under a link to a directory outside is refused" '^4' "$STATUS"
ureq POST "$F/attrs" "${JSON[@]}" -d '{"path": "/abs-link", "mode": 511}'
check_status "attrs on a link is refused" 400 invalid_path
ureq POST "$F/move" "${JSON[@]}" -d '{"from": "/dir-link/outside.txt", "to": "/stolen"}'
check_status "move of a file outside through a link: 404" 404 not_found
check_eq "the outside files are untouched" "keep state-outside" "$(cat "$TEST_TMP/outside.txt" "$SPACE_STATE_DIR/outside.txt" | tr '\n' ' ' | sed 's/ $//')"
check_eq "... nothing was made outside" "" "$(ls -d "$TEST_TMP/new.txt" "$TEST_TMP/deep" "$TEST_TMP/made" 2>/dev/null)"
ureq DELETE "$F?path=/dir-link"
check_status "remove of a link to a directory removes the link" 204
check_eq "... not what it pointed to" keep "$(cat "$TEST_TMP/outside.txt")"
ureq DELETE "$F?path=/abs-link"
check_eq "remove of a link to a file: the file stays" keep "$(cat "$TEST_TMP/outside.txt")"
for p in '/../../etc/passwd' '/a/../../x' '..' '/docs/..'; do
        ureq GET "$F?path=$p"
        check_status "path '$p' is refused: 400 invalid_path" 400 invalid_path
done
ureq GET "$F?path=/$(printf 'a%.0s' $(seq 300))"
check_status "a 300-byte name: 400 invalid_path" 400 invalid_path
ureq GET "$F?path=$(printf '/aaaaaaa%.0s' $(seq 600))"
check_status "a 4800-byte path: 400 invalid_path" 400 invalid_path
ureq PUT "$F?path=/x&mode=99999" --data-binary x
check_status "mode=99999 is refused" 400 invalid_argument

# ---- over TCP: a key is needed
req GET /v1/volumes
check_status "GET /v1/volumes over TCP without a key: 401" 401
kreq GET "$F?path=/log.txt"
check_eq "... with the key it reads" "abcdef" "$(cat "$OUT")"

# ---- mounts into sandboxes: checked before anything else (t55 mounts them)
ureq POST /v1/sandboxes "${JSON[@]}" -d '{"template": "minimal", "volume_mounts": [{"name": "nope", "path": "/data"}]}'
check_status "a mount of a volume that does not exist: 404 volume_not_found" 404 volume_not_found
ureq POST /v1/sandboxes "${JSON[@]}" -d '{"template": "minimal", "volume_mounts": [{"name": "data", "path": "data"}]}'
check_status "a relative mount path: 400 invalid_path" 400 invalid_path
ureq POST /v1/sandboxes "${JSON[@]}" -d '{"template": "minimal", "volume_mounts": [{"name": "data", "path": "/proc/x"}]}'
check_status "a mount under /proc: 400 invalid_path" 400 invalid_path
ureq POST /v1/sandboxes "${JSON[@]}" -d '{"template": "minimal", "volume_mounts": [{"name": "data", "path": "/a"}, {"name": "small", "path": "/a/b"}]}'
check_status "a mount under another: 400 invalid_path" 400 invalid_path
ureq POST /v1/sandboxes "${JSON[@]}" -d '{"template": "minimal", "volume_mounts": [{"name": "data", "path": "/a"}, {"name": "data", "path": "/b"}]}'
check_status "a volume mounted twice: 400 invalid_argument" 400 invalid_argument
ureq POST /v1/sandboxes "${JSON[@]}" -d '{"template": "minimal", "volume_mounts": [{"name": "da:ta", "path": "/a"}]}'
check_status "a name with ':': 404 volume_not_found" 404 volume_not_found
check_eq "... and no sandbox was made" 0 "$(sandbox_count)"

# ---- restart: volumes, files and usage kept; the walk counts the usage again
ureq PUT "$S?path=/keep" --data-binary @"$TEST_TMP/600"
mkdir "$SPACE_STATE_DIR/volume-data/vol-00000000000000ff" && echo left >"$SPACE_STATE_DIR/volume-data/vol-00000000000000ff/f"
PID=$(daemon_pid)
kill -TERM "$PID"
wait_for 30 pid_gone "$PID" || bail_out "spaced did not stop"
write_config "listen = 127.0.0.1:$API_PORT" "volume_quota = 2K" "volume_entries_max = 4"
start_daemon_tcp
check "a volume directory no row names is removed at start" test ! -e "$SPACE_STATE_DIR/volume-data/vol-00000000000000ff"
run sc volume ls -q
check_eq "after a restart both volumes are there" "data small" "$(tr '\n' ' ' <"$OUT" | sed 's/ $//')"
ureq GET "$F?path=/log.txt"
check_eq "... with their files" "abcdef" "$(cat "$OUT")"
ureq GET /v1/volumes/small
check_eq "... the usage counted again by a walk: 600" 600 "$(json "$OUT" 'd["usage"]')"
ureq PUT "$S?path=/b" --data-binary @"$TEST_TMP/600"
check_status "... and the quota still holds after the restart" 507 quota_exceeded
check_rc "volume create after volume_quota = 2K" 0 sc volume create dflt
ureq GET /v1/volumes/dflt
check_eq "... gets 2048 bytes" 2048 "$(json "$OUT" 'd["quota"]')"

# ---- the bound on entries (volume_entries_max = 4 since the restart): empty files and directories cost the
# host inodes the quota does not count
ureq GET /v1/volumes/data
check_eq "the walk after the restart counts data's entries as find does" \
        "$(find "$SPACE_STATE_DIR/volume-data/$VID" -mindepth 1 | wc -l)" "$(json "$OUT" 'd["entries"]')"
D=/v1/volumes/dflt/files
ureq GET /v1/volumes/dflt
DDIR="$SPACE_STATE_DIR/volume-data/$(json "$OUT" 'd["id"]')"
ureq POST "$D/mkdir" "${JSON[@]}" -d '{"path": "/a"}'
check_status "dflt: mkdir /a (1 of 4 entries)" 201
ureq PUT "$D?path=/a/f" --data-binary ''
check_status "... an empty file in it (2)" 200
ureq PUT "$D?path=/b" --data-binary 'b'
check_status "... another (3)" 200
ureq POST "$D/mkdir" "${JSON[@]}" -d '{"path": "/c/d", "parents": true}'
check_status "mkdir -p of two with room for one: 507 quota_exceeded" 507 quota_exceeded
check_contains "... the message names the bound" "volume_entries_max (spaced.conf) bounds a volume to 4" "$OUT"
check "... and nothing was made" test ! -e "$DDIR/c"
ureq POST "$D/mkdir" "${JSON[@]}" -d '{"path": "/c"}'
check_status "mkdir /c (4)" 201
ureq PUT "$D?path=/e" --data-binary ''
check_status "a fifth, empty file: 507 quota_exceeded" 507 quota_exceeded
check "... nothing made" test ! -e "$DDIR/e"
ureq PUT "$D?path=/e&offset=0" --data-binary 'e'
check_status "... nor at an offset" 507 quota_exceeded
ureq POST "$D/mkdir" "${JSON[@]}" -d '{"path": "/c/x"}'
check_status "... nor a directory" 507 quota_exceeded
check_eq "... the volume's directory holds the 4" "a a/f b c" "$(cd "$DDIR" && find . -mindepth 1 | sed 's|^\./||' | sort | tr '\n' ' ' | sed 's/ $//')"
ureq PUT "$D?path=/b" --data-binary 'bb'
check_status "replacing a file is no new entry" 200
ureq POST "$D/move" "${JSON[@]}" -d '{"from": "/a/f", "to": "/b"}'
check_status "a move onto a file: one entry fewer" 204
ureq PUT "$D?path=/e" --data-binary ''
check_status "... so a new file fits again" 200
ureq DELETE "$D?path=/c"
ureq DELETE "$D?path=/a"
ureq GET /v1/volumes/dflt
check_eq "removals give entries back: b and e left" 2 "$(json "$OUT" 'd["entries"]')"

# ---- rm
check_rc "volume rm data small" 0 sc volume rm data small
check_eq "... prints the names" "data small" "$(tr '\n' ' ' <"$OUT" | sed 's/ $//')"
check_eq "... their directories are gone" "" "$(ls -d "$V" "$SPACE_STATE_DIR/volume-data/$SID" 2>/dev/null)"
ureq GET /v1/volumes/data
check_status "GET of a removed volume: 404 volume_not_found" 404 volume_not_found
check_fails "volume rm of one that is not there fails" sc volume rm data
check_eq "the outside files survived it all" "keep" "$(cat "$TEST_TMP/outside.txt")"

done_testing
