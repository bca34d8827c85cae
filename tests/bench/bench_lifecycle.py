#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Lifecycle benchmarks for space (issue 5); run by tests/bench/run.sh after bench.py and bench_api.py.

Through the daemon (HTTP over the unix socket, `?wait=`, so each figure is one API round trip):
  (e) pause and resume, BENCH_PAUSES (default 30) each;
  (f) suspend and wake of 256 MiB and 1 GiB guests, idle and with memory dirtied in the guest's tmpfs /tmp
      (non-zero bytes, see dirty(); 200 MiB in the 1 GiB guest; a 256 MiB guest has ~220 MiB of usable RAM, so it gets BENCH_DIRTY_SMALL_MIB,
      default 150), BENCH_SUSPENDS (default 5) each, with the state file's size;
  (g) checkpoint pause time (the checkpoint's pause_ms) and size for the same four cases;
  (h) fork of one running sandbox into 10: time until all 10 answer an exec;
  (i) resident memory per idle sandbox (Pss and Private_Clean+Private_Dirty of QEMU's smaps_rollup) and how
      many idle 256 MiB sandboxes fit in 8 GiB by that figure;
  (j) create to first exec, for reference; create from a warm pool to first exec next to an exec round trip.

Raw QEMU figures in the same run, with no daemon in the path:
  - QMP stop and cont on a sandbox the API does not touch meanwhile, on a held connection and with a connection
    per command (what the daemon does);
  - the same save as a suspend (x-ignore-shared, bandwidth cap raised, stop, getfd, migrate fd:, poll until
    completed, cont) on that untouched twin of each case: the whole save and the stop-to-cont pause;
  - tests/tools/vm-smoke restoring a base snapshot of the same size to the first PONG (the closest raw analogue
    of a wake; it has no dirty memory), and the Pss/Private of the VM it leaves running.

With BENCH_STORAGE=qcow2|btrfs (run.sh, after the above): only (g) on an idle 256 MiB guest, with the
stop-and-disk part of the pause from the daemon's log, and (h), on the daemon's disk store; the btrfs run
(a second daemon on a loop-mounted btrfs) prints both side by side. Into $BENCH_OUT under
"lifecycle"."storage".

Results go into $BENCH_OUT under "lifecycle" (merged). Percentiles nearest-rank. Standard library only.
"""

import array
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import time

ENV = os.environ
BUILD = ENV.get("TOP_BUILDDIR", ".")
TMP = ENV["TEST_TMP"]
SPACECTL = ENV.get("SPACECTL_BIN", "spacectl")
LIB = ENV["SPACE_LIB_DIR"]
RUN_DIR = ENV["SPACE_RUNTIME_DIR"]
STATE_DIR = ENV["SPACE_STATE_DIR"]
SOCK = ENV["SPACE_SOCKET"]
N_PAUSE = max(10, int(ENV.get("BENCH_PAUSES", "30")))
N_SUSPEND = max(1, int(ENV.get("BENCH_SUSPENDS", "5")))
N_FORK = max(1, int(ENV.get("BENCH_FORKS", "3")))
N_CREATE = max(5, int(ENV.get("BENCH_LC_CREATES", "10")))
N_IDLE = max(1, int(ENV.get("BENCH_IDLE_SANDBOXES", "3")))
FORK_N = 10
DIRTY_MIB = 200
DIRTY_SMALL_MIB = int(ENV.get("BENCH_DIRTY_SMALL_MIB", "150"))
VM_SMOKE = os.path.join(BUILD, "tests/tools/vm-smoke")
EXTRA_PIDS = os.path.join(TMP, "extra.pids")

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import pct, stats, log, run, timed, kill_pid, save_results, smaps_rollup_kib  # noqa: E402

ID_RE = re.compile(r"[0-9a-f]{32}")


# ----------------------------------------------------------------------------------------- the API

class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path, timeout=600):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def api(method, path, body=None, timeout=600):
    """One request on a fresh connection (as a client would); returns (status, JSON, ms)."""
    c = UnixHTTP(SOCK, timeout)
    data = json.dumps(body).encode() if body is not None else None
    hdr = {"Content-Type": "application/json"} if data is not None else {}
    t0 = time.perf_counter()
    c.request(method, path, body=data, headers=hdr)
    r = c.getresponse()
    raw = r.read()
    ms = (time.perf_counter() - t0) * 1000.0
    c.close()
    try:
        doc = json.loads(raw) if raw else None
    except ValueError:
        doc = {"raw": raw[:300].decode(errors="replace")}
    return r.status, doc, ms


def op_of(doc):
    """Lifecycle routes answer {operation, sandbox}; checkpoint and fork answer the operation itself."""
    return doc.get("operation", doc) if isinstance(doc, dict) else {}


def lifecycle(sid, verb, body=None, wait=600):
    st, doc, ms = api("POST", "/v1/sandboxes/%s/%s?wait=%d" % (sid, verb, wait), body)
    op = op_of(doc)
    if st >= 300 or op.get("state") != "succeeded":
        raise RuntimeError("%s %s: HTTP %d %s" % (verb, sid[:12], st, json.dumps(doc)[:400]))
    return ms, op


def spacectl(*args, timeout=600):
    return run([SPACECTL] + list(args), timeout)


def minimal_rootfs():
    """The minimal template's image in the daemon's store (make installs only its rootfs.tar)."""
    return json.loads(spacectl("template", "inspect", "minimal").stdout.decode())["rootfs"]


def create(*args):
    r = spacectl("create", *args)
    sid = r.stdout.decode().strip()
    if not ID_RE.fullmatch(sid):
        raise RuntimeError("create printed %r" % sid)
    return sid


def remove(*sids):
    if sids:
        try:
            spacectl("rm", "-f", *sids, timeout=300)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            log("rm: %s" % e)


def qemu_pid(sid):
    with open(os.path.join(RUN_DIR, "sandboxes", sid, "qemu.pid")) as f:
        return int(f.read().strip())


def dirty(sid, mib):
    """Keeps mib MiB of non-zero bytes in the guest's tmpfs /tmp (resized to hold them). One random MiB repeated:
    /dev/urandom runs at a few MB/s under TCG, and migration neither compresses nor dedups, only zero pages are
    cheap, so repeated random bytes cost a suspend as much as fresh ones."""
    spacectl("exec", sid, "--", "sh", "-c",
             "mount -o remount,size=%dm /tmp && head -c 1048576 /dev/urandom > /tmp/r && "
             "i=0; while [ $i -lt %d ]; do cat /tmp/r; i=$((i+1)); done > /tmp/dirty && rm /tmp/r" % (mib + 16, mib))


def smaps(pid):
    d = smaps_rollup_kib(pid)
    return {"rss_mib": round(d.get("Rss", 0) / 1024, 1), "pss_mib": round(d.get("Pss", 0) / 1024, 1),
            "private_mib": round((d.get("Private_Clean", 0) + d.get("Private_Dirty", 0)) / 1024, 1),
            "private_dirty_mib": round(d.get("Private_Dirty", 0) / 1024, 1)}


def state_size(sid):
    try:
        return os.stat(os.path.join(STATE_DIR, "sandboxes", sid, "suspend.state")).st_size
    except OSError:
        return None


# ----------------------------------------------------------------------------------------- raw QMP

class Qmp:
    """A minimal QMP client on a sandbox's qmp.sock (only while the daemon leaves that sandbox alone)."""

    def __init__(self, path, timeout=120):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.buf = b""
        self.read()  # greeting
        self.cmd("qmp_capabilities")

    def read(self):
        while b"\n" not in self.buf:
            b = self.s.recv(65536)
            if not b:
                raise RuntimeError("QMP connection closed")
            self.buf += b
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)

    def cmd(self, name, args=None, fd=None):
        msg = {"execute": name}
        if args is not None:
            msg["arguments"] = args
        data = json.dumps(msg).encode() + b"\n"
        if fd is None:
            self.s.sendall(data)
        else:
            self.s.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
        while True:
            m = self.read()
            if "event" in m:
                continue
            if "error" in m:
                raise RuntimeError("QMP %s: %s" % (name, m["error"].get("desc")))
            return m.get("return")

    def close(self):
        self.s.close()


def qmp_path(sid):
    return os.path.join(RUN_DIR, "sandboxes", sid, "qmp.sock")


def raw_pause_resume(sid):
    q = Qmp(qmp_path(sid))
    held = {"stop": [], "cont": []}
    try:
        for _ in range(N_PAUSE):
            for c in ("stop", "cont"):
                t0 = time.perf_counter()
                q.cmd(c)
                held[c].append((time.perf_counter() - t0) * 1000.0)
    finally:
        q.close()
    conn = {"stop": [], "cont": []}
    for _ in range(N_PAUSE):
        for c in ("stop", "cont"):
            t0 = time.perf_counter()
            q = Qmp(qmp_path(sid))
            q.cmd(c)
            q.close()
            conn[c].append((time.perf_counter() - t0) * 1000.0)
    return {"held_connection": {k: stats(v, "ms") for k, v in held.items()},
            "connection_per_command": {k: stats(v, "ms") for k, v in conn.items()}}


def raw_save(sid, path):
    """What a suspend does to QEMU, by hand; QEMU then goes on running. Returns (total ms, pause ms, bytes)."""
    q = Qmp(qmp_path(sid))
    try:
        t0 = time.perf_counter()
        q.cmd("migrate-set-parameters", {"max-bandwidth": 68719476736})
        q.cmd("migrate-set-capabilities", {"capabilities": [{"capability": "x-ignore-shared", "state": True}]})
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            t_stop = time.perf_counter()
            q.cmd("stop")
            q.cmd("getfd", {"fdname": "state"}, fd=fd)
            q.cmd("migrate", {"uri": "fd:state"})
            while True:
                st = q.cmd("query-migrate").get("status")
                if st == "completed":
                    break
                if st in ("failed", "cancelled"):
                    raise RuntimeError("raw migrate %s" % st)
                time.sleep(0.002)
            os.fsync(fd)
        finally:
            os.close(fd)
        t_done = time.perf_counter()
        q.cmd("cont")
        t_cont = time.perf_counter()
    finally:
        q.close()
    size = os.stat(path).st_size
    os.unlink(path)
    return (t_done - t0) * 1000.0, (t_cont - t_stop) * 1000.0, size


def raw_restore(memory_mib, n, keep=False):
    """vm-smoke: boot, save a base snapshot of memory_mib, restore n times to the first PONG, no daemon."""
    if not os.access(VM_SMOKE, os.X_OK):
        return {"error": "%s is not built" % VM_SMOKE}, None
    d = os.path.join(TMP, "raw-lc-%d" % memory_mib)
    argv = [VM_SMOKE, "--kernel", os.path.join(LIB, "vmlinux"), "--initrd", os.path.join(LIB, "initramfs.cpio"),
            "--rootfs", minimal_rootfs(), "--dir", d, "-n", str(n),
            "--memory", str(memory_mib), "--pings", "1", "--accel", ENV.get("SPACE_TEST_ACCEL", "auto")]
    if keep:
        argv.append("--keep")
    r = run(argv, timeout=900)
    out = json.loads(r.stdout.decode())
    kept = None
    m = re.search(r"kept pid (\d+)", r.stderr.decode(errors="replace"))
    if m:
        kept = int(m.group(1))
        with open(EXTRA_PIDS, "a") as f:
            f.write("%d\n" % kept)
    return {"restore_to_pong_ms": out["restore"]["spawn_to_first_pong_ms"]}, kept


# ----------------------------------------------------------------------------------------- the benchmarks

def bench_pause():
    a, b = create(), create()
    try:
        spacectl("exec", a, "--", "true")
        spacectl("exec", b, "--", "true")
        p, r = [], []
        for _ in range(N_PAUSE):
            p.append(lifecycle(a, "pause")[0])
            r.append(lifecycle(a, "resume")[0])
        spacectl("exec", a, "--", "true")
        res = {"api": {"pause_ms": stats(p, "ms"), "resume_ms": stats(r, "ms")}}
        try:
            res["raw"] = raw_pause_resume(b)  # b: never touched through the API meanwhile
            spacectl("exec", b, "--", "true")
        except (OSError, RuntimeError) as e:
            res["raw"] = {"error": str(e)}
        return res
    finally:
        remove(a, b)


def bench_suspend_case(memory_mib, dirty_mib):
    a = create("--memory", str(memory_mib))
    b = create("--memory", str(memory_mib))
    res = {"memory_mib": memory_mib, "dirty_mib": dirty_mib}
    try:
        for s in (a, b):
            spacectl("exec", s, "--", "true")
            if dirty_mib:
                dirty(s, dirty_mib)
        sus, wake, wake_exec, sizes = [], [], [], []
        for _ in range(N_SUSPEND):
            sus.append(lifecycle(a, "suspend")[0])
            sizes.append(state_size(a))
            ms, _ = lifecycle(a, "wake")
            ems, _ = timed([SPACECTL, "exec", a, "--", "true"])
            wake.append(ms)
            wake_exec.append(ms + ems)
        if dirty_mib:  # the dirty data survived the round trips
            n = spacectl("exec", a, "--", "sh", "-c", "wc -c < /tmp/dirty").stdout.decode().strip()
            if n != str(dirty_mib << 20):
                raise RuntimeError("dirty file is %s bytes after wake" % n)
        res["suspend_ms"] = stats(sus, "ms")
        res["wake_ms"] = stats(wake, "ms")
        res["wake_to_exec_ms"] = stats(wake_exec, "ms")
        res["state_bytes"] = sizes[-1]
        cp_pause, cp_wall, cp_size = [], [], []
        for i in range(N_SUSPEND):
            ms, op = lifecycle(a, "checkpoints", {"name": "bench-%d-%d-%d" % (memory_mib, dirty_mib, i)})
            cid = op.get("checkpoint_id")
            st, c, _ = api("GET", "/v1/checkpoints/%s" % cid)
            if st != 200:
                raise RuntimeError("GET checkpoint %s: HTTP %d" % (cid, st))
            cp_pause.append(float(c["pause_ms"]))
            cp_size.append(int(c["size_bytes"]))
            cp_wall.append(ms)
            api("DELETE", "/v1/checkpoints/%s" % cid)
        res["checkpoint_pause_ms"] = stats(cp_pause, "ms")
        res["checkpoint_total_ms"] = stats(cp_wall, "ms")
        res["checkpoint_bytes"] = cp_size[-1]
        raw_total, raw_pause, raw_size = [], [], []
        try:
            for _ in range(N_SUSPEND):
                t, p, sz = raw_save(b, os.path.join(TMP, "raw-save.state"))
                raw_total.append(t)
                raw_pause.append(p)
                raw_size.append(sz)
            res["raw_save"] = {"total_ms": stats(raw_total, "ms"), "pause_ms": stats(raw_pause, "ms"),
                               "state_bytes": raw_size[-1]}
        except (OSError, RuntimeError) as e:
            res["raw_save"] = {"error": str(e)}
        return res
    finally:
        remove(a, b)


def bench_fork():
    runs, ops = [], []
    for _ in range(N_FORK):
        src = create()
        ids = []
        try:
            spacectl("exec", src, "--", "true")
            t0 = time.perf_counter()
            ms, op = lifecycle(src, "fork", {"count": FORK_N})
            ids = op.get("sandbox_ids") or []
            if len(ids) != FORK_N:
                raise RuntimeError("fork returned %d ids" % len(ids))
            procs = [subprocess.Popen([SPACECTL, "exec", i, "--", "true"], stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for i in ids]
            bad = [p.stderr.read()[:200] for p in procs if p.wait(timeout=300) != 0]
            runs.append((time.perf_counter() - t0) * 1000.0)
            ops.append(ms)
            if bad:
                raise RuntimeError("exec in a fork failed: %s" % bad[0])
        finally:
            remove(src, *ids)
    return {"n": FORK_N, "all_ready_ms": stats(runs, "ms"), "fork_op_ms": stats(ops, "ms")}


def bench_idle_memory():
    ids = [create() for _ in range(N_IDLE)]
    try:
        for s in ids:
            spacectl("exec", s, "--", "true")
        time.sleep(5)
        per = [smaps(qemu_pid(s)) for s in ids]
    finally:
        remove(*ids)
    priv = [p["private_mib"] for p in per]
    pss = [p["pss_mib"] for p in per]
    res = {"sandboxes": per, "private_mib": stats(priv, "MiB"), "pss_mib": stats(pss, "MiB"),
           "fit_in_8gib_by_private": int(8192 // pct(priv, 50)), "fit_in_8gib_by_pss": int(8192 // pct(pss, 50)),
           "goal_private_mib": 32}
    return res


def bench_create():
    tti = []
    for _ in range(N_CREATE):
        t0 = time.perf_counter()
        s = create()
        spacectl("exec", s, "--", "true")
        tti.append((time.perf_counter() - t0) * 1000.0)
        remove(s)
    return stats(tti, "ms")


def wait_pool_ready(n, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        st, doc, _ = api("GET", "/v1/pools")
        ready = [p["ready"] for p in (doc or {}).get("pools", []) if p["template"] == "minimal"]
        if ready and ready[0] >= n:
            return
        time.sleep(0.2)
    raise RuntimeError("the warm pool did not fill to %d" % n)


def bench_warm_pool():
    """Create from a warm pool to the first exec, next to an exec round trip in a running sandbox (same run):
    the goal is at most 5 ms more at p50. The pool refills between samples so every create is warm."""
    ref = create()
    rtt = []
    for _ in range(N_CREATE):
        t0 = time.perf_counter()
        spacectl("exec", ref, "--", "true")
        rtt.append((time.perf_counter() - t0) * 1000.0)
    st, doc, _ = api("PUT", "/v1/pools/minimal", {"size": 2})
    if st != 200:
        raise RuntimeError("PUT /v1/pools/minimal: %s %s" % (st, doc))
    tti, made = [], []
    try:
        for _ in range(N_CREATE):
            wait_pool_ready(2)
            t0 = time.perf_counter()
            s = create()
            spacectl("exec", s, "--", "true")
            tti.append((time.perf_counter() - t0) * 1000.0)
            made.append(s)
    finally:
        api("PUT", "/v1/pools/minimal", {"size": 0})
        remove(ref, *made)
    warm, base = stats(tti, "ms"), stats(rtt, "ms")
    return {"create_to_first_exec_ms": warm, "exec_round_trip_ms": base,
            "p50_over_exec_ms": round(warm["p50"] - base["p50"], 1)}


DAEMON_LOGS = [os.path.join(TMP, "spaced.log"), os.path.join(STATE_DIR, "spaced.log")]
DISK_PAUSE_RE = re.compile(r"paused ([0-9.]+) ms \(stop and disk ([0-9.]+) ms\)")


def log_marks():
    return [os.path.getsize(p) if os.path.exists(p) else 0 for p in DAEMON_LOGS]


def log_since(marks):
    text = ""
    for p, m in zip(DAEMON_LOGS, marks):
        try:
            with open(p, errors="replace") as f:
                f.seek(m)
                text += f.read()
        except OSError:
            pass
    return text


def bench_checkpoint_pause(memory_mib=256):
    """Checkpoints of an idle sandbox: the pause (pause_ms) and, from the daemon's log, the part of it spent
    stopping the VM and freezing the disk (a qcow2 layer switch or a btrfs snapshot)."""
    sid = create("--memory", str(memory_mib))
    pause, disk = [], []
    try:
        spacectl("exec", sid, "--", "true")
        for i in range(N_SUSPEND):
            marks = log_marks()
            ms, op = lifecycle(sid, "checkpoints", {"name": "bench-storage-%d" % i})
            cid = op.get("checkpoint_id")
            st, c, _ = api("GET", "/v1/checkpoints/%s" % cid)
            if st != 200:
                raise RuntimeError("GET checkpoint %s: HTTP %d" % (cid, st))
            pause.append(float(c["pause_ms"]))
            m = DISK_PAUSE_RE.findall(log_since(marks))
            if m:
                disk.append(float(m[-1][1]))
            api("DELETE", "/v1/checkpoints/%s" % cid)
    finally:
        remove(sid)
    return {"memory_mib": memory_mib, "pause_ms": stats(pause, "ms"),
            "stop_and_disk_ms": stats(disk, "ms") if disk else None}


def storage_main(kind):
    """One disk store's figures; the btrfs run prints them beside the qcow2 run's."""
    out_path = ENV.get("BENCH_OUT", "bench-results.json")
    res = {}
    log("storage %s: checkpoint pause, %d runs" % (kind, N_SUSPEND))
    step(res, "checkpoint", bench_checkpoint_pause)
    log("storage %s: fork into %d, %d runs" % (kind, FORK_N, N_FORK))
    step(res, "fork", bench_fork)
    try:
        with open(out_path) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        doc = {}
    doc.setdefault("lifecycle", {}).setdefault("storage", {})[kind] = res
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    st = doc["lifecycle"]["storage"]
    if kind == "btrfs" or "btrfs" in st:
        q, b = st.get("qcow2", {}), st.get("btrfs", {})

        def cell(d, *keys):
            for k in keys:
                d = (d or {}).get(k) if isinstance(d, dict) else None
            if isinstance(d, dict) and "p50" in d:
                return "%s / %s" % (fmt(d.get("p50")), fmt(d.get("p90")))
            return "-"
        print()
        print("disk stores side by side (ms, p50 / p90): qcow2 overlays vs btrfs subvolumes and reflinks")
        print("%-46s %17s %17s" % ("", "qcow2", "btrfs"))
        for name, keys in (("checkpoint pause, idle 256 MiB (pause_ms)", ("checkpoint", "pause_ms")),
                           ("  of which stop and disk freeze", ("checkpoint", "stop_and_disk_ms")),
                           ("fork 1 -> 10, until all 10 answer an exec", ("fork", "all_ready_ms")),
                           ("  of which the fork operation", ("fork", "fork_op_ms"))):
            print("%-46s %17s %17s" % (name, cell(q, *keys), cell(b, *keys)))
        for k, d in (("qcow2", q), ("btrfs", b)):
            for part in ("checkpoint", "fork"):
                if isinstance(d.get(part), dict) and "error" in d[part]:
                    print("%s %s: error: %s" % (k, part, d[part]["error"][:120]))
    return 0


# BENCH_LC_ONLY=key[,key...]: only those parts (e.g. warm_pool,create_to_first_exec_ms), no raw restores.
LC_ONLY = [k for k in ENV.get("BENCH_LC_ONLY", "").split(",") if k]


def step(res, key, fn, *args):
    if LC_ONLY and key not in LC_ONLY:
        return
    try:
        res[key] = fn(*args)
    except (RuntimeError, OSError, ValueError, KeyError, subprocess.TimeoutExpired) as e:
        log("%s failed: %s" % (key, e))
        res[key] = {"error": str(e)}


def main():
    out_path = ENV.get("BENCH_OUT", "bench-results.json")
    res = {"loadavg_start": [round(x, 2) for x in os.getloadavg()], "samples": {
        "pause": N_PAUSE, "suspend": N_SUSPEND, "fork": N_FORK, "create": N_CREATE, "idle": N_IDLE}}
    log("lifecycle: pause/resume, %d each" % N_PAUSE)
    step(res, "pause_resume", bench_pause)
    res["suspend"] = {}
    for mem in (256, 1024):
        for dm in (0, DIRTY_SMALL_MIB if mem < 512 else DIRTY_MIB) if not LC_ONLY or "suspend" in LC_ONLY else ():
            key = "%dmib_%s" % (mem, "idle" if not dm else "dirty%d" % dm)
            log("lifecycle: suspend/wake/checkpoint %s, %d each" % (key, N_SUSPEND))
            step(res["suspend"], key, bench_suspend_case, mem, dm)
    log("lifecycle: fork into %d, %d runs" % (FORK_N, N_FORK))
    step(res, "fork", bench_fork)
    log("lifecycle: resident memory of %d idle sandboxes" % N_IDLE)
    step(res, "idle_memory", bench_idle_memory)
    log("lifecycle: create to first exec, %d runs" % N_CREATE)
    step(res, "create_to_first_exec_ms", bench_create)
    log("lifecycle: create from a warm pool to first exec, %d runs" % N_CREATE)
    step(res, "warm_pool", bench_warm_pool)
    raw = {}
    for mem in (() if LC_ONLY else (256, 1024)):
        log("lifecycle: raw restore of a %d MiB base snapshot (vm-smoke)" % mem)
        try:
            raw["%dmib" % mem], kept = raw_restore(mem, 5, keep=(mem == 256))
            if kept:
                time.sleep(5)
                raw["idle_memory_256mib"] = smaps(kept)
                kill_pid(kept, TMP)
        except (RuntimeError, OSError, ValueError, KeyError, subprocess.TimeoutExpired) as e:
            raw["%dmib" % mem] = {"error": str(e)}
    res["raw_restore"] = raw
    res["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]

    doc = save_results(out_path, "lifecycle", res)
    print_table(res, doc, out_path)
    return 0


def fmt(v, nd=1):
    return "-" if v is None else ("%.*f" % (nd, v))


def print_table(res, doc, out_path):
    rows = []

    def add(name, d, unit="ms", extra=""):
        if isinstance(d, dict) and "error" in d:
            rows.append((name, unit, None, None, None, None, "error: " + d["error"][:50]))
        elif d:
            rows.append((name, unit, d.get("p50"), d.get("p90"), d.get("p99"), d.get("n"), extra))
        else:
            rows.append((name, unit, None, None, None, None, extra))

    pr = res.get("pause_resume", {})
    api_pr = pr.get("api", {})
    raw_pr = pr.get("raw", {})
    add("pause (POST .../pause?wait)", api_pr.get("pause_ms") if "error" not in pr else pr)
    add("  raw: QMP stop, held connection", (raw_pr.get("held_connection") or {}).get("stop") or raw_pr)
    add("  raw: QMP stop, connection per command", (raw_pr.get("connection_per_command") or {}).get("stop"))
    add("resume (POST .../resume?wait)", api_pr.get("resume_ms"))
    add("  raw: QMP cont, held connection", (raw_pr.get("held_connection") or {}).get("cont"))
    add("  raw: QMP cont, connection per command", (raw_pr.get("connection_per_command") or {}).get("cont"))
    raw = res.get("raw_restore", {})
    for key, c in res.get("suspend", {}).items():
        if "error" in c:
            add("suspend %s" % key, c)
            continue
        mib = lambda b: "%.0f MiB" % (b / 1048576.0) if b else "-"  # noqa: E731
        add("suspend %s" % key, c["suspend_ms"], extra="state " + mib(c.get("state_bytes")))
        rs = c.get("raw_save", {})
        add("  raw: QMP save to fd (same steps)", rs.get("total_ms") or rs, extra="state " + mib(rs.get("state_bytes")))
        add("wake %s" % key, c["wake_ms"])
        add("  wake + first exec", c["wake_to_exec_ms"])
        if not c.get("dirty_mib"):
            rr = raw.get("%dmib" % c["memory_mib"], {})
            add("  raw: vm-smoke restore base to PONG", rr.get("restore_to_pong_ms") or rr)
        add("checkpoint pause %s (pause_ms)" % key, c["checkpoint_pause_ms"], extra="size " + mib(c.get("checkpoint_bytes")))
        add("  checkpoint API round trip", c["checkpoint_total_ms"])
        add("  raw: stop .. migrate done .. cont", rs.get("pause_ms"))
    f = res.get("fork", {})
    add("fork 1 -> 10, until all 10 answer an exec", f.get("all_ready_ms") or f, extra="goal < 1000 ms")
    add("  of which the fork operation", f.get("fork_op_ms"))
    add("create to first exec (reference)", res.get("create_to_first_exec_ms"))
    wp = res.get("warm_pool") or {}
    if "error" in wp:
        add("create from a warm pool to first exec", wp)
    else:
        add("create from a warm pool to first exec", wp.get("create_to_first_exec_ms"),
            extra="p50 %s ms over exec, goal <= 5" % wp.get("p50_over_exec_ms"))
        add("  exec round trip in a running sandbox", wp.get("exec_round_trip_ms"))
    ex = (doc.get("spaced") or {}).get("exec_ms")
    add("exec round trip, running sandbox (bench.py)", ex)

    print()
    print("space lifecycle benchmarks (load average %s at start, %s at end)" % (
        " ".join(map(str, res["loadavg_start"])), " ".join(map(str, res["loadavg_end"]))))
    print("%-46s %5s %9s %9s %9s %4s  %s" % ("", "unit", "p50", "p90", "p99", "n", ""))
    for name, unit, p50, p90, p99, n, extra in rows:
        print("%-46s %5s %9s %9s %9s %4s  %s" % (name, unit, fmt(p50), fmt(p90), fmt(p99), n or "-", extra))
    im = res.get("idle_memory", {})
    if "error" in im:
        print("idle memory: error: %s" % im["error"])
    elif im:
        r = raw.get("idle_memory_256mib") or {}
        print("idle 256 MiB sandbox, QEMU resident (p50 of %d): Pss %.1f MiB, Private %.1f MiB (goal < 32 MiB); "
              "raw vm-smoke VM: Pss %s, Private %s MiB" % (im["pss_mib"]["n"], im["pss_mib"]["p50"],
                                                            im["private_mib"]["p50"], r.get("pss_mib", "-"),
                                                            r.get("private_mib", "-")))
        print("idle 256 MiB sandboxes in 8 GiB: %d by Private, %d by Pss" % (
            im["fit_in_8gib_by_private"], im["fit_in_8gib_by_pss"]))
    print("results: %s" % out_path)


if __name__ == "__main__":
    try:
        if ENV.get("BENCH_STORAGE") in ("qcow2", "btrfs"):
            sys.exit(storage_main(ENV["BENCH_STORAGE"]))
        sys.exit(main())
    except (RuntimeError, subprocess.TimeoutExpired, KeyError) as e:
        log("failed: %s" % e)
        sys.exit(1)
