#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The MCP server on stdio next to spacectl, in the same run (run by tests/bench/run.sh, BENCH_ONLY=mcp).

One `spacectl mcp --template T` session, spoken to as an agent's client does (JSON-RPC lines on its stdin and
stdout, after the initialize handshake; no SDK, so the figure is the server's and not a client library's): the
round trip of `tools/call exec {"argv": ["true"]}` on the session's sandbox, next to `spacectl exec SB -- true`
(a new process each time, as a shell runs it) on the same sandbox, alternated. BENCH_MCP_CALLS (>= 30) samples
each; p50/p90/p99 in ms; JSON under "mcp" in $BENCH_OUT. The template is BENCH_MCP_TEMPLATE (default minimal).
"""

import json
import os
import subprocess
import sys
import time

ENV = os.environ
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import log, stats, save_results  # noqa: E402

SPACECTL = ENV.get("SPACECTL_BIN", "spacectl")
TEMPLATE = ENV.get("BENCH_MCP_TEMPLATE", "minimal")
CALLS = max(30, int(ENV.get("BENCH_MCP_CALLS", "30")))


class Session:
    """spacectl mcp as a child, one request at a time."""

    def __init__(self):
        self.p = subprocess.Popen([SPACECTL, "mcp", "--template", TEMPLATE], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE)
        self.next_id = 0

    def request(self, method, params=None):
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.p.stdin.write(json.dumps(msg).encode() + b"\n")
        self.p.stdin.flush()
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError("spacectl mcp closed its stdout (exit %s)" % self.p.wait())
            answer = json.loads(line)
            if answer.get("id") == self.next_id:
                break
        if "error" in answer:
            raise RuntimeError("%s: %s" % (method, answer["error"]))
        return answer["result"]

    def notify(self, method):
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}).encode() + b"\n")
        self.p.stdin.flush()

    def tool(self, name, args):
        r = self.request("tools/call", {"name": name, "arguments": args})
        if r.get("isError"):
            raise RuntimeError("%s: %s" % (name, r["content"]))
        return r

    def close(self):
        self.p.stdin.close()
        return self.p.wait(timeout=120)


def ms_since(t0):
    return (time.perf_counter() - t0) * 1000.0


def main():
    s = Session()
    res = {"template": TEMPLATE, "calls": CALLS}
    try:
        init = s.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                        "clientInfo": {"name": "bench_mcp", "version": "0"}})
        res["protocol_version"] = init["protocolVersion"]
        s.notify("notifications/initialized")
        # the session's sandbox is made by the first call (and the template's base snapshot, if it is the first)
        t0 = time.perf_counter()
        r = s.tool("exec", {"argv": ["true"]})
        res["first_call_ms"] = round(ms_since(t0), 1)
        assert r["structuredContent"]["exit_code"] == 0, r
        mine = [b for b in s.tool("sandbox_list", {})["structuredContent"]["sandboxes"] if b.get("session")]
        sb = mine[0]["sandbox_id"]
        subprocess.run([SPACECTL, "exec", sb, "--", "true"], check=True)

        mcp, cli = [], []
        for _ in range(CALLS):
            t0 = time.perf_counter()
            r = s.tool("exec", {"argv": ["true"]})
            mcp.append(ms_since(t0))
            assert r["structuredContent"]["exit_code"] == 0, r
            t0 = time.perf_counter()
            subprocess.run([SPACECTL, "exec", sb, "--", "true"], check=True)
            cli.append(ms_since(t0))
    finally:
        rc = s.close()
    if rc != 0:
        raise RuntimeError("spacectl mcp exited %d" % rc)

    res["exec_true_round_trip_ms"] = {"mcp_tools_call": stats(mcp, "ms"), "spacectl_exec": stats(cli, "ms")}
    save_results(ENV.get("BENCH_OUT", "bench-results.json"), "mcp", res)

    print()
    print("MCP on stdio next to spacectl exec (template %s, one session, %d calls)" % (TEMPLATE, CALLS))
    print("%-44s %9s %9s %9s" % ("", "p50 ms", "p90 ms", "p99 ms"))
    for side, label in (("mcp_tools_call", 'tools/call exec {"argv": ["true"]}'),
                        ("spacectl_exec", "spacectl exec SB -- true")):
        st = res["exec_true_round_trip_ms"][side]
        print("%-44s %9.1f %9.1f %9.1f" % (label, st["p50"], st["p90"], st["p99"]))
    log("mcp: done")


if __name__ == "__main__":
    main()
