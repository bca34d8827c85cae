# SPDX-License-Identifier: Apache-2.0
"""E2B's control plane through the Python SDK (sync): create, info, lists, timeouts, pause and connect,
metrics, snapshots, kill and the errors a user meets."""
import datetime
import json
import os
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid

import pytest
from e2b import (AuthenticationException, CommandExitException, NotFoundException, Sandbox, SandboxException, SandboxQuery,
                 SandboxState)

from conftest import TEMPLATE, space_api


def sh(sbx, cmd):
    """A command's stdout. SPACE_E2B_NATIVE_EXEC=1 runs it with spacectl instead of the SDK's commands (for
    working on the control plane alone); the suite runs it through the SDK."""
    if os.environ.get("SPACE_E2B_NATIVE_EXEC") == "1":
        return subprocess.run([os.environ["SPACECTL"], "exec", sbx.sandbox_id, "--", "bash", "-c", cmd],
                              check=True, capture_output=True, text=True, timeout=60).stdout
    return sbx.commands.run(cmd).stdout


# the command lines of the guest's processes (seed has no ps)
PROCESSES = "for p in /proc/[0-9]*; do tr '\\0' ' ' <$p/cmdline 2>/dev/null; echo; done"


def wait_for(what, pred, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def api(method, path, body=None):
    """The control plane as the SDK reaches it (TCP, API key), for what the SDK hides (statuses)."""
    req = urllib.request.Request((os.environ.get("E2B_API_URL") or os.environ["SPACE_TEST_API_URL"]) + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"X-API-KEY": os.environ["E2B_API_KEY"],
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            data = r.read()
            return r.status, (json.loads(data) if data else None)
    except urllib.error.HTTPError as e:
        data = e.read()
        return e.code, (json.loads(data) if data else None)


def native_state(sandbox_id):
    status, body = space_api("GET", f"/v1/sandboxes/{sandbox_id}")
    return body["state"] if status == 200 else None


def test_create_base_with_envs_and_metadata():
    # 'base' (E2B's default template) is the configured e2b_template, seed unless spaced.conf says otherwise
    s = Sandbox.create("base", timeout=120, envs={"FOO": "bar baz"}, metadata={"suite": "sandboxes", "k": "v"})
    try:
        assert s.sandbox_id and s.envd_api_url
        assert sh(s, "echo $FOO") == "bar baz\n"
        info = s.get_info()
        assert info.sandbox_id == s.sandbox_id
        assert info.template_id == "seed"
        assert info.metadata == {"suite": "sandboxes", "k": "v"}
        assert info.state == SandboxState.RUNNING
        assert info.cpu_count >= 1 and info.memory_mb >= 64
        assert info.envd_version == "0.6.4"
        assert info.lifecycle == {"on_timeout": "kill", "auto_resume": False}
        now = datetime.datetime.now(datetime.timezone.utc)
        assert info.started_at <= now + datetime.timedelta(seconds=5)
        assert 100 <= (info.end_at - now).total_seconds() <= 125
        # what the daemon itself holds
        status, native = space_api("GET", f"/v1/sandboxes/{s.sandbox_id}")
        assert status == 200 and native["env"]["FOO"] == "bar baz" and native["metadata"]["k"] == "v"
    finally:
        assert s.kill() is True


def test_list_filters_and_pages():
    run = uuid.uuid4().hex
    # keys and values with characters the query's encoding must carry
    meta = {"run": run, "odd key": "a&b=c d%"}
    a = Sandbox.create(TEMPLATE, timeout=300, metadata=meta)
    b = Sandbox.create(TEMPLATE, timeout=300, metadata={"run": run})
    try:
        q = SandboxQuery(metadata={"run": run})
        ids = {i.sandbox_id for i in Sandbox.list(query=q).next_items()}
        assert ids == {a.sandbox_id, b.sandbox_id}
        only_a = Sandbox.list(query=SandboxQuery(metadata=meta)).next_items()
        assert [i.sandbox_id for i in only_a] == [a.sandbox_id]
        assert only_a[0].metadata == meta

        pages = Sandbox.list(query=q, limit=1)
        first = pages.next_items()
        assert len(first) == 1 and pages.has_next and pages.next_token
        second = pages.next_items()
        assert len(second) == 1 and not pages.has_next
        assert {first[0].sandbox_id, second[0].sandbox_id} == {a.sandbox_id, b.sandbox_id}

        b.pause()
        running = Sandbox.list(query=SandboxQuery(metadata={"run": run}, state=[SandboxState.RUNNING]))
        assert [i.sandbox_id for i in running.next_items()] == [a.sandbox_id]
        paused = Sandbox.list(query=SandboxQuery(metadata={"run": run}, state=[SandboxState.PAUSED]))
        listed = paused.next_items()
        assert [i.sandbox_id for i in listed] == [b.sandbox_id]
        assert listed[0].state == SandboxState.PAUSED
        both = Sandbox.list(query=SandboxQuery(metadata={"run": run},
                                               state=[SandboxState.RUNNING, SandboxState.PAUSED]))
        assert len(both.next_items()) == 2
    finally:
        a.kill()
        b.kill()


def test_set_timeout_then_killed_at_timeout():
    s = Sandbox.create(TEMPLATE, timeout=300)
    sid = s.sandbox_id
    s.set_timeout(600)
    end = s.get_info().end_at
    left = (end - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
    assert 580 <= left <= 605
    # shortening is allowed too: then it is removed at its timeout
    s.set_timeout(2)
    wait_for("the sandbox to be removed at its timeout", lambda: native_state(sid) is None, 30)
    with pytest.raises(NotFoundException):
        Sandbox.connect(sid)
    with pytest.raises(NotFoundException):
        Sandbox.get_info(sid)
    assert sid not in {i.sandbox_id for i in Sandbox.list().next_items()}
    assert Sandbox.kill(sid) is False


def test_pause_connect_keeps_files_and_processes():
    s = Sandbox.create(TEMPLATE, timeout=300)
    try:
        sh(s, "echo kept > /tmp/state.txt; (sleep 1000 >/dev/null 2>&1 &) ; true")
        s.pause()
        assert s.get_info().state == SandboxState.PAUSED
        assert native_state(s.sandbox_id) == "suspended"
        # E2B answers 409 for a paused sandbox; Python 2.21.1 returns the id all the same, newer SDKs False
        assert api("POST", f"/sandboxes/{s.sandbox_id}/pause") == (409, {
            "code": 409, "message": f"sandbox {s.sandbox_id} is already paused"})
        assert Sandbox.pause(s.sandbox_id) in (s.sandbox_id, False)

        again = Sandbox.connect(s.sandbox_id, timeout=200)
        assert again.sandbox_id == s.sandbox_id
        assert again.get_info().state == SandboxState.RUNNING
        assert sh(again, "cat /tmp/state.txt") == "kept\n"
        assert "sleep 1000" in sh(again, PROCESSES)
        # a connect to a running sandbox only makes its timeout longer
        left = (again.get_info().end_at - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
        assert 180 <= left <= 205
        Sandbox.connect(s.sandbox_id, timeout=30)
        left = (again.get_info().end_at - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
        assert left >= 150
    finally:
        s.kill()


def test_timeout_pauses_and_work_resumes_it():
    s = Sandbox.create(TEMPLATE, timeout=300, lifecycle={"on_timeout": "pause", "auto_resume": True})
    try:
        info = s.get_info()
        assert info.lifecycle == {"on_timeout": "pause", "auto_resume": True}
        sh(s, "echo before > /tmp/p.txt")
        s.set_timeout(2)
        wait_for("the sandbox to pause at its timeout", lambda: native_state(s.sandbox_id) == "suspended", 60)
        assert s.get_info().state == SandboxState.PAUSED
        # auto resume: using it wakes it
        assert s.commands.run("cat /tmp/p.txt").stdout == "before\n"
        assert s.get_info().state == SandboxState.RUNNING
        # resumed by use, it has its timeout again: it pauses once more, and use wakes it again
        wait_for("the sandbox to pause again at its timeout", lambda: native_state(s.sandbox_id) == "suspended", 60)
        assert s.commands.run("cat /tmp/p.txt").stdout == "before\n"
    finally:
        s.kill()


def test_metrics_are_the_vms():
    s = Sandbox.create(TEMPLATE, timeout=120)
    try:
        info = s.get_info()
        sh(s, "true")
        metrics = s.get_metrics()
        assert len(metrics) == 1
        m = metrics[0]
        assert m.cpu_count == info.cpu_count == 1
        assert 0 <= m.cpu_used_pct <= 100
        # memory as the guest sees it (its kernel keeps some of the sandbox's memory for itself)
        guest_total = int(sh(s, "awk '/^MemTotal:/ {print $2}' /proc/meminfo")) * 1024
        assert m.mem_total == guest_total
        assert info.memory_mb * 1024 * 1024 / 2 < m.mem_total <= info.memory_mb * 1024 * 1024
        assert 0 < m.mem_used <= m.mem_total
        if hasattr(m, "mem_cache"):  # newer SDKs
            assert 0 < m.mem_cache <= m.mem_total
        assert m.disk_total > 0 and 0 <= m.disk_used <= m.disk_total
        assert abs((m.timestamp - datetime.datetime.now(datetime.timezone.utc)).total_seconds()) < 10
        # a window that ends before now has no samples (space keeps only the current one)
        past = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=2)
        assert s.get_metrics(start=past - datetime.timedelta(hours=1), end=past) == []
    finally:
        s.kill()


def test_snapshot_forks_with_its_files():
    s = Sandbox.create(TEMPLATE, timeout=300, envs={"FROM": "origin"})
    name = "snap-" + uuid.uuid4().hex[:8]
    snap = None
    try:
        sh(s, "echo in-snapshot > /tmp/snap.txt")
        snap = s.create_snapshot(name=name)
        assert snap.snapshot_id.startswith("cp-") and snap.names == [name]
        listed = Sandbox.list_snapshots(sandbox_id=s.sandbox_id).next_items()
        assert [x.snapshot_id for x in listed] == [snap.snapshot_id]
        s.kill()
        # the snapshot outlives its sandbox, and a create from its id (or name) forks it
        fork = Sandbox.create(snap.snapshot_id, timeout=120)
        try:
            assert sh(fork, "cat /tmp/snap.txt; echo $FROM") == "in-snapshot\norigin\n"
        finally:
            fork.kill()
        by_name = Sandbox.create(name, timeout=120)
        by_name.kill()
        assert snap.snapshot_id in {x.snapshot_id for x in Sandbox.list_snapshots().next_items()}
        assert Sandbox.delete_snapshot(snap.snapshot_id) is True
        assert Sandbox.delete_snapshot(snap.snapshot_id) is False
        snap = None
    finally:
        s.kill()
        if snap:
            Sandbox.delete_snapshot(snap.snapshot_id)


def test_several_at_once():
    made, errors = [], []

    def create():
        try:
            made.append(Sandbox.create(TEMPLATE, timeout=120))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=create) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert not errors
        assert len({s.sandbox_id for s in made}) == 3
        for s in made:
            assert s.get_info().state == SandboxState.RUNNING
    finally:
        for s in made:
            s.kill()


def test_kill_twice():
    s = Sandbox.create(TEMPLATE, timeout=60)
    assert s.kill() is True
    assert s.kill() is False
    assert Sandbox.kill(s.sandbox_id) is False


def test_errors_say_what_is_wrong():
    with pytest.raises(SandboxException, match="template 'no-such-template' does not exist"):
        Sandbox.create("no-such-template", timeout=30)
    with pytest.raises(AuthenticationException):
        Sandbox.list(api_key="e2b_" + "0" * 40).next_items()
    with pytest.raises(NotFoundException):
        Sandbox.get_info("0" * 32)
    with pytest.raises(NotFoundException):
        Sandbox.connect("0" * 32)
    with pytest.raises(SandboxException, match="no volume 'vol' to mount"):
        Sandbox.create(TEMPLATE, timeout=30, volume_mounts={"/data": "vol"})
    with pytest.raises(SandboxException, match=r"network.allowOut.*wildcard"):
        Sandbox.create(TEMPLATE, timeout=30, network={"allow_out": ["*.example.com"]})


def egress_lists(sandbox_id):
    status, body = space_api("GET", f"/v1/sandboxes/{sandbox_id}")
    assert status == 200
    return body["egress_allow"], body["egress_deny"]


def test_network_options_are_egress_lists():
    # E2B's allow_out wins over a deny_out that holds it; space denies what nothing allows anyway, so that
    # deny is dropped and only the allows open anything (space-egress(5))
    s = Sandbox.create(TEMPLATE, timeout=60, network={"allow_out": ["1.1.1.1", "example.com"],
                                                      "deny_out": ["0.0.0.0/0", "8.8.8.8"]})
    try:
        assert egress_lists(s.sandbox_id) == (["1.1.1.1", "example.com"], ["8.8.8.8"])
    finally:
        s.kill()
    # no internet: every address denied, which wins over any profile
    s = Sandbox.create(TEMPLATE, timeout=60, allow_internet_access=False)
    try:
        assert egress_lists(s.sandbox_id) == ([], ["0.0.0.0/0", "::/0"])
        r = s.commands.run("curl -fsS --max-time 10 http://example.com/ || echo refused $?")
        assert "refused" in r.stdout
    finally:
        s.kill()


def test_logs_list_what_ran():
    s = Sandbox.create(TEMPLATE, timeout=300)
    try:
        s.commands.run("true")
        try:
            s.commands.run("exit 3")
        except CommandExitException:
            pass
        status, body = api("GET", f"/sandboxes/{s.sandbox_id}/logs")
        assert status == 200
        lines = [entry["line"] for entry in body["logs"]]
        assert any("started as user" in line and "bash -l -c true" in line for line in lines), lines
        assert any("exited with code 3" in line for line in lines), lines
        assert len(body["logEntries"]) == len(lines)
        # v2: filtered by level, newest first
        status, body = api("GET", f"/v2/sandboxes/{s.sandbox_id}/logs?level=warn&direction=backward")
        assert status == 200
        assert [e["level"] for e in body["logs"]] == ["warn"], body
        assert body["logs"][0]["message"].endswith("exited with code 3")
        assert api("GET", f"/v2/sandboxes/{s.sandbox_id}/logs?level=loud")[0] == 400
    finally:
        s.kill()


def test_paused_sandbox_and_uploads():
    # with auto resume an upload wakes it, body and all; without, it is refused as "not running"
    s = Sandbox.create(TEMPLATE, timeout=300, lifecycle={"on_timeout": "pause", "auto_resume": True})
    t = Sandbox.create(TEMPLATE, timeout=300)
    try:
        s.pause()
        t.pause()
        data = "x" * 200000 + "end"
        s.files.write("/home/user/after-pause.txt", data)
        assert s.files.read("/home/user/after-pause.txt") == data
        assert s.get_info().state == SandboxState.RUNNING
        with pytest.raises(SandboxException):
            t.files.write("/home/user/nope.txt", "x")
        assert native_state(t.sandbox_id) == "suspended"
    finally:
        s.kill()
        t.kill()


def test_template_lookups():
    from e2b import Template
    assert Template.exists("seed") is True
    assert Template.exists("no-such-template") is False
    status, body = api("GET", "/templates")
    assert status == 200 and any("seed:latest" in t["names"] and "seed" in t["aliases"] for t in body), body
    seed = next(t for t in body if "seed:latest" in t["names"])
    assert seed["templateID"].startswith("sha256:") and seed["buildStatus"] == "ready"
    status, detail = api("GET", "/templates/seed")
    assert status == 200 and detail["templateID"] == seed["templateID"] and len(detail["builds"]) == 1
    # builds are space's own: E2B's build routes say so, in E2B's error shape
    status, body = api("POST", "/v3/templates", {"name": "x"})
    assert status == 501 and body["code"] == 501 and "spacectl template build" in body["message"]
