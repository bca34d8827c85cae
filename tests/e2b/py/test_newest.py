# SPDX-License-Identifier: Apache-2.0
"""What the newest SDKs send besides fork and network updates (issue 26), each served or refused with an error
that says why: the list's filters, order and pages, the snapshots' name filter, symlinks as envd reports them,
and the pause modes (lifecycle mode, pause mode, connect on_resume). The pinned SDKs have none of these calls:
t29 leaves this file to t45."""
import time
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from e2b import Sandbox, SandboxException, SandboxState
from e2b.sandbox.sandbox_api import SandboxQuery

from conftest import TEMPLATE
from test_sandboxes import api, sh


@pytest.fixture(scope="module")
def pair():
    """Two sandboxes with a metadata tag of their own, made one after the other (a second apart, so that the
    list's order by start time is theirs)."""
    tag = uuid.uuid4().hex
    a = Sandbox.create(TEMPLATE, timeout=600, metadata={"suite": tag, "n": "a"})
    time.sleep(1.1)
    b = Sandbox.create(TEMPLATE, timeout=600, metadata={"suite": tag, "n": "b"})
    yield tag, a, b
    a.kill()
    b.kill()


def ids(pages):
    return [s.sandbox_id for s in pages]


def all_items(paginator):
    out = []
    while paginator.has_next:
        out += paginator.next_items()
    return out


def test_list_pages_by_limit_and_next_token(pair):
    tag, a, b = pair
    p = Sandbox.list(query=SandboxQuery(metadata={"suite": tag}, state=[SandboxState.RUNNING]), limit=1)
    first = p.next_items()
    assert ids(first) == [a.sandbox_id]
    assert p.has_next and p.next_token
    assert ids(p.next_items()) == [b.sandbox_id]
    assert not p.has_next


def test_list_order(pair):
    tag, a, b = pair
    q = SandboxQuery(metadata={"suite": tag})
    assert ids(all_items(Sandbox.list(query=q, order="asc"))) == [a.sandbox_id, b.sandbox_id]
    assert ids(all_items(Sandbox.list(query=q, order="desc"))) == [b.sandbox_id, a.sandbox_id]
    # pages of the descending list go on from where the last one ended
    assert ids(all_items(Sandbox.list(query=q, order="desc", limit=1))) == [b.sandbox_id, a.sandbox_id]


def test_list_started_after_and_template(pair):
    tag, a, b = pair
    info = b.get_info()
    q = lambda **kw: SandboxQuery(metadata={"suite": tag}, **kw)  # noqa: E731
    assert ids(all_items(Sandbox.list(query=q(started_after=info.started_at)))) == [b.sandbox_id]
    long_ago = datetime.now(timezone.utc) - timedelta(hours=1)
    assert ids(all_items(Sandbox.list(query=q(started_after=long_ago)))) == [a.sandbox_id, b.sandbox_id]
    assert all_items(Sandbox.list(query=q(started_after=datetime.now(timezone.utc) + timedelta(hours=1)))) == []
    assert ids(all_items(Sandbox.list(query=q(template=TEMPLATE)))) == [a.sandbox_id, b.sandbox_id]
    assert all_items(Sandbox.list(query=q(template="no-such-template"))) == []


def test_list_refuses_what_it_cannot_read():
    status, body = api("GET", "/v2/sandboxes?startedAfter=yesterday")
    assert status == 400 and "startedAfter" in body["message"], body
    status, body = api("GET", "/v2/sandboxes?order=sideways")
    assert status == 400 and "order" in body["message"], body


def test_snapshots_name_filter(pair):
    _, a, _ = pair
    name = "newest-" + uuid.uuid4().hex[:8]
    snap = a.create_snapshot(name)
    try:
        found = all_items(Sandbox.list_snapshots(name=name))
        assert [s.snapshot_id for s in found] == [snap.snapshot_id]
        assert all_items(Sandbox.list_snapshots(name="no-such-" + name)) == []
    finally:
        Sandbox.delete_snapshot(snap.snapshot_id)


def test_symlink_target_is_absolute(pair):
    _, a, _ = pair
    sh(a, "mkdir -p /home/user/ln/sub && echo x >/home/user/ln/real.txt && "
          "ln -s real.txt /home/user/ln/rel && ln -s .././real.txt /home/user/ln/sub/up && "
          "ln -s /home/user//ln/real.txt /home/user/ln/abs")
    for path in ("/home/user/ln/rel", "/home/user/ln/sub/up", "/home/user/ln/abs"):
        assert a.files.get_info(path).symlink_target == "/home/user/ln/real.txt", path
    listed = {e.name: e.symlink_target for e in a.files.list("/home/user/ln")}
    assert listed["rel"] == listed["abs"] == "/home/user/ln/real.txt"
    assert listed["real.txt"] is None


def _newer_envd(sbx, version):
    """The SDK gates includeEntry (0.6.3) and allowNetworkMounts (0.6.4) on the envd version the facade
    reports, which stays below them until file metadata (0.6.2) is served too: pretend it, so that the real SDK
    sends what it sends for them."""
    from packaging.version import Version

    sbx.files._envd_version = Version(version)


def test_watch_events_carry_the_entry(pair):
    _, a, _ = pair
    from e2b.sandbox.filesystem.watch_handle import FilesystemEventType as T

    def until(h, kind):
        seen = []
        for _ in range(100):
            seen += h.get_new_events()
            if any(e.type == kind for e in seen):
                break
            time.sleep(0.2)
        return seen

    _newer_envd(a, "0.6.4")
    sh(a, "mkdir -p /home/user/we")
    h = a.files.watch_dir("/home/user/we", include_entry=True)
    try:
        sh(a, "printf 12345 > /home/user/we/f.txt")
        seen = until(h, T.WRITE)
        assert [(e.name, e.type) for e in seen] == [("f.txt", T.CREATE), ("f.txt", T.WRITE)], seen
        # as envd: create, write and chmod carry the entry, as it is when the agent looks (the create's may
        # be from before the write)
        for e in seen:
            assert e.entry is not None, e
            assert (e.entry.name, e.entry.path, e.entry.owner) == ("f.txt", "/home/user/we/f.txt", "user"), e
        assert seen[0].entry.size in (0, 5) and seen[1].entry.size == 5, seen
        sh(a, "chmod 640 /home/user/we/f.txt")
        (chmod,) = until(h, T.CHMOD)
        assert chmod.type == T.CHMOD and chmod.entry.mode == 0o640, chmod
        sh(a, "rm /home/user/we/f.txt")
        (remove,) = until(h, T.REMOVE)
        assert remove.type == T.REMOVE and remove.entry is None, remove  # as envd: none for a remove
    finally:
        h.stop()
    # without include_entry, no entry
    h = a.files.watch_dir("/home/user/we")
    try:
        sh(a, "echo x > /home/user/we/g")
        seen = []
        for _ in range(100):
            seen += h.get_new_events()
            if seen:
                break
            time.sleep(0.2)
        assert seen and all(e.entry is None for e in seen), seen
    finally:
        h.stop()


def test_watch_refuses_network_mounts_unless_allowed(pair):
    _, a, _ = pair
    _newer_envd(a, "0.6.4")
    # /proc is no network file system: allowed either way; a FUSE or NFS mount needs allow_network_mounts
    a.files.watch_dir("/proc", allow_network_mounts=True).stop()
    a.files.watch_dir("/home/user").stop()


def test_watch_storm_stays_bounded():
    # what a hostile guest tries first under a watch that is read (WatchDir's stream, the async SDK's): a
    # storm of files, as many as the guest's disk has inodes for, up to 100000 (t26 and test-agent-watch have
    # trees too wide and too deep, and a storm nobody reads). The daemon answers all along and its peak RSS
    # stays within 64 MiB of where it was; the watch keeps up, or ends with an error that says why (events
    # waiting for credit, the kernel's queue), never with a crash or a silent stall.
    import asyncio

    from e2b import AsyncSandbox

    from conftest import space_api
    from test_files import _daemon_hwm_kib

    async def body(s):
        free = int((await s.commands.run("df --output=iavail /home/user | tail -1")).stdout)
        n = min(100000, free - 5000)
        assert n > 20000, free
        await s.files.make_dir("/home/user/storm")
        counts = {"n": 0}
        ended = []
        h = await s.files.watch_dir("/home/user/storm", lambda e: counts.__setitem__("n", counts["n"] + 1),
                                    on_exit=lambda e: e and ended.append(e), timeout=900)
        before = _daemon_hwm_kib()
        start = time.monotonic()
        cmd = await s.commands.run(f"cd /home/user/storm && seq 1 {n} | xargs touch", background=True, timeout=900)
        waiting = asyncio.ensure_future(cmd.wait())
        worst = 0.0
        while not waiting.done():
            t = time.monotonic()
            status, _ = await asyncio.to_thread(space_api, "GET", "/v1/version")
            assert status == 200
            worst = max(worst, time.monotonic() - t)
            await asyncio.sleep(1)
        assert (await waiting).exit_code == 0
        last, still = -1, 0
        while not ended and still < 5 and counts["n"] < 2 * n:  # until it ended, caught up, or was still 5 s
            still = still + 1 if counts["n"] == last else 0
            last = counts["n"]
            await asyncio.sleep(1)
        grown = _daemon_hwm_kib() - before
        print(f"storm of {n} files: {counts['n']} events in {time.monotonic() - start:.0f} s, ended: {ended}, "
              f"daemon answered within {worst:.2f} s, its peak RSS grew {grown} KiB")
        assert worst < 5, worst
        assert grown < 64 * 1024, grown
        if ended:
            msg = str(ended[0])
            assert "faster than they were read" in msg or "queue overflowed" in msg, msg
        else:
            assert counts["n"] >= n, (counts, n)  # every file's create at least (touch adds a chmod)
        await h.stop()
        assert (await s.commands.run("rm -rf /home/user/storm", timeout=600)).exit_code == 0

    async def run():
        s = await AsyncSandbox.create(TEMPLATE, timeout=1200)
        try:
            await body(s)
        finally:
            await s.kill()

    asyncio.run(run())


def test_pause_modes(pair):
    _, a, _ = pair
    # a filesystem-only pause is refused, saying why; the sandbox goes on running
    with pytest.raises(SandboxException, match="memory=false"):
        a.pause(mode="filesystem")
    assert a.get_info().state.value == "running"
    assert sh(a, "echo on") == "on\n"
    # a full one is space's pause, also when it must find the guest healthy
    a.pause(mode="full", strict=True)
    assert a.get_info().state.value == "paused"
    with pytest.raises(SandboxException, match="reboot"):
        a.connect(on_resume="reboot")
    a.connect(on_resume="restore")
    assert sh(a, "echo back") == "back\n"
    with pytest.raises(SandboxException, match="memory=false"):
        a.create_snapshot(mode="filesystem")


def test_create_lifecycle_mode():
    s = Sandbox.create(TEMPLATE, timeout=120, lifecycle={"on_timeout": {"action": "pause", "mode": "full"}})
    try:
        info = s.get_info()
        assert info.lifecycle["on_timeout"] == "pause"
        assert sh(s, "echo up") == "up\n"
    finally:
        s.kill()
    with pytest.raises(SandboxException, match="autoPauseMemory"):
        Sandbox.create(TEMPLATE, timeout=120, lifecycle={"on_timeout": {"action": "pause", "mode": "filesystem"}})
