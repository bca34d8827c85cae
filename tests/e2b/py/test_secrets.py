# SPDX-License-Identifier: Apache-2.0
"""E2B's Secret API (e2b 2.43 and later; issue 22) on the daemon's secrets: create, get_info by name and id,
update as a new version (metadata replaced or kept), list in pages, exists, destroy. Values are write-only: no
answer holds one. Bad values and names get errors that say why. And network.rules on Sandbox.create and
update_network, whose header transforms carry Secret.fill placeholders: the gateway puts the value in on the
way to the rule's host only (plain HTTP and HTTPS, to servers of the test's on a loopback address that the
daemon's egress_hosts_file names: t29 sets SPACE_E2B_NET_*, and SPACE_E2B_TLS_DIR with the HTTPS server's pair
and the CA the daemon's egress_tls_ca trusts). The pinned SDKs have no Secret: t29 leaves this file to t45."""
import http.server
import os
import ssl
import threading
import uuid

import pytest
from e2b import Sandbox, Secret
from e2b.exceptions import SecretException, SecretNotFoundException

from conftest import TEMPLATE
from test_sandboxes import api, sh

NET_HOST = os.environ.get("SPACE_E2B_NET_HOST")          # bound by the rules
NET_ADDR = os.environ.get("SPACE_E2B_NET_ADDR")
OTHER_HOST = os.environ.get("SPACE_E2B_NET_OTHER_HOST")  # the same address, no rule
CLOSED_HOST = os.environ.get("SPACE_E2B_NET_CLOSED_HOST")  # a rule, but allowOut does not name it
CLOSED_ADDR = os.environ.get("SPACE_E2B_NET_CLOSED_ADDR")
TLS_DIR = os.environ.get("SPACE_E2B_TLS_DIR")


def test_create_get_update_destroy():
    name = f"t-{uuid.uuid4().hex[:12]}"
    value = f"sk-py-{uuid.uuid4().hex}"
    info = Secret.create(name, value, metadata={"owner": "py"})
    try:
        assert info.name == name and info.version == 1 and info.metadata == {"owner": "py"}
        assert info.secret_id.startswith("sec-")
        assert info.created_at == info.updated_at
        assert Secret.get_info(name).secret_id == info.secret_id
        assert Secret.get_info(info.secret_id).name == name
        assert Secret.exists(name) and not Secret.exists(name + "-no")

        # a second create of the name is refused; an update is a new version
        with pytest.raises(SecretException):
            Secret.create(name, value)
        v2 = Secret.update(name, value + "-2")
        assert v2.version == 2 and v2.metadata == {"owner": "py"}, "metadata left out is kept"
        v3 = Secret.update(info.secret_id, value + "-3", metadata={"rotated": "yes"})
        assert v3.version == 3 and v3.metadata == {"rotated": "yes"}, "metadata given replaces it"

        # the value never comes back, on any read
        for path in (f"/secrets/{name}", f"/secrets/{info.secret_id}", "/secrets"):
            status, body = api("GET", path)
            assert status == 200
            assert value not in str(body), path
    finally:
        assert Secret.destroy(name) is True
    assert Secret.destroy(name) is False, "a second destroy finds nothing"
    with pytest.raises(SecretNotFoundException):
        Secret.get_info(name)
    with pytest.raises(SecretNotFoundException):
        Secret.update(name, "x")


def test_list_pages():
    tag = uuid.uuid4().hex[:8]
    names = [f"p{i}-{tag}" for i in range(3)]
    for n in names:
        Secret.create(n, "v")
    try:
        seen, pages = [], 0
        paginator = Secret.list(limit=2)
        while paginator.has_next:
            seen += [s.name for s in paginator.next_items()]
            pages += 1
        assert [n for n in seen if n.endswith(tag)] == names, "oldest first, each once"
        assert pages >= 2
    finally:
        for n in names:
            Secret.destroy(n)


def test_bad_input():
    with pytest.raises(SecretException, match="line break"):
        Secret.create(f"b-{uuid.uuid4().hex[:8]}", "a\r\nX-Injected: 1")
    with pytest.raises(SecretException, match="not a secret name"):
        Secret.create("-dash-first", "v")
    status, body = api("POST", "/secrets", {"name": "x", "value": "v", "extra": 1})
    assert status == 400 and "extra" in body["message"]
    status, _ = api("GET", "/secrets?nextToken=sec-ffffffffffffffff")
    assert status == 400
    assert Secret.fill("openai") == "${e2b.secrets.openai}"


# ---- network.rules


class Recorder(http.server.BaseHTTPRequestHandler):
    seen = []  # (Host, {lowercase name: value}) of every request, in order

    def do_GET(self):
        Recorder.seen.append((self.headers.get("Host", ""), {k.lower(): v for k, v in self.headers.items()}))
        body = b"recorded\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def recorder():
    if not (NET_HOST and NET_ADDR and OTHER_HOST and CLOSED_HOST and CLOSED_ADDR):
        pytest.skip("no SPACE_E2B_NET_* names: the daemon maps no name to a test server (t29 does)")
    servers = [http.server.ThreadingHTTPServer((NET_ADDR, 0), Recorder)]
    port = servers[0].server_address[1]
    servers.append(http.server.ThreadingHTTPServer((CLOSED_ADDR, port), Recorder))
    for srv in servers:
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield port
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def get(s, host, port, *headers):
    """A request from the guest, through its proxy as a program would send it; the last request the recorder
    saw (or None when none came)."""
    before = len(Recorder.seen)
    args = " ".join(f"-H '{h}'" for h in headers)
    out = sh(s, f"curl -sS --max-time 20 {args} http://{host}:{port}/ 2>&1 || echo CURL-FAILED")
    return out, (Recorder.seen[-1] if len(Recorder.seen) > before else None)


@pytest.fixture
def secret():
    name = f"r-{uuid.uuid4().hex[:10]}"
    value = f"sk-rule-{uuid.uuid4().hex}"
    Secret.create(name, value)
    yield name, value
    Secret.destroy(name)


def test_network_rules_put_the_secret_in(recorder, secret):
    name, value = secret
    ph = Secret.fill(name)
    allow = [NET_HOST, OTHER_HOST, NET_ADDR]  # a name never opens a loopback address alone (space-egress(5))
    s = Sandbox.create(TEMPLATE, timeout=300, network={
        "allow_out": allow,
        "rules": {
            NET_HOST: [{"transform": {"headers": {"Authorization": f"Bearer {ph}", "X-Pair": f"k={ph};v=2"}}}],
            CLOSED_HOST: [{"transform": {"headers": {"X-Closed": ph}}}],
        },
    })
    try:
        out, req = get(s, NET_HOST, recorder, "Authorization: forged")
        assert "recorded" in out and req, out
        assert req[1]["authorization"] == f"Bearer {value}", "the rule's header replaces the guest's"
        assert req[1]["x-pair"] == f"k={value};v=2", "text around the reference is kept"

        # the placeholder sent anywhere else leaves as it is
        out, req = get(s, OTHER_HOST, recorder, f"X-Key: {ph}")
        assert req and req[1]["x-key"] == ph and "authorization" not in req[1], req
        # a rule for a host that allowOut does not name opens nothing
        out, req = get(s, CLOSED_HOST, recorder)
        assert "no allow rule names it (no_rule)" in out and req is None, out

        # the value is nowhere in the guest: its processes' environments, a command's output
        out = sh(s, "env; for p in /proc/[0-9]*; do tr '\\0' '\\n' <$p/environ 2>/dev/null; done; "
                    "grep -rs sk-rule- /etc /home /tmp /root | head -5; echo done")
        assert out.endswith("done\n") and value not in out, "the value is in the guest"
        # the info shows the rules with their references, never the value
        status, info = api("GET", f"/sandboxes/{s.sandbox_id}")
        assert status == 200 and value not in str(info)
        assert info["network"]["rules"][NET_HOST][0]["transform"]["headers"]["Authorization"] == f"Bearer {ph}"

        # a rotation is seen by the next request
        Secret.update(name, value + "-2")
        _, req = get(s, NET_HOST, recorder)
        assert req and req[1]["authorization"] == f"Bearer {value}-2", req

        # update_network replaces the rules (what it leaves out is gone)
        s.update_network({"allow_out": allow, "rules": {NET_HOST: [{"transform": {"headers": {"X-New": ph}}}]}})
        _, req = get(s, NET_HOST, recorder, "Authorization: mine")
        assert req and req[1]["x-new"] == f"{value}-2" and req[1]["authorization"] == "mine", req
        s.update_network({"allow_out": allow})
        _, req = get(s, NET_HOST, recorder)
        assert req and "x-new" not in req[1], req
    finally:
        s.kill()


@pytest.fixture(scope="module")
def tls_recorder():
    if not (NET_HOST and NET_ADDR and OTHER_HOST and TLS_DIR):
        pytest.skip("no SPACE_E2B_NET_* names or SPACE_E2B_TLS_DIR: no HTTPS test server (t29 makes one)")
    srv = http.server.ThreadingHTTPServer((NET_ADDR, 0), Recorder)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(TLS_DIR, "srv.pem"), os.path.join(TLS_DIR, "srv.key"))
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def test_network_rules_over_https(tls_recorder, secret):
    """As E2B's proxy does, the rule's header goes into HTTPS requests: the gateway ends the guest's TLS with the
    daemon's CA, which the sandbox trusts, after checking the server's certificate; a host no rule names is
    left alone (the guest sees the server's own certificate there)."""
    name, value = secret
    ph = Secret.fill(name)
    s = Sandbox.create(TEMPLATE, timeout=300, network={
        "allow_out": [NET_HOST, OTHER_HOST, NET_ADDR],
        "rules": {NET_HOST: [{"transform": {"headers": {"Authorization": f"Bearer {ph}"}}}]},
    })
    try:
        before = len(Recorder.seen)
        out = sh(s, f"curl -sS --max-time 20 -H 'Authorization: forged' https://{NET_HOST}:{tls_recorder}/ "
                    f"https://{NET_HOST}:{tls_recorder}/again 2>&1 || echo CURL-FAILED")
        assert out.count("recorded") == 2, out
        got = [h for _, h in Recorder.seen[before:]]
        assert [h["authorization"] for h in got] == [f"Bearer {value}"] * 2, "each request gets the value"
        issuer = sh(s, "python3 -c 'import socket, ssl; c = ssl.create_default_context(); "
                       f"t = c.wrap_socket(socket.create_connection((\"{NET_HOST}\", {tls_recorder})), "
                       f"server_hostname=\"{NET_HOST}\"); print(dict(x[0] for x in t.getpeercert()[\"issuer\"])[\"commonName\"])'")
        assert issuer.strip() == "space local CA", issuer

        # the other name of the same server: not intercepted, so only its own CA verifies it
        s.files.write("/tmp/upstream-ca.pem", open(os.path.join(TLS_DIR, "ca.pem")).read())
        before = len(Recorder.seen)
        out = sh(s, f"curl -sS --max-time 20 --cacert /tmp/upstream-ca.pem -H 'X-Key: {ph}' "
                    f"https://{OTHER_HOST}:{tls_recorder}/ 2>&1 || echo CURL-FAILED")
        assert "recorded" in out, out
        h = Recorder.seen[-1][1]
        assert len(Recorder.seen) == before + 1 and h["x-key"] == ph and "authorization" not in h, h

        # a fork keeps the rules (they are the sandbox's, stored with its checkpoint)
        forks = s.fork(timeout=120)
        try:
            before = len(Recorder.seen)
            out = sh(forks[0], f"curl -sS --max-time 20 https://{NET_HOST}:{tls_recorder}/fork 2>&1 || echo CURL-FAILED")
            assert "recorded" in out and len(Recorder.seen) == before + 1, out
            assert Recorder.seen[-1][1]["authorization"] == f"Bearer {value}", "the fork's request gets the value"
        finally:
            for f in forks:
                f.kill()
    finally:
        s.kill()


def test_network_rules_unknown_secret_is_refused():
    missing = f"nope-{uuid.uuid4().hex[:8]}"
    with pytest.raises(Exception, match=missing):
        Sandbox.create(TEMPLATE, timeout=60, network={
            "rules": {"api.example.com": [{"transform": {"headers": {"Authorization": Secret.fill(missing)}}}]}})
    status, err = api("POST", "/sandboxes", {"templateID": TEMPLATE, "network": {
        "rules": {"api.example.com": [{"transform": {"headers": {"X": Secret.fill(missing)}}}]}}})
    assert (status, err["code"]) == (404, 404) and missing in err["message"], err


@pytest.mark.parametrize("rules, what", [
    ({"*.example.com": [{}]}, 'network.rules["*.example.com"]: wildcards'),
    ({"10.0.0.1": [{}]}, 'network.rules["10.0.0.1"]: not a host name'),
    ({"a.example.com": {}}, 'network.rules["a.example.com"] must be an array'),
    ({"a.example.com": [{"transform": {"headers": {"X": 1}}}]},
     'network.rules["a.example.com"][0].transform.headers["X"] must be a string'),
    ({"a.example.com": [{"transform": {"headers": {"Host": "x"}}}]}, 'headers["Host"]'),
    ({"a.example.com": [{"transform": {"body": "x"}}]}, "unknown field 'body'"),
    ({"a.example.com": [{"transform": {"headers": {"X": "${e2b.identity.tokens.aws}"}}}]}, "only ${e2b.secrets.NAME}"),
])
def test_network_rules_malformed(rules, what):
    status, err = api("POST", "/sandboxes", {"templateID": TEMPLATE, "network": {"rules": rules}})
    assert (status, err["code"]) == (400, 400) and what in err["message"], err
