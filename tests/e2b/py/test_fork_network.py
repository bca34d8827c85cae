# SPDX-License-Identifier: Apache-2.0
"""What the newest SDKs add to the control plane (issue 26): Sandbox.fork (POST /sandboxes/ID/fork) and
Sandbox.update_network (PUT /sandboxes/ID/network). Older SDKs have neither: each test is skipped there, saying
which SDK version lacks what. The network test needs a name the daemon's egress_hosts_file maps to a loopback
address (SPACE_E2B_NET_HOST, SPACE_E2B_NET_ADDR: t29 sets both), where it serves HTTP itself."""
import http.server
import importlib.metadata
import os
import threading

import pytest
from e2b import Sandbox, SandboxException

from conftest import TEMPLATE
from test_sandboxes import api, sh

SDK = importlib.metadata.version("e2b")
needs_fork = pytest.mark.skipif(not hasattr(Sandbox, "fork"), reason=f"SDK {SDK} has no Sandbox.fork")
needs_network = pytest.mark.skipif(not hasattr(Sandbox, "update_network"),
                                   reason=f"SDK {SDK} has no Sandbox.update_network")
NET_HOST = os.environ.get("SPACE_E2B_NET_HOST")
NET_ADDR = os.environ.get("SPACE_E2B_NET_ADDR")


@pytest.fixture(scope="module")
def parent():
    s = Sandbox.create(TEMPLATE, timeout=600)
    yield s
    s.kill()


@needs_fork
def test_two_forks_diverge_and_the_parent_goes_on(parent):
    sh(parent, "echo from-parent >/tmp/parent.txt")
    before = parent.get_info()
    forks = parent.fork(count=2, timeout=120)
    try:
        assert len(forks) == 2
        assert all(isinstance(f, Sandbox) for f in forks), forks
        a, b = forks
        assert len({parent.sandbox_id, a.sandbox_id, b.sandbox_id}) == 3
        # each has what the parent had when it was forked
        assert sh(a, "cat /tmp/parent.txt") == "from-parent\n"
        assert sh(b, "cat /tmp/parent.txt") == "from-parent\n"
        # ... and goes its own way
        sh(a, "echo only-a >/tmp/fork.txt")
        sh(b, "echo only-b >/tmp/fork.txt")
        assert sh(a, "cat /tmp/fork.txt") == "only-a\n"
        assert sh(b, "cat /tmp/fork.txt") == "only-b\n"
        assert sh(parent, "test -e /tmp/fork.txt && echo there || echo absent") == "absent\n"
        # the parent keeps its id, its expiry and its files, and runs commands
        after = parent.get_info()
        assert after.sandbox_id == before.sandbox_id
        assert after.end_at == before.end_at
        assert after.state.value == "running"
        assert sh(parent, "cat /tmp/parent.txt; echo still-here") == "from-parent\nstill-here\n"
        # a fork's timeout is its own, counted from when it runs
        ia = a.get_info()
        assert 90 <= (ia.end_at - ia.started_at).total_seconds() <= 400
        assert ia.end_at < after.end_at
    finally:
        for f in forks:
            if isinstance(f, Sandbox):
                f.kill()


@needs_fork
def test_fork_count_defaults_to_one(parent):
    forks = Sandbox.fork(parent.sandbox_id, timeout=60)
    try:
        assert len(forks) == 1 and isinstance(forks[0], Sandbox), forks
        assert sh(forks[0], "echo forked") == "forked\n"
    finally:
        for f in forks:
            if isinstance(f, Sandbox):
                f.kill()


@needs_fork
def test_fork_refuses_bad_input(parent):
    sid = parent.sandbox_id
    with pytest.raises(SandboxException, match="count"):
        parent.fork(count=0)  # the SDK's own check
    for body, what in (({"count": 0}, "count must be a whole number from 1 to 20"),
                       ({"count": 21}, "count must be a whole number from 1 to 20"),
                       ({"count": "two"}, "count must be a whole number"),
                       ({"timeout": -1}, "timeout"),
                       ({"count": 1, "name": "x"}, "unknown field 'name'")):
        status, err = api("POST", f"/sandboxes/{sid}/fork", body)
        assert (status, err["code"]) == (400, 400), (body, status, err)
        assert what in err["message"], (body, err)
    status, err = api("POST", "/sandboxes/inothere0000000000000000/fork", {"count": 1})
    assert (status, err["code"]) == (404, 404) and "not found" in err["message"], err
    s = Sandbox.create(TEMPLATE, timeout=120)
    try:
        s.pause()
        status, err = api("POST", f"/sandboxes/{s.sandbox_id}/fork", {"count": 1})
        assert status == 409 and "only a running sandbox can be forked" in err["message"], err
    finally:
        s.kill()
    # nothing of these was made
    assert parent.get_info().state.value == "running"


class Hello(http.server.BaseHTTPRequestHandler):
    hits = 0

    def do_GET(self):
        Hello.hits += 1
        body = b"hello-net\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    if not NET_HOST or not NET_ADDR:
        pytest.skip("no SPACE_E2B_NET_HOST/SPACE_E2B_NET_ADDR: the daemon maps no name to a test server (t29 does)")
    srv = http.server.ThreadingHTTPServer((NET_ADDR, 0), Hello)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def fetch(s, port):
    return s.commands.run(f"curl -fsS --max-time 20 http://{NET_HOST}:{port}/ 2>&1 || echo CURL-FAILED").stdout


@needs_network
def test_update_network_cuts_and_restores_a_connection(server):
    allow = [NET_HOST, NET_ADDR]  # a name never opens a loopback address alone (space-egress(5))
    s = Sandbox.create(TEMPLATE, timeout=300, network={"allow_out": allow})
    try:
        assert "hello-net" in fetch(s, server)
        hits = Hello.hits
        s.update_network({"deny_out": [NET_ADDR]})
        net = s.get_info().network
        assert (net["allow_out"], net["deny_out"]) == ([], [NET_ADDR]), net
        out = fetch(s, server)
        assert "CURL-FAILED" in out and "hello-net" not in out, out
        assert Hello.hits == hits  # nothing reached the server
        s.update_network({"allow_out": allow})
        net = s.get_info().network
        assert (net["allow_out"], net["deny_out"]) == (allow, []), net
        assert "hello-net" in fetch(s, server)
        # an invalid entry is refused, naming it, and the lists stay as they were
        with pytest.raises(SandboxException, match=r"network.allowOut.*\*\.example\.com"):
            s.update_network({"allow_out": ["*.example.com"]})
        status, err = api("PUT", f"/sandboxes/{s.sandbox_id}/network", {"denyOut": ["10.0.0.0/99"]})
        assert status == 400 and "10.0.0.0/99" in err["message"], err
        status, err = api("PUT", f"/sandboxes/{s.sandbox_id}/network", {"allowOut": [], "bogus": 1})
        assert status == 400 and "unknown field 'bogus'" in err["message"], err
        net = s.get_info().network
        assert (net["allow_out"], net["deny_out"]) == (allow, []), net
        assert "hello-net" in fetch(s, server)
    finally:
        s.kill()


@needs_network
def test_update_network_of_an_unknown_sandbox():
    status, err = api("PUT", "/sandboxes/inothere0000000000000000/network", {"allowOut": []})
    assert (status, err["code"]) == (404, 404), err
