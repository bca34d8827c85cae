#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Template build benchmarks; run by tests/bench/run.sh (BENCH_ONLY=build for this part alone).

For the recipes templates/minimal and templates/seed (space-template(5)):
(a) build: `spacectl template build RECIPE -o FILE` (the tree and its tarball, no import), in seconds and MB/s of
    tarball. seed once with an empty package cache (cold: every .deb downloaded from Debian's archive), then
    BENCH_BUILD_RUNS times with the cache that run filled (warm); minimal BENCH_BUILD_RUNS times.
(b) build + import: `spacectl template build RECIPE` (what a user runs), BENCH_BUILD_RUNS times for minimal,
    once for seed, with the template's size and file count.
Raw baselines in the same run: for minimal its build.sh (what make runs to produce the builtin tarball); for
seed a plain `mmdebstrap --variant=minbase --include=...` of the same packages to a tarball, without the
recipe's hooks (package cache, files, run commands, clean-ups); it downloads every package, so compare it with
the cold build. BENCH_BUILD_RUNS (default 2), BENCH_BUILD_RAW=0 leaves the baselines out.

Results go into $BENCH_OUT under "build" (merged). Percentiles are nearest-rank. Standard library only.
"""

import json
import math
import os
import shutil
import subprocess
import sys
import time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import pct, stats, log  # noqa: E402  (one definition of the percentiles for every bench)

ENV = os.environ
TMP = ENV["TEST_TMP"]
SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SPACECTL = ENV.get("SPACECTL_BIN", "spacectl")
RUNS = max(1, int(ENV.get("BENCH_BUILD_RUNS", "2")))
RAW = ENV.get("BENCH_BUILD_RAW", "1") != "0"





def run(argv, env=None, timeout=3600):
    t0 = time.perf_counter()
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, env=env)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (" ".join(argv), r.returncode, r.stderr.decode(errors="replace")[-600:]))
    return dt, r.stdout.decode().strip()


def build_to_file(recipe, out, env):
    if os.path.exists(out):
        os.unlink(out)
    dt, _ = run([SPACECTL, "template", "build", recipe, "-o", out], env=env)
    return dt, os.path.getsize(out)


def bench_recipe(name, cold_cache):
    recipe = os.path.join(SRC, "templates", name)
    out = os.path.join(TMP, "bench-%s.tar" % name)
    env = dict(ENV)
    res = {}
    if cold_cache:
        env["SPACE_CACHE_DIR"] = os.path.join(TMP, "bench-cache")
        shutil.rmtree(env["SPACE_CACHE_DIR"], ignore_errors=True)
        log("%s: build with an empty package cache" % name)
        dt, size = build_to_file(recipe, out, env)
        res["build_cold_s"] = round(dt, 3)
        res["build_cold_MBps"] = round(size / 1e6 / dt, 2)
    times = []
    size = 0
    for i in range(RUNS):
        log("%s: build %d/%d (-o)" % (name, i + 1, RUNS))
        dt, size = build_to_file(recipe, out, env)
        times.append(dt)
    res["tarball_bytes"] = size
    res["build_s"] = stats(times, "s")
    res["build_MBps_p50"] = round(size / 1e6 / res["build_s"]["p50"], 2)

    full = []
    digest = None
    for i in range(RUNS if not cold_cache else 1):
        log("%s: build + import %d" % (name, i + 1))
        dt, digest = run([SPACECTL, "template", "build", recipe, "--tag", "bench/%s:build" % name], env=env)
        full.append(dt)
    res["build_and_import_s"] = stats(full, "s")
    res["build_and_import_MBps_p50"] = round(size / 1e6 / res["build_and_import_s"]["p50"], 2)
    _, js = run([SPACECTL, "template", "inspect", digest])
    t = json.loads(js)
    res["digest"] = digest
    res["template_size_bytes"] = t.get("size_bytes")
    res["template_files"] = t.get("files")
    res["template_image_bytes"] = t.get("image_bytes")
    run([SPACECTL, "template", "rm", "bench/%s:build" % name])
    os.unlink(out)
    return res


def raw_minimal():
    times = []
    for i in range(RUNS):
        d = os.path.join(TMP, "raw-minimal")
        shutil.rmtree(d, ignore_errors=True)
        dt, _ = run(["bash", os.path.join(SRC, "templates/minimal/build.sh"), d])
        times.append(dt)
        size = os.path.getsize(os.path.join(d, "rootfs.tar"))
        shutil.rmtree(d, ignore_errors=True)
    return {"what": "templates/minimal/build.sh OUTDIR", "s": stats(times, "s"), "tarball_bytes": size}


def raw_seed():
    out = os.path.join(TMP, "raw-seed.tar")
    argv = ["mmdebstrap", "--variant=minbase", "--format=tar", "--quiet",
            "--include=bash,coreutils,procps,python3,python3-pip,curl,ca-certificates", "bookworm", out]
    if os.geteuid() == 0:
        argv.insert(1, "--mode=root")
    if os.path.exists("/etc/apt/sources.list.d/debian.sources"):
        argv.append("/etc/apt/sources.list.d/debian.sources")
    dt, _ = run(argv)
    size = os.path.getsize(out)
    os.unlink(out)
    return {"what": "mmdebstrap --variant=minbase --include=(seed's packages), no cache, no hooks", "s": round(dt, 3),
            "tarball_bytes": size, "MBps": round(size / 1e6 / dt, 2)}


def main():
    out_path = ENV.get("BENCH_OUT", "bench-results.json")
    res = {"runs": RUNS, "euid": os.geteuid(), "minimal": bench_recipe("minimal", False),
           "seed": bench_recipe("seed", True)}
    if RAW:
        log("raw: minimal's build.sh")
        res["raw_minimal"] = raw_minimal()
        log("raw: plain mmdebstrap of seed's packages")
        res["raw_seed"] = raw_seed()

    doc = {}
    if os.path.exists(out_path):
        try:
            with open(out_path) as f:
                doc = json.load(f)
        except ValueError:
            doc = {}
    doc["build"] = res
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=2)

    print("\ntemplate build (%d runs; MB/s of rootfs tarball)" % RUNS)
    print("%-34s %9s %9s %9s" % ("", "p50 s", "max s", "MB/s"))
    for name in ("minimal", "seed"):
        r = res[name]
        if "build_cold_s" in r:
            print("%-34s %9.2f %9s %9.1f" % (name + ": build, empty package cache", r["build_cold_s"], "", r["build_cold_MBps"]))
        print("%-34s %9.2f %9.2f %9.1f" % (name + ": build (-o)", r["build_s"]["p50"], r["build_s"]["max"], r["build_MBps_p50"]))
        b = r["build_and_import_s"]
        print("%-34s %9.2f %9.2f %9.1f" % (name + ": build + import", b["p50"], b["max"], r["build_and_import_MBps_p50"]))
        print("%-34s %s, %.1f MiB in %d files" % ("", r["digest"][:19], r["template_size_bytes"] / 1048576.0, r["template_files"]))
    if RAW:
        m, s = res["raw_minimal"], res["raw_seed"]
        print("%-34s %9.2f %9.2f %9.1f" % ("raw: minimal build.sh", m["s"]["p50"], m["s"]["max"], m["tarball_bytes"] / 1e6 / m["s"]["p50"]))
        print("%-34s %9.2f %9s %9.1f" % ("raw: plain mmdebstrap (downloads)", s["s"], "", s["MBps"]))


if __name__ == "__main__":
    main()
