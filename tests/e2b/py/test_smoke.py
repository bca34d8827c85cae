# SPDX-License-Identifier: Apache-2.0
"""The first thing a user tries: create from seed, run a command, read its output, kill."""
from e2b import Sandbox


def test_create_run_kill():
    s = Sandbox.create("seed", timeout=120)
    try:
        r = s.commands.run("echo hello from $(whoami)")
        assert r.exit_code == 0
        assert r.stdout == "hello from user\n"
    finally:
        assert s.kill() is True
