# SPDX-License-Identifier: Apache-2.0
"""The first thing a user tries: create from seed, run a command (also with sudo, as on E2B's base), read its
output, kill."""
from e2b import Sandbox


def test_create_run_kill():
    s = Sandbox.create("seed", timeout=120)
    try:
        r = s.commands.run("echo hello from $(whoami)")
        assert r.exit_code == 0
        assert r.stdout == "hello from user\n"
        # seed stands for E2B's base, where the default user may sudo without a password
        r = s.commands.run("sudo -n whoami && sudo -n install -d /opt/by-sudo && stat -c %U /opt/by-sudo")
        assert (r.exit_code, r.stdout) == (0, "root\nroot\n")
    finally:
        assert s.kill() is True
