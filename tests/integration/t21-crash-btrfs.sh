#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# t12's crash injection on a loop-mounted btrfs state dir: the same invariants for the btrfs disk store
# (subvolumes, reflinks and snapshots instead of qcow2 layers); skipped, with the reason, without root or btrfs.
SPACE_TEST_STATE_FS=btrfs exec bash "$(dirname "$0")/t12-crash-inject.sh"
