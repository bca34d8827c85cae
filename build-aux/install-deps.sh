#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# install-deps.sh: installs every Debian 12 package that space needs to build, test and run.
# Run as root. Idempotent: when everything is installed already it only asks dpkg and exits.
# --print lists the packages and exits.

set -euo pipefail

PACKAGES=(
        # build
        gcc libc6-dev make autoconf automake libtool pkg-config
        libsystemd-dev libsqlite3-dev libcjson-dev libarchive-dev libmicrohttpd-dev
        libcurl4-openssl-dev libreadline-dev libbtrfsutil-dev libssl-dev zlib1g-dev
        # the VMM and guest images (guest/build-*.sh, templates/*/build.sh)
        qemu-system-x86 qemu-utils busybox-static bash-static e2fsprogs erofs-utils btrfs-progs
        lz4 xz-utils cpio kmod mmdebstrap
        # the guest's transparent capture: nft and its libraries go into the initramfs
        nftables
        # template recipes (spacectl template build): mmdebstrap's keyring checks, and user namespaces for
        # builds by users other than root
        gpg debian-archive-keyring uidmap
        # running and testing: systemd-socket-activate, setpriv, tests and benches
        systemd util-linux socat curl jq tmux python3
        # the docs test (t23): the shells that parse our completions, and man to render the pages
        zsh fish man-db bsdextrautils
        # the fuzz targets (tests/fuzz, make fuzz, t24): clang with libFuzzer, ASan and UBSan
        clang libclang-rt-14-dev
)

if [ "${1:-}" = --print ]; then
        printf '%s\n' "${PACKAGES[@]}"
        exit 0
fi

# One dpkg-query for all: names it does not know come back on stderr and count as missing.
installed=$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "${PACKAGES[@]}" 2>/dev/null |
            awk '$2 == "installed" { print $1 }' || true)
missing=()
for p in "${PACKAGES[@]}"; do
        grep -qxF "$p" <<<"$installed" || missing+=("$p")
done
# guest/build-kernel.sh downloads the cloud kernel with apt-get download: that needs package lists.
need_lists=0
apt-cache show linux-image-cloud-amd64 >/dev/null 2>&1 || need_lists=1
[ ${#missing[@]} -eq 0 ] && [ $need_lists -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
        [ ${#missing[@]} -eq 0 ] || echo "install-deps.sh: missing packages: ${missing[*]}" >&2
        [ $need_lists -eq 0 ] || echo "install-deps.sh: apt has no package lists (needed to fetch the guest kernel)" >&2
        echo "install-deps.sh: run as root (sudo $0)" >&2
        exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -q=2
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-deps.sh: installing ${missing[*]}" >&2
apt-get install -y -q=2 --no-install-recommends "${missing[@]}"
