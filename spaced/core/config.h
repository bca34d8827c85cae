/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdint.h>
#include <sys/socket.h>

#include "core/error.h"
#include "vm/vmm.h"

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
        char *listen;               /* TCP listener "ADDR:PORT" or "off"; NULL = LISTEN_DEFAULT */
        int64_t idle_timeout;       /* default for new sandboxes, seconds; 0 = never suspend when idle */
        unsigned tcg_cache_mib;     /* TCG's translation cache per VM; 0 = VM_TCG_CACHE_MIB_DEFAULT */
} Config;

#define LISTEN_DEFAULT "127.0.0.1:7070"

void config_done(Config *c);
/* Reads `key = value` lines; a missing file is fine (defaults). Unknown keys or bad values: -EINVAL with a
 * message naming the line in reterr (ERROR_INVALID_ARGUMENT). */
int config_load(Config *c, const char *path, Error *reterr);
int accel_setting_from_string(const char *s, AccelSetting *ret);
uint64_t host_memory_mib(void);
/* Parses a TCP listen setting: "ADDR:PORT" where ADDR is an IPv4 loopback address, "localhost" or "[::1]"
 * (port 0 = any free port), or "off" (returns 0 with *ret_len = 0). -EINVAL when malformed, -EADDRNOTAVAIL
 * when ADDR is not a loopback address: the TCP API is for this machine only. */
int listen_address_parse(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len);
