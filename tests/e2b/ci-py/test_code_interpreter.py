# SPDX-License-Identifier: Apache-2.0
"""E2B's code interpreter on space, through the unmodified Python SDK (e2b-code-interpreter): results of every
kind, streaming callbacks, errors, contexts, languages, per-run environment, timeouts, a kernel that dies,
isolation between sandboxes, state across pause and connect and in a fork, and the server's answers to bad
input. Each test says what a user would see if it failed."""
import base64
import json
import os
import subprocess
import threading
import time

import httpx
import pytest
from e2b import SandboxException, TimeoutException, NotFoundException
from e2b_code_interpreter import Sandbox

from conftest import space_api

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_first_result_is_the_last_expression(sbx):
    ex = sbx.run_code("x = 40\nx + 2")
    assert ex.error is None, ex.error
    assert ex.text == "42"
    assert [r.is_main_result for r in ex.results] == [True]
    assert ex.execution_count >= 1


def test_kernel_was_started_in_the_snapshot():
    """A create is a restore: the first run_code finds a kernel that was started before the sandbox existed."""
    t0 = time.monotonic()
    s = Sandbox.create(timeout=300)
    try:
        ex = s.run_code("import os\nopen(f'/proc/{os.getpid()}/stat').read().split(')')[1].split()[19]")
        assert ex.error is None, ex.error
        start_ticks = int(ex.text)
        uptime = float(s.commands.run("cut -d' ' -f1 /proc/uptime").stdout)
        since_create = time.monotonic() - t0
        # started after the restore, it would be within the last since_create seconds of the guest's uptime
        assert start_ticks / 100 < uptime - since_create, (start_ticks, uptime, since_create)
    finally:
        s.kill()


def test_stdout_streams_while_the_code_runs(sbx):
    seen = []
    t0 = time.monotonic()
    ex = sbx.run_code("import time\nprint('first', flush=True)\ntime.sleep(2)\nprint('second')",
                      on_stdout=lambda m: seen.append((time.monotonic() - t0, m.line)))
    total = time.monotonic() - t0
    assert [line for _, line in seen] == ["first\n", "second\n"]
    assert seen[0][0] < total - 1.5, f"the first line came at {seen[0][0]:.1f} s of {total:.1f} s: not streamed"
    assert ex.logs.stdout == ["first\n", "second\n"]


def test_stderr_and_results_callbacks(sbx):
    errs, results = [], []
    ex = sbx.run_code("import sys\nsys.stderr.write('warn\\n')\n7 * 6",
                      on_stderr=lambda m: errs.append(m.line), on_result=results.append)
    assert errs == ["warn\n"]
    assert ex.logs.stderr == ["warn\n"]
    assert [r.text for r in results] == ["42"]


def test_error_has_name_value_traceback(sbx):
    errors = []
    ex = sbx.run_code("def f():\n    raise ValueError('boom')\nf()", on_error=errors.append)
    assert ex.error is not None
    assert ex.error.name == "ValueError"
    assert ex.error.value == "boom"
    assert "ValueError" in ex.error.traceback and "f()" in ex.error.traceback
    assert len(errors) == 1 and errors[0].name == "ValueError"
    assert sbx.run_code("1").text == "1", "the kernel goes on after an error"


def test_display_gives_non_main_results(sbx):
    ex = sbx.run_code("from IPython.display import display, HTML\ndisplay(HTML('<b>hi</b>'))\ndisplay('plain')\n5")
    assert ex.error is None, ex.error
    assert [r.is_main_result for r in ex.results] == [False, False, True]
    assert ex.results[0].html == "<b>hi</b>"
    assert ex.results[1].text == "plain", "E2B gives a string's repr without its quotes"
    assert ex.results[2].text == "5"


def test_dataframe_is_html_and_data(sbx):
    ex = sbx.run_code("import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})")
    assert ex.error is None, ex.error
    r = ex.results[0]
    assert r.is_main_result
    assert "<table" in r.html
    assert r.data is not None
    assert r.data["a"] == [1, 2] or r.data["a"] == {"0": 1, "1": 2}, r.data
    assert "data" in r.formats() and "html" in r.formats()


def run_chart(sbx, code):
    ex = sbx.run_code("import matplotlib.pyplot as plt\n" + code + "\nplt.show()")
    assert ex.error is None, ex.error
    pngs = [r for r in ex.results if r.png]
    assert pngs, f"no PNG among {[list(r.formats()) for r in ex.results]}"
    r = pngs[0]
    assert base64.b64decode(r.png)[:8] == PNG_MAGIC
    assert r.chart is not None, "no chart JSON with the PNG"
    return r.chart


def test_line_chart(sbx):
    c = run_chart(sbx, "plt.plot([1, 2, 3], [1, 4, 9], label='sq')\nplt.title('Squares')\nplt.xlabel('n')\n"
                       "plt.ylabel('n squared')")
    assert c.type.value == "line"
    assert c.title == "Squares"
    assert c.x_label == "n" and c.y_label == "n squared"
    assert c.elements[0].label == "sq"
    assert [tuple(map(float, p)) for p in c.elements[0].points] == [(1, 1), (2, 4), (3, 9)]


def test_scatter_chart(sbx):
    c = run_chart(sbx, "plt.scatter([1, 2, 3], [3, 1, 2], label='pts')\nplt.title('S')")
    assert c.type.value == "scatter"
    assert len(c.elements[0].points) == 3


def test_bar_chart(sbx):
    c = run_chart(sbx, "plt.bar(['a', 'b', 'c'], [3, 5, 2], label='counts')\nplt.title('Bars')\nplt.ylabel('n')")
    assert c.type.value == "bar"
    assert c.title == "Bars"
    bars = {b.label: b.value for b in c.elements}
    assert bars == {"a": 3, "b": 5, "c": 2}, bars


def test_pie_chart(sbx):
    c = run_chart(sbx, "plt.pie([1, 3], labels=['one', 'three'])\nplt.title('Pie')")
    assert c.type.value == "pie"
    assert sorted(e.label for e in c.elements) == ["one", "three"]
    assert sorted(e.angle for e in c.elements) == pytest.approx([90, 270], abs=0.5)


def test_box_and_whisker_chart(sbx):
    # boxes drawn as patches, as E2B's own tests draw them (without patch_artist a box plot is only lines)
    c = run_chart(sbx, "plt.boxplot([[1, 2, 3, 4, 5], [2, 4, 6, 8, 10]], labels=['a', 'b'], patch_artist=True)\n"
                       "plt.title('Box')")
    assert c.type.value == "box_and_whisker"
    first = c.elements[0]
    assert first.label == "a"
    assert (first.min, first.median, first.max) == (1, 3, 5)


def test_several_axes_are_a_superchart(sbx):
    c = run_chart(sbx, "fig, (a1, a2) = plt.subplots(1, 2)\na1.plot([1, 2], [2, 1])\na1.set_title('left')\n"
                       "a2.bar(['x'], [1])\na2.set_title('right')\nfig.suptitle('Both')")
    assert c.type.value == "superchart"
    assert c.title == "Both"
    assert [e.type.value for e in c.elements] == ["line", "bar"]
    assert [e.title for e in c.elements] == ["left", "right"]


def test_contexts_have_their_own_state_and_cwd(sbx):
    ctx = sbx.create_code_context(cwd="/tmp")
    assert ctx.cwd == "/tmp" and ctx.language == "python"
    assert sbx.run_code("import os\nos.getcwd()", context=ctx).text == "/tmp"
    sbx.run_code("only_here = 1", context=ctx)
    ex = sbx.run_code("only_here")
    assert ex.error is not None and ex.error.name == "NameError", "the default context sees another's state"
    assert ctx.id in [c.id for c in sbx.list_code_contexts()]
    sbx.restart_code_context(ctx)
    ex = sbx.run_code("only_here", context=ctx)
    assert ex.error is not None and ex.error.name == "NameError", "a restarted context kept its state"
    sbx.remove_code_context(ctx)
    assert ctx.id not in [c.id for c in sbx.list_code_contexts()]
    with pytest.raises((NotFoundException, SandboxException)):
        sbx.run_code("1", context=ctx)


def test_javascript_keeps_state_and_gives_the_last_value(sbx):
    ex = sbx.run_code("let base = 20\nconsole.log('in js')\nbase * 2 + 2", language="javascript")
    assert ex.error is None, ex.error
    assert ex.text == "42"
    assert ex.logs.stdout == ["in js\n"]
    assert sbx.run_code("base + 1", language="js").text == "21"
    ex = sbx.run_code("throw new TypeError('bad js')", language="javascript")
    assert ex.error is not None and ex.error.name == "TypeError" and ex.error.value == "bad js"


def test_bash_keeps_state(sbx):
    ex = sbx.run_code("GREETING=hello; echo $GREETING; echo oops >&2", language="bash")
    assert ex.error is None, ex.error
    assert ex.logs.stdout == ["hello\n"]
    assert ex.logs.stderr == ["oops\n"]
    assert sbx.run_code("echo $GREETING again", language="bash").logs.stdout == ["hello again\n"]
    ex = sbx.run_code("false", language="bash")
    assert ex.error is not None, "a failing command is an error"


def test_unknown_language_is_refused_naming_the_ones_there_are(sbx):
    with pytest.raises(SandboxException) as e:
        sbx.run_code("1", language="cobol")
    msg = str(e.value)
    assert "400" in msg and "python" in msg and "javascript" in msg and "bash" in msg, msg


def test_env_vars_apply_to_one_run(sbx):
    assert sbx.run_code("import os\nos.environ.get('ONE_RUN')", envs={"ONE_RUN": "yes"}).text == "yes"
    assert sbx.run_code("import os\nos.environ.get('ONE_RUN')").text is None, "None is no result, as in Jupyter"
    ex = sbx.run_code("echo ${ONE_RUN:-unset}", language="bash", envs={"ONE_RUN": "b"})
    assert ex.logs.stdout == ["b\n"]
    assert sbx.run_code("echo ${ONE_RUN:-unset}", language="bash").logs.stdout == ["unset\n"]
    assert sbx.run_code("process.env.ONE_RUN", language="javascript", envs={"ONE_RUN": "j"}).text == "j"
    assert sbx.run_code("process.env.ONE_RUN", language="javascript").text in (None, "undefined")


def test_timeout_interrupts_and_the_kernel_goes_on(sbx):
    sbx.run_code("counter = 0")
    t0 = time.monotonic()
    with pytest.raises(TimeoutException):
        sbx.run_code("import time\nwhile True:\n    counter += 1\n    time.sleep(0.01)", timeout=3)
    assert time.monotonic() - t0 < 30
    ex = sbx.run_code("counter > 0")
    assert ex.error is None and ex.text == "True", "the state before the timeout is kept"
    a = sbx.run_code("counter").text
    time.sleep(1)
    assert sbx.run_code("counter").text == a, "the timed-out loop still runs: it was not interrupted"


def test_a_run_that_kills_its_kernel(sbx):
    ctx = sbx.create_code_context()
    sbx.run_code("doomed = 1", context=ctx)
    ex = sbx.run_code("import os\nos._exit(1)", context=ctx)
    assert ex.error is not None, "the kernel's death is an error"
    assert "kernel" in (ex.error.name + ex.error.value + ex.error.traceback).lower()
    ex = sbx.run_code("doomed", context=ctx)
    assert ex.error is not None and ex.error.name == "NameError", "the next run has a fresh kernel"
    assert sbx.run_code("2 + 2", context=ctx).text == "4"
    sbx.remove_code_context(ctx)


def test_output_is_bounded_whatever_the_code_prints(sbx):
    n = []
    ex = sbx.run_code("for i in range(200):\n    print('x' * 100000)", on_stdout=lambda m: n.append(len(m.line)),
                      timeout=240)
    assert ex.error is None, ex.error
    assert sum(n) >= 200 * 100000


def test_two_sandboxes_do_not_share_a_kernel(sbx):
    sbx.run_code("mine = 'first'")
    other = Sandbox.create(timeout=300)
    try:
        ex = other.run_code("mine")
        assert ex.error is not None and ex.error.name == "NameError"
    finally:
        other.kill()


def test_state_survives_pause_and_connect():
    s = Sandbox.create(timeout=600)
    try:
        s.run_code("kept = [1, 2, 3]")
        s.commands.run("true")
        s.pause() if hasattr(s, "pause") else s.beta_pause()
        again = Sandbox.connect(s.sandbox_id, timeout=300)
        assert again.run_code("sum(kept)").text == "6"
    finally:
        Sandbox.kill(s.sandbox_id)


def test_a_fork_gets_its_own_copy_of_the_kernel():
    s = Sandbox.create(timeout=600)
    try:
        s.run_code("branch = 'parent'")
        out = subprocess.run([os.environ["SPACECTL"], "fork", s.sandbox_id], capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 0, out.stderr
        fork_id = out.stdout.strip()
        try:
            f = Sandbox.connect(fork_id, timeout=300)
            assert f.run_code("branch").text == "parent", "the fork has the parent's kernel state"
            f.run_code("branch = 'fork'")
            assert s.run_code("branch").text == "parent", "the parent's kernel changed with the fork's"
            assert f.run_code("branch").text == "fork"
        finally:
            space_api("DELETE", f"/v1/sandboxes/{fork_id}")
    finally:
        s.kill()


def raw(sbx, method, path, body=None, raw_body=None):
    """A request to the sandbox's port 49999 as the SDK makes it, with what the SDK would not send."""
    url = os.environ.get("E2B_SANDBOX_URL")
    headers = {"E2b-Sandbox-Id": sbx.sandbox_id, "E2b-Sandbox-Port": "49999", "Content-Type": "application/json"}
    tok = getattr(sbx, "traffic_access_token", None) or getattr(sbx, "_traffic_access_token", None)
    if tok:
        headers["E2B-Traffic-Access-Token"] = tok
    envd = getattr(sbx, "_envd_access_token", None)
    if envd:
        headers["X-Access-Token"] = envd
    if url:
        target = url + path
        verify = True
    else:
        target = f"https://{sbx.get_host(49999)}{path}"
        verify = os.environ.get("SSL_CERT_FILE", True)
    content = raw_body if raw_body is not None else (json.dumps(body) if body is not None else None)
    return httpx.request(method, target, headers=headers, content=content, verify=verify, timeout=60)


def test_bad_input_gets_e2b_answers_and_leaves_the_kernel_alone(sbx):
    sbx.run_code("survivor = 'still here'")
    r = raw(sbx, "POST", "/execute", {"code": "1", "context_id": "x", "language": "python"})
    assert r.status_code == 400, r.text
    r = raw(sbx, "POST", "/execute", {"code": "1", "context_id": "no-such-context"})
    assert r.status_code == 404, r.text
    r = raw(sbx, "POST", "/execute", raw_body="{not json")
    assert r.status_code == 400, r.text
    r = raw(sbx, "POST", "/execute", {"context_id": None})
    assert r.status_code == 400 and "code" in r.text, r.text
    r = raw(sbx, "POST", "/execute", {"code": 5})
    assert r.status_code == 400 and "code" in r.text, r.text
    r = raw(sbx, "POST", "/execute", {"code": "1", "env_vars": {"A": 1}})
    assert r.status_code == 400 and "env_vars" in r.text, r.text
    r = raw(sbx, "DELETE", "/contexts/no-such-context")
    assert r.status_code == 404, r.text
    assert raw(sbx, "GET", "/health").status_code in (200, 204)
    assert sbx.run_code("survivor").text == "still here"


def test_a_wrong_token_opens_nothing(sbx):
    url = os.environ.get("E2B_SANDBOX_URL")
    if not url:
        target = f"https://{sbx.get_host(49999)}/contexts"
        verify = os.environ.get("SSL_CERT_FILE", True)
    else:
        target, verify = url + "/contexts", True
    r = httpx.get(target, headers={"E2b-Sandbox-Id": sbx.sandbox_id, "E2b-Sandbox-Port": "49999",
                                   "E2B-Traffic-Access-Token": "0" * 40}, verify=verify, timeout=30)
    assert r.status_code in (401, 403, 404), r.text
    r = httpx.get(target, headers={"E2b-Sandbox-Id": sbx.sandbox_id, "E2b-Sandbox-Port": "49999"},
                  verify=verify, timeout=30)
    assert r.status_code in (401, 403), r.text
    if url:
        r = httpx.get(target, headers={"E2b-Sandbox-Id": sbx.sandbox_id, "E2b-Sandbox-Port": "99999"}, timeout=30)
        assert r.status_code == 400 and "E2b-Sandbox-Port" in r.text, r.text


def test_sandboxes_from_one_snapshot_draw_their_own_random_numbers():
    """The kernels start in the template's snapshot: each sandbox reseeds them, or all would draw alike."""
    code = {"python": "import random\nrandom.random()", "javascript": "Math.random()",
            "bash": "echo $RANDOM $RANDOM $RANDOM"}
    draws = {lang: [] for lang in code}
    boxes = [Sandbox.create(timeout=300) for _ in range(2)]
    try:
        for s in boxes:
            for lang, c in code.items():
                ex = s.run_code(c, language=lang)
                assert ex.error is None, ex.error
                draws[lang].append(ex.text if lang != "bash" else ex.logs.stdout[0])
    finally:
        for s in boxes:
            s.kill()
    for lang, d in draws.items():
        assert d[0] != d[1], f"two sandboxes drew the same {lang} random numbers: {d}"


def test_a_sandboxs_env_vars_reach_its_kernels():
    s = Sandbox.create(timeout=300, envs={"MADE_WITH": "create"})
    try:
        assert s.run_code("import os\nos.environ.get('MADE_WITH')").text == "create"
        assert s.run_code("process.env.MADE_WITH", language="javascript").text == "create"
        assert s.run_code("echo $MADE_WITH", language="bash").logs.stdout == ["create\n"]
        ctx = s.create_code_context()
        assert s.run_code("import os\nos.environ.get('MADE_WITH')", context=ctx).text == "create", \
            "a kernel started later has them too"
    finally:
        s.kill()
