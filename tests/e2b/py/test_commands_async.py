# SPDX-License-Identifier: Apache-2.0
"""sandbox.commands as the async SDK uses it (AsyncSandbox): the same envd calls through httpx's async client."""
import asyncio
import time

import pytest
from e2b import AsyncSandbox, CommandExitException, TimeoutException

from conftest import TEMPLATE


def run(coro):
    return asyncio.run(coro)


async def with_sandbox(body, **kw):
    s = await AsyncSandbox.create(TEMPLATE, timeout=600, **kw)
    try:
        return await body(s)
    finally:
        await s.kill()


def test_run_and_exit_codes():
    async def body(s):
        r = await s.commands.run("echo $SBX_VAR; echo err >&2", envs={"X": "1"})
        assert (r.exit_code, r.stdout, r.stderr) == (0, "from-create\n", "err\n")
        with pytest.raises(CommandExitException) as e:
            await s.commands.run("exit 5")
        assert e.value.exit_code == 5
        out = []
        r = await s.commands.run("echo a; echo b", on_stdout=out.append, user="root", cwd="/tmp")
        assert "".join(out) == "a\nb\n"
        assert (await s.commands.run("whoami; pwd", user="root", cwd="/tmp")).stdout == "root\n/tmp\n"
    run(with_sandbox(body, envs={"SBX_VAR": "from-create"}))


def test_background_kill_connect_list():
    async def body(s):
        h = await s.commands.run("sleep 60", background=True)
        assert h.pid in [p.pid for p in await s.commands.list()]
        assert await h.kill() is True
        with pytest.raises(CommandExitException) as e:
            await h.wait()
        assert e.value.exit_code == -1
        assert await s.commands.kill(h.pid) is False

        h = await s.commands.run("for i in 1 2 3; do echo n$i; sleep 0.5; done", background=True)
        await h.disconnect()
        h2 = await s.commands.connect(h.pid)
        r = await h2.wait()
        assert r.exit_code == 0 and r.stdout.endswith("n3\n")
    run(with_sandbox(body))


def test_stdin_and_timeout():
    async def body(s):
        h = await s.commands.run("head -n 1", background=True, stdin=True)
        await s.commands.send_stdin(h.pid, "typed\n")
        assert (await h.wait()).stdout == "typed\n"
        t = time.monotonic()
        with pytest.raises(TimeoutException):
            await s.commands.run("sleep 30", timeout=2)
        assert time.monotonic() - t < 15
    run(with_sandbox(body))


def test_concurrent_commands():
    async def body(s):
        rs = await asyncio.gather(*(s.commands.run(f"sleep 0.3; echo {i}") for i in range(8)))
        assert [r.stdout for r in rs] == [f"{i}\n" for i in range(8)]
    run(with_sandbox(body))
