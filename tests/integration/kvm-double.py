#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A /dev/kvm double that speaks KVM's API but refuses to create a VM (t41-accel).

kvm-double.py DIR: mounts a FUSE file system on DIR (root only) holding one file, DIR/kvm, whose ioctls answer
KVM_GET_API_VERSION with 12 and KVM_CREATE_VM with EBUSY, as a KVM does while another hypervisor holds the
CPU's virtualization. A character device would need CUSE, which this machine's kernel lacks; FUSE passes a
regular file's ioctls without data (_IO, as these two are) to the server as well, and vm_kvm_check() asks only
that the device opens read-write. Speaks the kernel's FUSE protocol on /dev/fuse itself: no libfuse. Serves
until SIGTERM or SIGINT, then unmounts. Prints "ready" on stdout once mounted.
"""

import ctypes
import errno
import os
import signal
import struct
import sys

KVM_GET_API_VERSION = 0xAE00
KVM_CREATE_VM = 0xAE01

LOOKUP, FORGET, GETATTR, OPEN, RELEASE, FLUSH, INIT, OPENDIR, RELEASEDIR, IOCTL, BATCH_FORGET, INTERRUPT = (
    1, 2, 3, 14, 18, 25, 26, 27, 29, 39, 42, 36)
NO_REPLY = (FORGET, BATCH_FORGET, INTERRUPT)
ROOT, KVM = 1, 2
IN_HEADER = struct.Struct("<IIQQIIIHH")   # len, opcode, unique, nodeid, uid, gid, pid, total_extlen, padding
OUT_HEADER = struct.Struct("<IiQ")        # len, error, unique

libc = ctypes.CDLL(None, use_errno=True)


def attr(node):
    mode = 0o040755 if node == ROOT else 0o100666
    # ino size blocks atime mtime ctime, atimensec mtimensec ctimensec mode nlink uid gid rdev blksize flags
    return struct.pack("<QQQQQQIIIIIIIIII", node, 0, 0, 0, 0, 0, 0, 0, 0, mode, 2 if node == ROOT else 1,
                       0, 0, 0, 4096, 0)


def answer(opcode, node, body):
    """(error, payload) for one request."""
    if opcode == INIT:
        major, minor, readahead, _ = struct.unpack_from("<IIII", body)
        # major minor max_readahead flags max_background congestion_threshold max_write time_gran max_pages
        # map_alignment flags2, unused[7]
        return 0, struct.pack("<IIIIHHIIHHI7I", 7, min(minor, 31), readahead, 0, 16, 12, 65536, 1, 0, 0, 0,
                              *([0] * 7))
    if opcode == LOOKUP:
        if node != ROOT or body.rstrip(b"\0") != b"kvm":
            return -errno.ENOENT, b""
        # nodeid generation entry_valid attr_valid entry_valid_nsec attr_valid_nsec, attr
        return 0, struct.pack("<QQQQII", KVM, 0, 1, 1, 0, 0) + attr(KVM)
    if opcode == GETATTR:
        return 0, struct.pack("<QII", 1, 0, 0) + attr(node)
    if opcode in (OPEN, OPENDIR):
        return 0, struct.pack("<QII", 0, 0, 0)   # fh open_flags padding
    if opcode in (RELEASE, RELEASEDIR, FLUSH):
        return 0, b""
    if opcode == IOCTL:
        _, _, cmd, _, _, _ = struct.unpack_from("<QIIQII", body)
        sys.stderr.write("kvm-double: ioctl 0x%x\n" % cmd)
        if cmd == KVM_GET_API_VERSION:
            return 0, struct.pack("<iIII", 12, 0, 0, 0)   # result flags in_iovs out_iovs
        if cmd == KVM_CREATE_VM:
            return -errno.EBUSY, b""
        return -errno.ENOTTY, b""
    return -errno.ENOSYS, b""


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: kvm-double.py DIR")
    where = os.path.abspath(sys.argv[1])
    os.makedirs(where, exist_ok=True)
    fd = os.open("/dev/fuse", os.O_RDWR)
    opts = "fd=%d,rootmode=40000,user_id=%d,group_id=%d" % (fd, os.getuid(), os.getgid())
    if libc.mount(b"kvm-double", where.encode(), b"fuse", 0, opts.encode()) != 0:
        sys.exit("kvm-double: mount %s: %s" % (where, os.strerror(ctypes.get_errno())))

    def stop(*_):
        libc.umount2(where.encode(), 2)   # MNT_DETACH
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("ready", flush=True)
    while True:
        try:
            req = os.read(fd, 1 << 20)
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.EINTR, errno.EAGAIN):
                continue   # an interrupted request, gone before we read it
            if e.errno == errno.ENODEV:
                stop()     # unmounted
            raise
        _, opcode, unique, node, _, _, _, _, _ = IN_HEADER.unpack_from(req)
        if opcode in NO_REPLY:
            continue
        error, payload = answer(opcode, node, req[IN_HEADER.size:])
        try:
            os.write(fd, OUT_HEADER.pack(OUT_HEADER.size + len(payload), error, unique) + payload)
        except OSError as e:
            if e.errno != errno.ENOENT:   # the request was interrupted meanwhile
                raise


if __name__ == "__main__":
    main()
