#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Template benchmarks; run by tests/bench/run.sh (BENCH_ONLY=templates for this part alone).

(a) import: `spacectl template import` of rootfs tarballs (the minimal template plus incompressible files) of
    64 MiB, 512 MiB and 1 GiB (BENCH_IMPORT_MIB), each imported BENCH_IMPORT_RUNS times (removed in between so
    that every run builds the image), in seconds and MB/s of tarball, next to a raw baseline on the same
    tarball: `tar -x` into a directory plus `mkfs.ext4 -d` of it (what an import does at least, without
    digests or ownership).
(b) create from a template of each size: `spacectl create` -> first `spacectl exec SB true`, BENCH_TEMPLATE_CREATES
    times per template (each sandbox removed afterwards, untimed; the first create, which builds the base
    snapshot, is not counted). With a copy-on-write disk this does not depend on the template's size.

Percentiles are nearest-rank. Results go into $BENCH_OUT under "templates". Standard library only.
"""

import json
import math
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import pct, stats, log  # noqa: E402  (one definition of the percentiles for every bench)

ENV = os.environ
TMP = ENV["TEST_TMP"]
SPACECTL = ENV.get("SPACECTL_BIN", "spacectl")
LIB = ENV["SPACE_LIB_DIR"]
SIZES = [int(x) for x in ENV.get("BENCH_IMPORT_MIB", "64,512,1024").split(",")]
RUNS = max(1, int(ENV.get("BENCH_IMPORT_RUNS", "3")))
CREATES = max(3, int(ENV.get("BENCH_TEMPLATE_CREATES", "10")))
FILE_MIB = 8





def run(argv, timeout=3600, check=True):
    r = subprocess.run(argv, capture_output=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (" ".join(argv), r.returncode, r.stderr.decode(errors="replace")[-400:]))
    return r


def spacectl(*args, timeout=3600):
    return run([SPACECTL] + list(args), timeout=timeout)


def make_tarball(path, mib):
    """The minimal rootfs plus `mib` MiB (less the minimal's few MiB) of random files, 8 MiB each."""
    base = os.path.join(LIB, "templates/minimal/rootfs.tar")
    left = (mib << 20) - os.path.getsize(base)
    chunk = os.urandom(FILE_MIB << 20)
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tf:
        with tarfile.open(base) as src:
            for m in src.getmembers():
                tf.addfile(m, src.extractfile(m) if m.isfile() else None)
        d = tarfile.TarInfo("./data")
        d.type, d.mode, d.mtime = tarfile.DIRTYPE, 0o755, 86400
        tf.addfile(d)
        i = 0
        while left > 1024:
            n = min(len(chunk), left - 1024)
            ti = tarfile.TarInfo("./data/blob-%04d" % i)
            ti.size, ti.mode, ti.mtime = n, 0o644, 86400
            # a different first 8 bytes per file: no two files alike
            data = i.to_bytes(8, "little") + chunk[8:n]

            class R:
                def __init__(self, b):
                    self.b, self.o = b, 0

                def read(self, k=-1):
                    k = len(self.b) - self.o if k < 0 else k
                    v = self.b[self.o:self.o + k]
                    self.o += len(v)
                    return v
            tf.addfile(ti, R(data))
            left -= n + 512
            i += 1
    return os.path.getsize(path)


def raw_import(tarball):
    d = os.path.join(TMP, "raw-import")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d + "/root")
    size = os.path.getsize(tarball)
    t0 = time.perf_counter()
    run(["tar", "-C", d + "/root", "-xf", tarball])
    img = d + "/rootfs.ext4"
    with open(img, "wb") as f:
        f.truncate(((size * 5 // 4) >> 20 << 20) + (64 << 20))
    run(["mkfs.ext4", "-q", "-F", "-b", "4096", "-d", d + "/root", img])
    t = time.perf_counter() - t0
    shutil.rmtree(d, ignore_errors=True)
    return t


def bench_import(mib):
    tarball = os.path.join(TMP, "bench-%d.tar" % mib)
    log("making a %d MiB tarball of incompressible files" % mib)
    size = make_tarball(tarball, mib)
    tag = "bench/size:%d" % mib
    secs, digest = [], None
    for i in range(RUNS):
        if digest:
            spacectl("template", "rm", tag)
        t0 = time.perf_counter()
        r = spacectl("template", "import", tarball, "--tag", tag, "--quiet")
        secs.append(time.perf_counter() - t0)
        digest = r.stdout.decode().strip()
        log("import %d MiB run %d: %.2f s" % (mib, i + 1, secs[-1]))
    raw = [raw_import(tarball) for _ in range(RUNS)]
    os.unlink(tarball)
    info = json.loads(spacectl("template", "inspect", tag).stdout.decode())
    mbps = [size / 1e6 / s for s in secs]
    return {"tarball_bytes": size, "digest": digest, "files": info.get("files"), "image_bytes": info.get("image_bytes"),
            "import_s": stats(secs, "s"), "import_MBps": stats(mbps, "MB/s"),
            "raw_tar_x_plus_mkfs_s": stats(raw, "s"), "raw_MBps": stats([size / 1e6 / s for s in raw], "MB/s"),
            "ratio_p50": round(pct(secs, 50) / pct(raw, 50), 2)}, tag


def bench_create(tag):
    def one():
        t0 = time.perf_counter()
        sid = spacectl("create", tag).stdout.decode().strip()
        if not re.fullmatch(r"[0-9a-f]{32}", sid):
            raise RuntimeError("create printed %r" % sid)
        spacectl("exec", sid, "--", "true")
        t = (time.perf_counter() - t0) * 1000
        spacectl("rm", "-f", sid)
        return t
    first = one()  # builds the template's base snapshot (a cold boot)
    return {"first_create_ms": round(first, 1), "create_to_first_exec_ms": stats([one() for _ in range(CREATES)], "ms")}


def main():
    out_path = ENV.get("BENCH_OUT", "bench-results.json")
    res = {"runs": RUNS, "creates": CREATES, "imports": {}, "create": {}}
    tags = {}
    for mib in SIZES:
        res["imports"]["%d_MiB" % mib], tags[mib] = bench_import(mib)
    for mib in (min(SIZES), max(SIZES)):
        if "%d_MiB" % mib in res["create"]:
            continue
        log("create -> first exec from the %d MiB template" % mib)
        res["create"]["%d_MiB" % mib] = bench_create(tags[mib])
    small, big = res["create"]["%d_MiB" % min(SIZES)], res["create"]["%d_MiB" % max(SIZES)]
    res["create_big_over_small_p50"] = round(big["create_to_first_exec_ms"]["p50"] / small["create_to_first_exec_ms"]["p50"], 2)
    for mib in SIZES:
        spacectl("template", "rm", tags[mib])

    doc = {}
    if os.path.exists(out_path):
        try:
            with open(out_path) as f:
                doc = json.load(f)
        except ValueError:
            doc = {}
    doc["templates"] = res
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=2)

    print("\ntemplate import (%d runs each; raw = tar -x + mkfs.ext4 -d)" % RUNS)
    print("%-10s %10s %10s %10s %12s %12s" % ("size", "p50 s", "p90 s", "MB/s p50", "raw p50 s", "raw MB/s"))
    for mib in SIZES:
        r = res["imports"]["%d_MiB" % mib]
        print("%-10s %10.2f %10.2f %10.1f %12.2f %12.1f" % ("%d MiB" % mib, r["import_s"]["p50"], r["import_s"]["p90"],
                                                         r["tarball_bytes"] / 1e6 / r["import_s"]["p50"],
                                                         r["raw_tar_x_plus_mkfs_s"]["p50"], r["raw_MBps"]["p50"]))
    print("\ncreate -> first exec (%d creates each)" % CREATES)
    print("%-10s %10s %10s %10s" % ("template", "p50 ms", "p90 ms", "p99 ms"))
    for k, v in res["create"].items():
        c = v["create_to_first_exec_ms"]
        print("%-10s %10.1f %10.1f %10.1f" % (k.replace("_", " "), c["p50"], c["p90"], c["p99"]))
    print("big / small p50: %.2f" % res["create_big_over_small_p50"])


if __name__ == "__main__":
    main()
