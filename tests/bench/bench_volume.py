#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Volume mounts (issue 26); run by tests/bench/run.sh (BENCH_ONLY=volume runs it alone).

In one sandbox with a volume mounted at /data, BENCH_VOLUME_RUNS (>= 3, default 3) times each: a BENCH_VOLUME_MIB
(default 32) MiB file written with dd (1 MiB blocks, then fsync) and read back (a new open: the mount keeps no
pages across opens), in MB/s; and BENCH_VOLUME_FILES (default 200) files created with one shell loop, in ms. Each
is timed on the host around its exec, less the median of five execs of `sh -c :`.
Side by side, in the same run, the same on the guest's own disk (/root, ext4 on virtio-blk; its read cache
dropped before each read so that both reads go past the guest's page cache). Results go into $BENCH_OUT under
"volume" (merged). Percentiles nearest-rank. Standard library only.
"""

import os
import re
import subprocess
import sys
import time

ENV = os.environ
SPACECTL = ENV.get("SPACECTL_BIN", "spacectl")
MIB = max(4, int(ENV.get("BENCH_VOLUME_MIB", "32")))
RUNS = max(3, int(ENV.get("BENCH_VOLUME_RUNS", "3")))
FILES = max(20, int(ENV.get("BENCH_VOLUME_FILES", "200")))

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import stats, log, run, save_results  # noqa: E402

ID_RE = re.compile(r"[0-9a-f]{32}")
BASE = [0.0]  # seconds of an exec of `sh -c :`, left out of each timing (the exec's own round trip)


def spacectl(*args, timeout=900):
    return run([SPACECTL] + list(args), timeout)


def guest_usec(sid, body):
    t0 = time.perf_counter()
    spacectl("exec", sid, "--", "sh", "-c", body)
    return max(1.0, (time.perf_counter() - t0 - BASE[0]) * 1e6)


def one_place(sid, d, size):
    w = guest_usec(sid, "dd if=/dev/zero of=%s/bench.bin bs=1048576 count=%d conv=fsync 2>/dev/null" % (d, MIB))
    spacectl("exec", sid, "--", "sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches")
    r = guest_usec(sid, "cat %s/bench.bin > /dev/null" % d)
    spacectl("exec", sid, "--", "sh", "-c", "rm -rf %s/bench.bin %s/many; mkdir %s/many" % (d, d, d))
    c = guest_usec(sid, 'i=0; while [ $i -lt %d ]; do : > %s/many/f$i; i=$((i+1)); done' % (FILES, d))
    return size / w, size / r, c / 1000.0


def exec_base(sid):
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        spacectl("exec", sid, "--", "sh", "-c", ":")
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def bench():
    size = MIB * 1048576
    name = "bench-vol-%d" % os.getpid()
    spacectl("volume", "create", name, "--quota", "%dM" % (MIB * 4 + 64))
    sid = None
    res = {"file_mib": MIB, "runs": RUNS, "files": FILES}
    try:
        sid = spacectl("create", "--name", "bench-volume", "--volume", "%s:/data" % name).stdout.decode().strip()
        if not ID_RE.fullmatch(sid):
            raise RuntimeError("create printed %r" % sid)
        BASE[0] = exec_base(sid)
        res["exec_base_ms"] = round(BASE[0] * 1000.0, 1)
        vw, vr, vc, dw, dr, dc = [], [], [], [], [], []
        for i in range(RUNS):
            a = one_place(sid, "/data", size)
            b = one_place(sid, "/root", size)
            for lst, v in zip((vw, vr, vc, dw, dr, dc), a + b):
                lst.append(v)
            log("volume: run %d: volume write %.1f MB/s, read %.1f MB/s, %d creates %.0f ms; disk %.1f, %.1f MB/s, "
                "%.0f ms" % (i + 1, a[0], a[1], FILES, a[2], b[0], b[1], b[2]))
        res["volume_write_mb_s"] = stats(vw, "MB/s")
        res["volume_read_mb_s"] = stats(vr, "MB/s")
        res["volume_creates_ms"] = stats(vc, "ms")
        res["disk_write_mb_s"] = stats(dw, "MB/s")
        res["disk_read_mb_s"] = stats(dr, "MB/s")
        res["disk_creates_ms"] = stats(dc, "ms")
    finally:
        if sid:
            try:
                spacectl("rm", "-f", sid, timeout=300)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                log("rm: %s" % e)
        try:
            spacectl("volume", "rm", name)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            log("volume rm: %s" % e)
    return res


def main():
    out_path = ENV.get("BENCH_OUT", "bench-results.json")
    res = {"loadavg_start": [round(x, 2) for x in os.getloadavg()]}
    log("volume: %d MiB written and read, %d file creates, %d runs, on a mounted volume and on the guest's disk" %
        (MIB, FILES, RUNS))
    rc = 0
    try:
        res.update(bench())
    except (RuntimeError, OSError, ValueError, IndexError, subprocess.TimeoutExpired) as e:
        log("volume failed: %s" % e)
        res["error"] = str(e)
        rc = 1
    res["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    save_results(out_path, "volume", res)

    print("\nvolume mounts, %d MiB file, %d creates (%s)" % (MIB, FILES, out_path))
    print("%-44s %8s %8s %8s %4s" % ("", "p50", "p90", "p99", "n"))
    for name, key in (("volume write (dd, fsync), MB/s", "volume_write_mb_s"),
                      ("  guest disk write, MB/s", "disk_write_mb_s"),
                      ("volume read (a new open), MB/s", "volume_read_mb_s"),
                      ("  guest disk read (caches dropped), MB/s", "disk_read_mb_s"),
                      ("volume: %d creates, ms" % FILES, "volume_creates_ms"),
                      ("  guest disk: %d creates, ms" % FILES, "disk_creates_ms")):
        d = res.get(key)
        if d:
            print("%-44s %8.1f %8.1f %8.1f %4d" % (name, d["p50"], d["p90"], d["p99"], d["n"]))
        else:
            print("%-44s %8s" % (name, "error" if "error" in res else "-"))
    return rc


if __name__ == "__main__":
    sys.exit(main())
