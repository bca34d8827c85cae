# SPDX-License-Identifier: Apache-2.0
"""sbx.files through AsyncSandbox (its own HTTP client): the same service, and WatchDir's stream, which only
the async SDK (and JS) use. Plain test functions around asyncio.run: no pytest plugin needed."""
import asyncio
import os

import pytest
from e2b import AsyncSandbox, FileType
from e2b.exceptions import FileNotFoundException
from e2b.sandbox.filesystem.filesystem import WriteEntry
from e2b.sandbox.filesystem.watch_handle import FilesystemEventType

from conftest import TEMPLATE


async def _with_sandbox(fn):
    s = await AsyncSandbox.create(TEMPLATE, timeout=300)
    try:
        await fn(s)
    finally:
        await s.kill()


def test_async_files_round_trip():
    async def body(s):
        info = await s.files.write("/home/user/as/a.txt", "async text")
        assert info.path == "/home/user/as/a.txt"
        assert await s.files.read("/home/user/as/a.txt") == "async text"
        data = os.urandom(300_000)
        await s.files.write("as/b.bin", data)
        assert bytes(await s.files.read("as/b.bin", format="bytes")) == data
        chunks = [c async for c in await s.files.read("as/b.bin", format="stream")]
        assert b"".join(chunks) == data
        infos = await s.files.write_files([WriteEntry(path="as/m1", data="1"), WriteEntry(path="as/m2", data="2")])
        assert [i.name for i in infos] == ["m1", "m2"]
        await s.files.write("as/o.txt", "octet", use_octet_stream=True)
        assert await s.files.read("as/o.txt") == "octet"
        entries = {e.name: e for e in await s.files.list("/home/user/as")}
        assert set(entries) == {"a.txt", "b.bin", "m1", "m2", "o.txt"}
        assert entries["b.bin"].size == 300_000 and entries["b.bin"].type == FileType.FILE
        assert await s.files.exists("/home/user/as/m1")
        assert await s.files.make_dir("/home/user/as/d") is True
        assert await s.files.make_dir("/home/user/as/d") is False
        await s.files.rename("/home/user/as/m1", "/home/user/as/d/m1")
        assert (await s.files.get_info("/home/user/as/d/m1")).owner == "user"
        await s.files.remove("/home/user/as")
        assert not await s.files.exists("/home/user/as")
        with pytest.raises(FileNotFoundException):
            await s.files.read("/home/user/as/a.txt")

    asyncio.run(_with_sandbox(body))


def test_async_watch_dir_stream():
    async def body(s):
        await s.files.make_dir("/home/user/wd/sub")
        seen = []
        got = asyncio.Event()

        def on_event(e):
            seen.append(e)
            if e.name == "f.txt" and e.type == FilesystemEventType.WRITE:
                got.set()

        h = await s.files.watch_dir("/home/user/wd", on_event)
        await s.files.write("/home/user/wd/f.txt", "watched")
        await asyncio.wait_for(got.wait(), 10)
        assert any(e.name == "f.txt" and e.type == FilesystemEventType.CREATE for e in seen)
        # not recursive: below sub/ is not this watch's business
        await s.files.write("/home/user/wd/sub/deep.txt", "x")
        await asyncio.sleep(1)
        assert not any(e.name.endswith("deep.txt") for e in seen)
        await h.stop()

        # recursive: names are relative to the watched directory
        seen.clear()
        got2 = asyncio.Event()

        def on_deep(e):
            seen.append(e)
            if e.name == "sub/deep2.txt":
                got2.set()

        h = await s.files.watch_dir("/home/user/wd", on_deep, recursive=True)
        await s.files.write("/home/user/wd/sub/deep2.txt", "y")
        await asyncio.wait_for(got2.wait(), 10)
        await h.stop()

        with pytest.raises(FileNotFoundException):
            await s.files.watch_dir("/home/user/not-there", on_event)

    asyncio.run(_with_sandbox(body))
