#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""E2B's fork next to spacectl fork, in the same run (run by tests/bench/run.sh, BENCH_ONLY=e2b, with the newest
Python SDK: the pinned one has no fork).

One running sandbox forked into BENCH_E2B_FORK_N (default 10) until all of them answer a command: with the
unmodified SDK, `Sandbox.fork(count=N)` then `commands.run("true")` on each fork from N threads (as a program
that fans work out would), against `spacectl fork -n N SB` then `spacectl exec ID -- true` on each, in parallel.
A fresh source sandbox for each run on both sides; the two sides alternate. BENCH_E2B_FORK_RUNS (>= 5) runs
each; p50/p90/p99 in ms; JSON under "e2b_fork" in $BENCH_OUT. The template is BENCH_E2B_TEMPLATE (default
minimal).
"""

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

ENV = os.environ
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import log, stats, save_results  # noqa: E402

from e2b import Sandbox  # noqa: E402 - the SDK's venv runs this file

SPACECTL = ENV.get("SPACECTL_BIN", "spacectl")
TEMPLATE = ENV.get("BENCH_E2B_TEMPLATE", "minimal")
N = int(ENV.get("BENCH_E2B_FORK_N", "10"))
RUNS = max(5, int(ENV.get("BENCH_E2B_FORK_RUNS", "5")))


def spacectl(*args):
    r = subprocess.run([SPACECTL, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError("spacectl %s: %s" % (" ".join(args), r.stderr.strip()[:300]))
    return r.stdout


def e2b_run():
    src = Sandbox.create(TEMPLATE, timeout=600)
    forks = []
    try:
        src.commands.run("true")
        t0 = time.perf_counter()
        forks = src.fork(count=N, timeout=600)
        bad = [f for f in forks if isinstance(f, Exception)]
        if bad or len(forks) != N:
            raise RuntimeError("fork gave %d sandboxes and %d errors: %s" % (len(forks) - len(bad), len(bad),
                                                                            bad[:1]))
        with ThreadPoolExecutor(N) as pool:
            codes = list(pool.map(lambda f: f.commands.run("true").exit_code, forks))
        ms = (time.perf_counter() - t0) * 1000.0
        if any(codes):
            raise RuntimeError("a command in a fork failed: %s" % codes)
        return ms
    finally:
        for f in forks:
            if not isinstance(f, Exception):
                f.kill()
        src.kill()


def native_run():
    src = spacectl("create", TEMPLATE).strip()
    ids = []
    try:
        spacectl("exec", src, "--", "true")
        t0 = time.perf_counter()
        ids = spacectl("fork", "-q", "-n", str(N), src).split()
        if len(ids) != N:
            raise RuntimeError("spacectl fork printed %d ids" % len(ids))
        procs = [subprocess.Popen([SPACECTL, "exec", i, "--", "true"], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for i in ids]
        bad = [p.stderr.read()[:200] for p in procs if p.wait(timeout=300) != 0]
        ms = (time.perf_counter() - t0) * 1000.0
        if bad:
            raise RuntimeError("exec in a fork failed: %s" % bad[0])
        return ms
    finally:
        subprocess.run([SPACECTL, "rm", "-f", src, *ids], stdin=subprocess.DEVNULL, capture_output=True, timeout=300)


def main():
    res = {"template": TEMPLATE, "forks": N, "runs": RUNS}
    e2b, native = [], []
    # the template's base snapshot may need building: not what is measured
    spacectl("rm", "-f", spacectl("create", TEMPLATE).strip())
    for i in range(RUNS):
        log("e2b fork: run %d of %d" % (i + 1, RUNS))
        e2b.append(e2b_run())
        native.append(native_run())
    res["fork_to_all_answered_ms"] = {"e2b_sdk": stats(e2b, "ms"), "spacectl": stats(native, "ms")}
    save_results(ENV.get("BENCH_OUT", "bench-results.json"), "e2b_fork", res)

    print()
    print("Fork of one running sandbox into %d, until all %d answer a command (template %s)" % (N, N, TEMPLATE))
    print("%-44s %9s %9s %9s" % ("", "p50 ms", "p90 ms", "p99 ms"))
    for side, label in (("e2b_sdk", "E2B SDK Sandbox.fork + commands.run"), ("spacectl", "spacectl fork + exec")):
        st = res["fork_to_all_answered_ms"][side]
        print("%-44s %9.1f %9.1f %9.1f" % (label, st["p50"], st["p90"], st["p99"]))
    log("e2b fork: done")


if __name__ == "__main__":
    main()
