# SPDX-License-Identifier: Apache-2.0
"""E2B's Volume API (e2b 2.64 and later; issue 26, stage 1) on the daemon's volumes: create, list, get_info,
connect, destroy on the control plane, and every file operation of the volume content API (list with depth,
make_dir, get_info, exists, update_metadata, read_file as text, bytes and a stream, write_file from str, bytes
and a file object, remove), which the SDK sends to E2B_VOLUME_API_URL with the volume's token. The quota's
refusal as the SDK raises it (and nothing left behind), files of 3 MiB streamed in and read back, a wrong token and another volume's token, the token on
a route it does not open. volume_mounts (stage 2): a volume written by one sandbox is read by the next, by the
content API and by a fork, cannot be destroyed while mounted, and its quota is ENOSPC in the guest. The pinned
SDKs have no Volume: t29 leaves this file to t45."""
import hashlib
import io
import os
import uuid

import pytest
from e2b import Sandbox, Volume
from e2b.exceptions import (AuthenticationException, SandboxException, VolumeException, VolumeNotFoundException,
                            VolumePathNotFoundException)

from conftest import TEMPLATE, space_api


def fresh_name():
    return f"py-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def vol():
    v = Volume.create(fresh_name())
    yield v
    Volume.destroy(v.volume_id)


def test_create_list_get_destroy():
    name = fresh_name()
    v = Volume.create(name)
    try:
        assert v.name == name and v.volume_id.startswith("vol-") and len(v.token) == 64
        assert any(i.volume_id == v.volume_id and i.name == name for i in Volume.list())
        info = Volume.get_info(v.volume_id)
        assert (info.volume_id, info.name, info.token) == (v.volume_id, name, v.token)
        assert Volume.connect(v.volume_id).name == name
        with pytest.raises(VolumeException, match="already a volume named"):
            Volume.create(name)
        with pytest.raises(VolumeException, match="not a volume name"):
            Volume.create("../x")
        status, body = space_api("GET", f"/v1/volumes/{name}")
        assert status == 200 and body["id"] == v.volume_id and body["quota"] > 0 and body["usage"] == 0
    finally:
        assert Volume.destroy(v.volume_id) is True
    assert Volume.destroy(v.volume_id) is False, "a second destroy finds nothing"
    with pytest.raises(VolumeNotFoundException):
        Volume.get_info(v.volume_id)
    assert space_api("GET", f"/v1/volumes/{name}")[0] == 404


def test_file_operations(vol):
    e = vol.write_file("/docs/a.txt", "hello", mode=0o640, uid=1000, gid=1000)
    assert (e.name, e.type.value, e.path, e.size, e.mode, e.uid, e.gid) == \
        ("a.txt", "file", "/docs/a.txt", 5, 0o640, 1000, 1000)
    assert e.mtime.year >= 2024 and e.target is None
    assert vol.read_file("/docs/a.txt") == "hello"
    assert vol.read_file("docs/a.txt", format="bytes") == b"hello"
    assert b"".join(vol.read_file("/docs/a.txt", format="stream")) == b"hello"

    d = vol.make_dir("/docs/sub/deep", force=True)
    assert (d.type.value, d.path, d.mode) == ("directory", "/docs/sub/deep", 0o755)
    with pytest.raises(VolumeException, match="409"):
        vol.make_dir("/docs/sub")
    with pytest.raises(VolumePathNotFoundException):
        vol.make_dir("/nowhere/x")
    assert [x.path for x in vol.list("/docs")] == ["/docs/a.txt", "/docs/sub"]
    assert [x.path for x in vol.list("/docs", depth=3)] == ["/docs/a.txt", "/docs/sub", "/docs/sub/deep"]
    assert vol.get_info("/docs/a.txt").size == 5
    assert vol.exists("/docs/a.txt") and not vol.exists("/docs/nope")

    u = vol.update_metadata("/docs/a.txt", mode=0o600, uid=0)
    assert (u.mode, u.uid, u.gid) == (0o600, 0, 1000), "what is left out is kept"

    vol.write_file("/docs/a.txt", b"replaced")
    assert vol.read_file("/docs/a.txt") == "replaced"
    assert vol.get_info("/docs/a.txt").mode == 0o600, "a replace keeps the metadata"
    with pytest.raises(VolumeException, match="409"):
        vol.write_file("/docs/a.txt", "x", force=False)
    vol.write_file("/big.bin", io.BytesIO(b"x" * 300000))
    assert vol.get_info("/big.bin").size == 300000
    assert vol.read_file("/big.bin", format="bytes") == b"x" * 300000

    vol.remove("/docs")
    with pytest.raises(VolumePathNotFoundException):
        vol.get_info("/docs")
    with pytest.raises(VolumePathNotFoundException):
        vol.read_file("/docs/a.txt")
    with pytest.raises(VolumePathNotFoundException):
        vol.remove("/docs")
    with pytest.raises(VolumeException, match="'..'"):
        vol.read_file("/../../etc/passwd")
    assert [x.path for x in vol.list("/")] == ["/big.bin"]


def test_large_files_are_streamed(vol):
    """Over the 1 MiB of a JSON body: the content is streamed into the volume, bounded by its quota only."""
    data = os.urandom(3 * 1024 * 1024)
    e = vol.write_file("/big/3m.bin", data)
    assert (e.path, e.size) == ("/big/3m.bin", len(data))
    got = vol.read_file("/big/3m.bin", format="bytes")
    assert hashlib.sha256(got).hexdigest() == hashlib.sha256(data).hexdigest()
    vol.write_file("/big/3m-obj.bin", io.BytesIO(data))
    assert vol.read_file("/big/3m-obj.bin", format="bytes") == data
    assert space_api("GET", f"/v1/volumes/{vol.volume_id}")[1]["usage"] == 2 * len(data)


def test_quota_refuses_a_large_write_whole():
    name = fresh_name()
    status, body = space_api("POST", "/v1/volumes", {"name": name, "quota": 2 * 1024 * 1024})
    assert status == 201
    v = Volume.connect(body["id"])
    try:
        with pytest.raises(VolumeException, match=r"507.*quota of 2097152 bytes"):
            v.write_file("/big", os.urandom(3 * 1024 * 1024))
        assert not v.exists("/big") and v.list("/") == []
        assert space_api("GET", f"/v1/volumes/{name}")[1]["usage"] == 0
    finally:
        Volume.destroy(v.volume_id)


def test_quota_refuses_a_write_whole():
    name = fresh_name()
    status, body = space_api("POST", "/v1/volumes", {"name": name, "quota": 1000})
    assert status == 201
    v = Volume.connect(body["id"])
    try:
        v.write_file("/a", b"a" * 600)
        with pytest.raises(VolumeException, match=r"507.*quota of 1000 bytes"):
            v.write_file("/b", b"b" * 600)
        assert not v.exists("/b"), "nothing is left of a refused write"
        assert [x.path for x in v.list("/")] == ["/a"]
        assert space_api("GET", f"/v1/volumes/{name}")[1]["usage"] == 600
    finally:
        Volume.destroy(v.volume_id)


def test_tokens_open_their_volume_only(vol):
    vol.write_file("/secret.txt", "mine")
    wrong = Volume(vol.volume_id, vol.name, token="0" * 64)
    with pytest.raises(AuthenticationException):
        wrong.read_file("/secret.txt")
    other = Volume.create(fresh_name())
    try:
        theirs = Volume(vol.volume_id, vol.name, token=other.token)
        with pytest.raises(VolumeException, match="403"):
            theirs.read_file("/secret.txt")
        with pytest.raises(VolumeException, match="403"):
            theirs.write_file("/planted.txt", "x")
        assert not vol.exists("/planted.txt")
    finally:
        Volume.destroy(other.volume_id)
    # the token is no API key: it opens no control-plane route
    with pytest.raises(AuthenticationException):
        Volume.list(api_key=vol.token)
    with pytest.raises(AuthenticationException):
        Sandbox.list(api_key=vol.token).next_items()


def sh(sbx, cmd):
    return sbx.commands.run(cmd, timeout=120).stdout


def test_volume_mounts_are_checked(vol):
    before = len(space_api("GET", "/v1/sandboxes")[1]["sandboxes"])
    with pytest.raises(SandboxException, match="no volume 'py-nope-x'"):
        Sandbox.create(TEMPLATE, timeout=30, volume_mounts={"/data": "py-nope-x"})
    with pytest.raises(SandboxException, match="cannot be mounted at /proc/x"):
        Sandbox.create(TEMPLATE, timeout=30, volume_mounts={"/proc/x": vol})
    assert len(space_api("GET", "/v1/sandboxes")[1]["sandboxes"]) == before, "no sandbox was made"


def test_a_volume_written_by_one_sandbox_is_read_by_the_next(vol):
    """The issue's scenario: one sandbox writes, is killed; the next mounts the volume elsewhere and reads it; so
    do the volume content API and a fork; the volume cannot be destroyed while mounted."""
    a = Sandbox.create(TEMPLATE, timeout=180, volume_mounts={"/data": vol})
    try:
        sh(a, "mkdir -p /data/out && echo from-a > /data/out/a.txt && chown -R user: /data/out 2>/dev/null; true")
        a.files.write("/data/out/sdk.txt", "written-through-envd")
        info = Sandbox.get_info(a.sandbox_id)
        assert [(m["name"], m["path"]) for m in info.volume_mounts] == [(vol.name, "/data")]
    finally:
        a.kill()
    assert vol.read_file("/out/a.txt") == "from-a\n", "the volume content API reads what the sandbox wrote"
    vol.write_file("/out/api.txt", "from-api")
    b = Sandbox.create(TEMPLATE, timeout=180, volume_mounts={"/mnt/v": vol.name})
    try:
        assert sh(b, "cat /mnt/v/out/a.txt /mnt/v/out/api.txt") == "from-a\nfrom-api"
        assert b.files.read("/mnt/v/out/sdk.txt") == "written-through-envd"
        with pytest.raises(VolumeException, match="mounted in 1 sandbox \\(" + b.sandbox_id):
            Volume.destroy(vol.volume_id)
        if hasattr(b, "fork"):
            (child,) = b.fork(count=1, timeout=120)
            try:
                sh(child, "echo from-fork > /mnt/v/out/fork.txt")
                assert sh(b, "cat /mnt/v/out/fork.txt") == "from-fork\n", "a fork keeps the mount, on the same volume"
            finally:
                child.kill()
    finally:
        b.kill()


def test_quota_is_enospc_inside_the_guest():
    name = fresh_name()
    status, body = space_api("POST", "/v1/volumes", {"name": name, "quota": 1024 * 1024})
    assert status == 201
    sbx = Sandbox.create(TEMPLATE, timeout=180, volume_mounts={"/q": name})
    try:
        r = sbx.commands.run("dd if=/dev/zero of=/q/fill bs=65536 count=32; echo rc=$?", timeout=120)
        assert "No space left on device" in r.stdout + r.stderr and "rc=1" in r.stdout, (r.stdout, r.stderr)
        usage = space_api("GET", f"/v1/volumes/{name}")[1]["usage"]
        assert usage <= 1024 * 1024, usage
        assert "1024" in sh(sbx, "df -k /q | tail -n1"), "statfs shows the quota"
    finally:
        sbx.kill()
        Volume.destroy(body["id"])
