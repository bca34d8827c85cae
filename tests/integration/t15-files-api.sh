#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The files API (issue 4): every /v1/sandboxes/{id}/files route with good and bad input, checked from inside the
# guest through exec (sha256sum, stat): a chunked PUT, modes and mtimes, parents, errors before the body,
# no_space during it, an aborted upload that leaves nothing, list limits, and wake on demand.
. "$(dirname "$0")/lib.sh"

space_env_setup
start_daemon

create_sandbox SB --name t15
[ -n "$SB" ] || { last_diag; bail_out "create failed"; }
pass "create a sandbox"
F=/v1/sandboxes/$SB/files
JSON=(-H 'Content-Type: application/json')

# in_guest CMD: runs a shell command in the sandbox, prints its stdout
in_guest() {
        sc exec "$SB" -- sh -c "$1" 2>/dev/null
}

# q VALUE: URL-escapes a query value
q() {
        python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"
}

# ---- PUT and GET of a file
printf 'hello, sandbox\n' >"$TEST_TMP/small"
ureq PUT "$F?path=/root/small.txt&mode=0640&mtime=1234567890" --data-binary @"$TEST_TMP/small"
check_status "PUT a file" 201
check_eq "  ... answers its entry" "file 416 15 1234567890 /root/small.txt small.txt" \
        "$(json "$OUT" '"%s %d %d %d %s %s" % (d["type"], d["mode"], d["size"], d["mtime"], d["path"], d["name"])')"
check_eq "  ... with the mode and mtime asked for (stat in the guest)" "640 1234567890 15 0" \
        "$(in_guest 'stat -c "%a %Y %s %u" /root/small.txt')"
STATUS=$(curl -sS -D "$TEST_TMP/hdr" -o "$TEST_TMP/got" -w '%{http_code}' --unix-socket "$SPACE_SOCKET" \
        "http://localhost$F?path=/root/small.txt")
check_eq "GET it" 200 "$STATUS"
check_eq "  ... the same bytes" "$(sha256sum <"$TEST_TMP/small")" "$(sha256sum <"$TEST_TMP/got")"
check_match "  ... X-Space-Mode: 0640" '^X-Space-Mode: 0640' "$(tr -d '\r' <"$TEST_TMP/hdr")"
check_match "  ... X-Space-Mtime: 1234567890" '^X-Space-Mtime: 1234567890$' "$(tr -d '\r' <"$TEST_TMP/hdr")"
check_match "  ... chunked" '^Transfer-Encoding: chunked' "$(tr -d '\r' <"$TEST_TMP/hdr")"
if grep -qi '^Content-Length' "$TEST_TMP/hdr"; then fail "  ... without a Content-Length"; else pass "  ... without a Content-Length"; fi

# A chunked upload (curl -T - sends Transfer-Encoding: chunked) of 6 MiB, more than the channel's window.
head -c 6291456 /dev/urandom >"$TEST_TMP/rand"
STATUS=$(curl -sS -v -o "$OUT" -w '%{http_code}' --unix-socket "$SPACE_SOCKET" -T - \
        "http://localhost$F?path=/root/rand" <"$TEST_TMP/rand" 2>"$TEST_TMP/curl.log")
check_status "PUT 6 MiB chunked (curl -T -)" 201
check_match "  ... sent as Transfer-Encoding: chunked" '^> Transfer-Encoding: chunked' "$(tr -d '\r' <"$TEST_TMP/curl.log")"
check_eq "  ... sha256 in the guest equals the host's" "$(sha256sum <"$TEST_TMP/rand" | cut -d' ' -f1)" \
        "$(in_guest 'sha256sum /root/rand' | cut -d' ' -f1)"
check_eq "  ... a new file is 0644 and root's" "644 0 0" "$(in_guest 'stat -c "%a %u %g" /root/rand')"
ureq GET "$F?path=/root/rand"
check_status "GET the 6 MiB back" 200
check_eq "  ... byte for byte" "$(sha256sum <"$TEST_TMP/rand" | cut -d' ' -f1)" "$(sha256sum <"$OUT" | cut -d' ' -f1)"

ureq PUT "$F?path=/root/small.txt&uid=1000&gid=1000" --data-binary 'replaced'
check_status "PUT over an existing file with uid/gid" 201
check_eq "  ... keeps its mode, takes the owner" "640 1000 1000 replaced" \
        "$(in_guest 'stat -c "%a %u %g" /root/small.txt; cat /root/small.txt' | tr '\n' ' ' | sed 's/ $//')"
ureq PUT "$F?path=/root/a/b/c/deep.txt&parents=1&mode=4755" --data-binary 'deep'
check_status "PUT with parents=1 makes the directories" 201
check_eq "  ... and keeps setuid" "4755 deep" "$(in_guest 'stat -c %a /root/a/b/c/deep.txt; cat /root/a/b/c/deep.txt' | tr '\n' ' ' | sed 's/ $//')"
ureq PUT "$F?path=/nodir/x.txt" --data-binary 'x'
check_status "PUT into a missing directory" 404 not_found
ureq PUT "$F?path=/root/a" --data-binary 'x'
check_status "PUT onto a directory" 400 is_a_directory
ureq PUT "$F?path=/root/new/" --data-binary 'x'
check_status "PUT to a path that ends in /" 400 is_a_directory
ureq PUT "$F?path=root/x.txt" --data-binary 'x'
check_status "PUT with a relative path" 400 invalid_path
ureq PUT "$F?path=/root/x.txt&mode=999" --data-binary 'x'
check_status "PUT with a bad mode" 400 invalid_argument
# An error known from the headers comes before the body: with Expect: 100-continue, none of it is sent.
STATUS=$(curl -sS -v -o "$OUT" -w '%{http_code}' --unix-socket "$SPACE_SOCKET" -T "$TEST_TMP/rand" \
        -H 'Expect: 100-continue' "http://localhost$F?path=/nodir/big" 2>"$TEST_TMP/curl.log")
check_status "PUT 6 MiB into a missing directory" 404 not_found
if grep -q '< HTTP/1.1 100' "$TEST_TMP/curl.log"; then
        fail "  ... is refused before the body (no 100 Continue)" "$(grep '^[<>] HTTP' "$TEST_TMP/curl.log")"
else pass "  ... is refused before the body (no 100 Continue)"; fi

# ---- GET errors
ureq GET "$F?path=/root/nope"
check_status "GET a missing file" 404 not_found
ureq GET "$F?path=/root"
check_status "GET a directory" 400 is_a_directory
ureq GET "$F?path=/dev/null"
check_status "GET a device" 400 invalid_path
ureq GET "$F"
check_status "GET without a path" 400 invalid_path
ureq GET "$F?path=/root%00/x"
check_status "GET with a NUL in the path" 400 invalid_path
ureq GET "$F?path=/$(head -c 4200 /dev/zero | tr '\0' a)"
check_status "GET with a path over 4096 bytes" 400 invalid_path
ureq GET "/v1/sandboxes/nosuchsandbox/files?path=/etc/passwd"
check_status "GET in an unknown sandbox" 404 sandbox_not_found
ureq GET "/v1/sandboxes/bad%20id/files?path=/etc/passwd"
check_status "GET with a malformed sandbox id" 400 invalid_argument

# ---- stat
ureq GET "$F/stat?path=/root/a/b/c/deep.txt"
check_status "stat" 200
check_eq "  ... the entry" "/root/a/b/c/deep.txt deep.txt file 2541 4 0 0" \
        "$(json "$OUT" '"%s %s %s %d %d %d %d" % (d["path"], d["name"], d["type"], d["mode"], d["size"], d["uid"], d["gid"])')"
ureq GET "$F/stat?path=/root/nope"
check_status "stat a missing path" 404 not_found
ureq GET "$F/stat?path=relative"
check_status "stat a relative path" 400 invalid_path

# ---- mkdir
ureq POST "$F/mkdir" "${JSON[@]}" -d '{"path": "/root/d1", "mode": "0750"}'
check_status "mkdir" 201
check_eq "  ... a directory with mode 0750" "dir 488" "$(json "$OUT" '"%s %d" % (d["type"], d["mode"])')"
check_eq "  ... in the guest" "750 directory" "$(in_guest 'stat -c "%a %F" /root/d1')"
ureq POST "$F/mkdir" "${JSON[@]}" -d '{"path": "/root/d1"}'
check_status "mkdir of an existing directory" 409 exists
ureq POST "$F/mkdir" "${JSON[@]}" -d '{"path": "/root/d1", "parents": true}'
check_status "  ... with parents it is fine" 201
ureq POST "$F/mkdir" "${JSON[@]}" -d '{"path": "/root/p/q/r", "parents": true, "mode": 1023, "uid": 1000, "gid": 1000}'
check_status "mkdir with parents, sticky mode and an owner" 201
check_eq "  ... in the guest" "1777 1000 1000" "$(in_guest 'stat -c "%a %u %g" /root/p/q/r')"
ureq POST "$F/mkdir" "${JSON[@]}" -d '{"path": "/root/x/y"}'
check_status "mkdir without parents under a missing directory" 404 not_found
ureq POST "$F/mkdir" "${JSON[@]}" -d '{"path": "/root/d2", "colour": "blue"}'
check_status "mkdir with an unknown field" 400 invalid_argument
ureq POST "$F/mkdir" "${JSON[@]}" -d '{"path": "d2"}'
check_status "mkdir of a relative path" 400 invalid_path
ureq POST "$F/mkdir" "${JSON[@]}" -d '{"path": "/root/a\u0000b"}'
check_status "mkdir of a path with an escaped NUL" 400 invalid_path

# ---- symlink and attrs
ureq POST "$F/symlink" "${JSON[@]}" -d '{"path": "/root/link", "target": "../etc"}'
check_status "symlink" 201
check_eq "  ... its entry" "symlink ../etc" "$(json "$OUT" '"%s %s" % (d["type"], d["target"])')"
check_eq "  ... in the guest" "../etc" "$(in_guest 'readlink /root/link')"
ureq POST "$F/symlink" "${JSON[@]}" -d '{"path": "/root/link", "target": "/x"}'
check_status "symlink over an existing path" 409 exists
ureq GET "$F/stat?path=/root/link&follow=1"
check_eq "stat follow=1 describes the target" "dir" "$(json "$OUT" 'd["type"]')"
ureq GET "$F/stat?path=/root/link"
check_eq "stat of a symlink: its text, where it leads (resolved) and what that is" "symlink ../etc /etc dir" \
        "$(json "$OUT" '"%s %s %s %s" % (d["type"], d["target"], d["resolved"], d["target_type"])')"
ureq POST "$F/attrs" "${JSON[@]}" -d '{"path": "/root/link", "mtime": 1000000000, "uid": 1000, "gid": 1000}'
check_status "attrs on a symlink" 200
check_eq "  ... change the link, not its target" "1000000000 1000 0" \
        "$(in_guest 'stat -c "%Y %u" /root/link; stat -c %u /etc' | tr '\n' ' ' | sed 's/ $//')"
ureq POST "$F/attrs" "${JSON[@]}" -d '{"path": "/root/rand", "mode": "4700", "uid": 1000, "mtime": 86400}'
check_status "attrs on a file: setuid mode and an owner at once" 200
check_eq "  ... setuid survives the chown" "4700 1000 86400" "$(in_guest 'stat -c "%a %u %Y" /root/rand')"
ureq POST "$F/attrs" "${JSON[@]}" -d '{"path": "/root/nope", "mode": 420}'
check_status "attrs on a missing path" 404 not_found
ureq POST "$F/attrs" "${JSON[@]}" -d '{"path": "/root/rand", "mtime": "yesterday"}'
check_status "attrs with a bad mtime" 400 invalid_argument

# ---- move
ureq POST "$F/move" "${JSON[@]}" -d '{"from": "/root/small.txt", "to": "/root/d1/moved.txt"}'
check_status "move" 200
check_eq "  ... answers the destination" "/root/d1/moved.txt 416" "$(json "$OUT" '"%s %d" % (d["path"], d["mode"])')"
ureq GET "$F/stat?path=/root/small.txt"
check_status "  ... the source is gone" 404 not_found
ureq POST "$F/move" "${JSON[@]}" -d '{"from": "/root/nope", "to": "/root/x"}'
check_status "move of a missing path" 404 not_found
ureq POST "$F/move" "${JSON[@]}" -d '{"from": "/root/d1"}'
check_status "move without a destination" 400 invalid_path

# ---- list
ureq GET "$F/list?path=/root"
check_status "list" 200
check_eq "  ... the names, sorted" "a d1 link p rand" "$(json "$OUT" '" ".join(e["name"] for e in d["entries"])')"
check_eq "  ... absolute paths, symlinks not followed" "/root/link symlink ../etc" \
        "$(json "$OUT" '[("%s %s %s" % (e["path"], e["type"], e["target"])) for e in d["entries"] if e["name"] == "link"][0]')"
ureq GET "$F/list?path=/root&depth=4"
check_status "list depth=4" 200
check_eq "  ... each directory's entries after it" "/root/a /root/a/b /root/a/b/c /root/a/b/c/deep.txt /root/d1 /root/d1/moved.txt" \
        "$(json "$OUT" '" ".join(e["path"] for e in d["entries"] if e["path"].startswith(("/root/a", "/root/d1")))')"
ureq GET "$F/list?path=/root/rand"
check_status "list a file" 400 not_a_directory
ureq GET "$F/list?path=/root&depth=65"
check_status "list deeper than 64" 400 invalid_argument
ureq GET "$F/list?path=/root/nope"
check_status "list a missing directory" 404 not_found
check_rc "make 100001 files in a tmpfs" 0 sc exec "$SB" -- sh -c \
        'mkdir -p /mnt/many && mount -t tmpfs -o size=8m,nr_inodes=120000 tmpfs /mnt/many && cd /mnt/many && seq 1 100001 | xargs touch'
ureq GET "$F/list?path=/mnt/many"
check_status "list more than 100000 entries" 400 too_many_entries
check_rc "remove one" 0 sc exec "$SB" -- rm /mnt/many/100001
ureq GET "$F/list?path=/mnt/many"
check_status "list exactly 100000 entries" 200
check_eq "  ... all of them" 100000 "$(json "$OUT" 'len(d["entries"])')"
check_rc "drop the tmpfs" 0 sc exec "$SB" -- umount /mnt/many

# ---- remove
ureq DELETE "$F?path=/root/a"
check_status "remove a directory with contents" 409 not_empty
ureq DELETE "$F?path=/root/a&recursive=1"
check_status "  ... with recursive=1" 204
ureq DELETE "$F?path=/root/a"
check_status "remove it again" 404 not_found
ureq DELETE "$F?path=/root/link"
check_status "remove a symlink" 204
check_eq "  ... not its target" "directory" "$(in_guest 'stat -c %F /etc')"
ureq DELETE "$F?path=/"
check_status "remove /" 400 invalid_path

# ---- a full disk: no_space during the body, nothing left behind
check_rc "mount a 1 MiB tmpfs" 0 sc exec "$SB" -- sh -c 'mkdir -p /mnt/small && mount -t tmpfs -o size=1m tmpfs /mnt/small'
ureq PUT "$F?path=/mnt/small/big" -T "$TEST_TMP/rand"
check_status "PUT 6 MiB into it" 507 no_space
check_eq "  ... leaves no file (not even a temporary one)" "" "$(in_guest 'ls -A /mnt/small')"

# ---- an upload that is aborted leaves nothing
mkfifo "$TEST_TMP/fifo"
curl -sS -o /dev/null --unix-socket "$SPACE_SOCKET" -T - "http://localhost$F?path=/root/aborted" <"$TEST_TMP/fifo" \
        2>/dev/null &
CURL=$!
exec 7>"$TEST_TMP/fifo"
head -c 1048576 /dev/urandom >&7
temp_exists() { in_guest 'ls -A /root' | grep -q '^\.aborted\.space-'; }
if wait_for 60 temp_exists; then pass "an upload in flight writes a temporary file"; else fail "an upload in flight writes a temporary file" "$(in_guest 'ls -A /root')"; fi
kill "$CURL" 2>/dev/null
exec 7>&-
wait "$CURL" 2>/dev/null
temp_gone() { ! in_guest 'ls -A /root' | grep -q 'aborted'; }
if wait_for 30 temp_gone; then pass "  ... which is gone when the client goes away"; else fail "  ... which is gone when the client goes away" "$(in_guest 'ls -A /root')"; fi

# ---- a paused sandbox is refused, a suspended one is woken
check_rc "pause" 0 sc pause "$SB"
ureq GET "$F/stat?path=/root"
check_status "a files route on a paused sandbox" 409 sandbox_not_running
check_rc "resume" 0 sc resume "$SB"
check_rc "suspend" 0 sc suspend "$SB"
check_eq "  ... it is suspended" suspended "$(state_of "$SB")"
ureq GET "$F/stat?path=/root/d1/moved.txt"
check_status "stat in a suspended sandbox wakes it" 200
check_eq "  ... running again" running "$(state_of "$SB")"
check_rc "suspend again" 0 sc suspend "$SB"
ureq PUT "$F?path=/root/after-wake.txt" --data-binary 'awake'
check_status "PUT into a suspended sandbox wakes it" 201
check_eq "  ... and writes the file" awake "$(in_guest 'cat /root/after-wake.txt')"

check_rc "remove the sandbox" 0 sc rm -f "$SB"
done_testing
