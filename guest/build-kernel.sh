#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# build-kernel.sh OUTDIR
#
# Makes the guest kernel from Debian's cloud kernel package, without installing it:
#   OUTDIR/vmlinux         the uncompressed ELF kernel, booted through PVH (qemu -kernel)
#   OUTDIR/modules/*.ko    the modules the guest needs, plain (MODULE_COMPRESS_NONE) .ko files
#   OUTDIR/modules/order   their file names, one a line, in load order
#   OUTDIR/kernel-release  the uname -r string
#
# Environment: GUEST_KERNEL_PACKAGE (default: what linux-image-cloud-amd64 depends on),
# SPACE_CACHE_DIR (default ${XDG_CACHE_HOME:-$HOME/.cache}/space), GUEST_MODULES (space-separated
# module names, default below). Idempotent: does nothing when OUTDIR already matches the package.

set -euo pipefail

die() { echo "build-kernel.sh: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: build-kernel.sh OUTDIR"
OUTDIR=$1

# virtio_mmio finds the devices (ACPI), virtio_blk the root disk, virtio_console the agent port.
# ext4 is built into the cloud kernel; erofs and overlay are for read-only template roots.
# crc32c is what ext4's metadata checksums ask for (crypto API; built in on cloud, but harmless).
# dummy and nftables (NAT with redirect, reject) are the transparent capture of outbound connections
# (guest/agent/net-capture.c); conntrack also gives the agent SO_ORIGINAL_DST.
# pvpanic_mmio binds QEMU's pvpanic (ACPI QEMU0001): a panicking kernel tells QEMU, which stops the VM in
# guest-panicked for the daemon to see (spaced/vm/vm-events-watch.c), even when root in the guest set
# kernel.panic to 0, where the kernel would otherwise spin for ever instead of resetting.
GUEST_MODULES=${GUEST_MODULES:-"virtio_mmio virtio_blk virtio_console erofs overlay loop dummy nf_tables nft_chain_nat nft_redir nft_reject_inet pvpanic_mmio fuse"}
CACHE=${SPACE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/space}

for tool in apt-get apt-cache dpkg-deb depmod modprobe lz4 xz od grep; do
        command -v "$tool" >/dev/null || die "missing '$tool': run build-aux/install-deps.sh as root"
done

pkg=${GUEST_KERNEL_PACKAGE:-}
if [ -z "$pkg" ]; then
        pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null |
              sed -n 's/^ *Depends: \(linux-image-[^ ]*-cloud-amd64\)$/\1/p' | head -n1)
        [ -n "$pkg" ] || die "cannot resolve linux-image-cloud-amd64: run 'apt-get update' (as root), or set GUEST_KERNEL_PACKAGE=linux-image-<version>-cloud-amd64"
fi

# Already built from this package? Then we are done.
if [ -f "$OUTDIR/.package" ] && [ "$(cat "$OUTDIR/.package")" = "$pkg $GUEST_MODULES" ] &&
   [ -s "$OUTDIR/vmlinux" ] && [ -s "$OUTDIR/modules/order" ] && [ -s "$OUTDIR/kernel-release" ]; then
        exit 0
fi

mkdir -p "$CACHE/debs" || die "cannot create cache directory $CACHE"
deb=$(ls "$CACHE/debs/${pkg}_"*.deb 2>/dev/null | head -n1 || true)
if [ -z "$deb" ]; then
        # apt-get download writes to the current directory; -o makes it work as non-root too.
        # As root, apt warns that _apt cannot write to a private cache dir and downloads anyway: keep quiet.
        if ! out=$(cd "$CACHE/debs" && apt-get download -q=2 "$pkg" 2>&1); then
                echo "$out" >&2
                die "'apt-get download $pkg' failed: check that the Debian archive is reachable and 'apt-get update' was run"
        fi
        deb=$(ls "$CACHE/debs/${pkg}_"*.deb 2>/dev/null | head -n1 || true)
        [ -n "$deb" ] || die "apt-get download $pkg produced no .deb in $CACHE/debs"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/space-kernel.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
dpkg-deb -x "$deb" "$tmp/root" || die "cannot unpack $deb (remove it to download again)"

bz=$(ls "$tmp/root/boot/"vmlinuz-* 2>/dev/null | head -n1 || true)
[ -n "$bz" ] || die "$deb has no /boot/vmlinuz-*"
kver=${bz##*/vmlinuz-}
[ -d "$tmp/root/lib/modules/$kver" ] || die "$deb has no /lib/modules/$kver"

config="$tmp/root/boot/config-$kver"
if [ -f "$config" ]; then
        grep -q '^CONFIG_PVH=y' "$config" || die "$pkg is not built with CONFIG_PVH=y: it cannot boot as a PVH vmlinux"
        grep -q '^CONFIG_EXT4_FS=y' "$config" ||
                die "$pkg does not build ext4 in; add ext4 and its dependencies to GUEST_MODULES"
        # cgroup v2 and its freezer (core since 5.2) come with CONFIG_CGROUPS; CONFIG_CGROUP_FREEZER is v1's
        grep -q '^CONFIG_CGROUPS=y' "$config" ||
                echo "warning: $pkg has no CONFIG_CGROUPS=y: the agent cannot freeze the workload around snapshots," \
                        "so forks may share their parent's random state for a moment" >&2
fi

# The bzImage payload is an LZ4 (cloud) or XZ (generic) stream; find its magic and decompress from there.
# Trailing garbage after the stream makes the decompressors complain, so judge by the result, not the exit code.
find_magic() { # FILE HEXBYTES -> byte offsets
        LC_ALL=C grep -obUaP "$2" "$1" | cut -d: -f1
}
extracted=
for off in $(find_magic "$bz" '\x02\x21\x4c\x18'); do
        tail -c +$((off + 1)) "$bz" | lz4 -dc 2>/dev/null >"$tmp/vmlinux" || true
        if [ "$(head -c4 "$tmp/vmlinux" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ]; then extracted=lz4; break; fi
done
if [ -z "$extracted" ]; then
        for off in $(find_magic "$bz" '\xfd\x37\x7a\x58\x5a\x00'); do
                tail -c +$((off + 1)) "$bz" | xz -dc 2>/dev/null >"$tmp/vmlinux" || true
                if [ "$(head -c4 "$tmp/vmlinux" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ]; then extracted=xz; break; fi
        done
fi
[ -n "$extracted" ] || die "could not extract an ELF vmlinux from $bz (neither LZ4 nor XZ payload found)"

depmod -b "$tmp/root" "$kver" || die "depmod failed on the unpacked $pkg"

# Resolve the load order: each module's dependency chain, first occurrence wins.
mkdir -p "$tmp/modules"
: >"$tmp/modules/order"
for m in $GUEST_MODULES; do
        deps=$(modprobe -d "$tmp/root" -S "$kver" --show-depends "$m" 2>&1) ||
                die "module '$m' not found in $pkg: $deps"
        while read -r kind path _; do
                [ "$kind" = insmod ] || continue   # 'builtin X' needs nothing
                name=${path##*/}
                grep -qxF "$name" "$tmp/modules/order" && continue
                cp "$path" "$tmp/modules/$name"
                echo "$name" >>"$tmp/modules/order"
        done <<<"$deps"
done

# Replace OUTDIR's contents in one go so a failure above leaves the old kernel usable.
mkdir -p "$OUTDIR"
rm -rf "$OUTDIR/modules.new"
mv "$tmp/modules" "$OUTDIR/modules.new"
mv "$tmp/vmlinux" "$OUTDIR/vmlinux"
rm -rf "$OUTDIR/modules"
mv "$OUTDIR/modules.new" "$OUTDIR/modules"
echo "$kver" >"$OUTDIR/kernel-release"
echo "$pkg $GUEST_MODULES" >"$OUTDIR/.package"
