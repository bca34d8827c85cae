#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# tree.sh ROOTDIR: fills ROOTDIR with the `minimal` tree, for `spacectl template build templates/minimal`
# (the recipe's `build = tree.sh`, see space-template(5)). build.sh makes the tarball that ships as the
# builtin template; this unpacks that same tarball, owners and times included (a recipe build runs as root,
# or as root in a user namespace), so both ways give one tree and one digest.

set -euo pipefail

die() { echo "templates/minimal/tree.sh: $*" >&2; exit 1; }

[ $# -eq 1 ] && [ -d "$1" ] || die "usage: tree.sh ROOTDIR (an existing directory)"
root=$1
here=$(cd "$(dirname "$0")" && pwd)

out=$(mktemp -d "${TMPDIR:-/tmp}/space-minimal-tree.XXXXXX")
trap 'rm -rf "$out"' EXIT
"$here/build.sh" "$out"
tar -x --numeric-owner --same-owner --same-permissions -f "$out/rootfs.tar" -C "$root"
