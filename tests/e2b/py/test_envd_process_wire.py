# SPDX-License-Identifier: Apache-2.0
"""process.Process on the wire, for what the SDKs do not reach: tags, StreamInput, keepalives, the errors of
streams (HTTP 200 and an end-of-stream error) and of unary calls, and hostile bodies."""
import base64
import json
import os
import struct
import time

import httpx
import pytest
from e2b import Sandbox

from conftest import TEMPLATE

# the plain TCP listener; in t29's domain mode the SDK has E2B_DOMAIN instead, and SPACE_TEST_API_URL is it
URL = os.environ.get("E2B_SANDBOX_URL") or os.environ["SPACE_TEST_API_URL"]


@pytest.fixture(scope="module")
def sbx():
    s = Sandbox.create(TEMPLATE, timeout=600)
    yield s
    s.kill()


def headers(sbx, **extra):
    h = {"E2b-Sandbox-Id": sbx.sandbox_id, "X-Access-Token": sbx._envd_access_token or ""}
    h.update(extra)
    return h


def envelope(msg, flags=0):
    data = json.dumps(msg).encode() if not isinstance(msg, bytes) else msg
    return struct.pack(">BI", flags, len(data)) + data


def read_envelopes(stream):
    buf = b""
    for chunk in stream.iter_bytes():
        buf += chunk
        while len(buf) >= 5:
            flags, n = struct.unpack(">BI", buf[:5])
            if len(buf) < 5 + n:
                break
            yield flags, json.loads(buf[5:5 + n])
            buf = buf[5 + n:]


def stream_call(sbx, method, msg, **hdrs):
    with httpx.Client(timeout=30) as c, c.stream("POST", f"{URL}/process.Process/{method}", content=envelope(msg),
                                                headers=headers(sbx, **{"Content-Type": "application/connect+json"},
                                                                **hdrs)) as r:
        assert r.status_code == 200
        assert r.headers["content-type"] == "application/connect+json"
        return list(read_envelopes(r))


def unary(sbx, method, msg):
    return httpx.post(f"{URL}/process.Process/{method}", json=msg, headers=headers(sbx), timeout=30)


def start_msg(cmd, **kw):
    return {"process": {"cmd": "/bin/bash", "args": ["-c", cmd]}, **kw}


def test_start_events_and_end(sbx):
    ev = stream_call(sbx, "Start", start_msg("echo hi; exit 2"))
    assert list(ev[0][1]["event"]) == ["start"]
    assert ev[1][1]["event"]["data"]["stdout"] == base64.b64encode(b"hi\n").decode()
    assert ev[-2][1]["event"]["end"] == {"exitCode": 2, "exited": True, "status": "exit status 2",
                                         "error": "exit status 2"}
    assert ev[-1] == (2, {})


def test_keepalive_after_silence(sbx):
    ev = stream_call(sbx, "Start", start_msg("sleep 2.5; echo late"), **{"Keepalive-Ping-Interval": "1"})
    kinds = [list(e[1]["event"])[0] for e in ev[:-1]]
    assert kinds[0] == "start" and kinds[-1] == "end"
    assert kinds.count("keepalive") >= 1
    assert kinds.index("keepalive") < kinds.index("data")


def test_deadline(sbx):
    t = time.monotonic()
    ev = stream_call(sbx, "Start", start_msg("sleep 30"), **{"connect-timeout-ms": "1200"})
    assert time.monotonic() - t < 10
    assert ev[-1][0] == 2 and ev[-1][1]["error"]["code"] == "deadline_exceeded"


def test_tag_connect_input_and_list(sbx):
    with httpx.Client(timeout=30) as c, c.stream(
            "POST", f"{URL}/process.Process/Start", content=envelope(start_msg("head -n 1; echo bye", tag="t1")),
            headers=headers(sbx, **{"Content-Type": "application/connect+json"})) as r:
        events = read_envelopes(r)
        flags, first = next(events)
        pid = first["event"]["start"]["pid"]
        listed = unary(sbx, "List", {}).json()["processes"]
        assert {"pid": pid, "tag": "t1"}.items() <= [p for p in listed if p["pid"] == pid][0].items()
        # Connect by tag: start first, then what comes from now on
        with httpx.Client(timeout=30) as c2, c2.stream(
                "POST", f"{URL}/process.Process/Connect", content=envelope({"process": {"tag": "t1"}}),
                headers=headers(sbx, **{"Content-Type": "application/connect+json"})) as r2:
            ev2 = read_envelopes(r2)
            assert next(ev2)[1] == {"event": {"start": {"pid": pid}}}
            # StreamInput: a client stream of envelopes
            body = envelope({"start": {"process": {"tag": "t1"}}}) + envelope({"keepalive": {}}) + \
                envelope({"data": {"input": {"stdin": base64.b64encode(b"line\n").decode()}}})
            si = httpx.post(f"{URL}/process.Process/StreamInput", content=body,
                            headers=headers(sbx, **{"Content-Type": "application/connect+json"}))
            assert si.status_code == 200
            assert si.content == envelope({}) .replace(b" ", b"") + envelope({}, 2).replace(b" ", b"")
            rest2 = list(ev2)
        rest = list(events)
    out = b"".join(base64.b64decode(e["event"]["data"]["stdout"]) for _, e in rest if "data" in e.get("event", {}))
    assert out == b"line\nbye\n"
    assert rest[-1] == (2, {})
    assert rest2[-1] == (2, {})
    assert any("end" in e.get("event", {}) for _, e in rest2)


def test_stream_errors_are_http_200(sbx):
    ev = stream_call(sbx, "Connect", {"process": {"pid": 999999}})
    assert ev == [(2, {"error": {"code": "not_found", "message": "process with pid 999999 not found"}})]
    ev = stream_call(sbx, "Start", {"process": {"cmd": "/no/such/binary"}})
    assert ev[-1][1]["error"]["code"] == "invalid_argument"
    ev = stream_call(sbx, "Start", {"process": {"cmd": "pwd", "cwd": "/no/such/dir"}})
    assert ev[-1][1]["error"]["code"] == "invalid_argument"
    ev = stream_call(sbx, "Start", {"process": {"cmd": 5}})
    assert ev[-1][1]["error"]["code"] == "invalid_argument"


def test_unary_errors(sbx):
    r = unary(sbx, "SendSignal", {"process": {"pid": 999999}, "signal": "SIGNAL_SIGKILL"})
    assert (r.status_code, r.json()["code"]) == (404, "not_found")
    r = unary(sbx, "SendInput", {"process": {"tag": "nope"}, "input": {"stdin": "aGk="}})
    assert r.json()["code"] == "not_found"
    r = unary(sbx, "SendInput", {"process": {}, "input": {"stdin": "aGk="}})
    assert r.json()["code"] == "invalid_argument"


def test_hostile_bodies(sbx):
    h = headers(sbx, **{"Content-Type": "application/connect+json"})
    for body in [b"", b"\x00\x00\x00\x00\x10{}", b"\x01\x00\x00\x00\x02{}", envelope(b"[1,2]"),
                 envelope({"process": {"cmd": "x", "args": ["a"] * 5000}}),
                 envelope({"process": {"cmd": "x", "envs": {"A=B": "c"}}}),
                 envelope({"process": {"cmd": "x"}, "pty": {"size": {"cols": -1}}})]:
        r = httpx.post(f"{URL}/process.Process/Start", content=body, headers=h)
        assert r.status_code in (200, 400), (body[:20], r.status_code)
        assert b"invalid_argument" in r.content
    r = unary(sbx, "SendInput", {"process": {"pid": 1}, "input": {"stdin": "not base64!"}})
    assert r.json()["code"] in ("invalid_argument", "not_found")
    # a StreamInput envelope that claims more than the limit is refused, not buffered
    r = httpx.post(f"{URL}/process.Process/StreamInput", content=b"\x00\x7f\xff\xff\xff" + b"x" * 100, headers=h)
    assert r.status_code == 200 and b"resource_exhausted" in r.content


def test_stream_refused_before_it_starts_is_an_end_stream_error(sbx):
    # An unknown sandbox (or a token that is not its own): still HTTP 200 with one end-of-stream envelope, since
    # the JS SDK reads no body of another status on a stream.
    for hdrs in ({"E2b-Sandbox-Id": "0" * 32}, {"X-Access-Token": "f" * 32}):
        ev = stream_call(sbx, "Start", start_msg("true"), **hdrs)
        assert len(ev) == 1 and ev[0][0] == 2, ev
        assert ev[0][1]["error"]["code"] == "unavailable" and ev[0][1]["error"]["message"], ev
    # a malformed request envelope: invalid_argument, the same way
    with httpx.Client(timeout=30) as c:
        r = c.post(f"{URL}/process.Process/Start", content=b"\x00\x00\x00\x00\x09{}",
                   headers=headers(sbx, **{"Content-Type": "application/connect+json"}))
    assert r.status_code == 200 and r.content[0] == 2
    assert json.loads(r.content[5:])["error"]["code"] == "invalid_argument"
