# SPDX-License-Identifier: Apache-2.0
"""E2B's control plane through the Python SDK's AsyncSandbox: the same routes as test_sandboxes.py, driven by the
async client (httpx.AsyncClient), each test one asyncio.run."""
import asyncio
import datetime
import os
import uuid

import pytest
from e2b import AsyncSandbox, NotFoundException, SandboxException, SandboxQuery, SandboxState

from conftest import TEMPLATE, space_api


async def sh(sbx, cmd):
    """A command's stdout (see test_sandboxes.sh: SPACE_E2B_NATIVE_EXEC=1 uses spacectl)."""
    if os.environ.get("SPACE_E2B_NATIVE_EXEC") == "1":
        p = await asyncio.create_subprocess_exec(os.environ["SPACECTL"], "exec", sbx.sandbox_id, "--", "bash",
                                                 "-c", cmd, stdout=asyncio.subprocess.PIPE)
        out, _ = await asyncio.wait_for(p.communicate(), 60)
        assert p.returncode == 0
        return out.decode()
    return (await sbx.commands.run(cmd)).stdout


def test_async_create_info_list_kill():
    async def main():
        run = uuid.uuid4().hex
        s = await AsyncSandbox.create(TEMPLATE, timeout=120, envs={"A": "1"}, metadata={"run": run})
        try:
            assert await sh(s, "echo $A") == "1\n"
            info = await s.get_info()
            assert info.state == SandboxState.RUNNING and info.metadata == {"run": run}
            listed = await AsyncSandbox.list(query=SandboxQuery(metadata={"run": run})).next_items()
            assert [i.sandbox_id for i in listed] == [s.sandbox_id]
            await s.set_timeout(240)
            left = ((await s.get_info()).end_at - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
            assert 220 <= left <= 245
        finally:
            assert await s.kill() is True
        assert await AsyncSandbox.kill(s.sandbox_id) is False
        with pytest.raises(NotFoundException):
            await AsyncSandbox.get_info(s.sandbox_id)

    asyncio.run(main())


def test_async_pause_connect():
    async def main():
        s = await AsyncSandbox.create(TEMPLATE, timeout=300)
        try:
            await sh(s, "echo async > /tmp/a.txt")
            await s.pause()
            assert (await s.get_info()).state == SandboxState.PAUSED
            # the 409, as the SDK takes it: 2.21.1 returns the id, newer SDKs False
            assert await AsyncSandbox.pause(s.sandbox_id) in (s.sandbox_id, False)
            again = await AsyncSandbox.connect(s.sandbox_id)
            assert (await again.get_info()).state == SandboxState.RUNNING
            assert await sh(again, "cat /tmp/a.txt") == "async\n"
            status, native = space_api("GET", f"/v1/sandboxes/{s.sandbox_id}")
            assert status == 200 and native["state"] == "running"
        finally:
            await s.kill()

    asyncio.run(main())


def test_async_metrics_and_snapshot():
    async def main():
        s = await AsyncSandbox.create(TEMPLATE, timeout=300)
        snap = None
        try:
            metrics = await s.get_metrics()
            assert len(metrics) == 1 and metrics[0].cpu_count == 1
            assert 0 < metrics[0].mem_used <= metrics[0].mem_total <= (await s.get_info()).memory_mb * 1024 * 1024
            await sh(s, "echo forked > /tmp/f.txt")
            snap = await s.create_snapshot()
            assert snap.snapshot_id.startswith("cp-") and snap.names == []
            listed = await AsyncSandbox.list_snapshots(sandbox_id=s.sandbox_id).next_items()
            assert [x.snapshot_id for x in listed] == [snap.snapshot_id]
            fork = await AsyncSandbox.create(snap.snapshot_id, timeout=120)
            try:
                assert await sh(fork, "cat /tmp/f.txt") == "forked\n"
            finally:
                await fork.kill()
            assert await AsyncSandbox.delete_snapshot(snap.snapshot_id) is True
            snap = None
        finally:
            await s.kill()
            if snap:
                await AsyncSandbox.delete_snapshot(snap.snapshot_id)

    asyncio.run(main())


def test_async_errors():
    async def main():
        with pytest.raises(SandboxException, match="does not exist"):
            await AsyncSandbox.create("no-such-template", timeout=30)
        with pytest.raises(NotFoundException):
            await AsyncSandbox.connect("f" * 32)
        with pytest.raises(SandboxException, match="mcp is not supported"):
            await AsyncSandbox.create(TEMPLATE, timeout=30, mcp={"exa": {"apiKey": "x"}})

    asyncio.run(main())
