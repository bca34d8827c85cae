#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""HTTP API benchmarks for space; run by tests/bench/run.sh after bench.py (same daemon, TCP listener and key).

(c) stream throughput guest -> client: a session running `cat` of a BENCH_STREAM_MIB file (random bytes, copied
    in first), read over TCP by an SSE client that decodes every event (tests/integration/sse.py), in MB/s; next
    to `spacectl exec SB -- cat` over the unix socket, and to the raw channel in the same run: tests/tools/space-chan
    exec of the same cat on the same VM's agent socket, with the daemon killed (the VM outlives it; the next
    spacectl call adopts it again).
(d) API latency: POST /v1/sandboxes/ID/sessions (`echo x`) plus the attach to the first stdout byte, over TCP,
    BENCH_SESSIONS (>= 50) times, p50/p90/p99 in ms.

Results go into $BENCH_OUT under "api" (merged with what bench.py wrote). Standard library only.
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
TMP = ENV["TEST_TMP"]
SPACECTL = ENV.get("SPACECTL_BIN", "spacectl")
SPACE_CHAN = os.path.join(BUILD, "tests/tools/space-chan")
STREAM_MIB = int(ENV.get("BENCH_STREAM_MIB", "64"))
RUNS = max(3, int(ENV.get("BENCH_STREAM_RUNS", "3")))
N_SESSIONS = max(50, int(ENV.get("BENCH_SESSIONS", "50")))

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import sse  # noqa: E402
from bench import pct, stats, log, run, save_results  # noqa: E402


def median(xs):
    return round(pct(xs, 50), 2) if xs else None


def spacectl(*args, timeout=300, stdin=None):
    if stdin is None:
        return run([SPACECTL] + list(args), timeout)
    with open(stdin, "rb") as f:
        r = subprocess.run([SPACECTL] + list(args), stdin=f, capture_output=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError("spacectl %s exited %d: %s" % (" ".join(args), r.returncode, r.stderr.decode(errors="replace")[:300]))
    return r


def timed_cat(argv, nbytes):
    """Runs argv (a cat of the file), discards its stdout, returns MB/s (checks the byte count)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    n = 0
    while True:
        b = p.stdout.read1(1 << 20)
        if not b:
            break
        n += len(b)
    rc = p.wait(timeout=300)
    secs = time.perf_counter() - t0
    if rc != 0 or n != nbytes:
        raise RuntimeError("%s: exit %d, %d bytes of %d: %s" % (argv[0], rc, n, nbytes, p.stderr.read()[:300]))
    return nbytes / secs / 1e6


def main():
    out_path = ENV.get("BENCH_OUT", "bench-results.json")
    api = sse.Api(url=ENV["API_URL"], key=ENV["API_KEY"])
    res = {"stream_file_mib": STREAM_MIB, "runs": RUNS}

    sid = spacectl("create", "--name", "bench-api").stdout.decode().strip()
    if not re.fullmatch(r"[0-9a-f]{32}", sid):
        raise RuntimeError("create printed %r" % sid)
    data = os.path.join(TMP, "stream.bin")
    nbytes = STREAM_MIB << 20
    with open(data, "wb") as f:
        f.write(os.urandom(nbytes))
    spacectl("exec", "-i", sid, "--", "sh", "-c", "mkdir -p /tmp && cat > /tmp/f", stdin=data)

    log("stream throughput: %d x %d MiB over TCP (SSE, decoded)" % (RUNS, STREAM_MIB))
    sse_mbps = []
    for _ in range(RUNS):
        d = sse.create_session(api, sid, ["cat", "/tmp/f"])
        r = sse.read_stream(api, d["stream_url"], token=d["attach_token"])
        if r["stdout_bytes"] != nbytes or r["exit_code"] != 0:
            raise RuntimeError("stream run: %s" % {k: r.get(k) for k in ("status", "stdout_bytes", "exit_code", "errors")})
        sse_mbps.append(r["mbps"])
    res["sse_mbps"] = {"samples": sse_mbps, "median": median(sse_mbps)}

    log("stream throughput: spacectl exec cat over the unix socket")
    cli = [timed_cat([SPACECTL, "exec", sid, "--", "cat", "/tmp/f"], nbytes) for _ in range(RUNS)]
    res["spacectl_exec_mbps"] = {"samples": [round(x, 2) for x in cli], "median": median(cli)}

    log("API latency: create session + attach to the first byte, %d runs" % N_SESSIONS)
    sse.cmd_latency(api, type("A", (), {"sb": sid, "n": 3})())  # warm up
    lat = sse.cmd_latency(api, type("A", (), {"sb": sid, "n": N_SESSIONS})())
    res["session_first_byte_ms"] = stats(lat["first_byte_ms"], "ms")
    res["session_create_ms"] = stats(lat["create_ms"], "ms")

    # Raw channel last: it kills the daemon to free the agent socket.
    raw = []
    if os.access(SPACE_CHAN, os.X_OK):
        log("raw channel: space-chan exec cat on the same VM, daemon killed")
        try:
            with open(os.path.join(ENV["SPACE_RUNTIME_DIR"], "spaced.pid")) as f:
                os.kill(int(f.read().strip()), signal.SIGKILL)
            time.sleep(0.5)
            sock = os.path.join(ENV["SPACE_RUNTIME_DIR"], "sandboxes", sid, "agent.sock")
            raw = [timed_cat([SPACE_CHAN, sock, "exec", "--", "cat", "/tmp/f"], nbytes) for _ in range(RUNS)]
            res["raw_channel_mbps"] = {"samples": [round(x, 2) for x in raw], "median": median(raw)}
        except (OSError, ValueError, RuntimeError, subprocess.TimeoutExpired) as e:
            res["raw_channel_mbps"] = {"error": str(e)}
    else:
        res["raw_channel_mbps"] = {"error": "%s is not built" % SPACE_CHAN}
    try:
        spacectl("rm", "-f", sid, timeout=120)  # starts the daemon again, which adopts the VM first
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        log("rm after the raw run: %s" % e)
    res["ratio_sse_to_raw"] = round(res["sse_mbps"]["median"] / median(raw), 2) if raw else None

    save_results(out_path, "api", res)

    print()
    print("space HTTP API benchmarks (%d MiB stream, %d runs each)" % (STREAM_MIB, RUNS))
    print("%-52s %10s" % ("stream throughput guest -> client", "MB/s p50"))
    for name, k in (("SSE over TCP, decoded (session + attach)", "sse_mbps"),
                    ("spacectl exec cat (unix socket)", "spacectl_exec_mbps"),
                    ("raw channel: space-chan exec cat, no daemon", "raw_channel_mbps")):
        v = res.get(k) or {}
        print("%-52s %10s" % ("  " + name, v.get("median", "-") if "error" not in v else "error: " + v["error"][:60]))
    if res["ratio_sse_to_raw"] is not None:
        print("%-52s %10.2f" % ("  SSE / raw", res["ratio_sse_to_raw"]))
    s = res["session_first_byte_ms"]
    c = res["session_create_ms"]
    print("%-52s %8s %8s %8s %5s" % ("API latency", "p50", "p90", "p99", "n"))
    print("%-52s %8.1f %8.1f %8.1f %5d" % ("  create session + attach to first byte (ms)", s["p50"], s["p90"], s["p99"], s["n"]))
    print("%-52s %8.1f %8.1f %8.1f %5d" % ("  of which POST .../sessions (ms)", c["p50"], c["p90"], c["p99"], c["n"]))
    print("results: %s" % out_path)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, subprocess.TimeoutExpired, KeyError) as e:
        log("failed: %s" % e)
        sys.exit(1)
