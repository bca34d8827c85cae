#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# --disk is enforced inside the guest (issue 4): a template with a small image (80 MiB here); a sandbox with
# --disk 96 gets a filesystem grown to 96 MiB at create; filling it gives the guest "No space left on device"
# while the sandbox keeps working and the host-side disk stays under 96 MiB plus qcow2 metadata; a --disk
# below the image is refused (disk_too_small, naming the minimum); checkpoints, forks and restores keep the
# grown size; the template's default size creates without growing.
. "$(dirname "$0")/lib.sh"

IMAGE_MIB=80
DISK_MIB=96

space_env_setup
add_small_template tiny "$IMAGE_MIB"
start_daemon

# df_total SANDBOX: the root filesystem's size in MiB as the guest's df sees it
df_total() {
        sc exec "$1" -- df -m / 2>/dev/null | awk 'NR == 2 { print $2 }'
}
df_avail() {
        sc exec "$1" -- df -m / 2>/dev/null | awk 'NR == 2 { print $4 }'
}
# about SIZE WANT: within the filesystem's own overhead (journal, inode tables: < 12 %) of WANT, never above
about() {
        [[ $1 =~ ^[0-9]+$ ]] && [ "$1" -le "$2" ] && [ "$1" -ge $(($2 * 88 / 100)) ]
}
# host_kib SANDBOX: what the sandbox's own disk (the file its data_dir/disk link names) takes on the host
host_kib() {
        du -k "$(readlink -f "$SPACE_STATE_DIR/sandboxes/$1/disk")" | awk '{ print $1 }'
}

# ---- too small
check_fails "--disk below the template's image is refused" sc create tiny --disk 64
check_contains "  ... saying how much it needs at least" "at least $IMAGE_MIB MiB" "$ERR"
ureq POST /v1/sandboxes -H 'Content-Type: application/json' -d '{"template": "tiny", "disk_mib": 64}'
check_status "  ... and over HTTP: 400 disk_too_small" 400 disk_too_small
check_eq "  ... and no sandbox was made" "" "$(sandbox_ids)"

# ---- the template's default: the image's size, no growing
create_sandbox SD tiny
[ -n "$SD" ] || { last_diag; bail_out "create from the small template failed"; }
t=$(df_total "$SD")
if about "$t" "$IMAGE_MIB"; then pass "the default disk is the template's $IMAGE_MIB MiB (df: $t MiB)"
else fail "the default disk is the template's $IMAGE_MIB MiB" "df total: '$t'"; fi
check_rc "remove it" 0 sc rm -f "$SD"

# ---- grown at create
t0=$(now_ms)
create_sandbox SB tiny --disk "$DISK_MIB" --name t19-main
[ -n "$SB" ] || { last_diag; bail_out "create --disk $DISK_MIB failed"; }
pass "create --disk $DISK_MIB ($(($(now_ms) - t0)) ms)"
check_rc "inspect" 0 sc inspect "$SB" --json
check_eq "  ... disk_mib is $DISK_MIB" "$DISK_MIB" "$(json "$OUT" 'd["disk_mib"]')"
t=$(df_total "$SB")
if about "$t" "$DISK_MIB"; then pass "the guest's filesystem is about $DISK_MIB MiB (df: $t MiB)"
else fail "the guest's filesystem is about $DISK_MIB MiB" "df total: '$t'"; fi
check_eq "the kernel sees a $DISK_MIB MiB disk" $((DISK_MIB * 2048)) "$(sc exec "$SB" -- cat /sys/block/vda/size 2>/dev/null)"

# ---- fill it
check_rc "write a file to keep" 0 sc exec "$SB" -- sh -c 'echo kept > /root/kept && sync'
run sc exec "$SB" -- dd if=/dev/zero of=/big bs=1M
if [ "$RC" -ne 0 ]; then pass "filling the disk fails in the guest (dd exit $RC)"; else fail "filling the disk fails in the guest"; fi
check_contains "  ... with No space left on device" "No space left on device" "$ERR"
run sc exec "$SB" -- sync
check_rc "the sandbox still answers" 0 sc exec "$SB" -- echo alive
check_eq "  ... and its file is intact" kept "$(sc exec "$SB" -- cat /root/kept 2>/dev/null)"
a=$(df_avail "$SB")
check_eq "the guest's filesystem is full (df available)" 0 "$a"
k=$(host_kib "$SB")
if [[ $k =~ ^[0-9]+$ ]] && [ "$k" -le $(((DISK_MIB + 8) * 1024)) ]; then
        pass "the host-side disk stays under $DISK_MIB MiB + metadata ($((k / 1024)) MiB)"
else fail "the host-side disk stays under $DISK_MIB MiB + metadata" "du: '$k' KiB"; fi
check_rc "rm of the big file" 0 sc exec "$SB" -- rm /big
a=$(df_avail "$SB")
if [[ $a =~ ^[0-9]+$ ]] && [ "$a" -ge $((DISK_MIB / 2)) ]; then pass "  ... frees the space ($a MiB available)"
else fail "  ... frees the space" "df available: '$a'"; fi
check_rc "and the disk takes writes again" 0 sc exec "$SB" -- sh -c 'dd if=/dev/zero of=/root/again bs=1M count=8 2>/dev/null && sync'

# ---- checkpoints, forks and restores keep the grown size
check_rc "checkpoint" 0 sc checkpoint "$SB" --name t19-cp
check_rc "fork the checkpoint" 0 sc fork t19-cp -n 1
FK=$(head -n1 "$OUT")
track_sandbox "$FK"
t=$(df_total "$FK")
if about "$t" "$DISK_MIB"; then pass "the fork's filesystem is $DISK_MIB MiB too (df: $t MiB)"
else fail "the fork's filesystem is $DISK_MIB MiB too" "df total: '$t'"; fi
check_eq "  ... on a $DISK_MIB MiB disk" $((DISK_MIB * 2048)) "$(sc exec "$FK" -- cat /sys/block/vda/size 2>/dev/null)"
check_rc "inspect the fork" 0 sc inspect "$FK" --json
check_eq "  ... disk_mib is $DISK_MIB" "$DISK_MIB" "$(json "$OUT" 'd["disk_mib"]')"
run sc exec "$FK" -- dd if=/dev/zero of=/big bs=1M
check_contains "the fork fills up at the same size" "No space left on device" "$ERR"
k=$(host_kib "$FK")
if [[ $k =~ ^[0-9]+$ ]] && [ "$k" -le $(((DISK_MIB + 8) * 1024)) ]; then
        pass "  ... and its own host-side layer stays under $DISK_MIB MiB + metadata ($((k / 1024)) MiB)"
else fail "  ... and its own host-side layer stays under $DISK_MIB MiB + metadata" "du: '$k' KiB"; fi
check_rc "fork a running sandbox" 0 sc fork "$SB" -n 1
FK2=$(head -n1 "$OUT")
track_sandbox "$FK2"
t=$(df_total "$FK2")
if about "$t" "$DISK_MIB"; then pass "a fork of the running sandbox keeps the size (df: $t MiB)"
else fail "a fork of the running sandbox keeps the size" "df total: '$t'"; fi
check_rc "restore the sandbox to the checkpoint" 0 sc restore "$SB" t19-cp
t=$(df_total "$SB")
if about "$t" "$DISK_MIB"; then pass "the restored sandbox keeps the size (df: $t MiB)"
else fail "the restored sandbox keeps the size" "df total: '$t'"; fi
check_eq "  ... and its file" kept "$(sc exec "$SB" -- cat /root/kept 2>/dev/null)"

check_rc "rm -f" 0 sc rm -f "$SB" "$FK" "$FK2"
check_rc "checkpoint rm" 0 sc checkpoint rm t19-cp
done_testing
