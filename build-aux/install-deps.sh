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
        libcurl4-openssl-dev libreadline-dev libbtrfsutil-dev libssl-dev zlib1g-dev libgnutls28-dev
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
        # the TLS listener's default name, space.localhost: *.localhost resolves to loopback through nss-myhostname
        libnss-myhostname
        # the docs test (t23): the shells that parse our completions, and man to render the pages
        zsh fish man-db bsdextrautils
        # the fuzz targets (tests/fuzz, make fuzz, t24): clang with libFuzzer, ASan and UBSan
        clang libclang-rt-14-dev
)

if [ "${1:-}" = --print ]; then
        printf '%s\n' "${PACKAGES[@]}"
        exit 0
fi

# nss-myhostname answers *.localhost (api.space.localhost, PORT-ID.space.localhost) only when the hosts line of
# /etc/nsswitch.conf names it: added after "files" when missing. Run after the packages are in (below) too.
nsswitch_myhostname() {
        [ -f /etc/nsswitch.conf ] || return 0
        grep -Eq '^hosts:.*[[:space:]]myhostname([[:space:]]|$)' /etc/nsswitch.conf && return 0
        if [ "$(id -u)" -ne 0 ]; then
                echo "install-deps.sh: /etc/nsswitch.conf's hosts line lacks myhostname (run as root to add it)" >&2
                return 1
        fi
        sed -i -E '/^hosts:/{s/^(hosts:[[:space:]]+files)([[:space:]]|$)/\1 myhostname\2/;t;s/^(hosts:[[:space:]]+)/\1myhostname /}' \
                /etc/nsswitch.conf
        echo "install-deps.sh: added myhostname to the hosts line of /etc/nsswitch.conf" >&2
}

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
if [ ${#missing[@]} -eq 0 ] && [ $need_lists -eq 0 ]; then
        nsswitch_myhostname
        exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
        [ ${#missing[@]} -eq 0 ] || echo "install-deps.sh: missing packages: ${missing[*]}" >&2
        [ $need_lists -eq 0 ] || echo "install-deps.sh: apt has no package lists (needed to fetch the guest kernel)" >&2
        echo "install-deps.sh: run as root (sudo $0)" >&2
        exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -q=2
if [ ${#missing[@]} -ne 0 ]; then
        echo "install-deps.sh: installing ${missing[*]}" >&2
        apt-get install -y -q=2 --no-install-recommends "${missing[@]}"
fi
nsswitch_myhostname
