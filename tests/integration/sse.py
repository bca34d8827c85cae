#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A small client of spaced's HTTP API and its SSE streams, for the integration tests and the benchmarks.

Standard library only (http.client). Talks to $API_URL (TCP, with --key or --token) or to $SPACE_SOCKET
(--unix). Every subcommand prints one JSON object on stdout and exits 0 when it could do what it was asked
(the test decides whether the figures are right), 1 otherwise.

  sse.py session SB [--out F] [--err F] [--drop-after BYTES] [--drops N] [--argv JSON] [--pty]
      creates a command session (POST /v1/sandboxes/SB/sessions, with the API key), attaches to its stream with
      the attach token and reads it to the end; with --drop-after it drops the connection after that many
      stdout bytes (N times) and reconnects with Last-Event-ID
  sse.py stream PATH [--last-event-id N] [--out F] [--err F] [--drop-after BYTES] [--drops N] [--max-events N]
      reads an existing stream (the token or key given) the same way
  sse.py stall SB --argv JSON --hold-file F [--out F]
      creates a session and attaches, reads only the first event, then stops reading (the socket stays open)
      until the file F exists; then reads the rest into --out
  sse.py many SB N [--sandboxes SB2,...]
      N sessions at once (spread over the sandboxes): session i runs a script printing its own lines and
      exiting with i % 7; prints per-session results
  sse.py latency SB N
      N times: create a session running `echo x` and attach; the time to the first stdout byte (ms)
  sse.py request METHOD PATH [BODY]
      one request; prints {"status", "body"}

The stream result: {"status", "events", "first_id", "last_id", "ids_ok", "id_problems", "exit_code", "signal",
"timed_out", "errors": [...], "stdout_bytes", "stderr_bytes", "stdout_sha256", "secs", "mbps", "reconnects",
"first_byte_ms", "pid"}. ids_ok: every event has an id, one more than the previous (across reconnects).
"""

import argparse
import binascii
import hashlib
import http.client
import json
import os
import socket
import struct
import sys
import threading
import time
import urllib.parse


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


class Api:
    def __init__(self, url=None, unix=None, key=None, key_header="bearer", timeout=120):
        self.url = url
        self.unix = unix
        self.key = key
        self.key_header = key_header
        self.timeout = timeout

    def conn(self, timeout=None):
        t = timeout or self.timeout
        if self.unix:
            return UnixHTTPConnection(self.unix, t)
        u = urllib.parse.urlsplit(self.url)
        return http.client.HTTPConnection(u.hostname, u.port or 80, timeout=t)

    def auth(self, token=None):
        if token:
            return {"Authorization": "Bearer " + token}
        if self.key and not self.unix:
            if self.key_header == "x-api-key":
                return {"X-API-Key": self.key}
            return {"Authorization": "Bearer " + self.key}
        return {}

    def request(self, method, path, body=None, token=None):
        c = self.conn()
        h = self.auth(token)
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        raw = r.read()
        c.close()
        try:
            doc = json.loads(raw) if raw else None
        except ValueError:
            doc = raw.decode(errors="replace")
        return r.status, doc

    def open_stream(self, path, token=None, last_event_id=None, timeout=None, rcvbuf=None):
        c = self.conn(timeout)
        h = self.auth(token)
        h["Accept"] = "text/event-stream"
        if last_event_id is not None:
            h["Last-Event-ID"] = str(last_event_id)
        c.connect()
        if rcvbuf:
            # Caps the receive window (and turns autotuning off), so that a stall reaches the daemon quickly.
            c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock = c.sock
        c.request("GET", path, headers=h)
        resp = c.getresponse()
        resp.raw_sock = sock
        return c, resp


def drop(c, resp):
    """Drops the connection hard (RST), mid-stream, like a client that died."""
    sock = resp.raw_sock
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    resp.close()
    c.close()
    sock.close()


class Reader:
    """Reads SSE events, checks the ids, decodes stdout and stderr."""

    def __init__(self, out=None, err=None):
        self.out = open(out, "wb") if out else None
        self.err = open(err, "wb") if err else None
        self.sha = hashlib.sha256()
        self.res = {"events": 0, "first_id": None, "last_id": None, "ids_ok": True, "id_problems": [],
                    "exit_code": None, "signal": None, "timed_out": None, "errors": [], "stdout_bytes": 0,
                    "stderr_bytes": 0, "reconnects": 0, "first_byte_ms": None, "pid": None, "status": None,
                    "types": {}}
        self.t0 = time.perf_counter()
        self.ended = False
        self.pending = (b"", None, None, [])

    def event(self, eid, etype, data):
        r = self.res
        r["events"] += 1
        r["types"][etype] = r["types"].get(etype, 0) + 1
        if eid is None:
            r["ids_ok"] = False
            r["id_problems"].append("an event without id (%s)" % etype)
        else:
            if r["last_id"] is not None and eid != r["last_id"] + 1:
                r["ids_ok"] = False
                if len(r["id_problems"]) < 10:
                    r["id_problems"].append("id %d after %d" % (eid, r["last_id"]))
            if r["first_id"] is None:
                r["first_id"] = eid
            r["last_id"] = eid
        if etype in ("stdout", "stderr"):
            b = binascii.a2b_base64(data)
            if etype == "stdout":
                if r["first_byte_ms"] is None and b:
                    r["first_byte_ms"] = (time.perf_counter() - self.t0) * 1000.0
                r["stdout_bytes"] += len(b)
                self.sha.update(b)
                if self.out:
                    self.out.write(b)
            else:
                r["stderr_bytes"] += len(b)
                if self.err:
                    self.err.write(b)
        elif etype == "process_exited":
            d = json.loads(data)
            r["exit_code"] = d.get("exit_code")
            r["signal"] = d.get("signal")
            r["timed_out"] = d.get("timed_out")
            self.ended = True
        elif etype == "process_started":
            try:
                r["pid"] = json.loads(data).get("pid")
            except ValueError:
                pass
        elif etype == "error":
            try:
                r["errors"].append(json.loads(data))
            except ValueError:
                r["errors"].append({"code": "?", "message": data})
            self.ended = True

    def read(self, resp, drop_after=None, max_events=None):
        """Reads events until the stream ends (True), or until drop_after stdout bytes / max_events (False)."""
        buf, eid, etype, data = self.pending
        self.pending = (b"", None, None, [])
        while True:
            chunk = resp.read1(1 << 16)
            if not chunk:
                return True
            buf += chunk
            start = 0
            while True:
                nl = buf.find(b"\n", start)
                if nl < 0:
                    break
                line = buf[start:nl].rstrip(b"\r")
                start = nl + 1
                if not line:
                    if etype is not None or data:
                        self.event(eid, etype or "message", b"\n".join(data))
                    eid = etype = None
                    data = []
                    if (drop_after is not None and self.res["stdout_bytes"] >= drop_after) or \
                            (max_events is not None and self.res["events"] >= max_events):
                        # What is buffered stays for the next read() on this connection.
                        self.pending = (buf[start:], None, None, [])
                        return False
                    continue
                if line.startswith(b":"):
                    continue
                k, _, v = line.partition(b":")
                if v.startswith(b" "):
                    v = v[1:]
                if k == b"id":
                    try:
                        eid = int(v)
                    except ValueError:
                        eid = None
                elif k == b"event":
                    etype = v.decode(errors="replace")
                elif k == b"data":
                    data.append(v)
            buf = buf[start:]

    def finish(self):
        r = self.res
        r["secs"] = round(time.perf_counter() - self.t0, 3)
        r["mbps"] = round(r["stdout_bytes"] / r["secs"] / 1e6, 2) if r["secs"] > 0 else None
        r["stdout_sha256"] = self.sha.hexdigest()
        if r["first_byte_ms"] is not None:
            r["first_byte_ms"] = round(r["first_byte_ms"], 2)
        for f in (self.out, self.err):
            if f:
                f.close()
        return r


def read_stream(api, path, token=None, last_event_id=None, out=None, err=None, drop_after=None, drops=1,
                max_events=None, reader=None, gap=0.2):
    rd = reader or Reader(out, err)
    if last_event_id is not None:
        rd.res["last_id"] = last_event_id
    left = drops if drop_after else 0
    lei = last_event_id
    while True:
        c, resp = api.open_stream(path, token=token, last_event_id=lei)
        rd.res["status"] = resp.status
        if resp.status != 200:
            body = resp.read().decode(errors="replace")
            c.close()
            rd.res["body"] = body[:500]
            return rd.finish()
        done = rd.read(resp, drop_after=drop_after if left > 0 else None, max_events=max_events)
        if done or max_events is not None:
            c.close()
            break
        drop(c, resp)
        rd.pending = (b"", None, None, [])
        left -= 1
        rd.res["reconnects"] += 1
        rd.res.setdefault("dropped_at", []).append({"id": rd.res["last_id"], "stdout_bytes": rd.res["stdout_bytes"]})
        lei = rd.res["last_id"]
        drop_after = rd.res["stdout_bytes"] + (drop_after or 0)
        time.sleep(gap)
    return rd.finish()


def create_session(api, sb, argv, pty=False, stdin=False):
    st, d = api.request("POST", "/v1/sandboxes/%s/sessions" % sb, {"argv": argv, "pty": pty, "stdin": stdin})
    if st != 201 or not isinstance(d, dict):
        raise RuntimeError("create session: %s %s" % (st, d))
    return d


def cmd_session(api, a):
    argv = json.loads(a.argv) if a.argv else ["cat", "/tmp/f"]
    d = create_session(api, a.sb, argv, pty=a.pty)
    r = read_stream(api, d["stream_url"], token=d["attach_token"], out=a.out, err=a.err,
                    drop_after=a.drop_after, drops=a.drops, gap=a.gap)
    r["session"] = {"session_id": d.get("session_id"), "pid": d.get("pid"), "stream_url": d.get("stream_url")}
    return r


def cmd_stream(api, a):
    return read_stream(api, a.path, token=a.token, last_event_id=a.last_event_id, out=a.out, err=a.err,
                       drop_after=a.drop_after, drops=a.drops, max_events=a.max_events, gap=a.gap)


def cmd_stall(api, a):
    d = create_session(api, a.sb, json.loads(a.argv))
    c, resp = api.open_stream(d["stream_url"], token=d["attach_token"], timeout=600, rcvbuf=64 * 1024)
    rd = Reader(a.out)
    rd.read(resp, max_events=2)
    with open(a.hold_file + ".ready", "w") as f:
        f.write(json.dumps({"pid": d.get("pid"), "status": resp.status}))
    while not os.path.exists(a.hold_file):
        time.sleep(0.1)
    rd.read(resp)
    c.close()
    r = rd.finish()
    r["session"] = {"pid": d.get("pid")}
    return r


def many_script(i):
    return "echo start-%d; sleep 1; i=0; while [ $i -lt 200 ]; do echo s%d-line-$i; i=$((i+1)); done; " \
           "echo err-%d >&2; exit %d" % (i, i, i, i % 7)


def many_expected(i):
    return "start-%d\n" % i + "".join("s%d-line-%d\n" % (i, j) for j in range(200))


def cmd_many(api, a):
    sbs = [a.sb] + ([s for s in a.sandboxes.split(",") if s] if a.sandboxes else [])
    n = a.n
    sessions = [None] * n
    results = [None] * n

    def make(i):
        try:
            sessions[i] = create_session(api, sbs[i % len(sbs)], ["sh", "-c", many_script(i)])
        except Exception as e:
            sessions[i] = {"error": str(e)}

    def attach(i):
        s = sessions[i]
        if "error" in s:
            results[i] = {"error": s["error"]}
            return
        outf = os.path.join(a.dir, "many.%d.out" % i)
        errf = os.path.join(a.dir, "many.%d.err" % i)
        try:
            results[i] = read_stream(api, s["stream_url"], token=s["attach_token"], out=outf, err=errf)
        except Exception as e:
            results[i] = {"error": "%s: %s" % (type(e).__name__, e)}

    t0 = time.perf_counter()
    th = [threading.Thread(target=make, args=(i,)) for i in range(n)]
    [t.start() for t in th]
    [t.join() for t in th]
    t1 = time.perf_counter()
    th = [threading.Thread(target=attach, args=(i,)) for i in range(n)]
    [t.start() for t in th]
    [t.join() for t in th]
    t2 = time.perf_counter()
    per = []
    for i in range(n):
        r = results[i] or {}
        problems = []
        if "error" in r:
            problems.append(r["error"])
        else:
            if r.get("status") != 200:
                problems.append("status %s" % r.get("status"))
            if r.get("exit_code") != i % 7:
                problems.append("exit_code %s, expected %d" % (r.get("exit_code"), i % 7))
            if r.get("errors"):
                problems.append("error events %s" % r["errors"])
            if not r.get("ids_ok"):
                problems.append("ids %s" % r.get("id_problems"))
            try:
                with open(os.path.join(a.dir, "many.%d.out" % i)) as f:
                    if f.read() != many_expected(i):
                        problems.append("stdout differs")
                with open(os.path.join(a.dir, "many.%d.err" % i)) as f:
                    if f.read() != "err-%d\n" % i:
                        problems.append("stderr differs")
            except OSError as e:
                problems.append(str(e))
        per.append({"i": i, "pid": (sessions[i] or {}).get("pid"), "sandbox": sbs[i % len(sbs)], "problems": problems})
    pids = [(p["sandbox"], p["pid"]) for p in per if p["pid"] is not None]
    return {"n": n, "ok": sum(1 for p in per if not p["problems"]), "create_secs": round(t1 - t0, 3),
            "attach_secs": round(t2 - t1, 3), "distinct_pids": len(set(pids)),
            "failures": [p for p in per if p["problems"]][:10]}


def cmd_latency(api, a):
    lat, create_ms = [], []
    for _ in range(a.n):
        t0 = time.perf_counter()
        d = create_session(api, a.sb, ["echo", "x"])
        t1 = time.perf_counter()
        c, resp = api.open_stream(d["stream_url"], token=d["attach_token"])
        rd = Reader()
        rd.t0 = t0
        rd.read(resp)
        c.close()
        if rd.res["first_byte_ms"] is None or rd.res["exit_code"] != 0:
            raise RuntimeError("latency run: %s" % rd.res)
        lat.append(rd.res["first_byte_ms"])
        create_ms.append((t1 - t0) * 1000.0)
    return {"first_byte_ms": lat, "create_ms": create_ms}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", default=os.environ.get("API_URL"))
    p.add_argument("--unix", default=None, help="the unix socket instead of TCP")
    p.add_argument("--key", default=os.environ.get("API_KEY"))
    p.add_argument("--key-header", default="bearer", choices=["bearer", "x-api-key"])
    p.add_argument("--token")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("session")
    s.add_argument("sb")
    s.add_argument("--argv")
    s.add_argument("--pty", action="store_true")
    for q in (s, sub.add_parser("stream")):
        q.add_argument("--out")
        q.add_argument("--err")
        q.add_argument("--drop-after", type=int)
        q.add_argument("--drops", type=int, default=1)
        q.add_argument("--gap", type=float, default=0.2, help="seconds between a drop and the reconnect")
    st = sub.choices["stream"]
    st.add_argument("path")
    st.add_argument("--last-event-id", type=int)
    st.add_argument("--max-events", type=int)
    s = sub.add_parser("stall")
    s.add_argument("sb")
    s.add_argument("--argv", required=True)
    s.add_argument("--hold-file", required=True)
    s.add_argument("--out")
    s = sub.add_parser("many")
    s.add_argument("sb")
    s.add_argument("n", type=int)
    s.add_argument("--sandboxes")
    s.add_argument("--dir", default=os.environ.get("TEST_TMP", "/tmp"))
    s = sub.add_parser("latency")
    s.add_argument("sb")
    s.add_argument("n", type=int)
    s = sub.add_parser("request")
    s.add_argument("method")
    s.add_argument("path")
    s.add_argument("body", nargs="?")
    a = p.parse_args()
    api = Api(url=a.url, unix=a.unix, key=a.key, key_header=a.key_header)
    try:
        if a.cmd == "session":
            r = cmd_session(api, a)
        elif a.cmd == "stream":
            r = cmd_stream(api, a)
        elif a.cmd == "stall":
            r = cmd_stall(api, a)
        elif a.cmd == "many":
            r = cmd_many(api, a)
        elif a.cmd == "latency":
            r = cmd_latency(api, a)
        else:
            st, d = api.request(a.method, a.path, json.loads(a.body) if a.body else None, token=a.token)
            r = {"status": st, "body": d}
    except Exception as e:
        print(json.dumps({"error": "%s: %s" % (type(e).__name__, e)}))
        return 1
    print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
