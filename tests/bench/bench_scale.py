#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Scale benchmark (issue 13); run by tests/bench/run.sh (BENCH_ONLY=scale runs it alone).

How the cost of idle sandboxes grows with their number. For each size N in BENCH_SCALE_SIZES (default
1,10,50,100, ascending), the set of idle sandboxes (template minimal, default shape) grows to N, each new one
timed from `spacectl create` to its first `spacectl exec SB -- true` completing; at size N the figure is over
the last up-to-10 creates (those that took the count from N-10 to N; one untimed create and rm before size 1 takes
the template's cold first create out of the figures). Then, with N idle:
  - `spacectl ls` wall time over BENCH_SCALE_LS_RUNS (>= 20, default 20) runs;
  - spaced's CPU (utime+stime of its /proc/PID/stat; and from its threads' schedstat, in ns, in the JSON) over a
    BENCH_SCALE_WINDOW (default 10) s idle window, as % of one core, and its VmRSS;
  - the QEMUs' total CPU over the same window (the idle cost of N guests; under TCG it is the guests' timers);
  - private memory per sandbox: Private_Clean+Private_Dirty of each QEMU's /proc/PID/smaps_rollup, p50 and mean.

A size is skipped (with the reason, in the table and the JSON) when the daemon's memory_limit_mib (`spacectl
info --json`) cannot admit N guests of the template's memory_mib, or when /proc/meminfo's MemAvailable would
not hold the sandboxes still to create at the private memory measured so far (x1.5, plus 2 GiB for the host).
run.sh raises memory_limit_mib for this part to max(RAM - 2 GiB, the default 80% of RAM), or to
BENCH_SCALE_MEMORY_LIMIT_MIB (which may overcommit: idle guests touch little of their memory).

Every sandbox is removed at the end (rm -f), also on failure or a signal. Results go into $BENCH_OUT under
"scale" (merged), one entry per size. Percentiles nearest-rank. Standard library only.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

ENV = os.environ
BUILD = ENV.get("TOP_BUILDDIR", ".")
SPACECTL = ENV.get("SPACECTL_BIN", "spacectl")
RUN_DIR = ENV["SPACE_RUNTIME_DIR"]
LS_RUNS = max(20, int(ENV.get("BENCH_SCALE_LS_RUNS", "20")))
WINDOW_S = max(1.0, float(ENV.get("BENCH_SCALE_WINDOW", "10")))
TTI_LAST = 10          # the create -> first exec figure at size N: the last up-to-10 creates
HOST_RESERVE_MIB = 2048
SETTLE_S = 3.0         # after the last create of a size, before the idle window
CLK_TCK = os.sysconf("SC_CLK_TCK")

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import stats, log, run, save_results, smaps_rollup_kib  # noqa: E402

ID_RE = re.compile(r"[0-9a-f]{32}")


def sizes():
    raw = ENV.get("BENCH_SCALE_SIZES", "1,10,50,100")
    try:
        out = sorted({int(x) for x in raw.replace(" ", "").split(",") if x})
    except ValueError:
        raise SystemExit("bench: BENCH_SCALE_SIZES=%r: expected positive integers separated by commas" % raw)
    if not out or out[0] < 1:
        raise SystemExit("bench: BENCH_SCALE_SIZES=%r: expected positive integers separated by commas" % raw)
    return out


def spacectl(*args, timeout=600):
    return run([SPACECTL] + list(args), timeout)


def meminfo():
    d = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            d[k] = int(v.split()[0]) // 1024
    return d


def daemon_pid():
    with open(os.path.join(RUN_DIR, "spaced.pid")) as f:
        return int(f.read().strip())


def qemu_pid(sid):
    with open(os.path.join(RUN_DIR, "sandboxes", sid, "qemu.pid")) as f:
        return int(f.read().strip())


def cpu_ticks(pid):
    """utime+stime of one process (all its threads), in clock ticks."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def run_ns(pid):
    """Time on a CPU of all the threads of one process, in ns (schedstat: finer than utime+stime's ticks)."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def status_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def smaps(pid):
    d = smaps_rollup_kib(pid)
    return {"rss": d.get("Rss", 0) / 1024.0, "pss": d.get("Pss", 0) / 1024.0,
            "private": (d.get("Private_Clean", 0) + d.get("Private_Dirty", 0)) / 1024.0}


class Scale:
    def __init__(self):
        self.ids = []          # the idle sandboxes, oldest first
        self.tti = []          # create -> first exec, ms, one per sandbox in self.ids' order
        self.create_ms = []
        self.exec_ms = []
        self.others = set()    # sandboxes that were there before this part started

    def add_one(self):
        t0 = time.perf_counter()
        r = spacectl("create")
        t1 = time.perf_counter()
        sid = r.stdout.decode().strip()
        if not ID_RE.fullmatch(sid):
            raise RuntimeError("create printed %r" % sid)
        self.ids.append(sid)
        spacectl("exec", sid, "--", "true")
        t2 = time.perf_counter()
        self.create_ms.append((t1 - t0) * 1000.0)
        self.exec_ms.append((t2 - t1) * 1000.0)
        self.tti.append((t2 - t0) * 1000.0)

    def remove_all(self):
        left = list(self.ids)
        while left:
            chunk, left = left[:20], left[20:]
            try:
                spacectl("rm", "-f", *chunk, timeout=600)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                log("scale: rm: %s" % e)
        self.ids = []

    def measure(self, n):
        """With n idle sandboxes: the idle window (CPU), spacectl ls, then memory."""
        dpid = daemon_pid()
        qpids = [qemu_pid(s) for s in self.ids]
        time.sleep(SETTLE_S)

        # the idle window: nothing of ours runs meanwhile
        w0 = time.monotonic()
        d0, dn0 = cpu_ticks(dpid), run_ns(dpid)
        q0 = {p: cpu_ticks(p) for p in qpids}
        time.sleep(WINDOW_S)
        d1, dn1 = cpu_ticks(dpid), run_ns(dpid)
        q1 = {p: cpu_ticks(p) for p in qpids}
        wall = time.monotonic() - w0
        gone = [p for p in qpids if p not in q1]
        if gone:
            raise RuntimeError("QEMU PIDs %s went away during the idle window" % gone)
        daemon_cpu = (d1 - d0) / CLK_TCK / wall * 100.0
        per_guest = [(q1[p] - q0[p]) / CLK_TCK / wall * 100.0 for p in qpids]

        # spacectl ls (the table people read), with n rows of ours (and those other parts of a full run left)
        rows = set(spacectl("ls", "-q").stdout.decode().split()) - self.others
        if rows != set(self.ids):
            raise RuntimeError("spacectl ls -q lists %d sandboxes of this part, expected %d" % (len(rows), n))
        spacectl("ls")
        ls_ms = []
        for _ in range(LS_RUNS):
            t0 = time.perf_counter()
            spacectl("ls")
            ls_ms.append((time.perf_counter() - t0) * 1000.0)

        mem = [smaps(p) for p in qpids]
        priv = [m["private"] for m in mem]
        pss = [m["pss"] for m in mem]
        last = self.tti[-min(TTI_LAST, len(self.tti)):]
        return {
            "n": n,
            "tti_ms": stats(last, "ms"),
            "create_ms": stats(self.create_ms[-len(last):], "ms"),
            "first_exec_ms": stats(self.exec_ms[-len(last):], "ms"),
            "ls_ms": stats(ls_ms, "ms"),
            "window_s": round(wall, 2),
            "daemon_cpu_pct": round(daemon_cpu, 2),
            "daemon_cpu_pct_schedstat": round((dn1 - dn0) / 1e9 / wall * 100.0, 3),
            "daemon_rss_mib": round(status_kib(dpid, "VmRSS") / 1024.0, 1),
            "qemu_cpu_pct_total": round(sum(per_guest), 1),
            "qemu_cpu_pct_per_guest": stats(per_guest, "% of a core"),
            "private_mib": stats(priv, "MiB"),
            "private_mib_total": round(sum(priv), 1),
            "pss_mib": stats(pss, "MiB"),
            "mem_available_mib": meminfo()["MemAvailable"],
            "loadavg": [round(x, 2) for x in os.getloadavg()],
        }


def skip_reason(n, have, info, guest_mib, private_est):
    """Why size n cannot be reached from `have` idle sandboxes now, or None."""
    limit = int(info.get("memory_limit_mib", 0))
    in_use = int(info.get("memory_in_use_mib", 0))
    more = n - have
    if in_use + more * guest_mib > limit:
        fit = have + max(0, (limit - in_use) // guest_mib)
        return ("memory_limit_mib = %d admits %d sandboxes of %d MiB here (%d MiB in use); "
                "BENCH_SCALE_MEMORY_LIMIT_MIB raises it" % (limit, fit, guest_mib, in_use))
    avail = meminfo()["MemAvailable"]
    need = more * private_est * 1.5 + HOST_RESERVE_MIB
    if need > avail:
        return ("MemAvailable is %d MiB; %d more sandboxes at ~%.0f MiB private each (x1.5) plus %d MiB for the "
                "host need %.0f MiB" % (avail, more, private_est, HOST_RESERVE_MIB, need))
    return None


def bench(res):
    info = json.loads(spacectl("info", "--json").stdout.decode())
    tmpl = json.loads(spacectl("template", "inspect", "minimal").stdout.decode())
    guest_mib = int(tmpl.get("memory_mib") or 256)
    res.update({"accel": info.get("accel"), "memory_limit_mib": info.get("memory_limit_mib"),
                "guest_memory_mib": guest_mib, "host_mem_total_mib": meminfo()["MemTotal"],
                "window_s": WINDOW_S, "ls_runs": LS_RUNS, "cpus": os.cpu_count()})
    log("scale: sizes %s; memory_limit_mib %s, %d MiB guests, %d MiB RAM (%d MiB available), accel %s" %
        (",".join(map(str, sizes())), info.get("memory_limit_mib"), guest_mib, res["host_mem_total_mib"],
         meminfo()["MemAvailable"], info.get("accel")))
    s = Scale()
    # Sandboxes that were there before (a full make bench runs other parts first): not ours to count or remove.
    s.others = set(spacectl("ls", "-q").stdout.decode().split())
    res["other_sandboxes"] = len(s.others)
    res["sizes"] = []
    private_est = guest_mib    # until a size measured it
    try:
        # The template's first create after the daemon started is a cold one (its base snapshot); not a scale cost.
        s.add_one()
        res["warmup_tti_ms"] = round(s.tti.pop(), 1)
        s.create_ms.pop()
        s.exec_ms.pop()
        s.remove_all()
        log("scale: warm-up create -> first exec %.0f ms (removed; not in the figures)" % res["warmup_tti_ms"])
        for n in sizes():
            why = skip_reason(n, len(s.ids), json.loads(spacectl("info", "--json").stdout.decode()), guest_mib,
                              private_est)
            if why:
                log("scale: size %d skipped: %s" % (n, why))
                res["sizes"].append({"n": n, "skipped": why})
                continue
            t0 = time.monotonic()
            while len(s.ids) < n:
                s.add_one()
                k = len(s.ids)
                if k == n or k % 10 == 0:
                    log("scale: %d idle sandboxes (last create -> first exec %.0f ms)" % (k, s.tti[-1]))
            grow_s = time.monotonic() - t0
            d = s.measure(n)
            d["grow_s"] = round(grow_s, 1)
            private_est = max(d["private_mib"]["p50"], 1.0)
            res["sizes"].append(d)
            log("scale: N=%d: create->exec p50 %.0f ms, ls p50 %.1f ms, spaced %.2f%% CPU %.1f MiB RSS, QEMUs %.1f%% "
                "CPU, private p50 %.1f MiB" % (n, d["tti_ms"]["p50"], d["ls_ms"]["p50"], d["daemon_cpu_pct"],
                                              d["daemon_rss_mib"], d["qemu_cpu_pct_total"],
                                              d["private_mib"]["p50"]))
    finally:
        res["creates_ms"] = [round(x, 1) for x in s.tti]   # every create -> first exec, in order: the whole curve
        n = len(s.ids)
        if n:
            log("scale: removing %d sandboxes" % n)
        s.remove_all()


def fmt(v, nd=1):
    return "-" if v is None else ("%.*f" % (nd, v))


def print_table(res, out_path):
    print("\nScale: N idle sandboxes (template minimal, %s MiB, %s; %s CPUs)%s (%s)" %
          (res.get("guest_memory_mib", "?"), res.get("accel", "?"), res.get("cpus", "?"),
           " [ASan build]" if res.get("asan") else "", out_path))
    row = "%5s | %7s %7s %7s | %7s | %7s %7s %7s | %7s | %7s %7s"
    hdr = row % ("N", "tti p50", "p90", "p99", "ls p50", "spaced", "(sched)", "spaced", "QEMUs", "private", "private")
    print(hdr)
    print(row % ("", "ms", "ms", "ms", "ms", "CPU %", "CPU %", "RSS MiB", "CPU %", "p50 MiB", "mean"))
    print("-" * len(hdr))
    for d in res.get("sizes", []):
        if "skipped" in d:
            print("%5d | skipped: %s" % (d["n"], d["skipped"]))
            continue
        t = d["tti_ms"]
        print("%5d | %7.0f %7.0f %7.0f | %7.1f | %7.2f %7.3f %7.1f | %7.1f | %7.1f %7.1f" %
              (d["n"], t["p50"], t["p90"], t["p99"], d["ls_ms"]["p50"], d["daemon_cpu_pct"],
               d["daemon_cpu_pct_schedstat"], d["daemon_rss_mib"], d["qemu_cpu_pct_total"], d["private_mib"]["p50"],
               d["private_mib"]["mean"]))
    if res.get("other_sandboxes"):
        print("(%d sandboxes of earlier parts were running too; not counted above)" % res["other_sandboxes"])
    if "error" in res:
        print("error: %s" % res["error"])
    print("tti: create -> first exec, over the last up-to-%d creates at that size (warm: one create before N=1 is "
          "not counted).\nCPU: %% of one core over a %.0f s idle window; spaced's utime+stime (10 ms ticks), and "
          "(sched) from its threads' schedstat (ns).\nprivate: Private_Clean+Private_Dirty of each QEMU; with "
          "N=1 it also holds the mapped-file pages that QEMUs share once there are two." % (TTI_LAST, WINDOW_S))


def asan_build():
    try:
        out = subprocess.run(["ldd", os.path.join(BUILD, "spaced/spaced")], capture_output=True, timeout=30).stdout
        return b"libasan" in out
    except (OSError, subprocess.TimeoutExpired):
        return False


def on_signal(signum, frame):
    raise KeyboardInterrupt("signal %d" % signum)


def main():
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    out_path = ENV.get("BENCH_OUT", "bench-results.json")
    res = {"loadavg_start": [round(x, 2) for x in os.getloadavg()], "asan": asan_build()}
    rc = 0
    try:
        bench(res)
    except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as e:
        log("scale failed: %s" % e)
        res["error"] = str(e)
        rc = 1
    except KeyboardInterrupt as e:
        log("scale interrupted (%s); the sandboxes were removed" % (e or "SIGINT"))
        res["error"] = "interrupted"
        rc = 130
    res["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    save_results(out_path, "scale", res)
    print_table(res, out_path)
    return rc


if __name__ == "__main__":
    sys.exit(main())
