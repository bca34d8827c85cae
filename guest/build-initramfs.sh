#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# build-initramfs.sh AGENT_BINARY KERNEL_OUTDIR OUT.cpio
#
# Packs the guest initramfs as an uncompressed newc cpio (the kernel's PVH boot skips decompression
# anyway, and an uncompressed archive unpacks fastest under TCG):
#   /init                        AGENT_BINARY (mode 0755)
#   /bin/busybox + /bin/APPLET   busybox-static and its applets, for debugging and scripted inits
#   /lib/modules-space/*.ko      KERNEL_OUTDIR/modules (from build-kernel.sh)
#   /lib/modules-space/order     module file names in load order
#   /lib/space-net/              nft (NFT, default /usr/sbin/nft), the libraries it links and the dynamic
#                                loader, run by the agent to program the transparent capture before the
#                                root switch; left out with a warning when nft is not installed
#   /dev/console (c 5 1), /dev/null (c 1 3), /proc /sys /tmp /run /mnt
#
# Needs no root: the tree goes through `cpio --owner 0:0`, and the two device nodes, which only root
# could mknod, are written by hand as a second newc archive appended to the first (the kernel unpacks
# concatenated archives in order). Reproducible: sorted names, fixed mtimes (SOURCE_DATE_EPOCH,
# default one day after the epoch), inodes renumbered.

set -euo pipefail

die() { echo "build-initramfs.sh: $*" >&2; exit 1; }

[ $# -eq 3 ] || die "usage: build-initramfs.sh AGENT_BINARY KERNEL_OUTDIR OUT.cpio"
AGENT=$1
KDIR=$2
OUT=$3
BUSYBOX=${BUSYBOX:-/bin/busybox}
NFT=${NFT:-/usr/sbin/nft}
epoch=${SOURCE_DATE_EPOCH:-86400}

[ -f "$AGENT" ] || die "agent binary '$AGENT' not found: build it first"
[ -s "$KDIR/modules/order" ] || die "$KDIR/modules/order missing: run guest/build-kernel.sh $KDIR first"
[ -x "$BUSYBOX" ] || die "missing $BUSYBOX: install busybox-static"
command -v cpio >/dev/null || die "missing 'cpio': install cpio"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/space-initramfs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root

mkdir -p "$root"/{bin,dev,proc,sys,tmp,run,mnt,lib/modules-space}
cp "$AGENT" "$root/init"
chmod 0755 "$root/init"
cp "$BUSYBOX" "$root/bin/busybox"
chmod 0755 "$root/bin/busybox"
for applet in $("$BUSYBOX" --list); do
        [ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
done

while read -r ko; do
        [ -n "$ko" ] || continue
        case $ko in */*|.*) die "bad module name '$ko' in $KDIR/modules/order" ;; esac
        [ -f "$KDIR/modules/$ko" ] || die "$KDIR/modules/$ko listed in order but missing: rerun guest/build-kernel.sh"
        cp "$KDIR/modules/$ko" "$root/lib/modules-space/$ko"
        echo "$ko"
done <"$KDIR/modules/order" >"$root/lib/modules-space/order"

# nft is dynamic: the agent runs it through the loader we ship (ld.so --library-path), so nothing in the
# initramfs needs a /lib64 or an ld.so.cache.
if [ -x "$NFT" ] && command -v ldd >/dev/null; then
        mkdir -p "$root/lib/space-net"
        cp "$NFT" "$root/lib/space-net/nft"
        libs=$(ldd "$NFT" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\/.*ld-linux/ { print $1 }')
        [ -n "$libs" ] || die "ldd found no libraries for $NFT"
        for lib in $libs; do
                cp -L "$lib" "$root/lib/space-net/${lib##*/}"
        done
        [ -f "$root/lib/space-net/ld-linux-x86-64.so.2" ] || die "no ld-linux-x86-64.so.2 among $NFT's libraries"
else
        echo "build-initramfs.sh: warning: no $NFT (install nftables): the guest gets no transparent capture" >&2
fi

find "$root" -exec touch -h -d "@$epoch" {} +

(cd "$root" && find . -mindepth 1 | LC_ALL=C sort |
        cpio -o -H newc --quiet --owner 0:0 --reproducible) >"$tmp/out.cpio" ||
        die "cpio failed"

# newc entry: "070701", then ino mode uid gid nlink mtime filesize devmajor devminor rdevmajor rdevminor
# namesize check as 8 hex digits each, the NUL-terminated name padded to 4 bytes; no data for nodes.
newc_entry() { # NAME MODE RDEVMAJOR RDEVMINOR INO
        local name=$1 namesize=$((${#1} + 1)) pad
        printf '070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X' \
                "$5" "$2" 0 0 1 "$epoch" 0 0 0 "$3" "$4" "$namesize" 0
        printf '%s\0' "$name"
        pad=$(( (4 - (110 + namesize) % 4) % 4 ))
        head -c "$pad" /dev/zero
}
{
        newc_entry dev/console $((0020000 | 0600)) 5 1 900001
        newc_entry dev/null    $((0020000 | 0666)) 1 3 900002
        newc_entry TRAILER!!!  0 0 0 0
} >>"$tmp/out.cpio"

mkdir -p "$(dirname "$OUT")"
mv "$tmp/out.cpio" "$OUT"
