#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""E2B's code interpreter on space, next to the plain command path of the same SDK in the same run (run by
tests/bench/run.sh, BENCH_ONLY=ci, with e2b-code-interpreter 2.11.5's venv; the code-interpreter template is
built first when missing).

(a) create to the first result: `Sandbox.create()` then `run_code("1+1")`, against `Sandbox.create()` then
    `commands.run("true")` (the goal: the first result within 1.5x of the first command: the kernel is warm in
    the snapshot, so the first run_code starts no Python);
(b) round trip in a running sandbox: `run_code("1+1")` against `commands.run("true")`;
(c) the private memory (Private_Clean + Private_Dirty of its QEMU) of an idle code-interpreter sandbox after
    BENCH_CI_IDLE seconds (default 10), next to an idle seed sandbox's.
BENCH_CI_CREATES (>= 20) and BENCH_CI_RUNS (>= 20) samples; p50/p90/p99 in ms; JSON under "code_interpreter".
"""

import os
import subprocess
import sys
import time

ENV = os.environ
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import log, stats, save_results, smaps_rollup_kib  # noqa: E402

from e2b_code_interpreter import Sandbox  # noqa: E402 - the SDK's venv runs this file

CREATES = max(20, int(ENV.get("BENCH_CI_CREATES", "20")))
RUNS = max(20, int(ENV.get("BENCH_CI_RUNS", "20")))
IDLE = int(ENV.get("BENCH_CI_IDLE", "10"))
RUN_DIR = ENV["SPACE_RUNTIME_DIR"]


def ms_since(t0):
    return (time.perf_counter() - t0) * 1000.0


def private_mib(sid):
    with open(os.path.join(RUN_DIR, "sandboxes", sid, "qemu.pid")) as f:
        pid = int(f.read().split()[0])
    d = smaps_rollup_kib(pid)
    return (d.get("Private_Clean", 0) + d.get("Private_Dirty", 0)) / 1024.0


def main():
    res = {"template": "code-interpreter", "creates": CREATES, "runs": RUNS}
    # the template's first sandbox builds its base snapshot (a cold boot and warm kernels, minutes under TCG,
    # longer than the SDK waits for a create): made first with spacectl, and not measured
    ctl = ENV.get("SPACECTL_BIN", "spacectl")
    sid = subprocess.run([ctl, "create", "code-interpreter"], check=True, capture_output=True, text=True,
                         timeout=900).stdout.strip()
    subprocess.run([ctl, "rm", "-f", sid], check=True, capture_output=True, timeout=120)

    first_code, first_cmd = [], []
    for _ in range(CREATES):
        t0 = time.perf_counter()
        s = Sandbox.create(timeout=300)
        ex = s.run_code("1+1")
        first_code.append(ms_since(t0))
        assert ex.text == "2", ex
        s.kill()

        t0 = time.perf_counter()
        s = Sandbox.create(timeout=300)
        r = s.commands.run("true")
        first_cmd.append(ms_since(t0))
        assert r.exit_code == 0
        s.kill()

    s = Sandbox.create(timeout=600)
    code_rtt, cmd_rtt = [], []
    try:
        s.run_code("1+1")
        s.commands.run("true")
        for _ in range(RUNS):
            t0 = time.perf_counter()
            s.run_code("1+1")
            code_rtt.append(ms_since(t0))
            t0 = time.perf_counter()
            s.commands.run("true")
            cmd_rtt.append(ms_since(t0))
    finally:
        s.kill()

    ci = Sandbox.create(timeout=600)
    seed = Sandbox.create("seed", timeout=600)
    try:
        ci.run_code("1+1")
        seed.commands.run("true")
        time.sleep(IDLE)
        res["idle_private_mib"] = {"code_interpreter": round(private_mib(ci.sandbox_id), 1),
                                   "seed": round(private_mib(seed.sandbox_id), 1), "idle_s": IDLE}
    finally:
        ci.kill()
        seed.kill()

    res["create_to_first_result_ms"] = {"run_code": stats(first_code, "ms"), "commands_run": stats(first_cmd, "ms")}
    res["round_trip_ms"] = {"run_code": stats(code_rtt, "ms"), "commands_run": stats(cmd_rtt, "ms")}
    res["first_result_ratio_p50"] = round(res["create_to_first_result_ms"]["run_code"]["p50"] /
                                          res["create_to_first_result_ms"]["commands_run"]["p50"], 2)
    save_results(ENV.get("BENCH_OUT", "bench-results.json"), "code_interpreter", res)

    print()
    print("E2B code interpreter (e2b-code-interpreter SDK, template code-interpreter, TCP)")
    print("%-46s %9s %9s %9s" % ("", "p50 ms", "p90 ms", "p99 ms"))
    for name, k in (("create -> first", "create_to_first_result_ms"), ("round trip", "round_trip_ms")):
        for side, label in (("run_code", 'run_code("1+1")'), ("commands_run", 'commands.run("true")')):
            st = res[k][side]
            print("%-46s %9.1f %9.1f %9.1f" % ("%s %s" % (name, label), st["p50"], st["p90"], st["p99"]))
    print("first result / first command, p50: %.2fx" % res["first_result_ratio_p50"])
    m = res["idle_private_mib"]
    print("idle private memory after %d s: code-interpreter %.1f MiB, seed %.1f MiB" %
          (m["idle_s"], m["code_interpreter"], m["seed"]))
    log("ci: done")


if __name__ == "__main__":
    main()
