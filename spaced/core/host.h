/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What the host gives the VMs, as the configuration and the Manager hold it: the accelerator, whether QEMU is
 * confined, the disk store's backend. Here, below vm/ and disk/, so that core names them without including
 * those subsystems; vm/vmm.h and disk/disk.h document them. */

typedef enum VmAccel {
        VM_ACCEL_TCG,
        VM_ACCEL_KVM,
} VmAccel;

/* Whether QEMU runs in namespaces of its own, its mount namespace holding only its own files (vm/jail.c). auto:
 * when the host allows unprivileged user namespaces, else unconfined, which vm_start() says; on: a sandbox fails
 * to start without them. */
typedef enum VmConfine {
        VM_CONFINE_AUTO,
        VM_CONFINE_ON,
        VM_CONFINE_OFF,
} VmConfine;

typedef enum DiskBackend {
        DISK_BACKEND_QCOW2,  /* qcow2 overlays */
        DISK_BACKEND_BTRFS,  /* raw files in btrfs subvolumes, reflinks and snapshots */
} DiskBackend;
