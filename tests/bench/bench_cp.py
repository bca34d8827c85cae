#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""spacectl cp throughput (issue 4); run by tests/bench/run.sh (BENCH_ONLY=cp runs it alone).

(k) `spacectl cp FILE SB:/root/` and `spacectl cp SB:/root/FILE OUT` of a BENCH_CP_MIB (default 256) MiB file of
    random bytes, BENCH_CP_RUNS (>= 3, default 3) times each, in MB/s (10^6 bytes per second) and ms, with the
    sha256 checked once each way; next to a raw read of the same file on the host (`cat FILE > /dev/null`, page
    cache as it is: nothing is dropped) in the same run.

The file goes to the guest's disk (the minimal template's 1 GiB ext4), so the figure includes the guest's
writes through virtio-blk. Results go into $BENCH_OUT under "cp" (merged). Percentiles nearest-rank. Standard
library only.
"""

import hashlib
import json
import os
import re
import subprocess
import sys
import time

ENV = os.environ
BUILD = ENV.get("TOP_BUILDDIR", ".")
TMP = ENV["TEST_TMP"]
SPACECTL = ENV.get("SPACECTL_BIN", "spacectl")
MIB = max(16, int(ENV.get("BENCH_CP_MIB", "256")))
RUNS = max(3, int(ENV.get("BENCH_CP_RUNS", "3")))

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import stats, log, run, save_results  # noqa: E402

ID_RE = re.compile(r"[0-9a-f]{32}")


def spacectl(*args, timeout=900):
    return run([SPACECTL] + list(args), timeout)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def timed_s(argv, timeout=900):
    t0 = time.perf_counter()
    run(argv, timeout)
    return time.perf_counter() - t0


def asan_build():
    try:
        out = subprocess.run(["ldd", os.path.join(BUILD, "spaced/spaced")], capture_output=True, timeout=30).stdout
        return b"libasan" in out
    except (OSError, subprocess.TimeoutExpired):
        return False


def bench():
    size = MIB * 1048576
    src = os.path.join(TMP, "cp-bench.bin")
    out = os.path.join(TMP, "cp-bench.out")
    with open(src, "wb") as f:
        for _ in range(MIB):
            f.write(os.urandom(1048576))
    want = sha256(src)

    sid = spacectl("create", "--name", "bench-cp").stdout.decode().strip()
    if not ID_RE.fullmatch(sid):
        raise RuntimeError("create printed %r" % sid)
    res = {"file_mib": MIB, "runs": RUNS, "asan": asan_build()}
    try:
        ins, outs, raw = [], [], []
        for i in range(RUNS):
            # each way, then the raw read, so that all three see the same load
            s = timed_s([SPACECTL, "cp", "-q", src, "%s:/root/cp-bench.bin" % sid])
            ins.append(s)
            if i == 0:
                got = spacectl("exec", sid, "--", "sha256sum", "/root/cp-bench.bin").stdout.decode().split()[0]
                if got != want:
                    raise RuntimeError("sha256 in the guest is %s, not %s" % (got, want))
            if os.path.exists(out):
                os.unlink(out)
            s = timed_s([SPACECTL, "cp", "-q", "%s:/root/cp-bench.bin" % sid, out])
            outs.append(s)
            if i == 0 and sha256(out) != want:
                raise RuntimeError("sha256 of the copy out differs")
            raw.append(timed_s(["sh", "-c", 'cat "$1" >/dev/null', "_", src]))
            log("cp: run %d: in %.1f MB/s, out %.1f MB/s, raw host read %.0f MB/s" %
                (i + 1, size / ins[-1] / 1e6, size / outs[-1] / 1e6, size / raw[-1] / 1e6))
        res["in_mb_s"] = stats([size / s / 1e6 for s in ins], "MB/s")
        res["in_ms"] = stats([s * 1000.0 for s in ins], "ms")
        res["out_mb_s"] = stats([size / s / 1e6 for s in outs], "MB/s")
        res["out_ms"] = stats([s * 1000.0 for s in outs], "ms")
        res["raw_host_read_mb_s"] = stats([size / s / 1e6 for s in raw], "MB/s")
    finally:
        try:
            spacectl("rm", "-f", sid, timeout=300)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            log("rm: %s" % e)
        for p in (src, out):
            if os.path.exists(p):
                os.unlink(p)
    return res


def main():
    out_path = ENV.get("BENCH_OUT", "bench-results.json")
    res = {"loadavg_start": [round(x, 2) for x in os.getloadavg()]}
    log("cp: %d MiB in and out, %d runs each" % (MIB, RUNS))
    rc = 0
    try:
        res.update(bench())
    except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as e:
        log("cp failed: %s" % e)
        res["error"] = str(e)
        rc = 1
    res["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    save_results(out_path, "cp", res)

    print("\nspacectl cp, %d MiB file%s (%s)" % (MIB, " [ASan build]" if res.get("asan") else "", out_path))
    print("%-44s %8s %8s %8s %4s" % ("", "p50", "p90", "p99", "n"))
    for name, key in (("cp in  (host -> sandbox disk), MB/s", "in_mb_s"),
                      ("cp out (sandbox disk -> host), MB/s", "out_mb_s"),
                      ("  raw: cat FILE > /dev/null on the host, MB/s", "raw_host_read_mb_s")):
        d = res.get(key)
        if d:
            print("%-44s %8.1f %8.1f %8.1f %4d" % (name, d["p50"], d["p90"], d["p99"], d["n"]))
        else:
            print("%-44s %8s" % (name, "error" if "error" in res else "-"))
    return rc


if __name__ == "__main__":
    sys.exit(main())
