#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# build.sh OUTDIR
#
# Builds the `minimal` template offline: busybox-static (applets linked into /bin, /sbin, /usr/bin,
# /usr/sbin), bash-static as /bin/bash, /bin/sh = busybox sh, a root and a `user` (uid 1000) account.
#   OUTDIR/rootfs.ext4     sparse ext4 image, size disk_mib from template.conf, label "root"
#   OUTDIR/template.conf   copied from beside this script
#
# Works as non-root: ownership inside the image is fixed with debugfs, not taken from the build tree.
# Reproducible: fixed UUID, hash seed and timestamps (SOURCE_DATE_EPOCH, default 0 + 1 day).

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
for tool in mkfs.ext4 debugfs; do
        command -v "$tool" >/dev/null || die "missing '$tool': install e2fsprogs"
done

disk_mib=$(sed -n 's/^[[:space:]]*disk_mib[[:space:]]*=[[:space:]]*\([0-9]\+\)[[:space:]]*$/\1/p' "$CONF" | tail -n1)
disk_mib=${disk_mib:-1024}
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

# Ownership: everything root:root except user's home. debugfs does not follow the last symlink.
# ctime and atime too: mkfs copies the build tree's, which touch cannot set or reading changed.
{
        echo "sif / ctime @$epoch"; echo "sif / atime @$epoch"
        (cd "$root" && find . -mindepth 1 | LC_ALL=C sort) | while read -r p; do
                p=${p#.}
                case $p in
                        /home/user|/home/user/*) u=1000 ;;
                        *) u=0 ;;
                esac
                echo "sif \"$p\" uid $u"
                echo "sif \"$p\" gid $u"
                echo "sif \"$p\" ctime @$epoch"
                echo "sif \"$p\" atime @$epoch"
        done
} >"$tmp/owners.debugfs"

img=$tmp/rootfs.ext4
rm -f "$img"
truncate -s "${disk_mib}M" "$img"
E2FSPROGS_FAKE_TIME=$epoch mkfs.ext4 -q -F -d "$root" -L root \
        -U 5ace0000-0000-4000-8000-000000000001 -E root_owner=0:0,hash_seed=5ace0000-0000-4000-8000-000000000002 \
        "$img" "${disk_mib}M" || die "mkfs.ext4 failed"
E2FSPROGS_FAKE_TIME=$epoch debugfs -w -f "$tmp/owners.debugfs" "$img" >/dev/null 2>"$tmp/debugfs.err" ||
        { cat "$tmp/debugfs.err" >&2; die "debugfs could not set ownership"; }
grep -v '^debugfs ' "$tmp/debugfs.err" | grep -q . && { cat "$tmp/debugfs.err" >&2; die "debugfs reported errors"; }

mkdir -p "$OUTDIR"
# In an in-tree build OUTDIR is this directory: leave the source alone then.
[ "$CONF" -ef "$OUTDIR/template.conf" ] || cp "$CONF" "$OUTDIR/template.conf"
mv "$img" "$OUTDIR/rootfs.ext4"
