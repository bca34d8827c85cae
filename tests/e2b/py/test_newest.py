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
