#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""spacectl's start-up cost; run by tests/bench/run.sh (BENCH_ONLY=cli: this part alone), with its daemon.

Agents call spacectl thousands of times, so what it pays before and around main() matters: the shared
libraries it maps and relocates, and the page faults that come with them (dear on virtualised hosts). Measured
for `spacectl --help` (no daemon), `spacectl version` (one GET over the unix socket; it starts nothing) and
/bin/true (the floor): wall time p50/p90/p99 over BENCH_CLI_RUNS (>= 200) runs, minor page faults from
os.wait4's rusage, and the shared objects the dynamic loader initialises (LD_DEBUG=libs, one extra run).

BENCH_CLI_BASELINE=/path/to/an/older/spacectl measures that binary too, interleaved with this one in the same
run, so before and after are side by side under the same load. Results go into $BENCH_OUT under "cli" (merged
with what the other parts wrote). Standard library only.
"""

import json
import os
import sys
import time

ENV = os.environ
SPACECTL = ENV.get("SPACECTL_BIN", "spacectl")
BASELINE = ENV.get("BENCH_CLI_BASELINE", "")
RUNS = max(200, int(ENV.get("BENCH_CLI_RUNS", "200")))
TRUE = "/bin/true"

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from bench import log, pct, stats, save_results  # noqa: E402


def which(name):
    if os.sep in name:
        return name
    for d in ENV.get("PATH", "").split(os.pathsep):
        p = os.path.join(d or ".", name)
        if os.access(p, os.X_OK):
            return p
    raise RuntimeError("%s is not in PATH" % name)


def spawn(argv, env=None, stderr_fd=None):
    """Runs argv with stdio on /dev/null; returns (wall ms, rusage, exit status, stderr text if captured)."""
    devnull = os.open(os.devnull, os.O_RDWR)
    acts = [(os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, devnull, 1),
            (os.POSIX_SPAWN_DUP2, stderr_fd if stderr_fd is not None else devnull, 2)]
    try:
        t0 = time.perf_counter()
        pid = os.posix_spawn(argv[0], argv, env if env is not None else ENV, file_actions=acts)
        _, status, ru = os.wait4(pid, 0)
        ms = (time.perf_counter() - t0) * 1000.0
    finally:
        os.close(devnull)
    return ms, ru, os.waitstatus_to_exitcode(status)


def loaded_objects(argv):
    """The shared objects the loader initialises for argv (LD_DEBUG=libs, its "calling init" lines)."""
    r, w = os.pipe()
    env = dict(ENV, LD_DEBUG="libs")
    try:
        spawn(argv, env=env, stderr_fd=w)
    finally:
        os.close(w)
    with os.fdopen(r, "rb") as f:
        text = f.read().decode(errors="replace")
    names = []
    for line in text.splitlines():
        if "calling init:" in line:
            names.append(os.path.basename(line.split("calling init:", 1)[1].strip()))
    return sorted(set(names))


def main():
    out_path = ENV.get("BENCH_OUT", "bench-results.json")
    binaries = [("current", which(SPACECTL))]
    if BASELINE:
        if not os.access(BASELINE, os.X_OK):
            raise RuntimeError("BENCH_CLI_BASELINE=%s is not an executable" % BASELINE)
        binaries.append(("baseline", os.path.abspath(BASELINE)))

    # (key, label, argv, exit status it must have)
    cases = [("true", "/bin/true", [TRUE], 0)]
    for tag, path in binaries:
        cases.append(("help_" + tag, "spacectl --help (%s)" % tag, [path, "--help"], 0))
        cases.append(("version_" + tag, "spacectl version (%s)" % tag, [path, "version"], 0))

    # version must reach the daemon, or it measures a refused connect
    for tag, path in binaries:
        r, w = os.pipe()
        try:
            rc = spawn([path, "version", "--json"], stderr_fd=w)[2]
        finally:
            os.close(w)
        os.close(r)
        if rc != 0:
            raise RuntimeError("%s version exited %d" % (path, rc))

    walls = {k: [] for k, *_ in cases}
    faults = {k: [] for k, *_ in cases}
    for _ in range(3):  # warm the page cache
        for _k, _l, argv, _rc in cases:
            spawn(argv)
    for i in range(RUNS):
        # rotate the order so neither binary always runs right after the other
        for j in range(len(cases)):
            k, _label, argv, want = cases[(i + j) % len(cases)]
            ms, ru, rc = spawn(argv)
            if rc != want:
                raise RuntimeError("%s exited %d" % (" ".join(argv), rc))
            walls[k].append(ms)
            faults[k].append(ru.ru_minflt)

    res = {"runs": RUNS, "spacectl": binaries[0][1], "baseline": BASELINE or None, "cases": {}}
    for k, label, argv, _ in cases:
        objs = loaded_objects(argv)
        res["cases"][k] = {
            "label": label,
            "wall_ms": stats(walls[k], "ms"),
            "minflt": stats(faults[k], "faults"),
            "shared_objects": len(objs),
            "shared_object_names": objs,
        }

    save_results(out_path, "cli", res)

    print()
    print("spacectl start-up (%d runs each, interleaved; a sanitizer build inflates the absolute numbers)" % RUNS)
    print("%-34s %8s %8s %8s %12s %8s" % ("command", "p50 ms", "p90 ms", "p99 ms", "minflt p50", "libs"))
    for k, label, _argv, _ in cases:
        c = res["cases"][k]
        w = c["wall_ms"]
        print("%-34s %8.2f %8.2f %8.2f %12d %8d" % (label, w["p50"], w["p90"], w["p99"], pct(faults[k], 50),
                                                  c["shared_objects"]))
    if BASELINE:
        for what in ("help", "version"):
            a, b = res["cases"][what + "_current"], res["cases"][what + "_baseline"]
            print("%-34s %8.2fx %26s %7d" % ("  %s: current / baseline" % what,
                                              a["wall_ms"]["p50"] / b["wall_ms"]["p50"],
                                              "%+d faults" % (a["minflt"]["p50"] - b["minflt"]["p50"]),
                                              a["shared_objects"] - b["shared_objects"]))
    print("results: %s" % out_path)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, OSError) as e:
        log("failed: %s" % e)
        sys.exit(1)
