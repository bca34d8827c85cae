#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# spacectl cp (issue 4): a tree with modes (0755, 0600, 4755), symlinks (relative, absolute, dangling), empty
# directories, mtimes and a name with spaces and unicode goes in and comes out byte for byte, also as a tar
# stream both ways; docker's destination rules in both directions; -L and -a; a hostile tree from the sandbox
# (evil -> /etc) comes out as symlinks and nothing is written through one; 1 GiB in and out with the sha256
# equal and the daemon's memory growth bounded. Issue 10: what comes out without -a has no setuid, setgid or
# sticky bit and the umask applied (with -a the modes as they are); an existing directory is never chmod'ed; a
# file that grows while it is copied and --max-bytes stop the copy; guest names are printed escaped.
. "$(dirname "$0")/lib.sh"

space_env_setup
start_daemon

# A 2560 MiB disk (grown at create): room for the 1 GiB file on the guest's own file system.
create_sandbox SB --name t16 --disk 2560
[ -n "$SB" ] || { last_diag; bail_out "create failed"; }
pass "create a sandbox"
S=t16

in_guest() {
        sc exec "$SB" -- sh -c "$1" 2>/dev/null
}

# The same listing on both sides: path|type|mode|mtime, then the sha256 of a file or the target of a symlink;
# sorted bytewise. Special files are left out (cp skips them).
LISTING='cd "$1" && find . | LC_ALL=C sort | while IFS= read -r f; do
        t=$(stat -c %F "$f" | sed "s/regular empty file/regular file/")
        case $t in fifo|socket|*special*) continue ;; esac
        l="$f|$t|$(stat -c %a "$f")|$(stat -c %Y "$f")"
        case $t in
                "regular file") l="$l|$(sha256sum <"$f" | cut -c1-64)" ;;
                "symbolic link") l="$l|$(readlink "$f")" ;;
        esac
        printf "%s\n" "$l"
done'
host_listing() {
        LC_ALL=C bash -c "$LISTING" _ "$1"
}
guest_listing() {
        sc exec "$SB" -- sh -c "$LISTING" _ "$1" 2>/dev/null
}

# ---- the tree
SRC=$TEST_TMP/src
T=$SRC/tree
mkdir -p "$T/sub/deep" "$T/empty" "$T/dir with space"
printf '#!/bin/sh\necho run\n' >"$T/run.sh" && chmod 0755 "$T/run.sh"
echo secret >"$T/secret" && chmod 0600 "$T/secret"
echo setuid >"$T/suid" && chmod 4755 "$T/suid"
echo plain >"$T/plain"
head -c 300000 /dev/urandom >"$T/sub/deep/random.bin"
printf 'ünïcödé\n' >"$T/dir with space/naïve ü – file.txt"
ln -s plain "$T/rel-link"
ln -s /etc/hostname "$T/abs-link"
ln -s does-not-exist "$T/dangling"
ln -s sub/deep "$T/dir-link"
mkfifo "$T/fifo"
touch -h -d '2001-02-03 04:05:06' "$T/plain" "$T/rel-link" "$T/sub/deep/random.bin" "$T/secret"
touch -h -d '2010-10-10 10:10:10' "$T/dangling" "$T/dir with space/naïve ü – file.txt"
touch -d '2005-05-05 05:05:05' "$T/sub/deep" "$T/sub" "$T/empty" "$T/dir with space" "$T"
host_listing "$T" >"$TEST_TMP/src.list"
# what comes out without -a: no setuid, setgid or sticky bits (the umask, 022 here, changes nothing else)
sed 's/|4755|/|755|/' "$TEST_TMP/src.list" >"$TEST_TMP/out.list"
check_match "the source tree is listed" 'naïve' "$(cat "$TEST_TMP/src.list")"

# ---- in and out
check_rc "cp the tree into the sandbox" 0 sc cp "$T" "$S:/root/"
check_match "  ... one warning for the FIFO" 'skipped 1 special file' "$(cat "$ERR")"
guest_listing /root/tree >"$TEST_TMP/guest.list"
check_eq "  ... the sandbox has it byte for byte (modes, mtimes, symlinks, sha256)" "$(cat "$TEST_TMP/src.list")" \
        "$(cat "$TEST_TMP/guest.list")"
check_eq "  ... owned by root" "0 0" "$(in_guest 'stat -c "%u %g" /root/tree/plain')"
mkdir -p "$TEST_TMP/back"
check_rc "cp it out again" 0 sc cp "$S:/root/tree" "$TEST_TMP/back"
check_eq "  ... byte for byte, without the setuid bit" "$(cat "$TEST_TMP/out.list")" "$(host_listing "$TEST_TMP/back/tree")"
mkdir -p "$TEST_TMP/back-a"
check_rc "cp -a out" 0 sc cp -a "$S:/root/tree" "$TEST_TMP/back-a"
check_eq "  ... byte for byte, with it" "$(cat "$TEST_TMP/src.list")" "$(host_listing "$TEST_TMP/back-a/tree")"
check_eq "  ... owned by the user" "$(id -u)" "$(stat -c %u "$TEST_TMP/back/tree/plain")"

# ---- tar streams
check_rc "mkdir a target for a tar stream" 0 sc exec "$SB" -- mkdir /root/fromtar
run sh -c "tar -C '$SRC' -cf - tree | timeout 120 spacectl cp - '$S:/root/fromtar'"
check_eq "cp - (a tar stream on stdin) into the sandbox" 0 "$RC" || last_diag
check_eq "  ... the same tree" "$(cat "$TEST_TMP/src.list")" "$(guest_listing /root/fromtar/tree)"
run sh -c "timeout 120 spacectl cp '$S:/root/tree' - >'$TEST_TMP/tree.tar'"
check_eq "cp SANDBOX:PATH - (a tar stream on stdout)" 0 "$RC" || last_diag
check_match "  ... a tar with the sandbox's owners" '^lrwxrwxrwx 0/0 .* tree/rel-link -> plain$' \
        "$(tar -tvf "$TEST_TMP/tree.tar" 2>&1 | sed 's/  */ /g')"
mkdir -p "$TEST_TMP/untar"
check_rc "  ... which tar extracts" 0 tar -C "$TEST_TMP/untar" -xpf "$TEST_TMP/tree.tar"
check_eq "  ... to the same tree" "$(cat "$TEST_TMP/src.list")" "$(host_listing "$TEST_TMP/untar/tree")"
run sh -c "timeout 60 spacectl cp '$S:/root/tree/.' - | tar -tf -"
check_match "SRC/. to a tar stream has the contents at the top" '^plain$' "$(cat "$OUT")"
run sh -c "printf 'not a tar' | timeout 60 spacectl cp - '$S:/root/fromtar'"
check_eq "cp - with garbage on stdin fails" 1 "$RC"
check_contains "  ... saying so" "tar stream" "$ERR"
check_fails "cp - into a file" sh -c "tar -C '$SRC' -cf - tree | timeout 60 spacectl cp - '$S:/root/tree/plain'"

# ---- docker's destination rules, into the sandbox
in_guest 'mkdir -p /root/rules/dir /root/rules/contents' >/dev/null
check_rc "file to an existing directory" 0 sc cp "$T/plain" "$S:/root/rules/dir"
check_eq "  ... goes into it" plain "$(in_guest 'cat /root/rules/dir/plain')"
check_rc "file to a new name (relative to /)" 0 sc cp "$T/plain" "$S:root/rules/newname"
check_eq "  ... is created there" plain "$(in_guest 'cat /root/rules/newname')"
check_rc "file to an existing file" 0 sc cp "$T/secret" "$S:/root/rules/newname"
check_eq "  ... replaces it (content and mode)" "secret 600" "$(in_guest 'cat /root/rules/newname; stat -c %a /root/rules/newname' | tr '\n' ' ' | sed 's/ $//')"
check_rc_msg() { check_rc "$@" && check_contains "  ... naming it" "$S" "$ERR"; }
check_rc_msg "file to a missing directory with a trailing /" 1 sc cp "$T/plain" "$S:/root/rules/nodir/"
check_rc "directory to a new name" 0 sc cp "$T" "$S:/root/rules/copy"
check_eq "  ... becomes it" plain "$(in_guest 'cat /root/rules/copy/plain')"
check_rc "directory to an existing directory" 0 sc cp "$T" "$S:/root/rules/copy"
check_eq "  ... goes into it" plain "$(in_guest 'cat /root/rules/copy/tree/plain')"
check_rc "SRC/. to an existing directory" 0 sc cp "$T/." "$S:/root/rules/contents"
check_eq "  ... copies the contents" "$(cat "$TEST_TMP/src.list")" "$(guest_listing /root/rules/contents)"
check_rc "directory to an existing file" 1 sc cp "$T" "$S:/root/rules/newname"
check_contains "  ... is refused" "cannot copy a directory to a file" "$ERR"
check_rc "into a missing directory" 1 sc cp "$T/plain" "$S:/nope/x"
check_eq "  ... names it" "spacectl: cp: sandbox '$S' has no /nope: No such file or directory" "$(cat "$ERR")"
check_rc "a missing source" 1 sc cp "$TEST_TMP/nope" "$S:/root"
check_contains "  ... names it" "$TEST_TMP/nope: No such file or directory" "$ERR"
check_rc "-L copies what a symlink points to" 0 sc cp -L "$T/rel-link" "$S:/root/rules/followed"
check_eq "  ... a regular file" "regular file plain" "$(in_guest 'stat -c %F /root/rules/followed; cat /root/rules/followed' | tr '\n' ' ' | sed 's/ $//')"
check_rc "without -L the symlink itself" 0 sc cp "$T/rel-link" "$S:/root/rules/link"
check_eq "  ... a symlink" "plain" "$(in_guest 'readlink /root/rules/link')"
check_rc "a symlink over an existing file" 0 sc cp "$T/dangling" "$S:/root/rules/newname"
check_eq "  ... replaces it" "does-not-exist" "$(in_guest 'readlink /root/rules/newname')"

# ---- and out of it
O=$TEST_TMP/rules
mkdir -p "$O/dir" "$O/contents"
check_rc "file to an existing local directory" 0 sc cp "$S:/root/tree/plain" "$O/dir"
check_eq "  ... goes into it" plain "$(cat "$O/dir/plain")"
check_rc "file to a new local name" 0 sc cp "$S:/root/tree/secret" "$O/newname"
check_eq "  ... keeps its mode and mtime" "600 $(stat -c %Y "$T/secret")" "$(stat -c '%a %Y' "$O/newname")"
check_rc "directory to a new local name" 0 sc cp "$S:/root/tree" "$O/copy"
check_eq "  ... becomes it" "$(cat "$TEST_TMP/out.list")" "$(host_listing "$O/copy")"
check_rc "SANDBOX:DIR/. to an existing directory" 0 sc cp "$S:/root/tree/." "$O/contents"
check_eq "  ... copies the contents (the directory itself is left as it was)" \
        "$(tail -n +2 "$TEST_TMP/out.list")" "$(host_listing "$O/contents" | tail -n +2)"
check_rc "directory to an existing local file" 1 sc cp "$S:/root/tree" "$O/newname"
check_rc "a missing file in the sandbox" 1 sc cp "$S:/nope" "$O"
check_eq "  ... is named" "spacectl: cp: sandbox '$S' has no /nope: No such file or directory" "$(cat "$ERR")"
check_rc "a file in the sandbox taken for a directory (SRC/)" 1 sc cp "$S:/root/tree/plain/" "$O"
check_rc "an unknown sandbox" 1 sc cp "nosuch-sandbox:/etc/hostname" "$O"
check_contains "  ... is named" "nosuch-sandbox" "$ERR"
check_rc "two local paths" 2 sc cp "$T" "$O"
check_rc "two sandboxes" 2 sc cp "$S:/a" "$S:/b"
check_rc "no arguments" 2 sc cp

# ---- -a keeps owners, both ways
mkdir -p "$SRC/owned"
echo mine >"$SRC/owned/f" && chown 1234:5678 "$SRC/owned/f" "$SRC/owned"
check_rc "cp -a in" 0 sc cp -a "$SRC/owned" "$S:/root/"
check_eq "  ... keeps uid/gid in the sandbox" "1234 5678 1234 5678" \
        "$(in_guest 'stat -c "%u %g" /root/owned/f /root/owned' | tr '\n' ' ' | sed 's/ $//')"
check_rc "cp -a out" 0 sc cp -a "$S:/root/owned" "$TEST_TMP/owned-out"
check_eq "  ... keeps them here" "1234 5678" "$(stat -c '%u %g' "$TEST_TMP/owned-out/f")"
check_rc "cp out without -a" 0 sc cp "$S:/root/owned" "$TEST_TMP/owned-mine"
check_eq "  ... makes them the user's" "$(id -u) $(id -g)" "$(stat -c '%u %g' "$TEST_TMP/owned-mine/f")"

# ---- a hostile tree from the sandbox: symlinks stay symlinks, nothing is written through one
in_guest 'mkdir -p /root/hostile/sub && ln -s /etc /root/hostile/evil && ln -s ../../../../../../../tmp /root/hostile/up &&
        echo payload > /root/hostile/passwd && echo inner > /root/hostile/sub/f' >/dev/null
before=$(stat -c '%Y %Z' /etc /etc/passwd)
mkdir -p "$TEST_TMP/h/hostile/sub" "$TEST_TMP/victimdir"
echo original >"$TEST_TMP/victim"
ln -s "$TEST_TMP/victim" "$TEST_TMP/h/hostile/passwd"   # an existing symlink where a file comes
rmdir "$TEST_TMP/h/hostile/sub"
ln -s "$TEST_TMP/victimdir" "$TEST_TMP/h/hostile/sub"   # and where a directory comes
check_rc "cp a tree with evil -> /etc out of the sandbox" 0 sc cp "$S:/root/hostile" "$TEST_TMP/h"
if [ -L "$TEST_TMP/h/hostile/evil" ] && [ "$(readlink "$TEST_TMP/h/hostile/evil")" = /etc ]; then
        pass "  ... evil comes out as a symlink to /etc"
else fail "  ... evil comes out as a symlink to /etc" "$(ls -la "$TEST_TMP/h/hostile")"; fi
if [ -L "$TEST_TMP/h/hostile/up" ]; then pass "  ... so does up -> ../../.."; else fail "  ... so does up -> ../../.."; fi
check_eq "  ... /etc is untouched" "$before" "$(stat -c '%Y %Z' /etc /etc/passwd)"
check_eq "  ... the file replaced the symlink that was in its way" "payload original" \
        "$(cat "$TEST_TMP/h/hostile/passwd") $(cat "$TEST_TMP/victim")"
if [ ! -L "$TEST_TMP/h/hostile/passwd" ]; then pass "  ... (it is a regular file now)"; else fail "  ... (it is a regular file now)"; fi
check_eq "  ... the directory too, and nothing went through the old symlink" "inner " \
        "$(cat "$TEST_TMP/h/hostile/sub/f") $(ls -A "$TEST_TMP/victimdir")"

# ---- issue 10: what leaves a sandbox is the user's. Without -a no setuid, setgid or sticky bit and the umask
# applied; with -a the modes as they were; an existing directory keeps its own mode either way.
in_guest 'mkdir -p /out/sticky && echo s >/out/suid && chmod 4755 /out/suid && echo g >/out/sgid &&
        chmod 2755 /out/sgid && chmod 1777 /out/sticky && echo w >/out/world && chmod 0666 /out/world &&
        chmod 0777 /out' >/dev/null
modes() { (cd "$1" && stat -c '%n %a' . suid sgid sticky world | tr '\n' ' ' | sed 's/ $//'); }
mkdir -m 0755 "$TEST_TMP/d" "$TEST_TMP/da"
run sh -c "umask 027 && exec timeout 120 spacectl cp '$S:/out/.' '$TEST_TMP/d'"
check_eq "cp SANDBOX:DIR/. out as root, umask 027" 0 "$RC" || last_diag
check_eq "  ... no s or t bits, the umask applied, the existing directory still 0755" \
        ". 755 suid 750 sgid 750 sticky 750 world 640" "$(modes "$TEST_TMP/d")"
run sh -c "umask 027 && exec timeout 120 spacectl cp -a '$S:/out/.' '$TEST_TMP/da'"
check_eq "cp -a SANDBOX:DIR/. out" 0 "$RC" || last_diag
check_eq "  ... keeps the modes, and the existing directory still 0755" \
        ". 755 suid 4755 sgid 2755 sticky 1777 world 666" "$(modes "$TEST_TMP/da")"
run sh -c "umask 077 && exec timeout 60 spacectl cp '$S:/out/suid' '$TEST_TMP/suid-file'"
check_eq "a setuid file out on its own, umask 077" "0 700" "$RC $(stat -c %a "$TEST_TMP/suid-file" 2>&1)"
mkdir -m 0700 "$TEST_TMP/d2"
check_rc "cp SANDBOX:DIR into an existing directory" 0 sc cp "$S:/out" "$TEST_TMP/d2"
mkdir -m 0711 "$TEST_TMP/d2/again"
check_rc "  ... and SANDBOX:DIR/. into an existing one below" 0 sc cp "$S:/out/." "$TEST_TMP/d2/again"
check_eq "  ... neither existing directory changed mode; the new one got 0777 less the umask" "700 711 755" \
        "$(stat -c %a "$TEST_TMP/d2" "$TEST_TMP/d2/again" "$TEST_TMP/d2/out" | tr '\n' ' ' | sed 's/ $//')"

# ---- sizes: a per-copy limit, and a file may not bring more than the size the sandbox announced
in_guest 'mkdir -p /lim && head -c 2097152 /dev/zero >/lim/two-mib && head -c 700000 /dev/zero >/lim/a &&
        head -c 700000 /dev/zero >/lim/b' >/dev/null
check_rc "--max-bytes 1M and a 2 MiB file" 1 sc cp --max-bytes 1M "$S:/lim/two-mib" "$TEST_TMP/lim1"
check_contains "  ... says which limit" "--max-bytes" "$ERR"
[ ! -e "$TEST_TMP/lim1" ] && pass "  ... and leaves no file" || fail "  ... and leaves no file"
mkdir "$TEST_TMP/lim2"
in_guest 'rm /lim/two-mib' >/dev/null
check_rc "--max-bytes 1M and two files of 700 kB" 1 sc cp --max-bytes 1M "$S:/lim" "$TEST_TMP/lim2"
check_contains "  ... stops at the second" "--max-bytes" "$ERR"
check_rc "--max-bytes 2M lets them through" 0 sc cp --max-bytes 2M "$S:/lim" "$TEST_TMP/lim2"
check_rc "--max-bytes 0 is no limit" 0 sc cp --max-bytes 0 "$S:/lim/a" "$TEST_TMP/lim3"
check_rc "--max-bytes with garbage" 2 sc cp --max-bytes lots "$S:/lim/a" "$TEST_TMP/lim4"
# A file that grows after the stat: a loop in the guest appends to it for up to 60 s.
in_guest 'mkdir -p /grow && head -c 4194304 /dev/zero >/grow/f && printf "x" >/grow/t &&
        (timeout 60 sh -c "while :; do echo grow >>/grow/f; echo grow >>/grow/t; done" </dev/null >/dev/null 2>&1 &)' >/dev/null
if wait_for 20 in_guest 'a=$(stat -c %s /grow/f); sleep 0.5; [ "$(stat -c %s /grow/f)" -gt "$a" ]'; then
        pass "a file in the sandbox is growing"
else fail "a file in the sandbox is growing"; fi
check_rc "cp of a file that grows while it is copied" 1 sc cp "$S:/grow/f" "$TEST_TMP/grown"
check_contains "  ... says so" "more than the" "$ERR" && diag "$(cat "$ERR")"
[ ! -e "$TEST_TMP/grown" ] && pass "  ... and leaves no file" || fail "  ... and leaves no file"
run sh -c "timeout 60 spacectl cp '$S:/grow/f' - >'$TEST_TMP/grown.tar'"
check_eq "  ... into a tar stream too" 1 "$RC" || last_diag
in_guest 'pkill -f "echo grow"; true' >/dev/null

# ---- guest names with control characters are printed escaped
in_guest 'mkdir -p /esc && mkfifo "/esc/$(printf "\033")[31mred" && head -c 2097152 /dev/zero >"/esc/$(printf "\033")]0;title$(printf "\007")"' >/dev/null
check_rc "cp a tree with an ESC in a FIFO's name" 0 sc cp "$S:/esc" "$TEST_TMP/esc"
check_contains "  ... the warning names it escaped" '/esc/\x1b[31mred' "$ERR"
no_raw_control() {
        if ! grep -q "$(printf '[\033\007]')" "$ERR"; then pass "  ... no raw control character on stderr"
        else fail "  ... no raw control character on stderr" "$(cat -v "$ERR")"; fi
}
no_raw_control
check_rc "cp --max-bytes 1M of a file with ESC and BEL in its name" 1 sc cp --max-bytes 1M "$S:/esc" "$TEST_TMP/esc2"
check_contains "  ... the error names it escaped" '/esc/\x1b]0;title\x07' "$ERR" && diag "$(cat "$ERR")"
no_raw_control

# ---- 1 GiB in and out: sha256 equal, the daemon's memory bounded
head -c 1073741824 /dev/urandom >"$TEST_TMP/big"
big_sum=$(sha256sum <"$TEST_TMP/big" | cut -d' ' -f1)
check_rc "a directory for it on the guest's disk" 0 sc exec "$SB" -- mkdir -p /big
pid=$(daemon_pid)
rss0=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status")
# peak RSS of a command (and what it runs), in KiB, into $TEST_TMP/maxrss
maxrss() {
        python3 -c 'import os, resource, subprocess, sys
rc = subprocess.call(sys.argv[1:])
open(os.path.join(os.environ["TEST_TMP"], "maxrss"), "w").write("%d\n" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(rc)' "$@"
}
export TEST_TMP
t0=$(now_ms)
check_rc "cp 1 GiB in" 0 maxrss timeout -k 10 "$CMD_TIMEOUT" spacectl cp "$TEST_TMP/big" "$S:/big/"
t1=$(now_ms)
cli_in=$(cat "$TEST_TMP/maxrss")
check_eq "  ... sha256 in the guest" "$big_sum" "$(in_guest 'sha256sum /big/big' | cut -d' ' -f1)"
rm -f "$TEST_TMP/big"
t2=$(now_ms)
check_rc "cp 1 GiB out" 0 maxrss timeout -k 10 "$CMD_TIMEOUT" spacectl cp "$S:/big/big" "$TEST_TMP/big.out"
t3=$(now_ms)
cli_out=$(cat "$TEST_TMP/maxrss")
check_eq "  ... sha256 here" "$big_sum" "$(sha256sum <"$TEST_TMP/big.out" | cut -d' ' -f1)"
rm -f "$TEST_TMP/big.out"
hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status")
rss1=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status")
diag "1 GiB in: $(( 1024 * 1000 / (t1 - t0 + 1) )) MiB/s, out: $(( 1024 * 1000 / (t3 - t2 + 1) )) MiB/s;" \
        "spaced VmRSS before ${rss0} KiB, after ${rss1} KiB, VmHWM ${hwm} KiB;" \
        "spacectl peak RSS in ${cli_in} KiB, out ${cli_out} KiB"
if [ "${cli_in:-999999}" -lt 131072 ] && [ "${cli_out:-999999}" -lt 131072 ]; then
        pass "spacectl stayed under 128 MiB both ways ($((cli_in / 1024)) and $((cli_out / 1024)) MiB)"
else fail "spacectl stayed under 128 MiB both ways" "peak RSS in ${cli_in:-?} KiB, out ${cli_out:-?} KiB"; fi
if [ -n "$rss0" ] && [ -n "$hwm" ] && [ $((hwm - rss0)) -lt 65536 ]; then
        pass "spaced's peak memory grew by less than 64 MiB ($(( (hwm - rss0) / 1024 )) MiB)"
else fail "spaced's peak memory grew by less than 64 MiB" "VmRSS before ${rss0:-?} KiB, VmHWM after ${hwm:-?} KiB"; fi

check_rc "remove the sandbox" 0 sc rm -f "$SB"
done_testing
