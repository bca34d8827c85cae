# SPDX-License-Identifier: Apache-2.0
"""sandbox.commands as the sync SDK uses it: envd's process.Process service (Start, Connect, List, SendInput,
SendSignal) on top of the daemon's processes."""
import time

import pytest
from e2b import CommandExitException, Sandbox, TimeoutException

from conftest import TEMPLATE


@pytest.fixture(scope="module")
def sbx():
    s = Sandbox.create(TEMPLATE, timeout=900, envs={"SBX_VAR": "from-create", "OVERRIDE": "sandbox"})
    yield s
    s.kill()


def test_stdout_and_stderr(sbx):
    r = sbx.commands.run("echo out; echo err >&2")
    assert (r.exit_code, r.stdout, r.stderr) == (0, "out\n", "err\n")
    assert r.error in ("", None)  # 2.21.1 says "", newer SDKs None


def test_exit_code_raises(sbx):
    with pytest.raises(CommandExitException) as e:
        sbx.commands.run("echo partial; echo bad >&2; exit 3")
    assert e.value.exit_code == 3
    assert e.value.stdout == "partial\n"
    assert e.value.stderr == "bad\n"
    assert e.value.error == "exit status 3"


def test_command_not_found_is_127(sbx):
    with pytest.raises(CommandExitException) as e:
        sbx.commands.run("no-such-command-here")
    assert e.value.exit_code == 127
    assert "not found" in e.value.stderr


def test_callbacks(sbx):
    out, err = [], []
    r = sbx.commands.run("for i in 1 2 3; do echo o$i; echo e$i >&2; sleep 0.1; done",
                         on_stdout=out.append, on_stderr=err.append)
    assert "".join(out) == r.stdout == "o1\no2\no3\n"
    assert "".join(err) == r.stderr == "e1\ne2\ne3\n"


def test_envs(sbx):
    r = sbx.commands.run("echo $SBX_VAR $OVERRIDE $PER_CMD", envs={"PER_CMD": "given", "OVERRIDE": "command"})
    assert r.stdout == "from-create command given\n"
    r = sbx.commands.run("echo $HOME $USER; echo $PATH")
    home_user, path = r.stdout.splitlines()
    assert home_user == "/home/user user"
    assert "/usr/bin" in path


def test_user(sbx):
    assert sbx.commands.run("whoami").stdout == "user\n"
    r = sbx.commands.run("whoami; echo $HOME", user="root")
    assert r.stdout == "root\n/root\n"


def test_cwd(sbx):
    assert sbx.commands.run("pwd").stdout == "/home/user\n"
    assert sbx.commands.run("pwd", cwd="/tmp").stdout == "/tmp\n"
    sbx.commands.run("mkdir -p sub/dir")
    # relative to the user's home, as envd resolves it
    assert sbx.commands.run("pwd", cwd="sub/dir").stdout == "/home/user/sub/dir\n"


def test_missing_cwd_fails(sbx):
    with pytest.raises(Exception) as e:
        sbx.commands.run("pwd", cwd="/no/such/dir")
    assert not isinstance(e.value, CommandExitException)


def test_timeout(sbx):
    t = time.monotonic()
    with pytest.raises(TimeoutException):
        sbx.commands.run("sleep 30", timeout=2)
    assert time.monotonic() - t < 15
    # envd kills what ran past its deadline
    time.sleep(0.5)
    assert not [p for p in sbx.commands.list() if p.args[-1:] == ["sleep 30"]]


def test_background_wait(sbx):
    h = sbx.commands.run("sleep 0.5; echo done", background=True)
    assert h.pid > 0
    r = h.wait()
    assert (r.exit_code, r.stdout) == (0, "done\n")


def test_background_kill(sbx):
    h = sbx.commands.run("sleep 60", background=True)
    assert h.pid in [p.pid for p in sbx.commands.list()]
    assert h.kill() is True
    with pytest.raises(CommandExitException) as e:
        h.wait()
    assert e.value.exit_code == -1
    assert e.value.error == "signal: killed"
    assert h.pid not in [p.pid for p in sbx.commands.list()]


def test_kill_unknown_pid(sbx):
    assert sbx.commands.kill(999999) is False


def test_disconnect_and_connect(sbx):
    h = sbx.commands.run("for i in 1 2 3 4; do echo line$i; sleep 0.5; done; exit 7", background=True)
    pid = h.pid
    h.disconnect()
    # a client that goes away does not end the process
    h2 = sbx.commands.connect(pid)
    assert h2.pid == pid
    with pytest.raises(CommandExitException) as e:
        h2.wait()
    assert e.value.exit_code == 7
    assert e.value.stdout.endswith("line4\n")


def test_connect_unknown_pid(sbx):
    with pytest.raises(Exception):
        sbx.commands.connect(999999)


def test_list(sbx):
    h = sbx.commands.run("sleep 30", background=True, envs={"LISTED": "yes"}, cwd="/tmp")
    try:
        [info] = [p for p in sbx.commands.list() if p.pid == h.pid]
        assert info.cmd == "/bin/bash"
        assert info.args == ["-l", "-c", "sleep 30"]
        assert info.envs == {"LISTED": "yes"}
        assert info.cwd == "/tmp"
    finally:
        h.kill()


def test_stdin(sbx):
    h = sbx.commands.run("read a; read b; echo got $a $b", background=True, stdin=True)
    sbx.commands.send_stdin(h.pid, "one\n")
    sbx.commands.send_stdin(h.pid, "two\n")
    assert h.wait().stdout == "got one two\n"


def test_stdin_off_by_default(sbx):
    # without stdin the process reads end-of-file at once
    assert sbx.commands.run("cat; echo eof").stdout == "eof\n"


def test_large_output_intact(sbx):
    r = sbx.commands.run("seq 1 800000", timeout=120)
    assert r.stdout == "".join(f"{i}\n" for i in range(1, 800001))
    assert len(r.stdout) > 5_000_000


def test_nohup_background_survives(sbx):
    # a daemon left by a command outlives the command (E2B users start servers this way)
    r = sbx.commands.run("nohup sleep 300 >/dev/null 2>&1 & echo $!")
    pid = int(r.stdout)
    time.sleep(1)
    try:
        assert sbx.commands.run(f"kill -0 {pid}").exit_code == 0
    finally:
        sbx.commands.run(f"kill {pid} || true")
