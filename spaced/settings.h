/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdint.h>

#include "vmm.h"

typedef enum AccelSetting {
        ACCEL_AUTO,
        ACCEL_KVM,
        ACCEL_TCG,
} AccelSetting;

typedef struct Config {
        AccelSetting accel;
        uint64_t memory_limit_mib;  /* sum of guest memory of live sandboxes; 0 = 80% of MemTotal */
        char *qemu_binary;
        char *state_dir;
} Config;

void config_done(Config *c);
/* Reads `key = value` lines; a missing file is fine (defaults). Unknown keys or bad values: -EINVAL with a
 * message naming the line in *reterr_message. */
int config_load(Config *c, const char *path, char **reterr_message);
int accel_setting_from_string(const char *s, AccelSetting *ret);
uint64_t host_memory_mib(void);
