#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Which accelerator, and why (issue 27). KVM is asked the way QEMU will use it: the device opens read-write,
# speaks KVM's API and creates a VM, and is not kvm-pvm. With accel = auto each failure falls back to TCG with
# one warning that says what to do, and `spacectl info` shows the reason; with accel = kvm the daemon refuses
# to start, saying why. The doubles: a device that does not exist, one that is not KVM (a character device the
# test makes: /dev/null's numbers), one the daemon may not open (mode 0 for a root without CAP_DAC_OVERRIDE),
# and this machine's own /dev/kvm (kvm-pvm). A sandbox then runs under TCG.
. "$(dirname "$0")/lib.sh"

space_env_setup

stop_daemon() {
        local pid
        pid=$(daemon_pid) || return 0
        kill -TERM "$pid"
        wait_for 30 pid_gone "$pid" || bail_out "spaced did not stop"
}

# accel_case DESC EXPECTED-REASON-PART: a daemon with accel = auto, then info's Accelerator line
accel_case() {
        : >"$TEST_TMP/spaced.log"
        start_daemon
        run sc info
        check_match "$1: tcg, with the reason" "^Accelerator: +tcg \(.*$2" "$(grep '^Accelerator:' "$OUT")"
        check_eq "... and one warning in the log" 1 "$(grep -cE 'using TCG \(software emulation\):.*'"$2" "$TEST_TMP/spaced.log")"
        stop_daemon
}

export SPACE_KVM_DEVICE=$TEST_TMP/no-such-kvm
accel_case "no KVM device" "there is no $TEST_TMP/no-such-kvm: this host has no KVM"

mknod "$TEST_TMP/not-kvm" c 1 3 || bail_out "cannot make a device node"
export SPACE_KVM_DEVICE=$TEST_TMP/not-kvm
accel_case "a device that is not KVM" "not-kvm is not KVM \(KVM_GET_API_VERSION: Inappropriate ioctl"

mknod -m 0 "$TEST_TMP/locked-kvm" c 1 3 || bail_out "cannot make a device node"
export SPACE_KVM_DEVICE=$TEST_TMP/locked-kvm
cat >"$TEST_TMP/spaced-nodac" <<EOF
#!/bin/sh
exec setpriv --bounding-set=-dac_override,-dac_read_search --inh-caps=-dac_override,-dac_read_search -- "$SPACED_BIN" "\$@"
EOF
chmod +x "$TEST_TMP/spaced-nodac"
REAL_SPACED=$SPACED_BIN
SPACED_BIN=$TEST_TMP/spaced-nodac
accel_case "a device the daemon may not open" "Permission denied: add the user to the kvm group"
SPACED_BIN=$REAL_SPACED

if [ -e /sys/module/kvm_pvm ] && [ -c /dev/kvm ]; then
        unset SPACE_KVM_DEVICE
        accel_case "this machine's /dev/kvm (kvm-pvm)" "/dev/kvm is kvm-pvm, which cannot run the stock guest kernel"
else
        skip "this machine's /dev/kvm is not kvm-pvm (nothing to say about it here)"
fi

# ---- accel = kvm refuses to start
export SPACE_KVM_DEVICE=$TEST_TMP/not-kvm
SPACE_TEST_ACCEL=kvm write_config
run timeout 60 "$SPACED_BIN"
check_eq "accel = kvm with a device that is not KVM: spaced refuses to start" 1 "$RC"
check_contains "... saying why" "accel = kvm, but KVM cannot run sandboxes here: $TEST_TMP/not-kvm is not KVM" "$ERR"
check_contains "... and what to do" "set accel = auto (or tcg) in spaced.conf" "$ERR"

# ---- back to auto: a sandbox runs under TCG
write_config
: >"$TEST_TMP/spaced.log"
start_daemon
create_sandbox SB --name t41
check_rc "with the fallback, a sandbox runs" 0 sc exec "$SB" -- true
check_eq "... under TCG" tcg "$(json "$(sc inspect "$SB" --json >"$TEST_TMP/i.json"; echo "$TEST_TMP/i.json")" 'd["accel"]')"

done_testing
