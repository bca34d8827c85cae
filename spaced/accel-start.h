/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The accelerator the daemon uses, decided once at start (accel-start.c; ARCHITECTURE.md, "The accelerator").
 * Beside main.c, above every subsystem, because the probe joins vm/'s QEMU, channel/'s hello and sandbox/'s
 * guest kernel. */

#include "core/config.h"
#include "core/manager.h"

/* Sets m->accel, m->accel_reason and m->accel_probe as setting asks. tcg: TCG, no check. auto and kvm: the
 * device checks (vm_kvm_check()), then, when they pass or object only that the device is kvm-pvm, the probe VM
 * (vm_accel_probe()), its outcome taken from the per-user cache when it holds this host's and this guest's.
 * auto falls back to TCG with one warning that says why and what to do; kvm refuses: -ENODEV, logged. Call
 * after detect_confinement(): the probe's QEMU is confined as sandboxes' are. */
int accel_decide(Manager *m, AccelSetting setting);
