#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Volumes mounted into sandboxes (issue 26, stage 2): `create --volume NAME:/PATH` mounts a volume as a FUSE file
# system that the guest's agent serves through the daemon, path by path. Files written in one sandbox are read
# in another and through the API, and the other way round; a rename of a directory, symlinks, chmod and chown
# (kept as the volume's metadata, the host files staying the daemon's 0600), a 3 MiB file read back by hash,
# statfs from the quota, and a write past the quota failing with ENOSPC in the guest with the host's files
# within the quota. A volume a sandbox mounts cannot be removed (CLI and API: 409 volume_in_use naming it).
# The mount outlives a pause, a suspend and wake, a checkpoint and a restore, a fork (whose child writes to
# the same volume), a stop and start (mounted again at the cold boot), and a kill -9 of the daemon while a
# guest's read of the volume waits for it. Refusals: no such volume, bad paths, twice, under another.
. "$(dirname "$0")/lib.sh"

space_env_setup
start_daemon
JSON=(-H 'Content-Type: application/json')

kill_daemon() {
        local old
        old=$(daemon_pid)
        kill -KILL "$old"
        wait_for 10 pid_gone "$old" || fail "spaced died on SIGKILL"
}

# gx SANDBOX SHELL-LINE: runs it in the guest, stdout in $OUT, exit status in $RC
gx() {
        run sc exec "$1" -- sh -c "$2"
}

check_rc "volume create data" 0 sc volume create data
DATA_ID=$(cat "$OUT")
check_rc "volume create tiny --quota 1M" 0 sc volume create tiny --quota 1M
TINY_ID=$(cat "$OUT")

# ---- refusals, before any VM is made
check_fails "--volume without a path is refused" sc create --volume data
check_contains "... saying what it takes" "NAME:/PATH" "$ERR"
check_fails "--volume of a volume that does not exist" sc create --volume nope:/data
check_contains "... names it" "no volume 'nope'" "$ERR"
check_fails "--volume at / is refused" sc create --volume data:/
check_fails "--volume under /proc is refused" sc create --volume data:/proc/x
check_fails "the same volume twice is refused" sc create --volume data:/a --volume data:/b
check_contains "... saying so" "mounted twice" "$ERR"
check_fails "a mount under another one is refused" sc create --volume data:/a --volume tiny:/a/b
check_eq "no sandbox was made by any of them" 0 "$(sandbox_count)"

# ---- one sandbox with two volumes
create_sandbox A --name t55a --volume data:/data --volume tiny:/tiny
[ -n "$A" ] || { last_diag; bail_out "create with volumes failed"; }
pass "create --volume data:/data --volume tiny:/tiny"
run sc inspect "$A" --json
check_eq "inspect shows both mounts" "[[\"data\", \"/data\", \"$DATA_ID\"], [\"tiny\", \"/tiny\", \"$TINY_ID\"]]" \
        "$(json "$OUT" '[[m["name"], m["path"], m["volume"]] for m in d["volume_mounts"]]')"
gx "$A" 'grep " /data " /proc/mounts'
check_match "the guest has a FUSE mount at /data" '^space-volume /data fuse(\.space)? ' "$(cat "$OUT")"

run sc exec -u 1000:1000 "$A" -- sh -c 'stat -c "%a %u" /data && echo by-a-user > /data/user.txt && stat -c "%u %g" /data/user.txt && rm /data/user.txt'
check_eq "a new volume's root is 0777: a user other than root writes there, and owns what it makes" "777 0 1000 1000" "$(tr '\n' ' ' <"$OUT" | sed 's/ $//')"
gx "$A" 'echo hello-volume > /data/hello.txt && mkdir -p /data/d/e && echo deep > /data/d/e/f && cat /data/hello.txt'
check_eq "write and read back in the guest" "hello-volume" "$(cat "$OUT")"
ureq GET "/v1/volumes/data/files?path=/hello.txt"
check_eq "the API reads what the guest wrote" "200 hello-volume" "$STATUS $(cat "$OUT")"
ureq PUT "/v1/volumes/data/files?path=/from-host.txt" --data-binary 'written-by-the-host'
gx "$A" 'cat /data/from-host.txt'
check_eq "the guest reads what the API wrote" "written-by-the-host" "$(cat "$OUT")"
gx "$A" 'mv /data/d /data/d2 && cat /data/d2/e/f && ! test -e /data/d'
check_eq "a directory renamed: what is under it follows" "deep" "$(cat "$OUT")"
gx "$A" 'head -c 3145728 /dev/urandom > /data/big && sha256sum /data/big | cut -d" " -f1'
GUEST_SUM=$(cat "$OUT")
ureq GET "/v1/volumes/data/files?path=/big"
cp "$OUT" "$TEST_TMP/big"
check_eq "3 MiB written in the guest: the host reads the same bytes" "$GUEST_SUM" "$(sha256sum "$TEST_TMP/big" | cut -d' ' -f1)"
gx "$A" 'dd if=/data/big bs=4096 skip=100 count=3 2>/dev/null | sha256sum | cut -d" " -f1'
check_eq "... and a read at an offset in the guest" \
        "$(dd if="$TEST_TMP/big" bs=4096 skip=100 count=3 2>/dev/null | sha256sum | cut -d' ' -f1)" "$(cat "$OUT")"
gx "$A" 'ln -s hello.txt /data/link && readlink /data/link && cat /data/link'
check_eq "a symlink: readlink and read through it" "hello.txt hello-volume" "$(tr '\n' ' ' <"$OUT" | sed 's/ $//')"
ureq GET "/v1/volumes/data/files/stat?path=/link"
check_eq "... the host keeps it as a symlink" "symlink hello.txt" "$(json "$OUT" 'd["type"] + " " + d["target"]')"
gx "$A" 'chmod 600 /data/hello.txt && chown 1234:567 /data/hello.txt && stat -c "%a %u %g" /data/hello.txt'
check_eq "chmod and chown in the guest" "600 1234 567" "$(cat "$OUT")"
ureq GET "/v1/volumes/data/files/stat?path=/hello.txt"
check_eq "... kept as the entry's mode and owner" "384 1234 567" "$(json "$OUT" '"%d %d %d" % (d["mode"], d["uid"], d["gid"])')"
check_eq "... the host file is still the daemon's 0600" "600 $(id -u)" \
        "$(stat -c '%a %u' "$SPACE_STATE_DIR/volume-data/$DATA_ID/hello.txt")"
gx "$A" 'printf 0123456789abcdef > /data/t && dd if=/dev/null of=/data/t bs=1 seek=4 2>/dev/null && cat /data/t'
check_eq "a truncate (dd seek)" "0123" "$(cat "$OUT")"
gx "$A" 'rmdir /data/d2/e'
check "rmdir of a directory that is not empty fails" test "$RC" -ne 0
gx "$A" 'rm /data/t /data/d2/e/f && rmdir /data/d2/e /data/d2 && ls /data | tr "\n" " "'
check_eq "rm and rmdir" "big from-host.txt hello.txt link " "$(cat "$OUT")"
gx "$A" 'mknod /data/dev c 1 3; ln /data/hello.txt /data/hard; ls /data | grep -c -e dev -e hard'
check_eq "device nodes and hard links are refused" "0" "$(cat "$OUT")"

# ---- the agent's own file operations in a mount (spacectl cp, E2B's files.*): run beside the loop that serves it
printf 'cp-content' >"$TEST_TMP/cpin"
check_rc "spacectl cp into the volume" 0 sc cp -q "$TEST_TMP/cpin" "$A:/data/cpin.txt"
ureq GET "/v1/volumes/data/files?path=/cpin.txt"
check_eq "... the volume has it" "cp-content" "$(cat "$OUT")"
check_rc "spacectl cp out of the volume" 0 sc cp -q "$A:/data/big" "$TEST_TMP/big-out"
check_eq "... the same 3 MiB" "$GUEST_SUM" "$(sha256sum "$TEST_TMP/big-out" | cut -d' ' -f1)"
gx "$A" 'ln -sfn /data /root/vlink'
check_rc "spacectl cp through a symlink that leads into the mount" 0 sc cp -q "$TEST_TMP/cpin" "$A:/root/vlink/via-link.txt"
ureq GET "/v1/volumes/data/files?path=/via-link.txt"
check_eq "... lands in the volume" "cp-content" "$(cat "$OUT")"
gx "$A" 'rm /data/cpin.txt /data/via-link.txt /root/vlink'
check_eq "... and the mount is served all along" 0 "$RC"

# ---- the quota, in the guest
gx "$A" 'df -k /tiny | tail -n1'
check_match "statfs: the quota's size (1024 KiB)" '^space-volume +1024 ' "$(cat "$OUT")"
gx "$A" 'dd if=/dev/zero of=/tiny/fill bs=65536 count=32 2>&1; echo "rc=$?"'
check_contains "a write past the quota fails with ENOSPC in the guest" "No space left on device" "$OUT"
check_contains "... and dd fails" "rc=1" "$OUT"
USED=$(du -sb "$SPACE_STATE_DIR/volume-data/$TINY_ID" | cut -f1)
check "the host's files of the volume are within its quota ($USED bytes)" test "$USED" -le $((1048576 + 4096))
run sc volume ls --json
check "... and so is the usage the daemon counts" test "$(json "$OUT" '[v["usage"] for v in d["volumes"] if v["name"] == "tiny"][0]')" -le 1048576
gx "$A" 'rm /tiny/fill && echo small > /tiny/ok && cat /tiny/ok'
check_eq "removing the file makes room again" "small" "$(cat "$OUT")"

# ---- a second sandbox shares the volume
create_sandbox B --name t55b --volume data:/mnt/shared
[ -n "$B" ] || { last_diag; bail_out "second create failed"; }
gx "$B" 'cat /mnt/shared/from-host.txt; echo; stat -c "%a %u" /mnt/shared/hello.txt'
check_eq "another sandbox reads the same files, owner and mode" "written-by-the-host 600 1234" "$(tr '\n' ' ' <"$OUT" | sed 's/ $//')"
gx "$B" 'echo from-b > /mnt/shared/b.txt'
gx "$A" 'cat /data/b.txt'
check_eq "what B wrote, A reads at its next open" "from-b" "$(cat "$OUT")"
run sc exec -u 4321:4321 "$B" -- sh -c 'echo x > /mnt/shared/hello.txt'
check "a user without the right cannot write a 0600 file of another owner" test "$RC" -ne 0
run sc exec -u 1234:567 "$B" -- sh -c 'echo owner-wrote > /mnt/shared/hello.txt && cat /mnt/shared/hello.txt'
check_eq "... its owner can" "owner-wrote" "$(cat "$OUT")"
gx "$B" 'echo hello-volume > /mnt/shared/hello.txt'


# ---- removal refused while mounted
check_fails "volume rm data while sandboxes mount it" sc volume rm data
check_contains "... names a sandbox that mounts it" "$A" "$ERR"
ureq DELETE /v1/volumes/data
check_status "DELETE /v1/volumes/data: 409 volume_in_use" 409 volume_in_use

# ---- lifecycle: the mount stays
check_rc "pause" 0 sc pause "$A"
check_rc "resume" 0 sc resume "$A"
gx "$A" 'cat /data/b.txt'
check_eq "... after a pause and resume the mount works" "from-b" "$(cat "$OUT")"
check_rc "suspend" 0 sc suspend "$A"
check_rc "wake" 0 sc wake "$A"
gx "$A" 'cat /data/hello.txt'
check_eq "... after a suspend and wake" "hello-volume" "$(cat "$OUT")"
check_rc "checkpoint A" 0 sc checkpoint --name t55cp -q "$A"
CP=$(head -n1 "$OUT")
gx "$A" 'echo after-checkpoint > /data/later.txt'
check_rc "restore A to the checkpoint" 0 sc restore "$A" "$CP"
gx "$A" 'cat /data/later.txt; grep -c " /data " /proc/mounts'
check_eq "... the mount is there and shows the volume as it is now (not as it was)" "after-checkpoint 1" "$(tr '\n' ' ' <"$OUT" | sed 's/ $//')"
check_rc "fork A" 0 sc fork -q "$A"
C=$(head -n1 "$OUT")
track_sandbox "$C"
run sc inspect "$C" --json
check_eq "the fork keeps the mounts" "/data /tiny" "$(json "$OUT" '" ".join(m["path"] for m in d["volume_mounts"])')"
gx "$C" 'echo from-fork > /data/fork.txt && cat /data/hello.txt'
check_eq "... and reads the volume" "hello-volume" "$(cat "$OUT")"
gx "$A" 'cat /data/fork.txt'
check_eq "... what the fork wrote, its parent reads" "from-fork" "$(cat "$OUT")"
check_rc "stop B" 0 sc stop "$B"
check_rc "start B" 0 sc start "$B"
gx "$B" 'cat /mnt/shared/fork.txt'
check_eq "after a stop and a start (a cold boot) the volume is mounted again" "from-fork" "$(cat "$OUT")"

# ---- the daemon killed while a guest waits on the volume
sc exec "$A" -- sh -c 'rm -f /tmp/out; (sleep 3; cat /data/hello.txt > /tmp/out 2>&1; echo "rc=$?" >> /tmp/out) </dev/null >/dev/null 2>&1 &'
kill_daemon
sleep 5
start_daemon
wait_for 30 sh -c "spacectl exec $A -- cat /tmp/out | grep -q rc=" || true
gx "$A" 'cat /tmp/out'
check_eq "a read made while the daemon was away is answered when it is back" "hello-volume rc=0" "$(tr '\n' ' ' <"$OUT" | sed 's/ $//')"
gx "$A" 'echo after-restart > /data/r.txt && cat /data/r.txt'
check_eq "... and the mount works on" "after-restart" "$(cat "$OUT")"

# ---- removal once nothing mounts it
check_rc "remove the sandboxes" 0 sc rm -f "$A" "$B" "$C"
check_rc "checkpoint rm" 0 sc checkpoint rm "$CP"
check_rc "volume rm data once no sandbox mounts it" 0 sc volume rm data tiny
check "... its files are gone" test ! -e "$SPACE_STATE_DIR/volume-data/$DATA_ID"

done_testing
