#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# QEMU in its own user, mount, pid, network, IPC and UTS namespaces (confine = on), looked at from inside:
# nsenter into a QEMU's namespaces without capabilities, as QEMU runs, and try what an escaped QEMU would. The
# user's home, the state database, the API socket and another sandbox's run dir, data dir and disk are not
# there, nor any network: a server on the host's loopback and an abstract unix socket of the host's cannot be
# reached from it. Its own
# sockets, disk, kernel and /usr are, all but its disk, run dir and base memory file read-only. It can
# neither ptrace nor signal a sibling QEMU or the daemon. A qcow2 checkpoint hands QEMU the new layer through
# data_dir/qemu and takes the frozen one away: after two checkpoints QEMU holds no writable fd on a frozen
# layer and has no path to it, and a fork sees its checkpoint's layer read-only. QEMU holds no capabilities
# and keeps its seccomp filter. The sandbox works across suspend/wake, checkpoints, fork, restore and a
# daemon killed and restarted. confine = off runs QEMU in the daemon's namespaces, as before, and says so in
# inspect. Where no user namespace can be made (the daemon in one of the test's own whose
# user.max_user_namespaces is 0), confine = auto warns at start and runs QEMU unconfined, which info and the
# sandbox's inspect say, with the sysctl, also after a restart; confine = on fails the create. The base memory
# file stays writable to QEMU before QEMU 8.2 (ARCHITECTURE.md, decision 12); what holds is checked: it is
# mapped private, and a guest's writes never reach it.
. "$(dirname "$0")/lib.sh"

command -v nsenter >/dev/null && command -v setpriv >/dev/null || bail_out "needs nsenter and setpriv (util-linux)"

space_env_setup
write_config "confine = on"
start_daemon

ns_of() {
        readlink "/proc/$1/ns/$2" 2>/dev/null
}

qemu_pid_of() {
        local f=$TEST_TMP/qp.json
        sc inspect "$1" --json >"$f" 2>/dev/null || return 1
        json "$f" 'd["qemu_pid"]'
}

# The options of the mount at PATH in /proc/PID/mountinfo.
mount_opts() {
        awk -v p="$2" '$5 == p { print $6 }' "/proc/$1/mountinfo" 2>/dev/null | tail -n1
}

# in_qemu PID CMD...: CMD in QEMU PID's user, mount, network and IPC namespaces, at its root, with QEMU's uid
# and no capabilities (nsenter alone would hold all of them in that user namespace).
in_qemu() {
        local pid=$1
        shift
        nsenter -t "$pid" -U -m -n -i --root --wd --preserve-credentials -- \
                setpriv --bounding-set=-all --inh-caps=-all --ambient-caps=-all --securebits=+noroot,+noroot_locked \
                -- "$@"
}

# Fails (with a message) when CMD can open PATH for writing inside QEMU PID: `: >>` creates nothing that
# exists and writes no byte.
in_qemu_writes() {
        in_qemu "$1" sh -c ': >> "$1"' sh "$2"
}

# The fds of PID open on FILE's inode, as "fd:flags" (octal flags from fdinfo).
fds_on() {
        local pid=$1 want fd
        want=$(stat -L -c '%d:%i' "$2") || return 1
        for fd in /proc/"$pid"/fd/*; do
                [ "$(stat -L -c '%d:%i' "$fd" 2>/dev/null)" = "$want" ] || continue
                echo "${fd##*/}:$(awk '/^flags:/ { print $2 }' "/proc/$pid/fdinfo/${fd##*/}")"
        done
}

# Whether every fd of PID on FILE is read-only (and there is at least one).
fds_read_only() {
        local l n=0
        for l in $(fds_on "$1" "$2"); do
                n=$((n + 1))
                [ $((8#${l#*:} & 3)) -eq 0 ] || return 1
        done
        [ "$n" -gt 0 ]
}

create_sandbox A --name t28-a
[ -n "$A" ] || { last_diag; bail_out "create failed"; }
create_sandbox B --name t28-b
[ -n "$B" ] || { last_diag; bail_out "create failed"; }
pass "two sandboxes created with confine = on"
QA=$(qemu_pid_of "$A")
QB=$(qemu_pid_of "$B")
DP=$(daemon_pid)
pid_alive "$QA" && pid_alive "$QB" || bail_out "no QEMU pids ($QA, $QB)"
ROOT=/proc/$QA/root

# ---- namespaces
for ns in mnt user pid net ipc uts; do
        if [ -n "$(ns_of "$QA" $ns)" ] && [ "$(ns_of "$QA" $ns)" != "$(ns_of "$DP" $ns)" ]; then
                pass "QEMU's $ns namespace is not the daemon's"
        else
                fail "QEMU's $ns namespace is not the daemon's" "$(ns_of "$QA" $ns) vs $(ns_of "$DP" $ns)"
        fi
        if [ "$(ns_of "$QA" $ns)" != "$(ns_of "$QB" $ns)" ]; then
                pass "each QEMU has its own $ns namespace"
        else
                fail "each QEMU has its own $ns namespace" "$(ns_of "$QA" $ns)"
        fi
done
check_eq "QEMU's pid file names the pid the daemon knows" "$QA" "$(cat "$SPACE_RUNTIME_DIR"/sandboxes/"$A"*/qemu.pid)"
check_eq "QEMU runs as the daemon's user" "$(stat -c %u "/proc/$DP")" "$(stat -c %u "/proc/$QA")"
check_eq "QEMU holds no capabilities" 0000000000000000 "$(awk '/^CapEff/ { print $2 }' "/proc/$QA/status")"
check_eq "QEMU's bounding set is empty" 0000000000000000 "$(awk '/^CapBnd/ { print $2 }' "/proc/$QA/status")"
check_eq "QEMU's seccomp filter (-sandbox on) is in place" 2 "$(awk '/^Seccomp:/ { print $2 }' "/proc/$QA/status")"
check_rc "nsenter reaches QEMU's view (its root is not the host's)" 0 in_qemu "$QA" sh -c '! test -e /etc/passwd'
check_eq "inspect says its QEMU is confined" "True|None" \
        "$(sc inspect "$A" --json >"$TEST_TMP/a.json" && json "$TEST_TMP/a.json" 'str(d["confined"]) + "|" + str(d["unconfined_reason"])')"

# ---- what it cannot reach, tried from inside
RUN_B=$(echo "$SPACE_RUNTIME_DIR"/sandboxes/"$B"*)
RUN_A=$(echo "$SPACE_RUNTIME_DIR"/sandboxes/"$A"*)
DATA_A=$SPACE_STATE_DIR/sandboxes/$A
DATA_B=$SPACE_STATE_DIR/sandboxes/$B
DISK_B=$(readlink -f "$DATA_B/disk")
DISK_A=$(readlink -f "$DATA_A/disk")
MEM=$(echo "$SPACE_STATE_DIR"/base/*/base.mem)
[ -e "$SPACE_STATE_DIR/space.db" ] || fail "the state database exists outside" "$SPACE_STATE_DIR/space.db"
[ -S "$RUN_B/qmp.sock" ] || fail "B's run dir exists outside" "$RUN_B"
[ -f "$DISK_B" ] || fail "B's disk exists outside" "$DISK_B"
[ -f "$MEM" ] || fail "one base memory file outside" "$MEM"
if [ -d "$HOME" ] && [ "$HOME" != / ]; then
        check_fails "the user's home ($HOME) cannot be listed" in_qemu "$QA" ls "$HOME"
else
        skip "the user's home cannot be listed" "HOME is '$HOME'"
fi
check_fails "the state database cannot be opened" in_qemu "$QA" cat "$SPACE_STATE_DIR/space.db"
check_fails "the state database cannot be created anew" in_qemu_writes "$QA" "$SPACE_STATE_DIR/space.db"
# base: the memory file and the base disk; templates: the root image at the bottom of the disk's chain.
check_eq "the state dir holds what QEMU needs alone" "base sandboxes templates" \
        "$(in_qemu "$QA" ls "$SPACE_STATE_DIR" 2>&1 | tr '\n' ' ' | sed 's/ $//')"
check_eq "  ... of the sandboxes its own disk dir alone" "$A qemu" "$(in_qemu "$QA" sh -c 'ls "$1"; ls "$1/$2"' sh \
        "$SPACE_STATE_DIR/sandboxes" "$A" 2>&1 | tr '\n' ' ' | sed 's/ $//')"
check_fails "another sandbox's run dir (its QMP socket) cannot be reached" in_qemu "$QA" ls -d "$RUN_B"
check_fails "another sandbox's data dir cannot be listed" in_qemu "$QA" ls "$DATA_B"
check_fails "another sandbox's disk cannot be opened" in_qemu "$QA" cat "$DISK_B"
check_fails "another sandbox's disk cannot be opened for writing" in_qemu_writes "$QA" "$DISK_B"
check_fails "the layers dir cannot be listed" in_qemu "$QA" ls "$SPACE_STATE_DIR/layers"
check_fails "the API socket is not there" in_qemu "$QA" ls "$SPACE_SOCKET"
check_fails "no /proc (no way to the daemon's root through /proc/PID/root)" in_qemu "$QA" ls /proc/1
check_fails "/usr cannot be written" in_qemu_writes "$QA" /usr/bin/env
check_fails "the guest kernel cannot be written" in_qemu_writes "$QA" "$SPACE_LIB_DIR/vmlinux"
check_fails "nothing can be made in the root" in_qemu "$QA" mkdir /x
check_fails "no new mount (no capabilities)" in_qemu "$QA" mount -t tmpfs none "$RUN_A"

# ---- no network: a server on the host's loopback and an abstract unix socket (an X server's, say) answer from
# the host, and not from inside
LISTENER='import os, socket, sys
t = socket.create_server(("127.0.0.1", 0))
u = socket.socket(socket.AF_UNIX)
u.bind("\0" + sys.argv[2])
u.listen(8)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("%d\n" % t.getsockname()[1])
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    for s in (t, u):
        s.settimeout(0.05)
        try:
            s.accept()[0].close()
        except OSError:
            pass'
CONNECT='import socket, sys
if sys.argv[1] == "tcp":
    socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=3).close()
else:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(3)
    s.connect("\0" + sys.argv[2])'
ABSTRACT=space-t28-$$
python3 -c "$LISTENER" "$TEST_TMP/listener.port" "$ABSTRACT" &
LISTENER_PID=$!
track_pid "$LISTENER_PID"
wait_for 10 test -s "$TEST_TMP/listener.port" || bail_out "the test's listener did not start"
PORT=$(cat "$TEST_TMP/listener.port")
check_rc "the host's loopback server answers on the host" 0 python3 -c "$CONNECT" tcp "$PORT"
check_rc "the host's abstract unix socket answers on the host" 0 python3 -c "$CONNECT" unix "$ABSTRACT"
check_fails "  ... the loopback server does not from inside QEMU's namespaces" in_qemu "$QA" python3 -c "$CONNECT" tcp "$PORT"
check_contains "  ... for want of a network" "unreachable" "$ERR"
check_fails "  ... nor the abstract unix socket" in_qemu "$QA" python3 -c "$CONNECT" unix "$ABSTRACT"
check_eq "QEMU's network has a loopback alone" lo \
        "$(in_qemu "$QA" python3 -c 'import socket; print(" ".join(n for _, n in socket.if_nameindex()))' 2>&1)"
kill "$LISTENER_PID"

# ---- other processes: ptrace and process_vm_readv/writev need CAP_SYS_PTRACE in the target's user namespace
# (commoncap), which no QEMU holds in a sibling's or the daemon's. Signals need only the same uid, but in its
# pid namespace QEMU is pid 1 and no other process has a pid.
PTRACE_PROBE='import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
pid = int(sys.argv[1])
if libc.ptrace(0x4206, pid, 0, 0) != 0:  # PTRACE_SEIZE
    sys.exit("ptrace: " + os.strerror(ctypes.get_errno()))
libc.ptrace(17, pid, 0, 0)  # PTRACE_DETACH'
if in_qemu "$QA" python3 -c 'import ctypes' 2>/dev/null; then
        run in_qemu "$QA" python3 -c "$PTRACE_PROBE" "$QB"
        check_contains "a sibling QEMU cannot be traced (its memory not read or written)" "Operation not permitted" "$ERR"
        run in_qemu "$QA" python3 -c "$PTRACE_PROBE" "$DP"
        check_contains "the daemon cannot be traced" "Operation not permitted" "$ERR"
else
        skip "a sibling QEMU cannot be traced" "no python3 with ctypes under /usr"
        skip "the daemon cannot be traced" "no python3 with ctypes under /usr"
fi
check_fails "neither a sibling QEMU nor the daemon can be signalled" nsenter -t "$QA" -U -m -p --root --wd --preserve-credentials -- \
        setpriv --bounding-set=-all --inh-caps=-all --ambient-caps=-all --securebits=+noroot,+noroot_locked -- \
        sh -c 'for p; do kill -0 "$p" && exit 0; done; exit 1' sh "$QB" "$DP"
check_eq "QEMU is pid 1 in its pid namespace" 1 "$(awk '/^NSpid:/ { print $NF }' "/proc/$QA/status")"

# ---- what it needs
check_rc "its own QMP socket is there, at the same path" 0 in_qemu "$QA" test -S "$RUN_A/qmp.sock"
check_rc "its own disk is there, writable" 0 in_qemu_writes "$QA" "$DATA_A/qemu/${DISK_A##*/}"
check_eq "its disk dir holds its disk's top layer alone" "${DISK_A##*/}" "$(in_qemu "$QA" ls "$DATA_A/qemu" 2>&1)"
check_rc "the guest kernel is there" 0 in_qemu "$QA" test -f "$SPACE_LIB_DIR/vmlinux"
check_rc "the base memory file is there" 0 in_qemu "$QA" test -f "$MEM"
check_match "/usr is read-only inside" '(^|,)ro(,|$)' "$(mount_opts "$QA" /usr)"
check_match "the root is read-only inside" '(^|,)ro(,|$)' "$(mount_opts "$QA" /)"
check_match "its run dir is writable" '(^|,)rw(,|$)' "$(mount_opts "$QA" "$RUN_A")"
# QEMU 7.2 opens a memory-backend-file O_RDWR even with share=off, so an escaped QEMU could write the base
# memory file (ARCHITECTURE.md, decision 12: not held before QEMU 8.2). What holds: it is mapped private, so
# nothing a guest writes to its memory reaches the file its siblings share.
MEM_SUM=$(sha256sum <"$MEM")
check_rc "a guest fills 64 MiB of its memory" 0 sc exec "$A" -- sh -c 'head -c 67108864 /dev/urandom >/tmp/fill; sync; rm /tmp/fill'
check_eq "... and the base memory file is unchanged" "$MEM_SUM" "$(sha256sum <"$MEM")"
check_match "QEMU maps it private (share=off)" 'share=off' "$(tr '\0' ' ' <"/proc/$QA/cmdline")"

# ---- the sandbox works
check_rc "exec" 0 sc exec "$A" -- sh -c 'echo hello > /tmp/f; cat /tmp/f'
check_eq "exec prints what the guest wrote" hello "$(cat "$OUT")"
check_rc "suspend" 0 sc suspend "$A"
check_rc "wake" 0 sc wake "$A"
check_rc "a file survives suspend and wake" 0 sc exec "$A" -- cat /tmp/f
Q2=$(qemu_pid_of "$A")
if [ -n "$(ns_of "$Q2" mnt)" ] && [ "$(ns_of "$Q2" mnt)" != "$(ns_of "$DP" mnt)" ]; then
        pass "the woken QEMU is confined too"
else
        fail "the woken QEMU is confined too" "pid $Q2"
fi
check_rc "write before the first checkpoint" 0 sc exec "$A" -- sh -c 'echo v1 > /root/g; sync'
L0=$(readlink -f "$DATA_A/disk")
check_rc "checkpoint" 0 sc checkpoint "$A" --name t28-cp1
check_rc "write after the first checkpoint" 0 sc exec "$A" -- sh -c 'echo v2 > /root/g; sync'
L1=$(readlink -f "$DATA_A/disk")
check_rc "a second checkpoint" 0 sc checkpoint "$A" --name t28-cp2
check_rc "write after the second checkpoint" 0 sc exec "$A" -- sh -c 'echo v3 > /root/g; sync; cat /root/g'
check_eq "  ... and read it back" v3 "$(cat "$OUT")"
L2=$(readlink -f "$DATA_A/disk")
Q2=$(qemu_pid_of "$A")
if [ "$L0" != "$L1" ] && [ "$L1" != "$L2" ]; then
        pass "each checkpoint moved the sandbox to a new layer"
else
        fail "each checkpoint moved the sandbox to a new layer" "$L0 $L1 $L2"
fi
check_eq "after two checkpoints its disk dir holds the new top alone" "${L2##*/}" "$(in_qemu "$Q2" ls "$DATA_A/qemu" 2>&1)"
for l in "$L0" "$L1"; do
        check_fails "the frozen layer ${l##*/} has no path inside" in_qemu_writes "$Q2" "$l"
        if fds_read_only "$Q2" "$l"; then
                pass "QEMU's fds on the frozen layer ${l##*/} are read-only"
        else
                fail "QEMU's fds on the frozen layer ${l##*/} are read-only" "fd:flags $(fds_on "$Q2" "$l" | tr '\n' ' ')"
        fi
done
if fds_on "$Q2" "$L2" | grep -qE ':[0-7]*[26]$'; then
        pass "QEMU writes the new top through a writable fd"
else
        fail "QEMU writes the new top through a writable fd" "fd:flags $(fds_on "$Q2" "$L2" | tr '\n' ' ')"
fi
check_rc "fork the first checkpoint" 0 sc fork t28-cp1
F=$(head -n1 "$OUT")
track_sandbox "$F"
check_rc "exec in the fork" 0 sc exec "$F" -- cat /root/g
check_eq "the fork has the first checkpoint's disk" v1 "$(cat "$OUT")"
QF=$(qemu_pid_of "$F")
if [ -n "$(ns_of "$QF" mnt)" ] && [ "$(ns_of "$QF" mnt)" != "$(ns_of "$DP" mnt)" ]; then
        pass "the fork's QEMU is confined"
else
        fail "the fork's QEMU is confined" "pid $QF"
fi
check_rc "the fork's QEMU sees the checkpoint's layer it stands on" 0 in_qemu "$QF" test -f "$L0"
check_fails "  ... read-only" in_qemu_writes "$QF" "$L0"
check_fails "the fork's QEMU does not see its source's disk top" in_qemu "$QF" ls -d "$L2"
check_fails "the source's QEMU does not see the fork's disk" in_qemu "$Q2" ls -d "$(readlink -f "$SPACE_STATE_DIR/sandboxes/$F/disk")"
check_rc "restore the second checkpoint" 0 sc restore "$A" t28-cp2
check_rc "exec after restore" 0 sc exec "$A" -- cat /root/g
check_eq "  ... reads the second checkpoint's disk" v2 "$(cat "$OUT")"

# ---- the daemon dies; QEMU does not, and the new daemon finds it and talks to it
QB=$(qemu_pid_of "$B")
kill -9 "$DP"
wait_for 10 pid_gone "$DP" || fail "the daemon dies" "$DP"
if pid_alive "$QB"; then pass "QEMU outlives the daemon"; else fail "QEMU outlives the daemon" "pid $QB"; fi
start_daemon
check_rc "exec after the daemon restart (socket reached from outside)" 0 sc exec "$B" -- echo back
check_eq "  ... prints" back "$(cat "$OUT")"
check_eq "the sandbox kept its QEMU" "$QB" "$(qemu_pid_of "$B")"

# ---- confine = off: as before
DP=$(daemon_pid)
kill "$DP" && wait_for 30 pid_gone "$DP" || bail_out "spaced did not stop"
write_config "confine = off"
start_daemon
create_sandbox C --name t28-off
[ -n "$C" ] || { last_diag; fail "create with confine = off"; }
QC=$(qemu_pid_of "$C")
check_eq "with confine = off QEMU shares the daemon's mount namespace" "$(ns_of "$(daemon_pid)" mnt)" "$(ns_of "$QC" mnt)"
check_rc "exec with confine = off" 0 sc exec "$C" -- true
check_eq "  ... and inspect says so" "False|confine = off in spaced.conf" \
        "$(sc inspect "$C" --json >"$TEST_TMP/c.json" && json "$TEST_TMP/c.json" 'str(d["confined"]) + "|" + d["unconfined_reason"]')"

# ---- confinement impossible: the daemon runs in a user namespace of the test's own whose
# user.max_user_namespaces is 0, so that no child of it can make one (ENOSPC), as on a host with that sysctl at 0
NOUSERNS=$TEST_TMP/spaced-nouserns
printf '#!/bin/sh\nexec unshare --user --map-root-user sh -c %s "%s" "$@"\n' \
        "'echo 0 >/proc/sys/user/max_user_namespaces && exec \"\$0\" \"\$@\"'" "$SPACED_BIN" >"$NOUSERNS"
chmod +x "$NOUSERNS"
restart_daemon() { # restart_daemon SPACED CONFIG-LINE
        local dp
        if dp=$(daemon_pid); then
                kill "$dp" && wait_for 30 pid_gone "$dp" || bail_out "spaced did not stop"
        fi
        write_config "$2"
        LOG_FROM=$(($(stat -c %s "$TEST_TMP/spaced.log") + 1))
        SPACED_BIN=$1 start_daemon
}
# what the daemon logged since restart_daemon
log_since() {
        tail -c "+$LOG_FROM" "$TEST_TMP/spaced.log"
}
if unshare --user --map-root-user sh -c 'echo 0 >/proc/sys/user/max_user_namespaces && ! unshare --user true' 2>/dev/null; then
        restart_daemon "$NOUSERNS" "confine = auto"
        UNCONF="user and pid namespaces: No space left on device; user.max_user_namespaces is 0"
        check_contains "confine = auto without user namespaces: one warning at start" \
                "QEMU runs unconfined, without namespaces of its own: $UNCONF" "$(log_since)"
        check_contains "  ... that says what to do" "sysctl user.max_user_namespaces=" "$(log_since)"
        check_rc "info" 0 sc info
        check_contains "  ... says QEMU runs unconfined, and why" "Confinement:  none, QEMU runs unconfined: $UNCONF" "$OUT"
        check_eq "  ... and so does its JSON" "False|auto" \
                "$(sc info --json >"$TEST_TMP/i.json" && json "$TEST_TMP/i.json" 'str(d["confined"]) + "|" + d["confine"]')"
        create_sandbox N --name t28-nouserns
        check_match "a sandbox is made, unconfined" "$ID_RE" "$N" || last_diag
        QN=$(qemu_pid_of "$N")
        check_eq "  ... its QEMU in the daemon's user and network namespaces" \
                "$(ns_of "$(daemon_pid)" user) $(ns_of "$(daemon_pid)" net)" "$(ns_of "$QN" user) $(ns_of "$QN" net)"
        check_rc "  ... which runs commands" 0 sc exec "$N" -- true
        check_rc "inspect" 0 sc inspect "$N"
        check_contains "  ... says it is not confined" "confined: false" "$OUT"
        check_contains "  ... and why" "unconfined_reason: $UNCONF" "$OUT"
        check_eq "no second warning for it" 1 "$(log_since | grep -c 'QEMU runs unconfined')"

        restart_daemon "$NOUSERNS" "confine = on"
        check_contains "confine = on without user namespaces: a warning at start" \
                "confine = on, but QEMU cannot be confined here: $UNCONF" "$(log_since)"
        check_fails "  ... and a create fails" sc_create --name t28-on
        check_contains "  ... saying why" "cannot confine QEMU in its own namespaces: $UNCONF" "$ERR"
        check_contains "  ... and that confine = on asked for it" "(confine = on in spaced.conf)" "$ERR"

        restart_daemon "$SPACED_BIN" "confine = auto"
        check_eq "after a restart where namespaces can be made, info says QEMU is confined" True \
                "$(sc info --json >"$TEST_TMP/i.json" && json "$TEST_TMP/i.json" 'str(d["confined"])')"
        check_eq "  ... the unconfined sandbox's inspect still says it is not, and why" "False|$UNCONF" \
                "$(sc inspect "$N" --json >"$TEST_TMP/n.json" && json "$TEST_TMP/n.json" 'str(d["confined"]) + "|" + d["unconfined_reason"].split(" (")[0]')"
        check_eq "  ... and it kept its QEMU" "$QN" "$(qemu_pid_of "$N")"
else
        skip "confinement impossible" "cannot make a user namespace with user.max_user_namespaces = 0 here"
fi

# ---- an installed layout: `make install` puts the guest files in /usr/local/lib/space, inside the /usr that
# QEMU's namespace has read-only already (no mount point can be made there for them)
if mkdir -p /usr/local/lib 2>/dev/null && [ -w /usr/local/lib ]; then
        USR_LIB_DIR=$(mktemp -d /usr/local/lib/space-t28.XXXXXX)
        cp -rL "$STAGE_LIB_DIR"/. "$USR_LIB_DIR"/ || bail_out "cannot copy the guest files to $USR_LIB_DIR"
        DP=$(daemon_pid)
        kill "$DP" && wait_for 30 pid_gone "$DP" || bail_out "spaced did not stop"
        write_config "confine = on"
        export SPACE_LIB_DIR=$USR_LIB_DIR
        start_daemon
        create_sandbox U --name t28-usr
        check_match "confine = on with the guest files under /usr: a sandbox is made" "$ID_RE" "$U" || last_diag
        check_rc "  ... and runs commands" 0 sc exec "$U" -- true
        [ -n "$U" ] && check_rc "  ... its QEMU in a mount namespace of its own" 1 \
                test "$(ns_of "$(daemon_pid)" mnt)" = "$(ns_of "$(qemu_pid_of "$U")" mnt)"
else
        skip "the guest files under /usr: /usr/local/lib is not writable by this user"
fi

done_testing
