#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Destinations for the egress tests (issue 11, space-egress(5)): servers on loopback addresses only.

Started in the background by a test; makes a throwaway CA and a server certificate (openssl CLI) for the
test names, writes the CA to DIR/ca.pem, starts every server, prints ONE JSON line on stdout when all of them
listen, then serves until killed (SIGTERM or SIGINT: exit 0). Standard library only.

Servers (every address and port can be changed; a port of 0 takes a free one, the JSON line says which):
  HTTPS  ALLOWED:8443 and DENIED:8443  any SNI; body "hello from ADDR host=HOST\\n" (HOST: the Host header's name,
                                       without a port; "-" for none); headers X-Egress-Server (ADDR:PORT),
                                       X-Egress-Host (the Host header as sent), X-Egress-SNI (the SNI the client
                                       sent, "-" for none)
  HTTP   ALLOWED:8080 and DENIED:8080  the same body; absolute-form request lines (a proxy's) are accepted
  echo   ALLOWED:9000 and DENIED:9000  raw TCP: sends back every byte it reads until the client closes
  bulk   ALLOWED:9001                  raw TCP, for throughput: the client sends one line, "send N\\n" (the
                                       server sends N bytes of zeros, then closes) or "recv N\\n" (the server reads
                                       N bytes, then answers "ok N\\n" and closes). Lower case: an upper-case
                                       word and a space is how an HTTP request starts, which the gateway reads
  index  PYPI:8080 (HTTP), PYPI:8443 (HTTPS, same certificate)
                                       a PEP 503 simple index: /simple/, /simple/spacedemo/ and
                                       /packages/spacedemo-1.0-py3-none-any.whl (a pure-Python wheel made here)
  control CONTROL:8099 (HTTP)          GET /stats: connection counts and the last requests (below); POST /reset
                                       (or GET /reset) zeroes them. Host only: no profile of a test names it.

Defaults: ALLOWED 127.0.0.2, DENIED 127.0.0.3, PYPI 127.0.0.4, CONTROL 127.0.0.9. IPv6 literals (::1) work too.

Connections are counted when they are accepted, before any TLS handshake or request, so a count of 0 at the
denied address shows that nothing ever connected there. GET /stats returns
  {"connections": {"127.0.0.3": 0, ...},                 every address served, all ports together
   "by_port": {"127.0.0.2:8443": 2, ...},                every (address, port) served
   "events": [{"n": 1, "t": 1733.2, "kind": "https", "addr": "127.0.0.2", "port": 8443, "peer": "127.0.0.1:5123",
               "sni": "allowed.test", "host": "allowed.test:8443", "method": "GET", "path": "/"}, ...]}
(the last 1000 connections; "sni", "host", "method", "path" are filled in as the connection gets that far, null
otherwise; on a kept-alive HTTP connection they are its last request's, and "requests" counts them; a failed TLS
handshake adds "error"; on bulk connections "method" is send or recv and "path" the byte count). --stats-file
FILE also writes that document to FILE after every change.

Names: --host NAME=ADDR (repeatable) replaces the default map
  allowed.test=ALLOWED  other.test=DENIED  denied.test=DENIED  pypi.test=PYPI
  rebind.test=ALLOWED  rebind.test=DENIED  (one name, an allowed and a denied address)
The certificate's SANs are every name of the map, --san NAME (repeatable) and every address served.
--hosts-out FILE writes the map as an /etc/hosts file (one "ADDR NAME" line per pair) for spaced's
egress_hosts_file.

Usage in a test:
  python3 "$TESTS_DIR/egress-servers.py" --dir "$TEST_TMP/egress" --hosts-out "$TEST_TMP/egress.hosts" \\
          >"$TEST_TMP/egress.json" 2>"$TEST_TMP/egress.log" &
  track_pid $!
  wait_for 30 test -s "$TEST_TMP/egress.json" || bail_out "egress-servers.py did not start"
  json "$TEST_TMP/egress.json" 'd["ca"]'

The line it prints:
  {"ready": true, "pid": 123, "dir": "...", "ca": "DIR/ca.pem", "hosts_file": "FILE" or null,
   "names": {"allowed.test": ["127.0.0.2"], ...}, "sans": [...],
   "servers": {"https": {"127.0.0.2": 8443, "127.0.0.3": 8443}, "http": {...}, "echo": {...},
               "bulk": {"127.0.0.2": 9001}, "pypi_http": {"127.0.0.4": 8080}, "pypi_https": {"127.0.0.4": 8443}},
   "control": "http://127.0.0.9:8099", "stats": "http://127.0.0.9:8099/stats",
   "index": {"http": "http://pypi.test:8080/simple/", "https": "https://pypi.test:8443/simple/"},
   "wheel": {"name": "spacedemo-1.0-py3-none-any.whl", "path": "DIR/...", "sha256": "...", "size": N}}
Startup errors (a port in use, openssl missing) go to stderr with exit status 1 and no JSON line.

pip and plain HTTP: pip ignores an http:// index on a name that is not localhost or a loopback literal unless
told --trusted-host NAME; the HTTPS index with --cert DIR/ca.pem needs no such flag (but REQUESTS_CA_BUNDLE, when
set, wins over --cert: unset it).
"""

import argparse
import base64
import hashlib
import http.server
import io
import ipaddress
import json
import os
import signal
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import zipfile

WHEEL_NAME = "spacedemo"
WHEEL_VERSION = "1.0"
WHEEL_FILE = "%s-%s-py3-none-any.whl" % (WHEEL_NAME, WHEEL_VERSION)


def log(msg):
    print("egress-servers: " + msg, file=sys.stderr, flush=True)


def hostport(addr, port):
    return "[%s]:%d" % (addr, port) if ":" in addr else "%s:%d" % (addr, port)


def family(addr):
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


# ------------------------------------------------------------------------------------------ statistics

class Stats:
    def __init__(self, path=None):
        self.lock = threading.Lock()
        self.path = path
        self.addrs = {}
        self.ports = {}
        self.events = []
        self.n = 0

    def register(self, addr, port):
        with self.lock:
            self.addrs.setdefault(addr, 0)
            self.ports.setdefault(hostport(addr, port), 0)
        self.write()

    def connect(self, kind, addr, port, peer):
        with self.lock:
            self.n += 1
            self.addrs[addr] = self.addrs.get(addr, 0) + 1
            k = hostport(addr, port)
            self.ports[k] = self.ports.get(k, 0) + 1
            ev = {"n": self.n, "t": round(time.time(), 3), "kind": kind, "addr": addr, "port": port,
                  "peer": hostport(peer[0], peer[1]), "sni": None, "host": None, "method": None, "path": None}
            self.events.append(ev)
            del self.events[:-1000]
        self.write()
        return ev

    def note(self, ev, **kw):
        with self.lock:
            ev.update(kw)
        self.write()

    def reset(self):
        with self.lock:
            for k in self.addrs:
                self.addrs[k] = 0
            for k in self.ports:
                self.ports[k] = 0
            self.events = []
        self.write()

    def doc(self):
        with self.lock:
            return {"connections": dict(self.addrs), "by_port": dict(self.ports), "events": [dict(e) for e in self.events]}

    def write(self):
        if not self.path:
            return
        tmp = "%s.%d.tmp" % (self.path, threading.get_ident())
        with open(tmp, "w") as f:
            json.dump(self.doc(), f)
            f.write("\n")
        os.replace(tmp, self.path)


STATS = None


# ------------------------------------------------------------------------------------------ certificates

def openssl(*args, cwd):
    r = subprocess.run(["openssl"] + list(args), cwd=cwd, capture_output=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError("openssl %s: %s" % (args[0], r.stderr.decode(errors="replace").strip()[:500]))


def make_certs(d, names, addrs):
    """A throwaway CA (d/ca.pem, key d/ca.key) and a server certificate for names and addresses."""
    for f in ("ca.pem", "ca.key", "server.pem", "server.key", "server.csr", "server.ext", "ca.srl"):
        if os.path.exists(os.path.join(d, f)):
            os.unlink(os.path.join(d, f))
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=space egress test CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=%s" % names[0], cwd=d)
    san = ["DNS:%s" % n for n in names] + ["IP:%s" % a for a in addrs]
    with open(os.path.join(d, "server.ext"), "w") as f:
        f.write("basicConstraints=critical,CA:FALSE\n"
                "keyUsage=critical,digitalSignature\n"
                "extendedKeyUsage=serverAuth\n"
                "subjectKeyIdentifier=hash\n"
                "authorityKeyIdentifier=keyid:always\n"
                "subjectAltName=%s\n" % ",".join(san))
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.pem", "-days", "2", "-extfile", "server.ext", cwd=d)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(d, "server.pem"), os.path.join(d, "server.key"))
    ctx.set_alpn_protocols(["http/1.1"])

    def on_sni(sslsock, name, _ctx):
        ev = getattr(sslsock, "egress_event", None)
        if ev is not None:
            STATS.note(ev, sni=name)
    ctx.sni_callback = on_sni
    return ctx


# ------------------------------------------------------------------------------------------ the wheel

def record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(d):
    """spacedemo-1.0-py3-none-any.whl, by hand: a module, METADATA, WHEEL and RECORD with sha256 hashes."""
    di = "%s-%s.dist-info" % (WHEEL_NAME, WHEEL_VERSION)
    files = [
        ("spacedemo/__init__.py",
         b'"""A tiny package served by the egress tests\' index (tests/integration/egress-servers.py)."""\n'
         b'__version__ = "1.0"\n\n\ndef hello():\n    return "hello from spacedemo 1.0"\n'),
        ("%s/METADATA" % di,
         b"Metadata-Version: 2.1\nName: spacedemo\nVersion: 1.0\n"
         b"Summary: A tiny package for space's egress tests\nLicense: Apache-2.0\nRequires-Python: >=3.7\n"),
        ("%s/WHEEL" % di,
         b"Wheel-Version: 1.0\nGenerator: space egress-servers.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
        ("%s/top_level.txt" % di, b"spacedemo\n"),
    ]
    record = "".join("%s,%s,%d\n" % (name, record_hash(data), len(data)) for name, data in files)
    record += "%s/RECORD,,\n" % di
    files.append(("%s/RECORD" % di, record.encode()))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files:
            zi = zipfile.ZipInfo(name, date_time=(1980, 1, 2, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = 0o644 << 16
            z.writestr(zi, data)
    data = buf.getvalue()
    path = os.path.join(d, WHEEL_FILE)
    with open(path, "wb") as f:
        f.write(data)
    return {"name": WHEEL_FILE, "path": path, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}, data


# ------------------------------------------------------------------------------------------ servers

class CountedServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    """A threaded TCP server that counts each connection when it is accepted (in the listening thread, before any
    TLS handshake) and, with tls, makes the handshake in the connection's own thread. The handler gets the
    connection's stats event as a fourth argument."""
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr, port, handler, kind, tls=None, counted=True, **extra):
        self.address_family = family(addr)
        self.kind = kind
        self.tls = tls
        self.addr = addr
        self.counted = counted
        self._ev = {}
        self._ev_lock = threading.Lock()
        self.__dict__.update(extra)
        super().__init__((addr, port), handler)
        self.port = self.server_address[1]
        if counted:
            STATS.register(addr, self.port)

    def process_request(self, request, client_address):
        if self.counted:
            ev = STATS.connect(self.kind, self.addr, self.port, client_address)
            with self._ev_lock:
                self._ev[id(request)] = ev
        super().process_request(request, client_address)

    def finish_request(self, request, client_address):
        with self._ev_lock:
            ev = self._ev.pop(id(request), None)
        if self.tls is not None:
            try:
                request.settimeout(30)
                tls = self.tls.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
                tls.egress_event = ev
                tls.do_handshake()
                tls.settimeout(None)
                request = tls
            except (OSError, ssl.SSLError, ValueError) as e:
                if ev is not None:
                    STATS.note(ev, error="tls: %s" % e)
                try:
                    request.close()
                except OSError:
                    pass
                return
        self.RequestHandlerClass(request, client_address, self, ev)

    def handle_error(self, request, client_address):
        pass  # a client that goes away is no error of ours


class Handler(socketserver.BaseRequestHandler):
    def __init__(self, request, client_address, server, ev):
        self.ev = ev
        super().__init__(request, client_address, server)


class EchoHandler(Handler):
    def handle(self):
        s = self.request
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            b = s.recv(65536)
            if not b:
                break
            s.sendall(b)


class BulkHandler(Handler):
    def handle(self):
        s = self.request
        f = s.makefile("rb")
        line = f.readline(100).decode(errors="replace").split()
        if len(line) != 2 or line[0].lower() not in ("send", "recv") or not line[1].isdigit():
            s.sendall(b"err expected send N or recv N\n")
            return
        n = int(line[1])
        STATS.note(self.ev, method=line[0].lower(), path=str(n))
        if line[0].lower() == "send":
            chunk = bytes(1 << 20)
            while n > 0:
                k = min(n, len(chunk))
                s.sendall(chunk[:k] if k < len(chunk) else chunk)
                n -= k
            s.shutdown(socket.SHUT_WR)
            return
        left = n  # read1: what the buffered reader already holds, then the socket
        while left > 0:
            b = f.read1(min(left, 1 << 20))
            if not b:
                break
            left -= len(b)
        s.sendall(b"ok %d\n" % (n - left))


class HTTPHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "space-egress-test/1"
    timeout = 60

    def __init__(self, request, client_address, server, ev):
        self.ev = ev
        super().__init__(request, client_address, server)

    def log_message(self, fmt, *args):
        pass

    def target_path(self):
        # a proxy sends the absolute form: GET http://allowed.test:8080/ HTTP/1.1
        u = urllib.parse.urlsplit(self.path)
        return u.path or "/" if u.scheme else self.path.split("?")[0]

    def note(self):
        if self.ev is not None:
            STATS.note(self.ev, host=self.headers.get("Host"), method=self.command, path=self.path,
                       requests=(self.ev.get("requests") or 0) + 1)

    def reply(self, code, body, ctype="text/plain; charset=utf-8", extra=None):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Egress-Server", hostport(self.server.addr, self.server.port))
        self.send_header("X-Egress-Host", self.headers.get("Host") or "-")
        sni = self.ev.get("sni") if self.ev else None
        if self.server.tls is not None:
            self.send_header("X-Egress-SNI", sni or "-")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def drain_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        while n > 0:
            b = self.rfile.read(min(n, 1 << 16))
            if not b:
                break
            n -= len(b)


def host_name(host):
    """The Host header without its port: allowed.test:8443 -> allowed.test, [::1]:80 -> [::1]; '-' for none."""
    if not host:
        return "-"
    if host.startswith("["):
        return host.split("]")[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class HelloHandler(HTTPHandler):
    def do_GET(self):
        self.note()
        self.drain_body()
        self.reply(200, "hello from %s host=%s\n" % (self.server.addr, host_name(self.headers.get("Host"))))

    do_HEAD = do_POST = do_PUT = do_GET


class IndexHandler(HTTPHandler):
    def do_GET(self):
        self.note()
        p = self.target_path()
        w = self.server.wheel
        if p in ("/simple", "/simple/"):
            self.reply(200, '<!DOCTYPE html>\n<html><head><meta name="pypi:repository-version" content="1.0">'
                       '<title>Simple index</title></head><body>\n'
                       '<a href="/simple/%s/">%s</a>\n</body></html>\n' % (WHEEL_NAME, WHEEL_NAME),
                       "text/html; charset=utf-8")
        elif p in ("/simple/%s" % WHEEL_NAME, "/simple/%s/" % WHEEL_NAME):
            self.reply(200, '<!DOCTYPE html>\n<html><head><meta name="pypi:repository-version" content="1.0">'
                       '<title>Links for %s</title></head><body>\n<h1>Links for %s</h1>\n'
                       '<a href="/packages/%s#sha256=%s" data-requires-python="&gt;=3.7">%s</a>\n</body></html>\n'
                       % (WHEEL_NAME, WHEEL_NAME, w["name"], w["sha256"], w["name"]), "text/html; charset=utf-8")
        elif p == "/packages/%s" % w["name"]:
            self.reply(200, self.server.wheel_bytes, "application/octet-stream")
        elif p.startswith("/simple/"):
            self.reply(404, "no such project\n")
        else:
            self.reply(200, "hello from %s host=%s\n" % (self.server.addr, host_name(self.headers.get("Host"))))

    do_HEAD = do_GET


class ControlHandler(HTTPHandler):
    def do_GET(self):
        p = self.target_path()
        if p == "/stats":
            self.reply(200, json.dumps(STATS.doc()) + "\n", "application/json")
        elif p == "/reset":
            STATS.reset()
            self.reply(200, json.dumps(STATS.doc()) + "\n", "application/json")
        else:
            self.reply(404, "GET /stats, POST /reset\n")

    do_POST = do_GET


# ------------------------------------------------------------------------------------------ main

def parse_args(argv):
    ap = argparse.ArgumentParser(description="Loopback servers for the egress tests (see the module's docstring).")
    ap.add_argument("--dir", required=True, help="where the CA (ca.pem), the certificate and the wheel go")
    ap.add_argument("--allowed", default="127.0.0.2", help="the address tests allow (default 127.0.0.2)")
    ap.add_argument("--denied", default="127.0.0.3", help="the address tests deny (default 127.0.0.3)")
    ap.add_argument("--pypi", default="127.0.0.4", help="the package index's address (default 127.0.0.4)")
    ap.add_argument("--control", default="127.0.0.9", help="the stats endpoint's address (default 127.0.0.9)")
    ap.add_argument("--https-port", type=int, default=8443)
    ap.add_argument("--http-port", type=int, default=8080)
    ap.add_argument("--echo-port", type=int, default=9000)
    ap.add_argument("--bulk-port", type=int, default=9001)
    ap.add_argument("--pypi-port", type=int, default=8080, help="the index over HTTP (default 8080)")
    ap.add_argument("--pypi-https-port", type=int, default=8443, help="the index over HTTPS (default 8443)")
    ap.add_argument("--control-port", type=int, default=8099)
    ap.add_argument("--host", action="append", default=[], metavar="NAME=ADDR",
                    help="a name and an address for the hosts file and the certificate (repeatable; replaces the defaults)")
    ap.add_argument("--san", action="append", default=[], metavar="NAME", help="one more name in the certificate")
    ap.add_argument("--hosts-out", metavar="FILE", help="write the names as an /etc/hosts file")
    ap.add_argument("--stats-file", metavar="FILE", help="keep the stats document in FILE as well")
    ap.add_argument("--only", default="https,http,echo,bulk,pypi,control",
                    help="comma-separated subset of https,http,echo,bulk,pypi,control")
    a = ap.parse_args(argv)
    for addr in (a.allowed, a.denied, a.pypi, a.control):
        ip = ipaddress.ip_address(addr)
        if not ip.is_loopback:
            ap.error("%s is not a loopback address: these servers stay on loopback" % addr)
    return a


def host_map(a):
    pairs = []
    if a.host:
        for h in a.host:
            name, sep, addr = h.partition("=")
            if not sep or not name or not addr:
                raise SystemExit("egress-servers: --host wants NAME=ADDR, not %r" % h)
            ipaddress.ip_address(addr)
            pairs.append((name.lower(), addr))
    else:
        pairs = [("allowed.test", a.allowed), ("other.test", a.denied), ("denied.test", a.denied),
                 ("pypi.test", a.pypi), ("rebind.test", a.allowed), ("rebind.test", a.denied)]
    return pairs


def main(argv):
    global STATS
    a = parse_args(argv)
    only = set(x.strip() for x in a.only.split(",") if x.strip())
    os.makedirs(a.dir, exist_ok=True)
    d = os.path.abspath(a.dir)
    STATS = Stats(os.path.abspath(a.stats_file) if a.stats_file else None)
    pairs = host_map(a)
    names = []
    for n, _ in pairs:
        if n not in names:
            names.append(n)
    names += [n.lower() for n in a.san if n.lower() not in names]
    addrs = []
    for x in [a.allowed, a.denied, a.pypi] + [ad for _, ad in pairs]:
        if x not in addrs:
            addrs.append(x)
    tls = make_certs(d, names or ["egress.test"], addrs)
    wheel, wheel_bytes = make_wheel(d)

    servers = []
    out = {k: {} for k in ("https", "http", "echo", "bulk", "pypi_http", "pypi_https")}

    def start(key, addr, port, handler, kind, tls_ctx=None, **extra):
        s = CountedServer(addr, port, handler, kind, tls_ctx, **extra)
        servers.append(s)
        out[key][addr] = s.port

    try:
        for addr in (a.allowed, a.denied):
            if "https" in only:
                start("https", addr, a.https_port, HelloHandler, "https", tls)
            if "http" in only:
                start("http", addr, a.http_port, HelloHandler, "http")
            if "echo" in only:
                start("echo", addr, a.echo_port, EchoHandler, "echo")
        if "bulk" in only:
            start("bulk", a.allowed, a.bulk_port, BulkHandler, "bulk")
        if "pypi" in only:
            start("pypi_http", a.pypi, a.pypi_port, IndexHandler, "index-http", wheel=wheel, wheel_bytes=wheel_bytes)
            start("pypi_https", a.pypi, a.pypi_https_port, IndexHandler, "index-https", tls, wheel=wheel,
                  wheel_bytes=wheel_bytes)
        control = None
        if "control" in only:
            # not counted: the control endpoint is the test's, not a destination
            c = CountedServer(a.control, a.control_port, ControlHandler, "control", counted=False)
            servers.append(c)
            control = "http://%s" % hostport(a.control, c.port)
    except OSError as e:
        log("cannot listen: %s" % e)
        return 1

    hosts_file = None
    if a.hosts_out:
        hosts_file = os.path.abspath(a.hosts_out)
        with open(hosts_file + ".tmp", "w") as f:
            f.write("# written by tests/integration/egress-servers.py\n")
            for n, ad in pairs:
                f.write("%s\t%s\n" % (ad, n))
        os.replace(hosts_file + ".tmp", hosts_file)

    # the main thread alone takes SIGTERM and SIGINT (sigwait below): the servers' threads inherit the mask
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    for s in servers:
        threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()

    pypi_name = next((n for n, ad in pairs if ad == a.pypi), a.pypi)
    nm = {}
    for n, ad in pairs:
        nm.setdefault(n, []).append(ad)
    doc = {
        "ready": True, "pid": os.getpid(), "dir": d, "ca": os.path.join(d, "ca.pem"), "hosts_file": hosts_file,
        "names": nm, "sans": names + addrs, "servers": out, "control": control,
        "stats": control and control + "/stats",
        "index": {"http": "http://%s/simple/" % hostport(pypi_name, out["pypi_http"].get(a.pypi, 0)),
                  "https": "https://%s/simple/" % hostport(pypi_name, out["pypi_https"].get(a.pypi, 0))}
        if "pypi" in only else None,
        "wheel": wheel,
    }
    print(json.dumps(doc), flush=True)

    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # at once: the interpreter's finalisation waits on the servers' threads for a second or two


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        log(str(e))
        sys.exit(1)
