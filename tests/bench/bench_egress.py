#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Egress through the gateway (issue 11, space-egress(5)); run by tests/bench/run.sh (BENCH_ONLY=egress).

The destination is tests/integration/egress-servers.py on the host (echo and bulk servers on BENCH_EGRESS_ADDR,
default 127.0.0.2, which run.sh's profile `bench-egress` allows; the same echo server on 127.0.0.3, which no rule
allows). One client program, python3, runs in a sandbox of BENCH_EGRESS_TEMPLATE (default seed, built first when
the daemon does not have it) through `spacectl exec`, and on the host:

(a) connect latency: from the start of connect() to the first byte of a one-byte echo round trip, then close;
    BENCH_EGRESS_CONNECTS (>= 50, default 200) connections; p50/p90/p99 in ms.
(b) throughput: BENCH_EGRESS_MIB (default 64) MiB from the server to the client ("down": send N, read to EOF)
    and from the client to the server ("up": recv N, N bytes, then the server's ok), BENCH_EGRESS_RUNS (>= 3,
    default 3) times each, in MB/s (10^6 bytes per second), timed from the request to the last byte (the
    connection is made before).

Paths (BENCH_EGRESS_VIA, comma-separated, default "proxy,transparent"):
  proxy        the guest's HTTP proxy (HTTPS_PROXY/HTTP_PROXY, which the agent sets in every process): CONNECT
               ADDR:PORT, then the bytes. The connect latency includes the CONNECT and its 200.
  transparent  a plain connect() in the guest, which the agent's capture hands to the gateway, to BENCH_EGRESS_NAME
               (default allowed.test; run.sh's egress_hosts_file maps it to ADDR), resolved once through the
               guest's DNS stub before the timed loop. (ADDR itself would be the guest's own loopback.)
Baselines in the same run:
  host         the same client on the host, straight to the same servers over loopback (no sandbox, no gateway).
  guest-local  the same client in the sandbox against the same servers forked inside the guest on its own
               127.0.0.1: what the guest alone costs (its CPU, emulated under TCG), without the channel.

Before measuring, the part checks that egress is enforced, and fails with the reason when it is not: `spacectl
egress ls --json` must say "enforced": true, the guest must have a proxy variable, a CONNECT to the denied
address must be refused, and the servers must have seen no connection at the denied address.

Results under "egress" in $BENCH_OUT (merged). Percentiles nearest-rank. Standard library only.
"""

import json
import os
import re
import subprocess
import sys
import time
import urllib.request

ENV = os.environ
BUILD = ENV.get("TOP_BUILDDIR", ".")
TMP = ENV["TEST_TMP"]
SPACECTL = ENV.get("SPACECTL_BIN", "spacectl")
HERE = os.path.dirname(os.path.abspath(__file__))
SERVERS = os.path.join(HERE, "..", "integration", "egress-servers.py")
SRCDIR = os.path.abspath(os.path.join(HERE, "..", ".."))
TEMPLATE = ENV.get("BENCH_EGRESS_TEMPLATE", "seed")
PROFILE = ENV.get("BENCH_EGRESS_PROFILE", "bench-egress")
ADDR = ENV.get("BENCH_EGRESS_ADDR", "127.0.0.2")
DENIED = ENV.get("BENCH_EGRESS_DENIED", "127.0.0.3")
NAME = ENV.get("BENCH_EGRESS_NAME", "allowed.test")  # the hosts file maps it to ADDR; denied.test to DENIED
CONNECTS = max(50, int(ENV.get("BENCH_EGRESS_CONNECTS", "200")))
MIB = max(1, int(ENV.get("BENCH_EGRESS_MIB", "64")))
RUNS = max(3, int(ENV.get("BENCH_EGRESS_RUNS", "3")))
VIAS = [v.strip() for v in ENV.get("BENCH_EGRESS_VIA", "proxy,transparent").split(",") if v.strip()]

sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
from bench import stats, log, run, save_results  # noqa: E402

ID_RE = re.compile(r"[0-9a-f]{32}")


class NotEnforced(RuntimeError):
    pass


# The client, run with python3 -c on the host and in the guest. argv[1] is a JSON job:
#   {"via": "direct"|"proxy"|"transparent"|"local", "host": ADDR, "echo": PORT, "bulk": PORT,
#    "connects": N, "bytes": N, "runs": N, "what": ["latency", "down", "up"]}
# It prints one JSON line: {"latency_ms": [...], "down_s": [...], "up_s": [...], "proxy": URL or null}, or
# {"error": "..."} with exit status 1. "local" forks echo and bulk servers on the guest's 127.0.0.1 first.
CLIENT = r'''
import json, os, socket, sys, time
job = json.loads(sys.argv[1])
CHUNK = 1 << 20

def proxy_url():
    for k in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        if os.environ.get(k):
            return os.environ[k]
    return None

def proxy_addr():
    u = proxy_url()
    if not u:
        raise OSError("no HTTPS_PROXY/HTTP_PROXY in the environment (it has %s)" % " ".join(sorted(os.environ)))
    u = u.split("://", 1)[-1].split("/", 1)[0].rsplit("@", 1)[-1]
    h, _, p = u.rpartition(":")
    return h.strip("[]"), int(p or 80)

def conn(port):
    via = job["via"]
    if via == "proxy":
        s = socket.create_connection(proxy_addr(), timeout=120)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        hp = "%s:%d" % (job["host"] if ":" not in job["host"] else "[%s]" % job["host"], port)
        s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (hp, hp)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            b = s.recv(4096)
            if not b:
                raise OSError("the proxy closed the connection after CONNECT %s (head %r)" % (hp, head[:200]))
            head += b
        head, _, rest = head.partition(b"\r\n\r\n")
        status = head.split(b"\r\n")[0]
        if status.split()[1:2] != [b"200"]:
            raise OSError("CONNECT %s: %s" % (hp, status.decode(errors="replace")))
        if rest:
            raise OSError("CONNECT %s: %d unexpected bytes after the 200" % (hp, len(rest)))
        return s
    s = socket.create_connection((job.get("addr") or job["host"], port), timeout=120)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s

def serve_local():
    """Echo and bulk servers on 127.0.0.1 in a forked child (its own interpreter: no GIL shared with us)."""
    e, b = socket.socket(), socket.socket()
    for s in (e, b):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        s.listen(64)
    ports = e.getsockname()[1], b.getsockname()[1]
    parent = os.getpid()
    pid = os.fork()
    if pid:
        e.close(); b.close()
        return (pid,) + ports
    try:
        serve(e, b, parent)
    finally:
        os._exit(0)

def serve(e, b, parent):
    import select
    zeros = bytes(CHUNK)
    while os.getppid() == parent:  # never outlive the client
        r, _, _ = select.select([e, b], [], [], 1.0)
        for l in r:
            c, _ = l.accept()
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if l is e:
                while True:
                    d = c.recv(65536)
                    if not d:
                        break
                    c.sendall(d)
            else:
                f = c.makefile("rb")
                cmd, n = f.readline().split()
                n = int(n)
                if cmd == b"send":
                    while n > 0:
                        k = min(n, CHUNK)
                        c.sendall(zeros if k == CHUNK else zeros[:k])
                        n -= k
                else:
                    left = n
                    while left > 0:
                        d = f.read1(min(left, CHUNK))
                        if not d:
                            break
                        left -= len(d)
                    c.sendall(b"ok %d\n" % (n - left))
                f.close()
            c.close()

out = {"proxy": proxy_url(), "latency_ms": [], "down_s": [], "up_s": []}
child = None
try:
    if job["via"] == "local":
        child, job["echo"], job["bulk"] = serve_local()
        job["host"] = "127.0.0.1"
    elif job["via"] == "transparent":
        # a name, resolved once (the DNS stub), so that the loop times connections, not lookups
        out["addr"] = job["addr"] = socket.getaddrinfo(job["host"], job["echo"], type=socket.SOCK_STREAM)[0][4][0]
    if "latency" in job["what"]:
        for i in range(job["connects"] + 3):
            t0 = time.perf_counter()
            s = conn(job["echo"])
            s.sendall(b"x")
            if s.recv(1) != b"x":
                raise OSError("the echo server did not echo")
            t1 = time.perf_counter()
            s.close()
            if i >= 3:  # three to warm up
                out["latency_ms"].append((t1 - t0) * 1000.0)
    n = job["bytes"]
    buf = bytearray(CHUNK)
    zeros = memoryview(bytes(CHUNK))
    for _ in range(job["runs"]):
        if "down" in job["what"]:
            s = conn(job["bulk"])
            t0 = time.perf_counter()
            s.sendall(b"send %d\n" % n)
            got = 0
            while True:
                k = s.recv_into(buf)
                if not k:
                    break
                got += k
            t1 = time.perf_counter()
            s.close()
            if got != n:
                raise OSError("down: %d bytes of %d" % (got, n))
            out["down_s"].append(t1 - t0)
        if "up" in job["what"]:
            s = conn(job["bulk"])
            t0 = time.perf_counter()
            s.sendall(b"recv %d\n" % n)
            left = n
            while left > 0:
                k = min(left, CHUNK)
                s.sendall(zeros[:k])
                left -= k
            ans = b""
            while not ans.endswith(b"\n"):
                d = s.recv(100)
                if not d:
                    break
                ans += d
            t1 = time.perf_counter()
            s.close()
            if ans.strip() != b"ok %d" % n:
                raise OSError("up: the server answered %r" % ans[:100])
            out["up_s"].append(t1 - t0)
except (OSError, ValueError) as e:
    out["error"] = "%s: %s" % (type(e).__name__, e)
finally:
    if child:
        os.kill(child, 9)
        os.waitpid(child, 0)
print(json.dumps(out))
sys.exit(1 if "error" in out else 0)
'''


def spacectl(*args, timeout=900, check=True):
    return run([SPACECTL] + list(args), timeout, check)


def client(where, job, timeout=1800):
    """Runs CLIENT with job on the host (where None) or in sandbox where. Returns its JSON document."""
    argv = ["python3", "-c", CLIENT, json.dumps(job)]
    if where:
        argv = [SPACECTL, "exec", where, "--"] + argv
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    lines = r.stdout.decode(errors="replace").strip().splitlines()
    try:
        doc = json.loads(lines[-1])
    except (IndexError, ValueError):
        raise RuntimeError("the client (%s, via %s) exited %d: %s %s" % (
            where or "host", job["via"], r.returncode, r.stdout.decode(errors="replace")[-300:],
            r.stderr.decode(errors="replace")[-500:]))
    return doc


def start_servers():
    d = os.path.join(TMP, "egress-bench")
    out = os.path.join(TMP, "egress-bench.json")
    errf = open(os.path.join(TMP, "egress-bench.log"), "w")
    # ports of the kernel's choosing: nothing clashes with a test running next to us; the profile allows the
    # whole address
    p = subprocess.Popen([sys.executable, SERVERS, "--dir", d, "--allowed", ADDR, "--denied", DENIED,
                          "--only", "echo,bulk,control", "--echo-port", "0", "--bulk-port", "0",
                          "--control-port", "0", "--host", "allowed.test=%s" % ADDR],
                         stdin=subprocess.DEVNULL, stdout=open(out, "w"), stderr=errf)
    with open(os.path.join(TMP, "extra.pids"), "a") as f:
        f.write("%d\n" % p.pid)
    for _ in range(300):
        if p.poll() is not None:
            raise RuntimeError("egress-servers.py exited %d: %s" % (
                p.returncode, open(os.path.join(TMP, "egress-bench.log")).read()[-500:]))
        try:
            with open(out) as f:
                doc = json.loads(f.readline())
            return p, doc
        except ValueError:
            time.sleep(0.1)
    p.kill()
    raise RuntimeError("egress-servers.py did not say it was ready within 30 s")


def server_stats(doc):
    with urllib.request.urlopen(doc["stats"], timeout=10) as r:
        return json.loads(r.read())


def ensure_template():
    if spacectl("template", "inspect", TEMPLATE, check=False).returncode == 0:
        return None
    if TEMPLATE != "seed":
        raise RuntimeError("the daemon has no template %s" % TEMPLATE)
    log("egress: building templates/seed (python3 in the guest)")
    t0 = time.perf_counter()
    spacectl("template", "build", os.path.join(SRCDIR, "templates", "seed"), timeout=1800)
    return round(time.perf_counter() - t0, 1)


def check_enforced(sid, srv):
    """Raises NotEnforced with the reason unless the gateway applies the policy to this sandbox."""
    try:
        ls = json.loads(spacectl("egress", "ls", "--json").stdout.decode())
    except (RuntimeError, ValueError) as e:
        raise NotEnforced("spacectl egress ls --json: %s" % e)
    if ls.get("enforced") is not True:
        raise NotEnforced("spaced says egress is not enforced (`spacectl egress ls --json`: enforced=%s): the "
                          "gateway (spaced/egress/gateway.c) and the agent's proxy and capture are not in this "
                          "build" % json.dumps(ls.get("enforced")))
    port = srv["servers"]["echo"][ADDR]
    dport = srv["servers"]["echo"][DENIED]
    base = {"connects": 1, "bytes": 0, "runs": 0, "what": ["latency"]}
    for via in VIAS:
        host, dhost = (NAME, "denied.test") if via == "transparent" else (ADDR, DENIED)
        got = client(sid, dict(base, via=via, host=host, echo=port, bulk=port))
        if via == "proxy" and not got.get("proxy"):
            raise NotEnforced("the guest has no HTTPS_PROXY/HTTP_PROXY: the agent's proxy is not there (%s)" %
                              got.get("error"))
        if "error" in got:
            raise RuntimeError("via %s, %s:%d (allowed by profile %s) fails: %s" % (via, host, port, PROFILE,
                                                                                   got["error"]))
        got = client(sid, dict(base, via=via, host=dhost, echo=dport, bulk=dport))
        if "error" not in got:
            raise NotEnforced("via %s, %s:%d (no rule allows it) answered: egress is not enforced" %
                              (via, dhost, dport))
    st = server_stats(srv)
    if st["connections"].get(DENIED, 0):
        raise NotEnforced("the servers saw %d connection(s) at the denied address %s" %
                          (st["connections"][DENIED], DENIED))
    if not st["connections"].get(ADDR):
        raise RuntimeError("the servers saw no connection at %s although the client's succeeded" % ADDR)


def mbs(size, secs):
    return [size / s / 1e6 for s in secs]


def bench(srv, res):
    size = MIB * 1048576
    echo = srv["servers"]["echo"][ADDR]
    bulk = srv["servers"]["bulk"][ADDR]
    built = ensure_template()
    if built is not None:
        res["template_build_s"] = built
    r = spacectl("create", TEMPLATE, "--egress", PROFILE, "--name", "bench-egress")
    sid = r.stdout.decode().strip()
    if not ID_RE.fullmatch(sid):
        raise RuntimeError("create printed %r" % sid)
    try:
        spacectl("exec", sid, "--", "true")
        check_enforced(sid, srv)
        lat_job = {"host": ADDR, "echo": echo, "bulk": bulk, "connects": CONNECTS, "bytes": size, "runs": 0,
                   "what": ["latency"]}
        bulk_job = dict(lat_job, connects=0, runs=1, what=["down", "up"])
        paths = [(v, sid) for v in VIAS] + [("host", None), ("guest-local", sid)]
        for name, where in paths:
            via = {"host": "direct", "guest-local": "local"}.get(name, name)
            log("egress: connect latency, %s, %d connections" % (name, CONNECTS))
            got = client(where, dict(lat_job, via=via, host=NAME if via == "transparent" else ADDR))
            if "error" in got:
                raise RuntimeError("latency via %s: %s" % (name, got["error"]))
            res.setdefault(name, {})["connect_echo_ms"] = stats(got["latency_ms"], "ms")
        # throughput: every path once per run, so that they all see the same load
        downs, ups = {}, {}
        for i in range(RUNS):
            for name, where in paths:
                via = {"host": "direct", "guest-local": "local"}.get(name, name)
                got = client(where, dict(bulk_job, via=via, host=NAME if via == "transparent" else ADDR))
                if "error" in got:
                    raise RuntimeError("throughput via %s: %s" % (name, got["error"]))
                downs.setdefault(name, []).extend(got["down_s"])
                ups.setdefault(name, []).extend(got["up_s"])
                log("egress: run %d, %s: down %.1f MB/s, up %.1f MB/s" % (
                    i + 1, name, size / got["down_s"][0] / 1e6, size / got["up_s"][0] / 1e6))
        for name, _ in paths:
            res[name]["down_mb_s"] = stats(mbs(size, downs[name]), "MB/s")
            res[name]["up_mb_s"] = stats(mbs(size, ups[name]), "MB/s")
        st = server_stats(srv)
        res["denied_connections"] = st["connections"].get(DENIED, 0)
        for name in VIAS:
            h = res.get("host", {})
            g = res.get(name, {})
            res.setdefault("ratios", {})[name] = {
                "connect_p50_vs_host": ratio(g["connect_echo_ms"]["p50"], h["connect_echo_ms"]["p50"]),
                "connect_p50_vs_guest_local": ratio(g["connect_echo_ms"]["p50"],
                                                    res["guest-local"]["connect_echo_ms"]["p50"]),
                "down_p50_vs_host": ratio(g["down_mb_s"]["p50"], h["down_mb_s"]["p50"]),
                "up_p50_vs_host": ratio(g["up_mb_s"]["p50"], h["up_mb_s"]["p50"]),
                "down_p50_vs_guest_local": ratio(g["down_mb_s"]["p50"], res["guest-local"]["down_mb_s"]["p50"]),
                "up_p50_vs_guest_local": ratio(g["up_mb_s"]["p50"], res["guest-local"]["up_mb_s"]["p50"]),
            }
        try:
            res["accel"] = json.loads(spacectl("inspect", sid, "--json").stdout.decode()).get("accel")
        except (RuntimeError, ValueError):
            pass
    finally:
        try:
            spacectl("rm", "-f", sid, timeout=300)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            log("rm: %s" % e)


def ratio(a, b):
    return round(a / b, 2) if a is not None and b else None


def main():
    out_path = ENV.get("BENCH_OUT", "bench-results.json")
    res = {"loadavg_start": [round(x, 2) for x in os.getloadavg()], "template": TEMPLATE, "profile": PROFILE,
           "address": ADDR, "name": NAME, "via": VIAS, "connects": CONNECTS, "mib": MIB, "runs": RUNS}
    rc = 0
    srv = None
    try:
        srv_proc, srv = start_servers()
        try:
            log("egress: servers on %s (echo %d, bulk %d); %d connections, %d MiB x %d each way, via %s" % (
                ADDR, srv["servers"]["echo"][ADDR], srv["servers"]["bulk"][ADDR], CONNECTS, MIB, RUNS,
                ",".join(VIAS)))
            bench(srv, res)
        finally:
            srv_proc.terminate()
            srv_proc.wait(timeout=10)
    except NotEnforced as e:
        log("egress: NOT ENFORCED: %s" % e)
        res["error"] = "egress is not enforced: %s" % e
        res["enforced"] = False
        rc = 1
    except (RuntimeError, OSError, ValueError, KeyError, subprocess.TimeoutExpired) as e:
        log("egress failed: %s" % e)
        res["error"] = str(e)
        rc = 1
    res["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    save_results(out_path, "egress", res)
    print_table(res, out_path)
    return rc


def print_table(res, out_path):
    print("\negress through the gateway, %s in a %s sandbox (accel %s), %d MiB transfers (%s)" % (
        ",".join(res["via"]), res["template"], res.get("accel", "?"), res["mib"], out_path))
    if "error" in res:
        print("error: %s" % res["error"])
        return
    print("%-54s %5s %9s %9s %9s %5s" % ("", "unit", "p50", "p90", "p99", "n"))
    names = list(res["via"]) + ["host", "guest-local"]
    label = {"proxy": "sandbox, proxy (CONNECT) + gateway", "transparent": "sandbox, captured + gateway",
             "host": "  baseline: host over loopback", "guest-local": "  guest alone, its own 127.0.0.1"}
    for key, what in (("connect_echo_ms", "connect+echo"), ("down_mb_s", "down"), ("up_mb_s", "up")):
        for n in names:
            d = res.get(n, {}).get(key)
            if d:
                print("%-54s %5s %9.2f %9.2f %9.2f %5d" % ("%-12s %s" % (what, label[n]), d["unit"], d["p50"], d["p90"],
                                                          d["p99"], d["n"]))
    for v, r in res.get("ratios", {}).items():
        print("%s p50: connect %sx the host's (%sx the guest's own); MB/s down %sx, up %sx the host's (%sx, %sx the "
              "guest's own)" % (v, r["connect_p50_vs_host"], r["connect_p50_vs_guest_local"], r["down_p50_vs_host"],
                                r["up_p50_vs_host"], r.get("down_p50_vs_guest_local"), r.get("up_p50_vs_guest_local")))
    print("connections the servers saw at the denied address: %d" % res.get("denied_connections", 0))


if __name__ == "__main__":
    sys.exit(main())
