# SPDX-License-Identifier: Apache-2.0
"""sbx.files through the Python SDK (sync): envd's filesystem service and /files, as the default user
`user` unless a test says otherwise."""
import base64
import datetime
import gzip
import hashlib
import io
import json
import os
import socket
import struct
import subprocess
import time
import urllib.parse
import urllib.request
import zlib

import pytest
from e2b import FileType, Sandbox
from e2b.exceptions import FileNotFoundException, SandboxException
from e2b.sandbox.filesystem.filesystem import WriteEntry
from e2b.sandbox.filesystem.watch_handle import FilesystemEventType

from conftest import space_api


def test_write_read_text_bytes_stream(sbx):
    info = sbx.files.write("/home/user/t/a.txt", "hello ünïcode\n")
    # 2.21.1 gives the type as "file", newer SDKs as FileType.FILE
    assert (info.name, getattr(info.type, "value", info.type), info.path) == ("a.txt", "file", "/home/user/t/a.txt")
    assert sbx.files.read("/home/user/t/a.txt") == "hello ünïcode\n"
    data = bytes(range(256)) * 10
    sbx.files.write("/home/user/t/b.bin", data)
    assert bytes(sbx.files.read("/home/user/t/b.bin", format="bytes")) == data
    assert b"".join(sbx.files.read("/home/user/t/b.bin", format="stream")) == data
    # an IO object, and an empty file
    sbx.files.write("/home/user/t/io.bin", io.BytesIO(b"from io"))
    assert sbx.files.read("/home/user/t/io.bin") == "from io"
    sbx.files.write("/home/user/t/empty", "")
    assert sbx.files.read("/home/user/t/empty") == ""
    # overwrite
    sbx.files.write("/home/user/t/a.txt", "second")
    assert sbx.files.read("/home/user/t/a.txt") == "second"


def test_octet_stream_write(sbx):
    info = sbx.files.write("/home/user/oct/x.txt", "raw body", use_octet_stream=True)
    assert info.path == "/home/user/oct/x.txt"
    assert sbx.files.read("/home/user/oct/x.txt") == "raw body"
    infos = sbx.files.write_files([WriteEntry(path="oct/y", data=b"y"), WriteEntry(path="oct/z", data="z")],
                                  use_octet_stream=True)
    assert [i.path for i in infos] == ["/home/user/oct/y", "/home/user/oct/z"]


def test_write_many_files_in_one_call(sbx):
    files = [WriteEntry(path=f"/home/user/many/{i}.txt", data=f"file {i}") for i in range(20)]
    infos = sbx.files.write_files(files)
    assert [i.path for i in infos] == [f"/home/user/many/{i}.txt" for i in range(20)]
    for i in (0, 7, 19):
        assert sbx.files.read(f"/home/user/many/{i}.txt") == f"file {i}"


def test_list_depth_and_info(sbx):
    sbx.files.write("/home/user/ls/f1", "12345")
    sbx.files.make_dir("/home/user/ls/d1/d2")
    names = sorted(e.name for e in sbx.files.list("/home/user/ls"))
    assert names == ["d1", "f1"]
    deep = {e.path: e for e in sbx.files.list("/home/user/ls", depth=2)}
    assert set(deep) == {"/home/user/ls/f1", "/home/user/ls/d1", "/home/user/ls/d1/d2"}
    f = deep["/home/user/ls/f1"]
    assert f.type == FileType.FILE and f.size == 5 and f.mode == 0o644
    assert f.permissions == "-rw-r--r--" and f.owner == "user" and f.group == "user"
    assert abs(f.modified_time.timestamp() - time.time()) < 3600 * 24
    d = sbx.files.get_info("/home/user/ls/d1")
    assert d.type == FileType.DIR and d.permissions.startswith("d") and d.name == "d1"
    with pytest.raises(FileNotFoundException):
        sbx.files.list("/home/user/nope")


def utc_seconds(dt):
    """The SDK's modified_time is protobuf's ToDatetime(): naive, in UTC."""
    return (dt.replace(tzinfo=datetime.timezone.utc) if dt.tzinfo is None else dt).timestamp()


def test_modified_time_is_now(sbx):
    # a file written through E2B, and one made in the sandbox, carry the time they were made (template files
    # keep the reproducible build's fixed time)
    sbx.files.write("/home/user/mt/written.txt", "now")
    sbx.commands.run("echo made > /home/user/mt/made.txt")
    now = time.time()
    info = sbx.files.get_info("/home/user/mt/written.txt")
    assert abs(utc_seconds(info.modified_time) - now) < 60, info.modified_time
    listed = {e.name: e for e in sbx.files.list("/home/user/mt")}
    for name in ("written.txt", "made.txt"):
        assert abs(utc_seconds(listed[name].modified_time) - now) < 60, (name, listed[name].modified_time)


def test_exists_make_dir_rename_remove(sbx):
    assert sbx.files.exists("/etc/passwd")
    assert not sbx.files.exists("/home/user/nothing-here")
    assert sbx.files.make_dir("/home/user/mk/a/b") is True
    assert sbx.files.make_dir("/home/user/mk/a/b") is False
    sbx.files.write("/home/user/mk/f", "x")
    moved = sbx.files.rename("/home/user/mk/f", "/home/user/mk/g")
    assert moved.path == "/home/user/mk/g" and moved.name == "g"
    assert not sbx.files.exists("/home/user/mk/f")
    sbx.files.remove("/home/user/mk")
    assert not sbx.files.exists("/home/user/mk")
    with pytest.raises(FileNotFoundException):
        sbx.files.read("/home/user/mk/g")
    with pytest.raises(FileNotFoundException):
        sbx.files.get_info("/home/user/mk")


def test_users_and_relative_paths(sbx):
    info = sbx.files.write("rel/r.txt", "relative")
    assert info.path == "/home/user/rel/r.txt"
    assert sbx.files.get_info("/home/user/rel/r.txt").owner == "user"
    assert sbx.files.get_info("/home/user/rel").owner == "user"
    # user may not write into /root; root may, and what it writes is root's
    with pytest.raises(SandboxException):
        sbx.files.write("/root/denied.txt", "no")
    with pytest.raises(SandboxException):
        sbx.files.make_dir("/root/denied")
    info = sbx.files.write("/root/ok.txt", "yes", user="root")
    assert info.path == "/root/ok.txt"
    assert sbx.files.get_info("/root/ok.txt", user="root").owner == "root"
    assert sbx.files.read("/root/ok.txt", user="root") == "yes"
    # a relative path of root's is below /root
    assert sbx.files.write("rootrel.txt", "r", user="root").path == "/root/rootrel.txt"


def _connect_frames(data):
    frames = []
    while len(data) >= 5:
        flags, n = struct.unpack(">BI", data[:5])
        if len(data) < 5 + n:
            break
        frames.append((flags, json.loads(data[5:5 + n])))
        data = data[5 + n:]
    return frames


def test_unread_watch_stream_ends_bounded(sbx):
    # what a hostile client tries: a WatchDir stream it never reads, over a directory that churns (1200 files
    # with long names, all of them growing in a loop). The daemon holds at most 1 MiB of unread events, then
    # ends the stream with resource_exhausted; the kernel's socket buffers hold a few MiB more before that.
    name = "n" * 240
    sbx.commands.run(f"mkdir -p /home/user/churn && cd /home/user/churn && for i in $(seq 1200); do : > {name}$i; done")
    u = urllib.parse.urlparse(os.environ.get("E2B_SANDBOX_URL") or os.environ["SPACE_TEST_API_URL"])
    body = json.dumps({"path": "/home/user/churn"}).encode()
    body = struct.pack(">BI", 0, len(body)) + body
    head = (f"POST /filesystem.Filesystem/WatchDir HTTP/1.1\r\nHost: {u.netloc}\r\n"
            f"E2b-Sandbox-Id: {sbx.sandbox_id}\r\nX-Access-Token: {sbx._envd_access_token}\r\n"
            f"Content-Type: application/connect+json\r\nConnect-Protocol-Version: 1\r\nConnection: close\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect((u.hostname, u.port))
    s.sendall(head + body)
    churn = sbx.commands.run("cd /home/user/churn; while :; do truncate -s +1 *; done", background=True)
    try:
        time.sleep(18)  # about 1300 events a second here: the cap and the buffers fill in about 14 s
    finally:
        churn.kill()
    s.settimeout(30)
    data = b""
    while chunk := s.recv(1 << 16):
        data += chunk
    s.close()
    head, raw = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200"), head
    if b"transfer-encoding: chunked" in head.lower():
        out = b""
        while raw:
            size, raw = raw.split(b"\r\n", 1)
            if int(size, 16) == 0:
                break
            out, raw = out + raw[:int(size, 16)], raw[int(size, 16) + 2:]
        raw = out
    frames = _connect_frames(raw)
    assert frames and frames[-1][0] == 2, (len(frames), frames[-1:])
    assert frames[-1][1]["error"]["code"] == "resource_exhausted", frames[-1]
    assert sum(1 for f in frames if "filesystem" in f[1]) > 1000
    sbx.commands.run("rm -rf /home/user/churn")


def test_watch_dir_polled(sbx):
    sbx.files.make_dir("/home/user/w")
    h = sbx.files.watch_dir("/home/user/w")
    try:
        sbx.files.write("/home/user/w/new.txt", "data")
        seen = []
        for _ in range(30):
            seen += h.get_new_events()
            if any(e.name == "new.txt" and e.type == FilesystemEventType.WRITE for e in seen):
                break
            time.sleep(0.2)
        assert any(e.name == "new.txt" and e.type == FilesystemEventType.CREATE for e in seen), seen
        assert any(e.name == "new.txt" and e.type == FilesystemEventType.WRITE for e in seen), seen
        sbx.files.remove("/home/user/w/new.txt")
        for _ in range(30):
            ev = h.get_new_events()
            if any(e.name == "new.txt" and e.type == FilesystemEventType.REMOVE for e in ev):
                break
            time.sleep(0.2)
        else:
            pytest.fail("no REMOVE event")
    finally:
        h.stop()
    with pytest.raises(SandboxException):
        h.get_new_events()


def _events_until(h, done, seconds=20):
    """get_new_events() until done(events so far) or seconds passed: the events."""
    seen = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        seen += h.get_new_events()
        if done(seen):
            break
        time.sleep(0.2)
    return seen


def _has(seen, name, kind):
    return any(e.name == name and e.type == kind for e in seen)


def test_watch_sees_a_write_right_after_it_returns(sbx):
    # issue 26: inotify is armed in the guest before watch_dir returns, so the very next write is seen, and a
    # write in the guest, a rename and a remove are what envd (fsnotify) says they are
    sbx.files.make_dir("/home/user/wn")
    h = sbx.files.watch_dir("/home/user/wn")
    try:
        sbx.commands.run("echo one > /home/user/wn/a.txt")
        seen = _events_until(h, lambda s: _has(s, "a.txt", FilesystemEventType.WRITE))
        assert [(e.name, e.type) for e in seen][:2] == [("a.txt", FilesystemEventType.CREATE),
                                                         ("a.txt", FilesystemEventType.WRITE)], seen
        sbx.commands.run("mv /home/user/wn/a.txt /home/user/wn/b.txt && chmod 600 /home/user/wn/b.txt && "
                         "rm /home/user/wn/b.txt")
        seen = _events_until(h, lambda s: _has(s, "b.txt", FilesystemEventType.REMOVE))
        # a rename is RENAME of the old name and CREATE of the new one, as fsnotify's
        assert [(e.name, e.type) for e in seen] == [("a.txt", FilesystemEventType.RENAME),
                                                     ("b.txt", FilesystemEventType.CREATE),
                                                     ("b.txt", FilesystemEventType.CHMOD),
                                                     ("b.txt", FilesystemEventType.REMOVE)], seen
        # an upload through /files is CREATE and WRITE of its name (its temporary file is not shown)
        sbx.files.write("/home/user/wn/up.txt", "uploaded")
        seen = _events_until(h, lambda s: _has(s, "up.txt", FilesystemEventType.WRITE))
        assert [(e.name, e.type) for e in seen] == [("up.txt", FilesystemEventType.CREATE),
                                                     ("up.txt", FilesystemEventType.WRITE)], seen
    finally:
        h.stop()
    # every time, not by luck: ten watches, each with the write at once
    for i in range(10):
        h = sbx.files.watch_dir("/home/user/wn")
        try:
            sbx.commands.run(f"echo {i} > /home/user/wn/n{i}")
            assert _has(_events_until(h, lambda s: _has(s, f"n{i}", FilesystemEventType.WRITE), 10),
                        f"n{i}", FilesystemEventType.WRITE), i
        finally:
            h.stop()


def test_watch_recursive_follows_new_directories(sbx):
    sbx.files.make_dir("/home/user/wr/old")
    h = sbx.files.watch_dir("/home/user/wr", recursive=True)
    try:
        # made after the watch, filled at once: the new directories are watched as they appear, and what
        # they held before that is reported too
        sbx.commands.run("mkdir -p /home/user/wr/new/deeper && echo x > /home/user/wr/new/deeper/f && "
                         "echo y > /home/user/wr/old/g")
        seen = _events_until(h, lambda s: _has(s, "new/deeper/f", FilesystemEventType.CREATE) and
                             _has(s, "old/g", FilesystemEventType.WRITE))
        for name, kind in (("new", FilesystemEventType.CREATE), ("new/deeper", FilesystemEventType.CREATE),
                           ("new/deeper/f", FilesystemEventType.CREATE), ("old/g", FilesystemEventType.CREATE),
                           ("old/g", FilesystemEventType.WRITE)):
            assert _has(seen, name, kind), (name, kind, seen)
        sbx.commands.run("echo z >> /home/user/wr/new/deeper/f && rm -r /home/user/wr/new")
        seen = _events_until(h, lambda s: _has(s, "new", FilesystemEventType.REMOVE))
        assert _has(seen, "new/deeper/f", FilesystemEventType.WRITE), seen
        assert _has(seen, "new/deeper/f", FilesystemEventType.REMOVE), seen
    finally:
        h.stop()


def test_watch_limits_end_clearly(sbx):
    # what a hostile guest tries first: a storm of files under a watch nobody reads, and a tree too wide to
    # watch. The daemon keeps at most 4096 events of a polled watcher, then the watch ends with
    # resource_exhausted; a recursive watch of more directories than the agent watches ends with
    # limit_exceeded (or is refused at once when the tree is that big already). The daemon answers on.
    sbx.files.make_dir("/home/user/storm")
    h = sbx.files.watch_dir("/home/user/storm")
    r = sbx.commands.run("cd /home/user/storm && seq 1 20000 | xargs touch && ls | wc -l", timeout=300)
    assert r.stdout.strip() == "20000"
    with pytest.raises(SandboxException) as ei:
        for _ in range(10):
            h.get_new_events()
    assert "resource_exhausted" in str(ei.value).lower() or "4096 events" in str(ei.value), ei.value
    sbx.commands.run("rm -rf /home/user/storm", timeout=300)

    sbx.files.make_dir("/home/user/wide")
    h = sbx.files.watch_dir("/home/user/wide", recursive=True)
    # read as they come, so that it is the directories that run out, not the events kept
    mk = sbx.commands.run("cd /home/user/wide && seq 1 4200 | xargs mkdir", background=True, timeout=300)
    with pytest.raises(SandboxException) as ei:
        _events_until(h, lambda s: False, 120)
    assert mk.wait().exit_code == 0
    assert "too many directories" in str(ei.value), ei.value
    with pytest.raises(SandboxException) as ei:
        sbx.files.watch_dir("/home/user/wide", recursive=True)
    assert "too many directories" in str(ei.value), ei.value
    # not recursive, the same directory is one watch and fine
    sbx.files.watch_dir("/home/user/wide").stop()
    assert sbx.files.exists("/home/user/wide/4200")
    sbx.commands.run("rm -rf /home/user/wide", timeout=300)


def _daemon_hwm_kib():
    status, v = space_api("GET", "/v1/version")
    with open(f"/proc/{v['pid']}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def test_50mib_round_trip_bounded(sbx, tmp_path):
    blob = os.urandom(1024 * 1024) * 50
    want = hashlib.sha256(blob).hexdigest()
    src = tmp_path / "big.bin"
    src.write_bytes(blob)
    before = _daemon_hwm_kib()
    with open(src, "rb") as f:
        sbx.files.write("/home/user/big.bin", f)
    got = hashlib.sha256()
    for chunk in sbx.files.read("/home/user/big.bin", format="stream"):
        got.update(chunk)
    assert got.hexdigest() == want
    assert sbx.files.get_info("/home/user/big.bin").size == len(blob)
    # the daemon streamed it: its peak memory did not grow by the file's size
    assert _daemon_hwm_kib() - before < 40 * 1024
    sbx.files.remove("/home/user/big.bin")


def test_signed_urls_with_curl(sbx, tmp_path):
    sbx.files.write("/home/user/dl.txt", "download me")
    url = sbx.download_url("/home/user/dl.txt")
    assert "signature=" in url
    out = subprocess.run(["curl", "-sf", url], capture_output=True, check=True).stdout
    assert out == b"download me"
    # an expiring one, and a tampered one
    url = sbx.download_url("/home/user/dl.txt", use_signature_expiration=60)
    assert subprocess.run(["curl", "-sf", url], capture_output=True).stdout == b"download me"
    bad = url.replace("dl.txt", "other.txt")
    assert subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", bad],
                          capture_output=True).stdout == b"401"
    src = tmp_path / "up.txt"
    src.write_text("uploaded")
    url = sbx.upload_url("/home/user/up.txt")
    subprocess.run(["curl", "-sf", "-F", f"file=@{src}", url], capture_output=True, check=True)
    assert sbx.files.read("/home/user/up.txt") == "uploaded"


def _post_signed(url, body, headers):
    req = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_signed_upload_writes_its_path_as_its_user(sbx):
    # what a link holder tries first: a Basic header naming root, and a second part naming another file
    url = sbx.upload_url("notes.txt")
    root = {"Authorization": "Basic " + base64.b64encode(b"root:").decode()}
    body, headers = _multipart(b"notes.txt", b"mine")
    st, out = _post_signed(url, body, {**headers, **root})
    assert st == 200, out
    owner = sbx.commands.run("stat -c %U /home/user/notes.txt").stdout.strip()
    assert owner == "user"
    b = b"XyZbOuNdArY"
    two = (b"--" + b + b'\r\nContent-Disposition: form-data; name="file"; filename="notes.txt"\r\n\r\nok\r\n'
           b"--" + b + b'\r\nContent-Disposition: form-data; name="file"; filename="/etc/profile.d/zz.sh"\r\n\r\n'
           b"echo owned\r\n--" + b + b"--\r\n")
    st, out = _post_signed(url, two, {**headers, **root})
    assert st == 403 and b"signed for" in out, (st, out)
    assert not sbx.files.exists("/etc/profile.d/zz.sh")
    assert sbx.commands.run("test ! -e /etc/profile.d/zz.sh", user="root").exit_code == 0
    # a signed URL must name its file: signed for no path, it would let its parts name any
    raw = hashlib.sha256(f":write::{sbx._envd_access_token}".encode()).digest()
    sig = "v1_" + base64.b64encode(raw).decode().rstrip("=")
    st, out = _post_signed(url.split("?")[0] + "?signature=" + urllib.parse.quote(sig), body, headers)
    assert st == 400 and b"must name the file" in out, (st, out)


def _raw_files(sbx, method, query, headers=None, body=None):
    """/files with the sandbox's token, around the SDK."""
    req = urllib.request.Request(f"{sbx.envd_api_url}/files?{query}", data=body, method=method,
                                 headers={"X-Access-Token": sbx._envd_access_token,
                                          "E2b-Sandbox-Id": sbx.sandbox_id, **(headers or {})})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _multipart(filename, data):
    b = b"XyZbOuNdArY"
    body = (b"--" + b + b'\r\nContent-Disposition: form-data; name="file"; filename="' + filename +
            b'"\r\nContent-Type: application/octet-stream\r\n\r\n' + data + b"\r\n--" + b + b"--\r\n")
    return body, {"Content-Type": "multipart/form-data; boundary=XyZbOuNdArY"}


def test_gzip_uploads(sbx):
    # the SDK's own gzip, multipart and octet-stream
    data = b"gz" * 100000
    sbx.files.write("/home/user/gz/m.bin", data, gzip=True)
    sbx.files.write("/home/user/gz/o.bin", data, gzip=True, use_octet_stream=True)
    assert sbx.files.read("/home/user/gz/m.bin", format="bytes") == data
    assert sbx.files.read("/home/user/gz/o.bin", format="bytes") == data
    # a body cut short
    st, _ = _raw_files(sbx, "POST", "path=/tmp/cut", {"Content-Type": "application/octet-stream",
                                                      "Content-Encoding": "gzip"}, gzip.compress(b"x" * 9999)[:-12])
    assert st == 400


def test_gzip_bomb_stops_at_the_disk(sbx):
    # 4 GiB of zeros in about 4 MiB, more than the sandbox's whole disk: the guest's disk fills first (507), or
    # the daemon stops inflating at the disk's size (413); either way in bounded memory, and nothing is left
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = bytes(1 << 20)
    bomb = b"".join(z.compress(chunk) for _ in range(4096)) + z.flush()
    before = _daemon_hwm_kib()
    st, out = _raw_files(sbx, "POST", "path=/tmp/bomb", {"Content-Type": "application/octet-stream",
                                                         "Content-Encoding": "gzip"}, bomb)
    assert (st, b"inflates to more than the sandbox's disk" in out) in ((413, True), (507, False)), out
    assert b"No space left on device" in out or st == 413
    assert _daemon_hwm_kib() - before < 64 * 1024
    assert not sbx.files.exists("/tmp/bomb")
    assert sbx.commands.run("df --output=avail -B1M / | tail -1").exit_code == 0


def test_hostile_uploads(sbx):
    # traversal is only a path in the guest
    body, h = _multipart(b"/home/user/../user/trav.txt", b"t")
    st, out = _raw_files(sbx, "POST", "", h, body)
    assert st == 200, out
    assert sbx.files.read("/home/user/trav.txt") == "t"
    # control characters and overlong names are refused
    for name in (b"/tmp/a\x01b", b"/tmp/new\nline", b"/tmp/" + b"x" * 5000):
        body, h = _multipart(name, b"x")
        st, out = _raw_files(sbx, "POST", "", h, body)
        assert st == 400, (name[:20], st, out)
    # a body that is not multipart at all, a raw upload without a path
    st, _ = _raw_files(sbx, "POST", "", {"Content-Type": "text/plain"}, b"x")
    assert st == 400
    st, _ = _raw_files(sbx, "POST", "", {"Content-Type": "application/octet-stream"}, b"x")
    assert st == 400
    # a broken gzip body fails with 400; an unknown encoding with 501
    st, _ = _raw_files(sbx, "POST", "path=/tmp/gz", {"Content-Type": "application/octet-stream",
                                                     "Content-Encoding": "gzip"}, b"\x1f\x8b\x08\x00garbage")
    assert st == 400
    st, _ = _raw_files(sbx, "POST", "path=/tmp/br", {"Content-Type": "application/octet-stream",
                                                     "Content-Encoding": "br"}, b"x")
    assert st == 501
    assert not sbx.files.exists("/tmp/br")
    # NUL in ?path=
    st, _ = _raw_files(sbx, "GET", "path=/etc/pass%00wd")
    assert st == 400
