#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# build.sh OUTDIR
#
# Builds the `minimal` template offline: busybox-static (applets linked into /bin, /sbin, /usr/bin,
# /usr/sbin), bash-static as /bin/bash, /bin/sh = busybox sh, a root and a `user` (uid 1000) account.
#   OUTDIR/rootfs.tar      the root filesystem: owned by root, /home/user by 1000:1000
#   OUTDIR/template.conf   copied from beside this script
# spaced imports rootfs.tar into its template store (content-addressed ext4 images) when it changes.
#
# Works as non-root: ownership is written into the tar headers, not taken from the build tree.
# Reproducible: fixed modes, owners, order and timestamps (SOURCE_DATE_EPOCH, default 0 + 1 day), GNU format
# without atime or ctime, so the same inputs give the same bytes.

set -euo pipefail

die() { echo "templates/minimal/build.sh: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: build.sh OUTDIR"
OUTDIR=$1
SRCDIR=$(cd "$(dirname "$0")" && pwd)
CONF=$SRCDIR/template.conf

BUSYBOX=${BUSYBOX:-/bin/busybox}
BASH_STATIC=${BASH_STATIC:-/bin/bash-static}
export PATH="$PATH:/sbin:/usr/sbin"
for f in "$BUSYBOX" "$BASH_STATIC"; do
        [ -x "$f" ] || die "missing $f: run build-aux/install-deps.sh as root (busybox-static, bash-static)"
done
"$BUSYBOX" --list-full >/dev/null 2>&1 ||
        die "$BUSYBOX is not busybox-static (no --list-full): install busybox-static"
tar --version 2>/dev/null | grep -q 'GNU tar' || die "GNU tar is needed"
umask 022

epoch=${SOURCE_DATE_EPOCH:-86400}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/space-minimal.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root

mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,usr/local/sbin,etc,proc,sys,dev,tmp,run,root,home/user,var/tmp,lib,mnt}
chmod 1777 "$root/tmp" "$root/var/tmp"
chmod 0700 "$root/root"

cp "$BUSYBOX" "$root/bin/busybox"
cp "$BASH_STATIC" "$root/bin/bash"
chmod 0755 "$root/bin/busybox" "$root/bin/bash"

# Relative symlinks so the tree works both as / and when inspected from outside.
"$BUSYBOX" --list-full | while read -r applet; do
        [ -e "$root/$applet" ] || [ -L "$root/$applet" ] && continue
        case $applet in
                bin/*)  target=busybox ;;
                sbin/*) target=../bin/busybox ;;
                usr/*)  target=../../bin/busybox ;;
                *) continue ;;
        esac
        ln -s "$target" "$root/$applet"
done
# bash is the real bash; sh stays busybox's ash, which is what --list-full already linked.
for a in md5sum sha256sum head dd cat seq sleep yes env sh; do
        [ -e "$root/bin/$a" ] || [ -e "$root/usr/bin/$a" ] || die "busybox lacks the '$a' applet"
done

cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/bash
user:x:1000:1000:user:/home/user:/bin/bash
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
user:x:1000:
nogroup:x:65534:
EOF
cat >"$root/etc/shadow" <<'EOF'
root:*:1::::::
user:*:1::::::
nobody:*:1::::::
EOF
chmod 0640 "$root/etc/shadow"
echo space >"$root/etc/hostname"
cat >"$root/etc/hosts" <<'EOF'
127.0.0.1	localhost
::1	localhost ip6-localhost ip6-loopback
127.0.1.1	space
EOF
cat >"$root/etc/profile" <<'EOF'
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
EOF
: >"$root/etc/resolv.conf"

find "$root" -exec touch -h -d "@$epoch" {} +

# Everything root:root except user's home, in name order, with only mtimes: the same bytes every time.
tar_opts=(--format=gnu --sort=name --numeric-owner --mtime="@$epoch" -C "$root")
out=$tmp/rootfs.tar
tar -cf "$out" "${tar_opts[@]}" --owner=0 --group=0 --exclude=./home/user . || die "tar failed"
tar -rf "$out" "${tar_opts[@]}" --owner=1000 --group=1000 ./home/user || die "tar failed"

mkdir -p "$OUTDIR"
# In an in-tree build OUTDIR is this directory: leave the source alone then.
[ "$CONF" -ef "$OUTDIR/template.conf" ] || cp "$CONF" "$OUTDIR/template.conf"
mv "$out" "$OUTDIR/rootfs.tar"
