#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""HTTPS with a secret binding (issue 22, space-egress(5) "SECRETS"); run by tests/bench/run.sh (BENCH_ONLY=secret).

An HTTPS server of this file's own (`bench_secret.py --serve`, a process of its own: GET /first answers a tiny
body, GET /bulk/N answers N bytes, HTTP/1.1 with keep-alive) listens on BENCH_SECRET_ADDR (default 127.0.0.5)
port BENCH_SECRET_PORT (default 8443) with a certificate for bound.test and unbound.test from a test CA that
run.sh makes with openssl (BENCH_SECRET_PKI) and names in egress_tls_ca. run.sh's hosts file maps both names
there; its profile bench-secret allows both and the address, and binds the secret bench-secret-token to
bound.test:PORT alone (header Authorization: Bearer {value}). So from a sandbox of BENCH_SECRET_TEMPLATE (default
seed, imported from the tests' seed cache or built when missing) the same server is reached two ways:
  bound     bound.test: the gateway ends the guest's TLS with a certificate from the daemon's CA, verifies the
            server, re-encrypts and adds the header to each request (spaced/egress/intercept.c);
  unbound   unbound.test: the same captured connection through the gateway, never intercepted (the guest's TLS
            goes through to the server as it is).
and, as a baseline in the same run,
  host      the same client on the host, straight to the server over loopback (no sandbox, no gateway).
One python3 client (python3 -c through `spacectl exec`; in the guest with an explicit CA bundle of the daemon's
CA and the test CA, /tmp/bench-secret-bundle.pem, as guests do not trust the daemon's CA by default yet):
(a) connect to first byte: from before connect() through the TLS handshake and GET /first to the first byte of
    the response (the rest of it read untimed), then close; BENCH_SECRET_CONNECTS (>= 30, default 100)
    connections to each name, bound and unbound alternating so that both see the same drift; p50/p90/p99 in ms.
(b) throughput: GET /bulk/N of BENCH_SECRET_MIB (default 32) MiB on a kept-open TLS connection (made and used
    once before, untimed), from the request to the last byte, BENCH_SECRET_RUNS (>= 3, default 3) times each,
    alternating; MB/s (10^6 bytes per second).
The names are resolved once in the guest (its DNS stub answers a stand-in address for a host loopback address)
before the timed loops.

Before measuring, the part checks that interception really happens, and fails with the reason otherwise: in
the guest the issuer of the certificate seen on bound.test must be "space local CA" and on unbound.test the
test CA; the server must have got "Authorization: Bearer VALUE" on bound.test and no Authorization on
unbound.test (the guest's TLS version and cipher on each name are kept as "guest_tls"). After measuring, every
request the guest made on bound.test must have reached the server with the value, and none other with any.

Results under "secret" in $BENCH_OUT (merged). Percentiles nearest-rank. Standard library only.
"""

import json
import os
import re
import secrets
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = os.environ
TMP = ENV.get("TEST_TMP", "/tmp")
SPACECTL = ENV.get("SPACECTL_BIN", "spacectl")
SRCDIR = os.path.abspath(os.path.join(HERE, "..", ".."))
TEMPLATE = ENV.get("BENCH_SECRET_TEMPLATE", "seed")
PROFILE = "bench-secret"
SECRET = "bench-secret-token"
ADDR = ENV.get("BENCH_SECRET_ADDR", "127.0.0.5")
PORT = int(ENV.get("BENCH_SECRET_PORT", "8443"))
PKI = ENV.get("BENCH_SECRET_PKI", os.path.join(TMP, "secret-pki"))
BOUND, UNBOUND = "bound.test", "unbound.test"
CONNECTS = max(30, int(ENV.get("BENCH_SECRET_CONNECTS", "100")))
MIB = max(1, int(ENV.get("BENCH_SECRET_MIB", "32")))
RUNS = max(3, int(ENV.get("BENCH_SECRET_RUNS", "3")))
GUEST_BUNDLE = "/tmp/bench-secret-bundle.pem"
LOCAL_CA_CN = "space local CA"
UPSTREAM_CA_CN = "space bench upstream CA"  # run.sh's -subj

sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
from bench import stats, log, run, save_results  # noqa: E402

ID_RE = re.compile(r"[0-9a-f]{32}")


# ----------------------------------------------------------------------------------------- the server

def serve(addr, port, cert, key, log_path):
    """HTTPS on addr:port, a thread per connection, HTTP/1.1 keep-alive; the client closes. Each request is a
    JSON line in log_path: Host, path, the Authorization header (null when none). Prints "ready" when it listens."""
    import socket
    import ssl
    import threading

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols(["http/1.1"])
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(128)
    logf = open(log_path, "a")
    lock = threading.Lock()
    zeros = memoryview(bytes(1 << 20))
    parent = os.getppid()

    def conn(c):
        try:
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            c.settimeout(300)
            t = ctx.wrap_socket(c, server_side=True)
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    d = t.recv(65536)
                    if not d:
                        return
                    buf += d
                    if len(buf) > 65536:
                        return
                head, _, buf = buf.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                parts = lines[0].split()
                path = parts[1] if len(parts) > 1 else ""
                hdrs = {}
                for ln in lines[1:]:
                    k, _, v = ln.partition(":")
                    hdrs.setdefault(k.strip().lower(), v.strip())
                n = int(hdrs.get("content-length") or 0)
                while len(buf) < n:
                    d = t.recv(65536)
                    if not d:
                        return
                    buf += d
                buf = buf[n:]
                with lock:
                    logf.write(json.dumps({"host": hdrs.get("host"), "path": path, "client": hdrs.get("user-agent"),
                                           "auth": hdrs.get("authorization")}) + "\n")
                    logf.flush()
                if path.startswith("/bulk/"):
                    size = int(path[6:])
                    t.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                              b"Content-Length: %d\r\n\r\n" % size)
                    while size > 0:
                        k = min(size, len(zeros))
                        t.sendall(zeros[:k])
                        size -= k
                else:
                    t.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nok\n")
        except (OSError, ValueError):
            pass
        finally:
            c.close()

    print("ready", flush=True)
    ls.settimeout(1.0)
    while os.getppid() == parent:  # never outlive the bench
        try:
            c, _ = ls.accept()
        except socket.timeout:
            continue
        threading.Thread(target=conn, args=(c,), daemon=True).start()


# ----------------------------------------------------------------------------------------- the client

# Run with python3 -c on the host and in the guest. argv[1] is a JSON job:
#   {"what": "check"|"latency"|"bulk", "names": [...], "addr": ADDR or null (resolve each name once), "port": N,
#    "cafile": PATH, "connects": N, "bytes": N, "runs": N}
# It prints one JSON line: {"addrs": {name: addr}, "issuer": {name: CN}, "latency_ms": {name: [...]},
# "bulk_s": {name: [...]}}, or with "error" and exit status 1.
CLIENT = r'''
import json, socket, ssl, sys, time
job = json.loads(sys.argv[1])
ctx = ssl.create_default_context(cafile=job["cafile"])
ctx.set_alpn_protocols(["http/1.1"])
port = job["port"]
out = {"addrs": {}, "issuer": {}, "tls": {}, "latency_ms": {}, "bulk_s": {}}

def connect(name):
    s = socket.create_connection((out["addrs"][name], port), timeout=120)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return ctx.wrap_socket(s, server_hostname=name)

def request(t, name, path):
    t.sendall(("GET %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: bench-secret-%s\r\n\r\n" % (
        path, name, port, job["client"])).encode())

def response(t, first=b"", buf=None):
    """Reads one response (its head and Content-Length bytes of body); returns (status line, body length)."""
    head = first
    while b"\r\n\r\n" not in head:
        d = t.recv(65536)
        if not d:
            raise OSError("the connection ended in the response head (%r)" % head[:200])
        head += d
    head, _, rest = head.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    n = 0
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        if k.strip().lower() == "content-length":
            n = int(v)
    if not lines[0].startswith("HTTP/1.1 200"):
        body = rest
        while len(body) < min(n, 2000):
            d = t.recv(65536)
            if not d:
                break
            body += d
        raise OSError("%s: %s" % (lines[0], body[:300].decode(errors="replace").strip()))
    got = len(rest)
    buf = buf or bytearray(1 << 20)
    while got < n:
        k = t.recv_into(buf)
        if not k:
            raise OSError("the response ended after %d bytes of %d" % (got, n))
        got += k
    if got != n:
        raise OSError("%d bytes after a response of %d" % (got - n, n))
    return lines[0], n

try:
    for name in job["names"]:
        out["addrs"][name] = job["addr"] or socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)[0][4][0]
    if job["what"] == "check":
        for name in job["names"]:
            with connect(name) as t:
                out["issuer"][name] = dict(x[0] for x in t.getpeercert()["issuer"]).get("commonName")
                out["tls"][name] = "%s %s" % (t.version(), t.cipher()[0])
                request(t, name, "/check/" + name)
                response(t)
    elif job["what"] == "latency":
        for name in job["names"]:
            out["latency_ms"][name] = []
        for i in range(job["connects"] + 3):
            for name in job["names"]:  # alternating: every name sees the same drift
                t0 = time.perf_counter()
                t = connect(name)
                request(t, name, "/first")
                first = t.recv(1)
                t1 = time.perf_counter()
                if not first:
                    raise OSError("%s: the connection ended before the response" % name)
                response(t, first)
                t.close()
                if i >= 3:  # three to warm up
                    out["latency_ms"][name].append((t1 - t0) * 1000.0)
    else:
        conns = {}
        buf = bytearray(1 << 20)
        for name in job["names"]:  # kept open; its handshake and one request before the timed ones
            conns[name] = connect(name)
            request(conns[name], name, "/first")
            response(conns[name])
            out["bulk_s"][name] = []
        for i in range(job["runs"]):
            for name in job["names"]:
                t = conns[name]
                t0 = time.perf_counter()
                request(t, name, "/bulk/%d" % job["bytes"])
                response(t, buf=buf)
                out["bulk_s"][name].append(time.perf_counter() - t0)
        for t in conns.values():
            t.close()
except (OSError, ValueError, KeyError, ssl.SSLError) as e:
    out["error"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
sys.exit(1 if "error" in out else 0)
'''


# ----------------------------------------------------------------------------------------- the bench

class NotIntercepted(RuntimeError):
    pass


def spacectl(*args, timeout=900, check=True, input=None):
    if input is None:
        return run([SPACECTL] + list(args), timeout, check)
    r = subprocess.run([SPACECTL] + list(args), input=input, capture_output=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError("spacectl %s exited %d: %s" % (" ".join(args), r.returncode,
                                                           r.stderr.decode(errors="replace").strip()[:400]))
    return r


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
        raise RuntimeError("the client (%s, %s) exited %d: %s %s" % (
            where or "host", job["what"], r.returncode, r.stdout.decode(errors="replace")[-300:],
            r.stderr.decode(errors="replace")[-500:]))
    return doc


def start_server():
    cert, key = os.path.join(PKI, "srv.pem"), os.path.join(PKI, "srv.key")
    for f in (cert, key, os.path.join(PKI, "upca.pem")):
        if not os.path.isfile(f):
            raise RuntimeError("%s is missing: run.sh makes the test PKI (openssl) when the secret part runs" % f)
    logp = os.path.join(TMP, "secret-bench.requests")
    open(logp, "w").close()
    errp = os.path.join(TMP, "secret-bench.log")
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve", ADDR, str(PORT), cert, key, logp],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=open(errp, "w"))
    with open(os.path.join(TMP, "extra.pids"), "a") as f:
        f.write("%d\n" % p.pid)
    line = p.stdout.readline()
    if line.strip() != b"ready":
        p.wait(timeout=10)
        raise RuntimeError("the HTTPS server on %s:%d exited %s: %s" % (ADDR, PORT, p.returncode,
                                                                       open(errp).read()[-500:]))
    log("secret: HTTPS server on %s:%d (pid %d)" % (ADDR, PORT, p.pid))
    return p, logp


def requests(logp):
    with open(logp) as f:
        return [json.loads(ln) for ln in f if ln.strip()]


def ensure_template():
    if spacectl("template", "inspect", TEMPLATE, check=False).returncode == 0:
        return None
    if TEMPLATE != "seed":
        raise RuntimeError("the daemon has no template %s" % TEMPLATE)
    log("secret: building templates/seed (python3 in the guest)")
    t0 = time.perf_counter()
    spacectl("template", "build", os.path.join(SRCDIR, "templates", "seed"), timeout=1800)
    return round(time.perf_counter() - t0, 1)


def check_intercepted(sid, job, logp, value):
    """Raises NotIntercepted with the reason unless bound.test is intercepted and unbound.test is not."""
    got = client(sid, dict(job, what="check"))
    if "error" in got:
        raise NotIntercepted("an HTTPS request from the guest to %s and %s:%d fails: %s" % (
            BOUND, UNBOUND, PORT, got["error"]))
    iss = got["issuer"]
    if iss.get(BOUND) != LOCAL_CA_CN:
        raise NotIntercepted("the guest sees a certificate issued by %r on %s, not by the daemon's CA (%r): the "
                             "gateway does not intercept the bound host" % (iss.get(BOUND), BOUND, LOCAL_CA_CN))
    if iss.get(UNBOUND) != UPSTREAM_CA_CN:
        raise NotIntercepted("the guest sees a certificate issued by %r on %s, not the server's own (%r): a "
                             "host with no binding is intercepted" % (iss.get(UNBOUND), UNBOUND, UPSTREAM_CA_CN))
    seen = {r["path"]: r for r in requests(logp) if r["path"].startswith("/check/")}
    b, u = seen.get("/check/" + BOUND), seen.get("/check/" + UNBOUND)
    if not b or not u:
        raise NotIntercepted("the server did not get both check requests (it got %s)" % sorted(seen))
    if b["auth"] != "Bearer " + value:
        raise NotIntercepted("the server got %s on %s, not Authorization: Bearer <the value>" % (
            "no Authorization" if b["auth"] is None else "another Authorization", BOUND))
    if u["auth"] is not None:
        raise NotIntercepted("the server got an Authorization header on %s, which no binding names" % UNBOUND)
    return got["addrs"], got["tls"]


def mbs(size, secs):
    return [size / s / 1e6 for s in secs]


def bench(res, logp, value):
    size = MIB * 1048576
    built = ensure_template()
    if built is not None:
        res["template_build_s"] = built
    spacectl("secret", "set", SECRET, input=(value + "\n").encode())
    r = spacectl("create", TEMPLATE, "--egress", PROFILE, "--name", "bench-secret")
    sid = r.stdout.decode().strip()
    if not ID_RE.fullmatch(sid):
        raise RuntimeError("create printed %r" % sid)
    try:
        spacectl("exec", sid, "--", "true")
        with open(os.path.join(ENV["SPACE_STATE_DIR"], "tls", "ca.pem"), "rb") as f:
            bundle = f.read()
        with open(os.path.join(PKI, "upca.pem"), "rb") as f:
            bundle += b"\n" + f.read()
        spacectl("exec", "-i", sid, "--", "sh", "-c", "cat > %s" % GUEST_BUNDLE, input=bundle)
        names = [BOUND, UNBOUND]
        guest = {"client": "guest", "names": names, "addr": None, "port": PORT, "cafile": GUEST_BUNDLE,
                 "connects": CONNECTS, "bytes": size, "runs": RUNS}
        host = dict(guest, client="host", addr=ADDR, cafile=os.path.join(PKI, "upca.pem"))
        res["guest_addrs"], res["guest_tls"] = check_intercepted(sid, guest, logp, value)
        log("secret: %s is intercepted (the daemon's CA, the value arrives), %s is not; the guest reaches them "
            "at %s" % (BOUND, UNBOUND, ", ".join("%s=%s" % kv for kv in sorted(res["guest_addrs"].items()))))
        before = len(requests(logp))

        for where, job, tag in ((sid, guest, "sandbox"), (None, host, "host")):
            log("secret: connect to first byte, %s, %d connections to each name" % (tag, CONNECTS))
            got = client(where, dict(job, what="latency"))
            if "error" in got:
                raise RuntimeError("connect to first byte, %s: %s" % (tag, got["error"]))
            if where:
                for n, k in ((BOUND, "bound"), (UNBOUND, "unbound")):
                    res.setdefault(k, {})["first_byte_ms"] = stats(got["latency_ms"][n], "ms")
            else:
                res.setdefault("host", {})["first_byte_ms"] = stats(got["latency_ms"][BOUND] +
                                                                    got["latency_ms"][UNBOUND], "ms")
        for where, job, tag in ((sid, guest, "sandbox"), (None, host, "host")):
            log("secret: throughput, %s, %d MiB x %d to each name" % (tag, MIB, RUNS))
            got = client(where, dict(job, what="bulk"))
            if "error" in got:
                raise RuntimeError("throughput, %s: %s" % (tag, got["error"]))
            if where:
                for n, k in ((BOUND, "bound"), (UNBOUND, "unbound")):
                    res[k]["mb_s"] = stats(mbs(size, got["bulk_s"][n]), "MB/s")
                    log("secret: %s: %s MB/s" % (k, " ".join("%.1f" % x for x in mbs(size, got["bulk_s"][n]))))
            else:
                res["host"]["mb_s"] = stats(mbs(size, got["bulk_s"][BOUND] + got["bulk_s"][UNBOUND]), "MB/s")
                log("secret: host: %s MB/s" % " ".join("%.1f" % x for x in
                                                      mbs(size, got["bulk_s"][BOUND] + got["bulk_s"][UNBOUND])))

        # every measured request on the bound name carried the value, none on the other (the host's requests
        # name both hosts too, and carry nothing)
        reqs = requests(logp)[before:]
        counts = {}
        for r in reqs:
            h = "%s from the %s" % ((r["host"] or "").rsplit(":", 1)[0], (r["client"] or "?").rsplit("-", 1)[-1])
            c = counts.setdefault(h, {"requests": 0, "with_value": 0, "with_other_auth": 0})
            c["requests"] += 1
            if r["auth"] == "Bearer " + value:
                c["with_value"] += 1
            elif r["auth"] is not None:
                c["with_other_auth"] += 1
        res["server_requests"] = counts
        cb, cu = counts.get(BOUND + " from the guest", {}), counts.get(UNBOUND + " from the guest", {})
        # the guest's requests on bound.test: CONNECTS + 3 warm-up, 1 + RUNS on the kept-open connection
        want = CONNECTS + 3 + 1 + RUNS
        if cb.get("requests") != want or cb.get("with_value") != want or cu.get("requests") != want or \
                cu.get("with_value") or cu.get("with_other_auth") or \
                any(c["with_value"] or c["with_other_auth"] for h, c in counts.items() if h.endswith("host")):
            raise NotIntercepted("the server's count of requests with the value does not fit: %s (%d requests from "
                                 "the guest to each name, all with the value on %s, none elsewhere)" % (
                                     json.dumps(counts), want, BOUND))
        for k in ("bound", "unbound"):
            h = res["host"]
            g = res[k]
            res.setdefault("ratios", {})[k] = {
                "first_byte_p50_vs_host": ratio(g["first_byte_ms"]["p50"], h["first_byte_ms"]["p50"]),
                "mb_s_p50_vs_host": ratio(g["mb_s"]["p50"], h["mb_s"]["p50"]),
            }
        res["ratios"]["bound_vs_unbound"] = {
            "first_byte_p50": ratio(res["bound"]["first_byte_ms"]["p50"], res["unbound"]["first_byte_ms"]["p50"]),
            "first_byte_p90": ratio(res["bound"]["first_byte_ms"]["p90"], res["unbound"]["first_byte_ms"]["p90"]),
            "mb_s_p50": ratio(res["bound"]["mb_s"]["p50"], res["unbound"]["mb_s"]["p50"]),
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
           "address": "%s:%d" % (ADDR, PORT), "bound": {}, "unbound": {}, "host": {}, "connects": CONNECTS,
           "mib": MIB, "runs": RUNS}
    res["names"] = {"bound": BOUND, "unbound": UNBOUND}
    rc = 0
    value = "bench-" + secrets.token_hex(16)
    try:
        srv, logp = start_server()
        try:
            log("secret: %d connections to each name, %d MiB x %d" % (CONNECTS, MIB, RUNS))
            bench(res, logp, value)
        finally:
            srv.terminate()
            srv.wait(timeout=10)
    except NotIntercepted as e:
        log("secret: NOT INTERCEPTED: %s" % e)
        res["error"] = "HTTPS to the bound host is not intercepted as it should be: %s" % e
        res["intercepted"] = False
        rc = 1
    except (RuntimeError, OSError, ValueError, KeyError, subprocess.TimeoutExpired) as e:
        log("secret failed: %s" % e)
        res["error"] = str(e)
        rc = 1
    res["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    save_results(out_path, "secret", res)
    print_table(res, out_path)
    return rc


def print_table(res, out_path):
    print("\nHTTPS with a secret binding, from a %s sandbox (accel %s) through the gateway to %s, %d MiB "
          "transfers (%s)" % (res["template"], res.get("accel", "?"), res["address"], res["mib"], out_path))
    if "error" in res:
        print("error: %s" % res["error"])
        return
    print("%-58s %5s %9s %9s %9s %5s" % ("", "unit", "p50", "p90", "p99", "n"))
    label = {"bound": "sandbox, %s, intercepted + secret" % BOUND,
             "unbound": "sandbox, %s, not intercepted" % UNBOUND,
             "host": "  baseline: host over loopback"}
    for key, what in (("first_byte_ms", "first byte"), ("mb_s", "GET /bulk")):
        for n in ("bound", "unbound", "host"):
            d = res.get(n, {}).get(key)
            if d:
                print("%-58s %5s %9.2f %9.2f %9.2f %5d" % ("%-11s %s" % (what, label[n]), d["unit"], d["p50"],
                                                          d["p90"], d["p99"], d["n"]))
    r = res.get("ratios", {})
    if r:
        print("bound vs unbound p50: first byte %sx (p90 %sx), MB/s %sx; vs the host: bound %sx, unbound %sx "
              "first byte, MB/s %sx, %sx" % (
                  r["bound_vs_unbound"]["first_byte_p50"], r["bound_vs_unbound"]["first_byte_p90"],
                  r["bound_vs_unbound"]["mb_s_p50"], r["bound"]["first_byte_p50_vs_host"],
                  r["unbound"]["first_byte_p50_vs_host"], r["bound"]["mb_s_p50_vs_host"],
                  r["unbound"]["mb_s_p50_vs_host"]))
    print("the guest's TLS: %s" % ", ".join("%s %s" % kv for kv in sorted(res.get("guest_tls", {}).items())))
    print("requests the server got (since the check), by name: %s" % json.dumps(res.get("server_requests")))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        a = sys.argv[2:]
        serve(a[0], int(a[1]), a[2], a[3], a[4])
        sys.exit(0)
    sys.exit(main())
