#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Snapshots know their host (issue 27): `spacectl info` shows the fingerprint snapshots record; a checkpoint, a
# suspended sandbox and a base snapshot doctored to another host's fingerprint (another accelerator, another
# QEMU), with the daemon restarted in between, are refused (restore, fork, /v1 and wake: 409 host_mismatch,
# the message naming what differs) with nothing stopped or lost, while a base made elsewhere is set aside and
# built again by the next create, and so is a base whose restore fails (its state cut in half), once; a
# checkpoint of an older daemon (no fingerprint) is still taken as this host's.
. "$(dirname "$0")/lib.sh"

space_env_setup
start_daemon

check_rc "spacectl info" 0 sc info
check_match "... shows the host snapshots record" '^Host: +accel=tcg qemu=[0-9]' "$(grep '^Host:' "$OUT")"
HOST=$(sc info --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["host"])')

create_sandbox SB --name t40
[ -n "$SB" ] || { last_diag; bail_out "create failed"; }
create_sandbox SB2 --name t40-sleeper
[ -n "$SB2" ] || { last_diag; bail_out "create failed"; }
check_rc "an exec leaves a mark in the sandbox" 0 sc exec "$SB" -- sh -c 'echo before > /root/mark'
CP1=$(sc checkpoint "$SB" --name t40-elsewhere 2>/dev/null)
CP2=$(sc checkpoint "$SB" --name t40-legacy 2>/dev/null)
check_match "two checkpoints" '^cp-' "$CP1 $CP2"
check_rc "suspend the second sandbox" 0 sc suspend "$SB2"
QP=$(cat "$SPACE_RUNTIME_DIR"/sandboxes/"$SB"*/qemu.pid 2>/dev/null)

# ---- another host, as far as the records go
PID=$(daemon_pid)
kill -TERM "$PID"
wait_for 30 pid_gone "$PID" || bail_out "spaced did not stop"
python3 - "$SPACE_STATE_DIR/space.db" "$CP1" "$CP2" "$SB2" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("UPDATE checkpoints SET host = ? WHERE id = ?",
           ("accel=kvm qemu=9.9.9 kernel=6.99 microcode=0x1 cpuid=0123456789abcdef", sys.argv[2]))
db.execute("UPDATE checkpoints SET host = NULL WHERE id = ?", (sys.argv[3],))
db.execute("UPDATE sandboxes SET host = 'accel=tcg qemu=0.0.1' WHERE id = ?", (sys.argv[4],))
db.commit()
PY
READY=$(ls "$SPACE_STATE_DIR"/base/*/ready | head -n1)
BASE=$(dirname "$READY")
check_eq "the base snapshot records this host" "$HOST" "$(cat "$READY")"
echo "accel=tcg qemu=0.0.1" >"$READY"
start_daemon

# ---- a checkpoint from elsewhere
check_rc "restore to a checkpoint made under KVM with another QEMU is refused" 1 sc restore "$SB" "$CP1"
check_contains "... it says why" "made under another host" "$ERR"
diag "$(cat "$ERR")"
check_contains "... naming the accelerator" "accel tcg here, kvm when it was made" "$ERR"
check_contains "... and the QEMU" "when it was made" "$ERR"
check_eq "... the sandbox still runs, on the same QEMU" "running $QP" \
        "$(state_of "$SB") $(cat "$SPACE_RUNTIME_DIR"/sandboxes/"$SB"*/qemu.pid 2>/dev/null)"
check_eq "... with its files" before "$(sc exec "$SB" -- cat /root/mark 2>/dev/null)"
check_rc "fork of that checkpoint is refused" 1 sc fork "$CP1"
check_contains "... the same way" "made under another host" "$ERR"
ureq POST "/v1/sandboxes/$SB/restore" -H 'Content-Type: application/json' -d "{\"checkpoint\": \"$CP1\"}"
check_status "... /v1 restore: 409 host_mismatch" 409 host_mismatch
N=$(sandbox_count)
check_eq "... and no sandbox was made" 2 "$N"

# ---- a checkpoint of an older daemon
check_rc "restore to a checkpoint that records no host works (taken as this host's)" 0 sc restore "$SB" "$CP2"
check_eq "... its files are there" before "$(sc exec "$SB" -- cat /root/mark 2>/dev/null)"

# ---- a suspended sandbox from elsewhere
check_rc "wake of a sandbox suspended under another QEMU is refused" 1 sc wake "$SB2"
check_contains "... it says why" "suspended under another host" "$ERR"
check_contains "... naming the QEMU" "qemu " "$ERR"
check_eq "... it stays suspended" suspended "$(state_of "$SB2")"
check_rc "... and can be removed" 0 sc rm "$SB2"

# ---- a base from elsewhere
create_sandbox SB3 --name t40-new
check_rc "a create with a base made under another QEMU works" 0 test -n "$SB3"
check_contains "... the daemon said why it built the base again" "was made on another host" "$TEST_TMP/spaced.log"
check_rc "... the old one is set aside" 0 test -e "$BASE.set-aside/ready"
check_eq "... and the new one records this host" "$HOST" "$(cat "$READY")"
check_rc "... the new sandbox runs commands" 0 sc exec "$SB3" -- true

# ---- a base that does not restore, though it says it was made here
STATE_FILE=$(ls "$BASE"/*.state 2>/dev/null | head -n1)
check_rc "the base has a state file" 0 test -s "$STATE_FILE"
truncate -s "$(($(stat -c %s "$STATE_FILE") / 2))" "$STATE_FILE"
create_sandbox SB4 --name t40-after-damage
check_rc "a create from a base whose state is cut in half works" 0 test -n "$SB4"
check_contains "... the daemon said the base did not restore and built it again" "did not restore" "$TEST_TMP/spaced.log"
check_rc "... the new sandbox runs commands" 0 sc exec "$SB4" -- true
check_rc "... and the next create restores the rebuilt base" 0 sh -c \
        "timeout 120 spacectl create --name t40-next >/dev/null"
check_eq "... without building it a third time" 1 "$(grep -c 'did not restore' "$TEST_TMP/spaced.log")"

done_testing
