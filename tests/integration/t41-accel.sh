#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Which accelerator, and why (issue 27). KVM is asked the way QEMU will use it: the device opens read-write,
# speaks KVM's API and creates a VM, and is not kvm-pvm. With accel = auto each failure falls back to TCG with
# one warning that says what to do, and `spacectl info` shows the reason; with accel = kvm the daemon refuses
# to start, saying why. The doubles: a device that does not exist, one that is not KVM (a character device the
# test makes: /dev/null's numbers), one the daemon may not open (mode 0 for a root without CAP_DAC_OVERRIDE),
# and this machine's own /dev/kvm (kvm-pvm). A device that fails its checks is not probed; kvm-pvm is: a confined
# QEMU under -accel kvm boots the guest to the agent's hello, which never comes here, and the outcome is cached
# per user (here in a cache dir of the test's own: these checks doctor it). A sandbox then runs under TCG.
# A KVM that speaks the API but refuses KVM_CREATE_VM is a FUSE file whose ioctls kvm-double.py answers.
. "$(dirname "$0")/lib.sh"

space_env_setup
export SPACE_CACHE_DIR=$TEST_TMP/cache

stop_daemon() {
        local pid
        pid=$(daemon_pid) || return 0
        kill -TERM "$pid"
        wait_for 30 pid_gone "$pid" || bail_out "spaced did not stop"
}

# accel_case DESC EXPECTED-REASON-PART [EXPECTED-PROBE-PART]: a daemon with accel = auto, then info's
# Accelerator and KVM probe lines (the latter in $PROBE_LINE), with the start's time in ms in $START_MS
accel_case() {
        local t0
        : >"$TEST_TMP/spaced.log"
        t0=$(date +%s%N)
        start_daemon
        START_MS=$((($(date +%s%N) - t0) / 1000000))
        run sc info
        PROBE_LINE=$(grep '^KVM probe:' "$OUT")
        check_match "$1: tcg, with the reason" "^Accelerator: +tcg \(.*$2" "$(grep '^Accelerator:' "$OUT")"
        check_eq "... and one warning in the log" 1 "$(grep -cE 'using TCG \(software emulation\):.*'"$2" "$TEST_TMP/spaced.log")"
        check_match "... and info says what the probe found" "^KVM probe: +${3:-not run: the KVM device check failed}" "$PROBE_LINE"
        stop_daemon
}

# The probe's cache files (one per key) and the probe's QEMUs still running.
cache_files() {
        find "$SPACE_CACHE_DIR" -name 'accel-probe-*' -type f 2>/dev/null | sort
}
probe_qemus() {
        local p n=0
        for p in /proc/[0-9]*; do
                { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qF -- "$SPACE_RUNTIME_DIR/accel-probe/" && n=$((n + 1))
        done
        echo "$n"
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

# a KVM that speaks the API but refuses to create a VM (another hypervisor holds VT-x): a FUSE file whose ioctls
# kvm-double.py answers (a character device would need CUSE, which this kernel lacks)
if [ -c /dev/fuse ] && [ "$(id -u)" = 0 ]; then
        python3 "$(dirname "$0")/kvm-double.py" "$TEST_TMP/fuse" >"$TEST_TMP/kvm-double.out" 2>"$TEST_TMP/kvm-double.log" &
        track_pid $!
        wait_for 10 grep -q ready "$TEST_TMP/kvm-double.out" || bail_out "kvm-double.py did not mount: $(cat "$TEST_TMP/kvm-double.log")"
        export SPACE_KVM_DEVICE=$TEST_TMP/fuse/kvm
        accel_case "a KVM that refuses to create a VM" "KVM cannot create a VM: Device or resource busy \(another hypervisor"
        check_eq "... after it answered KVM's API version" "0xae00 0xae01" \
                "$(sed -n 's/^kvm-double: ioctl //p' "$TEST_TMP/kvm-double.log" | head -n 2 | tr '\n' ' ' | sed 's/ $//')"
        kill -TERM "${EXTRA_PIDS[-1]}"
        wait "${EXTRA_PIDS[-1]}" 2>/dev/null
else
        for c in "a KVM that refuses to create a VM: tcg, with the reason" "... and one warning in the log" \
                "... and info says what the probe found" "... after it answered KVM's API version"; do
                skip "$c" "needs /dev/fuse and root for the FUSE double"
        done
fi
check_eq "a device that fails its checks is not probed: nothing cached" "" "$(cache_files)"

# ---- this machine's kvm-pvm: the device checks object only to kvm-pvm, so the probe VM runs, and fails
if [ -e /sys/module/kvm_pvm ] && [ -c /dev/kvm ]; then
        unset SPACE_KVM_DEVICE
        PVM="/dev/kvm is kvm-pvm, which cannot run the stock guest kernel"
        HELLO="no agent hello within [0-9]+ s"
        accel_case "this machine's /dev/kvm (kvm-pvm)" "the probe VM under KVM failed: $HELLO; $PVM" "$HELLO\$"
        diag "the probe's start took $START_MS ms"
        check_eq "... its QEMU is gone, killed by its pid" 0 "$(probe_qemus)"
        check_eq "... and so is its run dir" no "$([ -e "$SPACE_RUNTIME_DIR/accel-probe" ] && echo yes || echo no)"
        CACHE=$(cache_files)
        check_eq "... its outcome cached in one file" 1 "$(printf '%s' "$CACHE" | grep -c .)"
        check_match "... which says what it found" "^result fail$" "$(cat "$CACHE" 2>/dev/null)"

        accel_case "a second start" "the probe VM under KVM failed: $HELLO \(cached from .* in $CACHE\); $PVM" \
                "$HELLO \(cached from [0-9TZ:-]+ in $CACHE\)"
        diag "the cached start took $START_MS ms"
        check_eq "... takes the cached outcome, starting at once (no probe: under 3 s, the probe alone takes 5)" yes \
                "$([ "$START_MS" -lt 3000 ] && echo yes || echo no)"

        printf 'garbage\n' >"$CACHE"
        accel_case "a corrupt cache file" "the probe VM under KVM failed: $HELLO; $PVM" "$HELLO\$"
        check_contains "... is ignored, saying so" "$CACHE is not an accelerator probe's cache of ours: ignored" \
                "$TEST_TMP/spaced.log"
        check_eq "... and replaced by the probe's outcome" "space-accel-probe 1" "$(head -n 1 "$CACHE")"

        sed -i 's/ cpuid=[0-9a-f]* / cpuid=0000000000000000 /' "$CACHE"
        check_contains "(a cache file doctored to another CPU's)" "cpuid=0000000000000000" "$CACHE"
        accel_case "a changed fingerprint" "the probe VM under KVM failed: $HELLO; $PVM" "$HELLO\$"
        check_eq "... makes the probe run again and its key is this host's once more" no \
                "$(grep -q 'cpuid=0000000000000000' "$CACHE" && echo yes || echo no)"

        # a daemon killed mid-probe leaves its probe's QEMU (a session of its own) spinning: the next one kills it
        rm -f "$CACHE"
        "$SPACED_BIN" >>"$TEST_TMP/spaced.log" 2>&1 </dev/null &
        KILLED=$!
        SEEN_PIDS+=("$KILLED")
        wait_for 10 test -s "$SPACE_RUNTIME_DIR/accel-probe/qemu.pid" || bail_out "the probe's QEMU did not start"
        read -r OLD_QEMU <"$SPACE_RUNTIME_DIR/accel-probe/qemu.pid"
        SEEN_PIDS+=("$OLD_QEMU")
        kill -KILL "$KILLED"
        wait "$KILLED" 2>/dev/null
        check_eq "a daemon killed mid-probe leaves its probe's QEMU running" 1 "$(probe_qemus)"
        accel_case "the next start" "the probe VM under KVM failed: $HELLO; $PVM" "$HELLO\$"
        check_eq "... kills it before its own probe" no "$(kill -0 "$OLD_QEMU" 2>/dev/null && echo yes || echo no)"
        check_eq "... and leaves none" 0 "$(probe_qemus)"

        SPACE_TEST_ACCEL=kvm write_config
        run timeout 60 "$SPACED_BIN"
        check_eq "accel = kvm on kvm-pvm: spaced refuses to start" 1 "$RC"
        check_match "... with the probe's reason" \
                "accel = kvm, but KVM cannot run sandboxes here: the probe VM under KVM failed: $HELLO \(cached from .*\); $PVM" \
                "$(cat "$ERR")"
        write_config
else
        for c in "the probe runs on kvm-pvm and fails" "a second start takes the cached outcome" \
                "a corrupt cache file is ignored" "a changed fingerprint probes again" \
                "a daemon killed mid-probe leaves a QEMU the next one kills" "accel = kvm refuses with the probe's reason"; do
                skip "$c" "this machine's /dev/kvm is not kvm-pvm"
        done
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
sc info --json >"$TEST_TMP/info.json"
check_eq "GET /v1/info has accel_probe: here why it did not run" "not run: the KVM device check failed" \
        "$(json "$TEST_TMP/info.json" 'd["accel_probe"]')"

done_testing
