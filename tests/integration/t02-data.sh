#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Data comes through intact: 20 MiB in through exec -i, 20 MiB out, every byte value, both streams.
. "$(dirname "$0")/lib.sh"

space_env_setup
start_daemon

SIZE=$((20 * 1024 * 1024))
DATA=$TEST_TMP/data.bin
head -c "$SIZE" /dev/urandom >"$DATA"
HOST_MD5=$(md5sum <"$DATA" | cut -d' ' -f1)
HOST_SHA=$(sha256sum <"$DATA" | cut -d' ' -f1)
python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 64 + bytes(range(255, -1, -1)))' >"$TEST_TMP/bytes.bin"

create_sandbox SB
[ -n "$SB" ] || { last_diag; bail_out "create failed"; }
pass "create a sandbox"

# Safety net per transfer: 20 MiB takes seconds even under TCG and ASan.
DATA_TIMEOUT=${SPACE_TEST_DATA_TIMEOUT:-90}
sct() {
        timeout -k 5 "$DATA_TIMEOUT" spacectl "$@"
}

# ---- stdin: a small transfer first, so that a broken stdin path fails fast instead of timing out 5 times
head -c 1024 "$DATA" >"$TEST_TMP/small.bin"
check_rc "exec -i of 1 KiB: wc -c exits 0" 0 sct exec -i "$SB" -- wc -c <"$TEST_TMP/small.bin"
check_eq "exec -i of 1 KiB: the guest counts 1024 bytes" 1024 "$(tr -d ' \n' <"$OUT")"
STDIN_OK=1
[ "$RC" -eq 0 ] || STDIN_OK=0

# check_in DESC EXPECTED CMD...: check_rc, unless stdin is already known to be broken.
check_in() {
        if [ $STDIN_OK = 1 ]; then
                check_rc "$@"
        else
                : >"$OUT"
                : >"$ERR"
                fail "$1" "not attempted: exec -i of 1 KiB failed above"
        fi
}

# ---- 20 MiB in
t0=$(now_ms)
check_in "20 MiB piped through exec -i md5sum exits 0" 0 sct exec -i "$SB" -- md5sum <"$DATA"
diag "20 MiB in: $(($(now_ms) - t0)) ms"
check_eq "the guest's md5 of the 20 MiB equals the host's" "$HOST_MD5" "$(cut -d' ' -f1 <"$OUT")"

check_in "exec -i wc -c counts 20 MiB" 0 sct exec -i "$SB" -- wc -c <"$DATA"
check_eq "wc -c in the guest" "$SIZE" "$(tr -d ' \n' <"$OUT")"

check_rc "exec -i with empty stdin sees EOF at once" 0 sct exec -i "$SB" -- wc -c </dev/null
check_eq "empty stdin is 0 bytes" 0 "$(tr -d ' \n' <"$OUT")"

# ---- 20 MiB out, generated in the guest (deterministic), independent of stdin
SEQ_SHA=$(seq 1 3000000 | head -c "$SIZE" | sha256sum | cut -d' ' -f1)
t0=$(now_ms)
check_rc "20 MiB of output generated in the guest exits 0" 0 sct exec "$SB" -- sh -c "seq 1 3000000 | head -c $SIZE"
diag "20 MiB out (seq): $(($(now_ms) - t0)) ms"
check_eq "20 MiB out: size" "$SIZE" "$(stat -c %s "$OUT")"
check_eq "20 MiB out: sha256 equals the host's seq" "$SEQ_SHA" "$(sha256sum <"$OUT" | cut -d' ' -f1)"
check_eq "20 MiB out: stderr is empty" 0 "$(stat -c %s "$ERR")"

# ---- random data: copy in, then 20 MiB out
check_in "copy 20 MiB of random data into the guest with exec -i cat" 0 \
        sct exec -i "$SB" -- sh -c 'mkdir -p /tmp && cat > /tmp/f' <"$DATA"
COPIED=$RC
check_rc "sha256sum in the guest" 0 sct exec "$SB" -- sha256sum /tmp/f
check_eq "the file in the guest has the host's sha256" "$HOST_SHA" "$(cut -d' ' -f1 <"$OUT")"

if [ "$COPIED" -eq 0 ] && [ $STDIN_OK = 1 ]; then
        t0=$(now_ms)
        check_rc "exec cat of the 20 MiB random file exits 0" 0 sct exec "$SB" -- cat /tmp/f
        diag "20 MiB out (cat): $(($(now_ms) - t0)) ms"
        check_eq "20 MiB random out: sha256 equals the original" "$HOST_SHA" "$(sha256sum <"$OUT" | cut -d' ' -f1)"
        check_rc "exec cat of the file to stderr exits 0" 0 sct exec "$SB" -- sh -c 'cat /tmp/f >&2'
        check_eq "20 MiB on stderr: sha256 equals the original" "$HOST_SHA" "$(sha256sum <"$ERR" | cut -d' ' -f1)"
        check_eq "20 MiB on stderr: stdout is empty" 0 "$(stat -c %s "$OUT")"
else
        fail "20 MiB of random data back out" "not attempted: the copy into the guest failed above"
fi

# ---- every byte value, in and out, on both streams
BYTES_SHA=$(sha256sum <"$TEST_TMP/bytes.bin" | cut -d' ' -f1)
check_in "all 256 byte values through exec -i cat" 0 sct exec -i "$SB" -- cat <"$TEST_TMP/bytes.bin"
check_eq "stdout is byte-identical" "$BYTES_SHA" "$(sha256sum <"$OUT" | cut -d' ' -f1)"
check_in "all 256 byte values through exec -i to stderr" 0 sct exec -i "$SB" -- sh -c 'cat >&2' <"$TEST_TMP/bytes.bin"
check_eq "stderr is byte-identical" "$BYTES_SHA" "$(sha256sum <"$ERR" | cut -d' ' -f1)"
check_rc "NUL bytes and lone CR come out as is" 0 sc exec "$SB" -- printf 'a\000b\rc\n\000'
check_eq "printf of NUL and CR" "$(printf 'a\000b\rc\n\000' | od -An -tx1 | tr -d ' \n')" "$(od -An -tx1 <"$OUT" | tr -d ' \n')"

# ---- both streams at once, interleaved, large: nothing lost or crossed
check_rc "1 MiB on each stream at once" 0 sct exec "$SB" -- sh -c "seq 1 3000000 | head -c 1048576 & seq 1 3000000 | head -c 1048576 >&2; wait"
FIRST_MIB=$(seq 1 3000000 | head -c 1048576 | sha256sum | cut -d' ' -f1)
check_eq "stdout: the first MiB" "$FIRST_MIB" "$(sha256sum <"$OUT" | cut -d' ' -f1)"
check_eq "stderr: the first MiB" "$FIRST_MIB" "$(sha256sum <"$ERR" | cut -d' ' -f1)"

check_rc "rm" 0 sc rm "$SB"
done_testing
