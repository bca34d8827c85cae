# SPDX-License-Identifier: Apache-2.0
"""What the newest SDKs send besides fork and network updates (issue 26), each served or refused with an error
that says why: the list's filters, order and pages, the snapshots' name filter, symlinks as envd reports them,
and the pause modes (lifecycle mode, pause mode, connect on_resume): without memory, a stop and a cold boot
from the disk. The pinned SDKs have none of these calls:
t29 leaves this file to t45."""
import time
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from e2b import FileType, InvalidArgumentException, Sandbox, SandboxException, SandboxState
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


def test_symlink_resolved_through_links(pair):
    """envd's symlink_target is Go's EvalSymlinks of the link: every link on the way followed (a relative one
    from its directory, one through a linked directory, a chain); its type is what it leads to; a dangling
    link's target is the link itself, with no type."""
    _, a, _ = pair
    sh(a, "mkdir -p /home/user/ch/d && echo x >/home/user/ch/d/f.txt && cd /home/user/ch && "
          "ln -s d dl && ln -s dl/f.txt via && ln -s via chain && ln -s ../ch/chain up && "
          "ln -s nowhere dangling && ln -s loop1 loop2 && ln -s loop2 loop1")
    for name in ("via", "chain", "up"):
        info = a.files.get_info("/home/user/ch/" + name)
        assert info.symlink_target == "/home/user/ch/d/f.txt", name
        assert info.type == FileType.FILE, name
    dl = a.files.get_info("/home/user/ch/dl")
    assert dl.symlink_target == "/home/user/ch/d" and dl.type == FileType.DIR
    for name in ("dangling", "loop1"):
        info = a.files.get_info("/home/user/ch/" + name)
        assert info.symlink_target == "/home/user/ch/" + name and info.type is None, name
    listed = {e.name: e for e in a.files.list("/home/user/ch")}
    assert listed["chain"].symlink_target == "/home/user/ch/d/f.txt"
    assert listed["dl"].type == FileType.DIR
    # a dangling link has no type, and the SDK's list leaves entries without one out (with envd too)
    assert "dangling" not in listed and "loop1" not in listed


def test_file_metadata(pair):
    """write's metadata is kept as user.e2b.* attributes and comes back from get_info and list; a write
    replaces the whole set (none: none), as envd's upload does."""
    _, a, _ = pair
    path = "/home/user/meta/m.txt"
    info = a.files.write(path, "one", metadata={"Owner": "alice", "k-2": "v=2 x"})
    assert info.metadata == {"owner": "alice", "k-2": "v=2 x"}
    assert a.files.get_info(path).metadata == {"owner": "alice", "k-2": "v=2 x"}
    assert sh(a, "python3 -c 'import os; print(os.getxattr(\"%s\", \"user.e2b.owner\").decode())'" % path) == "alice\n"
    listed = {e.name: e.metadata for e in a.files.list("/home/user/meta")}
    assert listed == {"m.txt": {"owner": "alice", "k-2": "v=2 x"}}
    # a second write replaces the set, and one without metadata leaves none
    assert a.files.write(path, "two", metadata={"x": "1"}).metadata == {"x": "1"}
    assert a.files.get_info(path).metadata == {"x": "1"}
    assert a.files.write(path, "three").metadata is None
    assert a.files.get_info(path).metadata is None
    # octet-stream and several files alike
    a.files.write_files([{"path": "/home/user/meta/b1", "data": b"1"}, {"path": "/home/user/meta/b2", "data": b"2"}],
                        metadata={"batch": "yes"})
    assert a.files.get_info("/home/user/meta/b2").metadata == {"batch": "yes"}
    assert a.files.write(path, b"s", use_octet_stream=True, metadata={"o": "s"}).metadata == {"o": "s"}


def test_file_metadata_refused_as_envd_refuses(pair):
    _, a, _ = pair
    with pytest.raises(InvalidArgumentException, match="exceeds 246 bytes"):
        a.files.write("/home/user/meta/long", "x", metadata={"k" * 247: "v"})
    with pytest.raises(InvalidArgumentException, match="total metadata size"):
        a.files.write("/home/user/meta/big", "x", metadata={"k%d" % i: "v" * 100 for i in range(40)})
    for path in ("/home/user/meta/long", "/home/user/meta/big"):
        with pytest.raises(Exception):
            a.files.get_info(path)


def test_file_metadata_set_in_the_guest_is_bounded(pair):
    """An attacker's first try: a guest process sets as many user.e2b.* attributes as the file system takes, and
    the longest value it can; stat and list answer, with at most envd's budget of it, and other attributes
    never leave the guest."""
    _, a, _ = pair
    sh(a, "mkdir -p /home/user/flood && cd /home/user/flood && touch many big && python3 -c '\n"
          "import os\n"
          "os.setxattr(\"many\", \"user.other\", b\"secret\")\n"
          "for i in range(10000):\n"
          "    try: os.setxattr(\"many\", \"user.e2b.k%05d\" % i, b\"v\" * 20)\n"
          "    except OSError: break\n"
          "n = 65536\n"
          "while n > 0:\n"
          "    try: os.setxattr(\"big\", \"user.e2b.big\", b\"B\" * n); break\n"
          "    except OSError: n //= 2\n"
          "os.setxattr(\"big\", \"user.e2b.bad\", b\"\\xff\\xfe\")\n'")
    def budget(meta):
        return sum(len("user.e2b.") + len(k) + len(v) for k, v in (meta or {}).items())
    many = a.files.get_info("/home/user/flood/many")
    assert many.metadata and "other" not in many.metadata and budget(many.metadata) <= 4096
    big = a.files.get_info("/home/user/flood/big")
    assert "bad" not in (big.metadata or {}) and budget(big.metadata) <= 4096
    listed = {e.name: e.metadata for e in a.files.list("/home/user/flood")}
    assert listed["many"] == many.metadata and listed["big"] == big.metadata
    assert sh(a, "echo alive") == "alive\n"


# The guest's command lines, one a line, as /proc has them (busybox's and procps' ps differ).
PROCS = "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' <$f; echo; done"


def wait_state(sbx, want, seconds=90):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if sbx.get_info().state.value == want:
            return True
        time.sleep(0.5)
    return False


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
    # /proc is no network file system: allowed either way; a FUSE or NFS mount needs allow_network_mounts
    a.files.watch_dir("/proc", allow_network_mounts=True).stop()
    a.files.watch_dir("/home/user").stop()


def test_watch_storm_stays_bounded():
    # what a hostile guest tries first under a watch that is read (WatchDir's stream, the async SDK's): a
    # storm of files, as many as the guest's disk has inodes for, up to 30000 (test-agent-watch has trees too
    # wide and too deep, and a storm of 100000 nobody reads). The daemon answers all along and its peak RSS
    # stays within 64 MiB of where it was; the watch keeps up, or ends with an error that says why (events
    # waiting for credit, the kernel's queue), never with a crash or a silent stall.
    import asyncio

    from e2b import AsyncSandbox

    from conftest import space_api
    from test_files import _daemon_hwm_kib

    async def body(s):
        free = int((await s.commands.run("df --output=iavail /home/user | tail -1")).stdout)
        n = min(30000, free - 5000)
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
    # a filesystem-only pause is a stop: the files stay, the processes go, and connect boots it from its disk
    a.files.write("/home/user/fs-kept.txt", "kept by the disk")
    a.commands.run("sleep 1000", background=True)
    assert "sleep 1000" in sh(a, PROCS)
    a.pause(mode="filesystem")
    assert a.get_info().state.value == "paused"
    assert a.sandbox_id in [s.sandbox_id for s in all_items(Sandbox.list(query=SandboxQuery(state=[SandboxState.PAUSED])))]
    a.connect()
    assert a.get_info().state.value == "running"
    assert a.files.read("/home/user/fs-kept.txt") == "kept by the disk"
    assert "sleep 1000" not in sh(a, PROCS)
    # a full one is space's suspend, also when it must find the guest healthy; connect with on_resume "reboot"
    # drops that memory and boots the disk: the process started before it is gone, the file synced is kept (what
    # only the saved memory held is not: E2B's "crash-recovery semantics")
    a.commands.run("sleep 1001", background=True)
    a.files.write("/home/user/fs-kept.txt", "written before a full pause")
    sh(a, "sync")
    a.pause(mode="full", strict=True)
    assert a.get_info().state.value == "paused"
    a.connect(on_resume="reboot")
    assert a.files.read("/home/user/fs-kept.txt") == "written before a full pause"
    assert "sleep 1001" not in sh(a, PROCS)
    # on a running sandbox it is a no-op, as E2B's
    a.commands.run("sleep 1002", background=True)
    a.connect(on_resume="reboot")
    assert "sleep 1002" in sh(a, PROCS)
    a.connect(on_resume="restore")
    assert sh(a, "echo back") == "back\n"
    # a filesystem-only snapshot is refused, saying why
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
    # mode 'filesystem': the timeout pauses it without memory (a stop); connect boots it from its disk
    s = Sandbox.create(TEMPLATE, timeout=8, lifecycle={"on_timeout": {"action": "pause", "mode": "filesystem"}})
    try:
        assert s.get_info().lifecycle["on_timeout"] == "pause"
        s.files.write("/home/user/at-timeout.txt", "kept")
        s.commands.run("sleep 1000", background=True)
        assert wait_state(s, "paused"), s.get_info().state
        s.connect(timeout=120)
        assert s.files.read("/home/user/at-timeout.txt") == "kept"
        assert "sleep 1000" not in sh(s, PROCS)
    finally:
        s.kill()
