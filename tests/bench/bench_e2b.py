#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The E2B facade next to the native API, in the same run (run by tests/bench/run.sh with the E2B SDK's venv).

(a) create to the first command's result: `Sandbox.create(T)` then `commands.run("true")` with the unmodified
    Python SDK, against `POST /v1/sandboxes?wait=` then `POST /v1/sandboxes/ID/processes` (argv bash -l -c true,
    the same command the SDK sends) read to its exit event, over the same TCP listener and key.
(b) command round trip in a running sandbox: `commands.run("true")` against the same native exec.
BENCH_E2B_CREATES (>= 20) and BENCH_E2B_RUNS (>= 20) samples each; p50/p90/p99 in ms; JSON under "e2b" in
$BENCH_OUT. The template is BENCH_E2B_TEMPLATE (default minimal: it ships built, and both sides use it).
"""

import http.client
import json
import os
import sys
import time
import urllib.parse

ENV = os.environ
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import log, stats, save_results  # noqa: E402

from e2b import Sandbox  # noqa: E402 - the SDK's venv runs this file

TEMPLATE = ENV.get("BENCH_E2B_TEMPLATE", "minimal")
CREATES = max(20, int(ENV.get("BENCH_E2B_CREATES", "20")))
RUNS = max(20, int(ENV.get("BENCH_E2B_RUNS", "20")))
ARGV = ["/bin/bash", "-l", "-c", "true"]


class Native:
    """The native /v1 API over one kept-alive TCP connection, as a client library would use it."""

    def __init__(self, url, key):
        u = urllib.parse.urlparse(url)
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
        self.headers = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}

    def call(self, method, path, body=None):
        self.conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=self.headers)
        r = self.conn.getresponse()
        return r.status, r.read()

    def create(self):
        status, data = self.call("POST", "/v1/sandboxes?wait=120", {"template": TEMPLATE})
        if status != 201:
            raise RuntimeError("create: HTTP %d %s" % (status, data[:300]))
        return json.loads(data)["sandbox"]["id"]

    def exec_true(self, sid):
        # The SSE body ends with the process_exited event (the stream closes after it).
        status, data = self.call("POST", "/v1/sandboxes/%s/processes" % sid, {"argv": ARGV})
        if status != 200 or b"event: process_exited" not in data or b'"exit_code":0' not in data:
            raise RuntimeError("exec: HTTP %d %s" % (status, data[-300:]))

    def remove(self, sid):
        self.call("DELETE", "/v1/sandboxes/%s?force=1&wait=60" % sid)


def ms_since(t0):
    return (time.perf_counter() - t0) * 1000.0


def main():
    native = Native(ENV["E2B_API_URL"], ENV["E2B_API_KEY"])
    res = {"template": TEMPLATE, "creates": CREATES, "runs": RUNS}

    # The template's first sandbox builds its base snapshot (a cold boot): not what is measured here.
    native.remove(native.create())
    e2b_first, native_first = [], []
    for _ in range(CREATES):
        t0 = time.perf_counter()
        s = Sandbox.create(TEMPLATE, timeout=300)
        r = s.commands.run("true")
        e2b_first.append(ms_since(t0))
        assert r.exit_code == 0
        s.kill()

        t0 = time.perf_counter()
        sid = native.create()
        native.exec_true(sid)
        native_first.append(ms_since(t0))
        native.remove(sid)

    s = Sandbox.create(TEMPLATE, timeout=300)
    sid = native.create()
    e2b_rtt, native_rtt = [], []
    try:
        s.commands.run("true")
        native.exec_true(sid)
        for _ in range(RUNS):
            t0 = time.perf_counter()
            s.commands.run("true")
            e2b_rtt.append(ms_since(t0))
            t0 = time.perf_counter()
            native.exec_true(sid)
            native_rtt.append(ms_since(t0))
    finally:
        s.kill()
        native.remove(sid)

    res["create_to_first_run_ms"] = {"e2b_sdk": stats(e2b_first, "ms"), "native_api": stats(native_first, "ms")}
    res["run_round_trip_ms"] = {"e2b_sdk": stats(e2b_rtt, "ms"), "native_api": stats(native_rtt, "ms")}

    out_path = ENV.get("BENCH_OUT", "bench-results.json")
    save_results(out_path, "e2b", res)

    print()
    print("E2B facade next to the native API (template %s, Python SDK, TCP)" % TEMPLATE)
    print("%-44s %9s %9s %9s" % ("", "p50 ms", "p90 ms", "p99 ms"))
    for name, k in (("create -> first commands.run", "create_to_first_run_ms"),
                    ("commands.run round trip", "run_round_trip_ms")):
        for side, label in (("e2b_sdk", "E2B SDK"), ("native_api", "native /v1")):
            st = res[k][side]
            print("%-44s %9.1f %9.1f %9.1f" % ("%s, %s" % (name, label), st["p50"], st["p90"], st["p99"]))
    log("e2b: done")


if __name__ == "__main__":
    main()
