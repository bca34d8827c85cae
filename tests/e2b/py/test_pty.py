# SPDX-License-Identifier: Apache-2.0
"""sandbox.pty: a login shell on a terminal (Start with pty), its input (SendInput pty), resize (Update), kill."""
import pytest
from e2b import CommandExitException, PtySize, Sandbox

from conftest import TEMPLATE


@pytest.fixture(scope="module")
def sbx():
    s = Sandbox.create(TEMPLATE, timeout=600)
    yield s
    s.kill()


def collect(handle):
    out = []
    try:
        handle.wait(on_pty=out.append)
    except CommandExitException:
        pass
    return b"".join(out).decode("utf-8", "replace")


def test_pty_input_output_and_size(sbx):
    h = sbx.pty.create(PtySize(rows=24, cols=80))
    assert h.pid > 0
    sbx.pty.send_stdin(h.pid, b"echo $TERM; tty; stty size; exit\n")
    out = collect(h)
    assert "xterm-256color" in out
    assert "/dev/pts/" in out
    assert "24 80" in out


def test_pty_resize(sbx):
    h = sbx.pty.create(PtySize(rows=24, cols=80))
    sbx.pty.resize(h.pid, PtySize(rows=40, cols=123))
    sbx.pty.send_stdin(h.pid, b"stty size; exit\n")
    assert "40 123" in collect(h)


def test_pty_user_and_cwd(sbx):
    h = sbx.pty.create(PtySize(rows=24, cols=80), user="root", cwd="/tmp")
    sbx.pty.send_stdin(h.pid, b"echo who=$(whoami) dir=$(pwd); exit\n")
    out = collect(h)
    assert "who=root dir=/tmp" in out


def test_pty_kill(sbx):
    h = sbx.pty.create(PtySize(rows=24, cols=80))
    assert sbx.pty.kill(h.pid) is True
    with pytest.raises(CommandExitException) as e:
        h.wait()
    assert e.value.exit_code == -1
    assert sbx.pty.kill(h.pid) is False
