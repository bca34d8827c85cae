/* SPDX-License-Identifier: Apache-2.0 */
/* The accelerator's probe (vm/accel-probe.c): its QEMU command line is a sandbox's under KVM without the root
 * disk; and its cache (vm/accel-cache.c): what it writes it reads back, and anything else (garbage, another
 * key, an old failure, a file that is not ours) is refused, never trusted. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "core/util.h"
#include "vm/vmm.h"
#include "tap.h"

#define KEY "accel=kvm qemu=7.2.22 kernel=6.1 microcode=0x1 cpuid=0123456789abcdef guest-kernel=sha256:aa initramfs=sha256:bb"
#define NOW 1800000000LL

static const char *after(char **v, const char *opt) {
        for (size_t i = 0; v && v[i]; i++)
                if (streq(v[i], opt))
                        return v[i + 1];
        return NULL;
}

static bool has_substr(char **v, const char *s) {
        for (size_t i = 0; v && v[i]; i++)
                if (strstr(v[i], s))
                        return true;
        return false;
}

static int fake_wait(const char *agent_socket, int timeout_ms, Error *reterr) {
        (void) agent_socket;
        (void) timeout_ms;
        (void) reterr;
        return 0;
}

static void test_argv(void) {
        _cleanup_strv_free_ char **probe = NULL, **sandbox = NULL;
        VmAccelProbe p = {
                .run_dir = "/run/user/0/space/accel-probe",
                .kernel = "/usr/lib/space/vmlinux",
                .initrd = "/usr/lib/space/initramfs.cpio",
                .confine = VM_CONFINE_AUTO,
                .timeout_ms = VM_ACCEL_PROBE_TIMEOUT_MS,
                .wait_hello = fake_wait,
        };
        VmConfig sb = {
                .run_dir = "/run/user/0/space/sb-1",
                .kernel = p.kernel,
                .initrd = p.initrd,
                .disk = "/var/lib/space/sb-1/disk.qcow2",
                .disk_format = "qcow2",
                .mem_path = "/var/lib/space/base/x/base.mem",
                .vcpus = 2,
                .memory_mib = 512,
                .accel = VM_ACCEL_KVM,
        };
        const char *append;

        ok(vm_accel_probe_argv(&p, &probe) == 0 && vm_build_argv(&sb, &sandbox) == 0, "the probe's argv builds");
        ok(streq_ptr(after(probe, "-accel"), "kvm") && streq_ptr(after(probe, "-cpu"), after(sandbox, "-cpu")) &&
                   streq_ptr(after(probe, "-M"), after(sandbox, "-M")),
           "-accel kvm with a sandbox's machine and CPU under KVM: %s %s", after(probe, "-M") ?: "?",
           after(probe, "-cpu") ?: "?");
        append = after(probe, "-append");
        ok(!after(probe, "-drive") && !has_substr(probe, "virtio-blk") && append && !strstr(append, "space.root"),
           "no root disk, and no space.root (the agent says hello from the initramfs): %s", append ?: "?");
        ok(streq_ptr(after(probe, "-kernel"), p.kernel) && streq_ptr(after(probe, "-initrd"), p.initrd),
           "the guest kernel and initramfs");
        ok(has_substr(probe, "socket,path=/run/user/0/space/accel-probe/agent.sock,server=on,wait=off,id=agent0") &&
                   has_substr(probe, "virtserialport,chardev=agent0,name=agent"),
           "the agent's channel in the probe's run dir");
        ok(has_substr(probe, "mem-path=/run/user/0/space/accel-probe/probe.mem,share=off") &&
                   streq_ptr(after(probe, "-smp"), "1"),
           "its RAM mapped privately from a file in its run dir, one vCPU");
        ok(streq_ptr(after(probe, "-sandbox"), after(sandbox, "-sandbox")) && has_substr(probe, "-no-reboot"),
           "the same seccomp sandbox as a sandbox's QEMU");

        VmAccelProbe bad = p;
        bad.run_dir = "relative";
        char **none = NULL;
        ok(vm_accel_probe_argv(&bad, &none) == -EINVAL && !none, "a relative run dir is refused");
        bad = p;
        bad.timeout_ms = 0;
        ok(vm_accel_probe_argv(&bad, &none) == -EINVAL, "no timeout is refused");
}

static int parse(const char *text, int64_t now, VmAccelCache *ret) {
        return vm_accel_cache_parse(text, KEY, now, ret);
}

static void test_parse(void) {
        _cleanup_free_ char *text = NULL, *key = NULL, *path = NULL, *path2 = NULL;
        VmAccelCache in = { .key = (char *) KEY, .time = NOW - 60, .ok = false, .outcome = (char *) "no agent hello within 5 s" };
        VmAccelCache out = {};

        ok(vm_accel_cache_key("accel=kvm qemu=7.2.22 kernel=6.1 microcode=0x1 cpuid=0123456789abcdef", "sha256:aa",
                              "sha256:bb", &key) == 0 && streq(key, KEY),
           "the key: the host's fingerprint under KVM, the guest kernel's and initramfs's digests");
        ASSERT(vm_accel_cache_path("/c", KEY, &path) == 0 && vm_accel_cache_path("/c", KEY " x", &path2) == 0);
        ok(strncmp(path, "/c/accel-probe-", 15) == 0 && strlen(path) == 15 + 16 && !streq(path, path2),
           "one file per key, named by its hash: %s", path);
        ok(vm_accel_cache_format(&in, &text) == 0 && parse(text, NOW, &out) == 0 && streq(out.key, KEY) &&
                   out.time == NOW - 60 && !out.ok && streq(out.outcome, in.outcome),
           "what is written reads back");
        vm_accel_cache_done(&out);

        ok(vm_accel_cache_parse(text, KEY " guest-kernel=other", NOW, &out) == -ESTALE,
           "another key (a changed fingerprint or guest) is stale");
        ok(parse(text, NOW + 25 * 3600, &out) == -ESTALE, "a failure older than a day is stale");
        in.ok = true;
        free(text);
        text = NULL;
        ASSERT(vm_accel_cache_format(&in, &text) == 0);
        ok(parse(text, NOW + 400 * 24 * 3600LL, &out) == 0 && out.ok, "a success stands until its key changes");
        vm_accel_cache_done(&out);

        static const struct {
                const char *text, *why;
        } garbage[] = {
                { "", "an empty file" },
                { "garbage\n", "garbage" },
                { "space-accel-probe 2\nkey " KEY "\ntime 1799999999\nresult ok\noutcome x\n", "another version" },
                { "space-accel-probe 1\nkey " KEY "\ntime 1799999999\nresult ok\n", "a missing line" },
                { "space-accel-probe 1\nkey " KEY "\ntime 1799999999\nresult ok\noutcome x", "a cut-off last line" },
                { "space-accel-probe 1\nkey " KEY "\ntime 1799999999\nresult ok\noutcome x\nmore\n", "trailing lines" },
                { "space-accel-probe 1\ntime 1799999999\nkey " KEY "\nresult ok\noutcome x\n", "lines out of order" },
                { "space-accel-probe 1\nkey " KEY "\ntime -5\nresult ok\noutcome x\n", "a negative time" },
                { "space-accel-probe 1\nkey " KEY "\ntime 0179999999\nresult ok\noutcome x\n", "a time with a leading 0" },
                { "space-accel-probe 1\nkey " KEY "\ntime 99999999999999999999\nresult ok\noutcome x\n", "a time too long" },
                { "space-accel-probe 1\nkey " KEY "\ntime 1900000000\nresult ok\noutcome x\n", "a time in the future" },
                { "space-accel-probe 1\nkey " KEY "\ntime 1799999999\nresult yes\noutcome x\n", "an unknown result" },
                { "space-accel-probe 1\nkey " KEY "\ntime 1799999999\nresult ok\noutcome \n", "an empty outcome" },
                { "space-accel-probe 1\nkey " KEY "\ntime 1799999999\nresult ok\noutcome a\033[2Jb\n", "an escape sequence" },
                { "space-accel-probe 1\nkey " KEY "\ntime 1799999999\nresult ok\noutcome x\r\n", "a carriage return" },
        };
        for (size_t i = 0; i < ELEMENTSOF(garbage); i++)
                ok(parse(garbage[i].text, NOW, &out) == -EBADMSG, "refused as garbage: %s", garbage[i].why);
}

static void test_files(void) {
        char dir[] = "/tmp/test-accel-probe-XXXXXX";
        _cleanup_free_ char *sub = NULL, *path = NULL, *link = NULL, *fifo = NULL, *big = NULL;
        VmAccelCache in = { .key = (char *) KEY, .time = NOW, .ok = true, .outcome = (char *) "the agent said hello in 300 ms" };
        VmAccelCache out = {};
        struct stat st;

        ASSERT(mkdtemp(dir));
        ASSERT(asprintf(&sub, "%s/cache/space", dir) > 0 && asprintf(&path, "%s/accel-probe-x", sub) > 0);
        ok(vm_accel_cache_load(path, KEY, NOW, &out) == -ENOENT, "nothing cached: -ENOENT");
        ok(vm_accel_cache_save(path, &in) == 0 && stat(sub, &st) == 0 && (st.st_mode & 0777) == 0700 &&
                   stat(path, &st) == 0 && (st.st_mode & 0777) == 0600,
           "saved, its directory made 0700 and the file 0600");
        ok(vm_accel_cache_load(path, KEY, NOW, &out) == 0 && out.ok && streq(out.outcome, in.outcome),
           "and loaded back");
        vm_accel_cache_done(&out);

        ASSERT(asprintf(&link, "%s/link", sub) > 0 && symlink(path, link) == 0);
        ok(vm_accel_cache_load(link, KEY, NOW, &out) == -ELOOP, "a symlink is not followed");
        ASSERT(asprintf(&fifo, "%s/fifo", sub) > 0 && mkfifo(fifo, 0600) == 0);
        ok(vm_accel_cache_load(fifo, KEY, NOW, &out) == -EBADMSG, "a FIFO is refused, without blocking");
        ASSERT(asprintf(&big, "%s/big", sub) > 0);
        {
                _cleanup_close_ int fd = open(big, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
                ASSERT(fd >= 0 && ftruncate(fd, 8192) == 0);
        }
        ok(vm_accel_cache_load(big, KEY, NOW, &out) == -EBADMSG, "a file too large is refused");
        {
                _cleanup_close_ int fd = open(big, O_WRONLY | O_TRUNC | O_CLOEXEC);
                static const char nul[] = "space-accel-probe 1\nkey " KEY "\ntime 1799999999\nresult ok\noutcome x\0y\n";
                ASSERT(fd >= 0 && write(fd, nul, sizeof nul - 1) == (ssize_t) sizeof nul - 1);
        }
        ok(vm_accel_cache_load(big, KEY, NOW, &out) == -EBADMSG, "a NUL inside is refused");
        if (geteuid() == 0) {
                ASSERT(chown(path, 65534, 65534) == 0);
                ok(vm_accel_cache_load(path, KEY, NOW, &out) == -EBADMSG, "a file someone else owns is refused");
        } else
                ok(true, "# SKIP a file someone else owns: needs root to make one");
        ok(vm_accel_cache_save(path, &in) == 0 && stat(path, &st) == 0 && st.st_uid == geteuid() &&
                   vm_accel_cache_load(path, KEY, NOW, &out) == 0,
           "a save replaces what was there with a file of our own");
        vm_accel_cache_done(&out);
        VmAccelCache nl = in;
        nl.outcome = (char *) "two\nlines";
        ok(vm_accel_cache_save(path, &nl) == -EINVAL, "an outcome that would break the format is not written");

        (void) rm_rf(dir);
}

int main(void) {
        plan(9 + 6 + 15 + 10);
        test_argv();
        test_parse();
        test_files();
        return done();
}
