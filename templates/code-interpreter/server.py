#!/usr/bin/python3
"""space code-interpreter: the in-guest server that speaks E2B's code-interpreter protocol.

It listens on port 49999 (SPACE_CI_PORT, or the first argument) and answers the routes the
e2b-code-interpreter SDKs call: GET /health, POST /execute (a stream of JSON lines), POST/GET /contexts,
DELETE /contexts/ID, POST /contexts/ID/restart. A context is a kernel with its own state and working
directory: an IPython kernel (jupyter_client) for python, jsrunner.js under node for javascript, a bash
process for bash. The default python and javascript contexts are started, and warm, before the port is
opened, so a client that gets an answer from /health gets a warm kernel.

Environment: SPACE_CI_PORT (49999), SPACE_CI_HOST (0.0.0.0), SPACE_CI_CWD (/home/user: the working
directory of the default contexts and of new ones that name none), SPACE_CI_DIR (the directory of this file:
where jsrunner.js, startup.py, charts.py and ipython_kernel_config.py are), SPACE_CI_NODE (node).
"""
import codecs
import datetime
import json
import logging
import os
import queue
import re
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.environ.get("SPACE_CI_DIR") or os.path.dirname(os.path.abspath(__file__))
DEFAULT_CWD = os.environ.get("SPACE_CI_CWD", "/home/user")
NODE = os.environ.get("SPACE_CI_NODE") or shutil.which("node") or shutil.which("nodejs") or "node"
KEEPALIVE_SECONDS = 5.0
MAX_BODY = 64 << 20          # bytes of a request body
TEXT_PIECE = 1 << 20         # characters of one stdout/stderr line at most; longer output is split
INTERRUPT_GRACE = 5.0        # seconds a kernel gets to stop after an interrupt before it is restarted

LANGUAGES = {"python": "python", "py": "python", "python3": "python",
             "javascript": "javascript", "js": "javascript", "node": "javascript", "nodejs": "javascript",
             "bash": "bash", "sh": "bash", "shell": "bash"}
KNOWN = "python, javascript (or js) and bash"
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# written by the guest agent for each sandbox made from the snapshot (Identity below)
IDENTITY_DIR = os.environ.get("SPACE_CI_IDENTITY_DIR", "/run/space")
IDENTITY_FILE = os.path.join(IDENTITY_DIR, "sandbox-id")
ENV_FILE = os.path.join(IDENTITY_DIR, "env")

log = logging.getLogger("space-ci")


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


class ClientGone(Exception):
    """The HTTP client closed the connection (or a write to it failed)."""


class Output:
    """The /execute stream: one JSON object per line, in HTTP/1.1 chunks, written as it comes (so a slow
    reader slows the kernel down instead of filling memory)."""

    def __init__(self, handler):
        self.wfile = handler.wfile
        self.sock = handler.connection
        self.last_write = time.monotonic()
        self.last_poll = 0.0

    def send(self, obj):
        if obj.get("type") in ("stdout", "stderr") and len(obj.get("text", "")) > TEXT_PIECE:
            text = obj["text"]
            for i in range(0, len(text), TEXT_PIECE):
                self.send(dict(obj, text=text[i:i + TEXT_PIECE]))
            return
        data = (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass")
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        except (OSError, ValueError) as e:
            raise ClientGone() from e
        self.last_write = time.monotonic()

    def poll(self):
        """Raise ClientGone when the client has closed its end; send a keepalive line when silent."""
        t = time.monotonic()
        if t - self.last_poll >= 0.25:
            self.last_poll = t
            try:
                r, _, _ = select.select([self.sock], [], [], 0)
                if r and self.sock.recv(1, socket.MSG_PEEK) == b"":
                    raise ClientGone()
            except (OSError, ValueError) as e:
                raise ClientGone() from e
        if t - self.last_write >= KEEPALIVE_SECONDS:
            self.send({"type": "keepalive"})

    def finish(self):
        try:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (OSError, ValueError) as e:
            raise ClientGone() from e


def error_obj(name, value, traceback=""):
    return {"type": "error", "name": name, "value": value, "traceback": traceback}


class Identity:
    """Which sandbox this is. The server and its default kernels start once, in the template's base snapshot,
    and every sandbox (and every fork) is a copy of that memory: the guest agent writes /run/space/env and then
    /run/space/sandbox-id afresh whenever a sandbox is made from it. A new file there (another inode or mtime)
    means a new sandbox: its environment is read (E2B gives a sandbox's env vars to its code), and each kernel,
    before its next run, takes it and reseeds the random generators it seeded once at start (Python's random,
    numpy's, bash's $RANDOM), which would otherwise give every sandbox the same numbers."""

    def __init__(self):
        self.lock = threading.Lock()
        self.key = self._key()
        self.gen = 0
        self.env = {}
        self.removed = []

    @staticmethod
    def _key():
        try:
            st = os.stat(IDENTITY_FILE)
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    @staticmethod
    def _read_env():
        try:
            with open(ENV_FILE, "rb") as f:
                data = f.read(1 << 20)
        except OSError:
            return {}
        env = {}
        for rec in data.split(b"\0"):
            k, eq, v = rec.decode("utf-8", "replace").partition("=")
            if eq and ENV_NAME.match(k):
                env[k] = v
        return env

    def check(self):
        """The current generation (it grows whenever the sandbox changed)."""
        with self.lock:
            key = self._key()
            if key != self.key:
                self.key = key
                env = self._read_env()
                # what an earlier sandbox set and this one does not have goes (not what the server had itself)
                self.removed = [k for k in self.env if k not in env]
                self.env = env
                for k in self.removed:
                    os.environ.pop(k, None)
                os.environ.update(env)
                self.gen += 1
                log.info("a new sandbox (%s): %d env vars", key, len(env))
            return self.gen


IDENT = Identity()


class Discard:
    """An output that drops what it is sent: the hidden runs that give a kernel its sandbox, and the waits for a
    kernel's start or its stop after an interrupt, which give up with TimeoutError(why) after `seconds`."""

    def __init__(self, seconds=None, why=""):
        self.deadline = None if seconds is None else time.monotonic() + seconds
        self.why = why

    def send(self, obj):
        pass

    def poll(self):
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise TimeoutError(self.why)


class Context:
    """A kernel. Runs in one context queue on its lock; runs in different contexts go in parallel."""

    language = None

    def __init__(self, cwd):
        self.id = str(uuid.uuid4())
        self.cwd = cwd
        self.lock = threading.Lock()
        self.closed = False
        self.aborting = None      # "restarted" or "removed" while restart()/remove() takes the kernel down
        self.count = 0
        self.identity_gen = IDENT.gen

    def describe(self):
        return {"id": self.id, "language": self.language, "cwd": self.cwd}

    # subclasses: start(), stop(), kill(), _run(code, env_vars, out)

    def execute(self, code, env_vars, out):
        with self.lock:
            if self.closed:
                out.send(error_obj("ContextNotFound", f"Context {self.id} was removed"))
                return
            gen = IDENT.check()
            if gen != self.identity_gen:
                self._take_identity(IDENT.env, IDENT.removed)
                self.identity_gen = gen
            self._run(code, env_vars, out)

    def started(self):
        """A kernel started now has the server's environment and fresh seeds: nothing to take later."""
        self.identity_gen = IDENT.gen

    def died(self, out, status):
        """The kernel died during a run: say so, and start a fresh one (unless restart/remove did it)."""
        if self.aborting == "restarted":
            out.send(error_obj("ContextRestarting", "Context was restarted"))
            return
        if self.aborting == "removed":
            out.send(error_obj("ContextRemoved", "Context was removed"))
            return
        log.warning("%s context %s: kernel died (%s), restarting it", self.language, self.id, status)
        try:
            out.send(error_obj("KernelDied", f"The kernel died while running the code ({status}); it has been "
                               "restarted, and the state of the context is lost"))
        finally:
            self.stop()
            self.start()

    def restart(self):
        self.aborting = "restarted"
        try:
            self.kill()
            with self.lock:
                self.stop()
                self.start()
        finally:
            self.aborting = None

    def remove(self):
        self.aborting = "removed"
        self.kill()
        with self.lock:
            self.closed = True
            self.stop()


class PythonContext(Context):
    language = "python"

    def __init__(self, cwd):
        super().__init__(cwd)
        self.km = None
        self.kc = None
        self.sub = None

    def start(self):
        from jupyter_client import KernelManager
        env = dict(os.environ, SPACE_CI_DIR=HERE, PYDEVD_DISABLE_FILE_VALIDATION="1")
        env.pop("SPACE_CI_PORT", None)
        km = KernelManager(kernel_name="python3")
        km.start_kernel(cwd=self.cwd, env=env, stdout=subprocess.DEVNULL, extra_arguments=[
            "--config=" + os.path.join(HERE, "ipython_kernel_config.py"),
            "--IPKernelApp.exec_files=" + os.path.join(HERE, "startup.py"),
        ])
        # The shell channel through jupyter_client's thread; iopub (the output) read here, in the thread of
        # the request, from a SUB socket with a small queue: output is taken from the kernel only as fast
        # as the client reads it, and what cannot be kept is dropped by ZeroMQ, not stored in this process.
        kc = km.client()
        kc.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=False)
        import zmq
        sub = zmq.Context.instance().socket(zmq.SUB)
        sub.setsockopt(zmq.RCVHWM, 16)
        sub.setsockopt(zmq.LINGER, 0)
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        sub.connect(km._make_url("iopub"))
        self.km, self.kc, self.sub = km, kc, sub
        try:
            deadline = time.monotonic() + 120
            while True:   # until the kernel answers and its output reaches the SUB socket
                if time.monotonic() > deadline or not self._alive():
                    raise RuntimeError(f"the python kernel did not start ({self._status()})")
                msg_id = kc.execute("", silent=True, store_history=False)
                if self._wait_idle(msg_id, 1.0):
                    break
        except Exception:
            self.stop()
            raise
        self.started()

    def _take_identity(self, env, removed):
        self._silent("import os as __o, random as __r, sys as __s\n"
                     f"__o.environ.update({env!r})\n"
                     f"for __k in {removed!r}: __o.environ.pop(__k, None)\n"
                     "__r.seed()\n"
                     "if 'numpy' in __s.modules: __s.modules['numpy'].random.seed()\n"
                     "del __o, __r, __s\n")

    def stop(self):
        if self.kc is not None:
            try:
                self.kc.stop_channels()
            except Exception:
                pass
        if self.sub is not None:
            self.sub.close(linger=0)
        if self.km is not None:
            try:
                self.km.shutdown_kernel(now=True)
            except Exception:
                pass
        self.km = self.kc = self.sub = None

    def _iopub(self, timeout):
        """The next message on iopub within timeout seconds, or None."""
        import zmq
        if not self.sub.poll(int(timeout * 1000)):
            return None
        try:
            _, msg = self.kc.session.recv(self.sub, mode=zmq.NOBLOCK)
        except zmq.Again:
            return None
        return msg

    def _replied(self, msg_id, timeout=0):
        """Whether the execute_reply of msg_id is on the shell channel (other replies are dropped)."""
        while True:
            try:
                msg = self.kc.get_shell_msg(timeout=timeout)
            except queue.Empty:
                return False
            if msg["parent_header"].get("msg_id") == msg_id:
                return True

    def _wait_idle(self, msg_id, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = self._iopub(0.1)
            if (msg is not None and msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status"
                    and msg["content"].get("execution_state") == "idle"):
                return True
        return False

    def kill(self):
        km = self.km
        if km is not None:
            try:
                km.provisioner.process.kill() if km.provisioner and km.provisioner.process else km.kill_kernel()
            except Exception:
                pass

    def _alive(self):
        try:
            return self.km is not None and self.km.is_alive()
        except Exception:
            return False

    def _status(self):
        try:
            return f"exit status {self.km.provisioner.process.poll()}"
        except Exception:
            return "it exited"

    def _silent(self, code, timeout=30):
        """Run code with no output and no execution count (the per-run env vars)."""
        msg_id = self.kc.execute(code, silent=True, store_history=False, allow_stdin=False)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                msg = self.kc.get_shell_msg(timeout=0.5)
            except queue.Empty:
                if not self._alive():
                    return False
                continue
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg["content"].get("status") == "ok"
        return False

    def _run(self, code, env_vars, out):
        if env_vars:
            self._silent("def __space_ci_env(e):\n import os\n s = {k: os.environ.get(k) for k in e}\n"
                         " os.environ.update(e)\n return s\n"
                         f"__space_ci_env_saved = __space_ci_env({env_vars!r})\ndel __space_ci_env\n")
        msg_id = self.kc.execute(code, store_history=True, allow_stdin=False, stop_on_error=True)
        errored = False
        replied = False          # the shell channel's execute_reply came (that channel drops nothing)
        quiet_since = time.monotonic()
        try:
            while True:
                msg = self._iopub(0.2)
                if not replied:
                    replied = self._replied(msg_id)
                if msg is None:
                    if not self._alive():
                        self.died(out, self._status())
                        return
                    # ZeroMQ drops iopub messages of a client too slow for the kernel, the final idle status
                    # among them: once the kernel has replied and iopub has been quiet for 5 s, the run is over.
                    # Not sooner: a kernel slowed down (TCG, a busy host) sends its last output well after its
                    # reply, and 1 s lost a final print under load; the idle status ends a run at once anyway.
                    if replied and time.monotonic() - quiet_since > 5.0:
                        break
                    out.poll()
                    continue
                quiet_since = time.monotonic()
                if msg["parent_header"].get("msg_id") != msg_id:
                    continue
                kind, c = msg["msg_type"], msg["content"]
                if kind == "stream":
                    date = msg["header"].get("date")
                    ts = date.isoformat() if hasattr(date, "isoformat") else (date or now_iso())
                    out.send({"type": "stdout" if c.get("name") == "stdout" else "stderr", "text": c.get("text", ""),
                              "timestamp": ts})
                elif kind == "execute_input":
                    out.send({"type": "number_of_executions", "execution_count": c.get("execution_count")})
                elif kind in ("execute_result", "display_data"):
                    out.send(result_obj(c.get("data", {}), kind == "execute_result"))
                elif kind == "error":
                    if not errored:
                        errored = True
                        out.send(error_obj(c.get("ename", ""), c.get("evalue", ""), "\n".join(c.get("traceback", []))))
                elif kind == "status" and c.get("execution_state") == "idle":
                    break
                out.poll()
        except ClientGone:
            log.info("python context %s: client left during a run, interrupting the kernel", self.id)
            self._interrupt(msg_id)
            raise
        finally:
            if env_vars and self._alive():
                self._silent("def __space_ci_env(s):\n import os\n for k, v in s.items():\n"
                             "  if v is None: os.environ.pop(k, None)\n  else: os.environ[k] = v\n"
                             "__space_ci_env(__space_ci_env_saved)\ndel __space_ci_env, __space_ci_env_saved\n")

    def _interrupt(self, msg_id):
        try:
            self.km.interrupt_kernel()
        except Exception:
            pass
        deadline = time.monotonic() + INTERRUPT_GRACE
        while time.monotonic() < deadline and self._alive():
            if self._replied(msg_id, 0.2):
                # the output the client left behind: dropped now, or it would crowd out the next run's
                end = time.monotonic() + 30
                while time.monotonic() < end and self._iopub(0.5) is not None:
                    pass
                return
        log.warning("python context %s: the kernel did not stop on interrupt, restarting it", self.id)
        self.stop()
        self.start()


# Jupyter MIME type → field of E2B's result; text/plain loses its quotes as in E2B's server.
MIME_FIELDS = [("text/html", "html"), ("text/markdown", "markdown"), ("image/svg+xml", "svg"),
               ("image/png", "png"), ("image/jpeg", "jpeg"), ("application/pdf", "pdf"), ("text/latex", "latex"),
               ("application/json", "json"), ("application/javascript", "javascript"), ("e2b/data", "data"),
               ("e2b/chart", "chart")]


def result_obj(bundle, is_main):
    bundle = dict(bundle)
    res = {"type": "result"}
    text = bundle.pop("text/plain", None)
    if text and len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    if text:
        res["text"] = text
    for mime, field in MIME_FIELDS:
        v = bundle.pop(mime, None)
        if v:
            res[field] = v
    if bundle:
        res["extra"] = bundle
    res["is_main_result"] = is_main
    return res


class ProcessContext(Context):
    """A kernel that is a child process read through pipes (javascript, bash)."""

    def __init__(self, cwd):
        super().__init__(cwd)
        self.proc = None
        self.fds = {}         # fd -> "stdout" | "stderr" | "events"
        self.decoders = {}
        self.events = b""
        self.cmd_fd = None

    def _spawn(self, argv, extra_env, pass_fds, stdin):
        env = dict(os.environ)
        env.pop("SPACE_CI_PORT", None)
        env.update(extra_env)
        self.proc = subprocess.Popen(argv, cwd=self.cwd, env=env, stdin=stdin, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, pass_fds=pass_fds, start_new_session=True)
        self.fds = {self.proc.stdout.fileno(): "stdout", self.proc.stderr.fileno(): "stderr"}
        self.decoders = {}
        self.events = b""
        for fd in self.fds:
            os.set_blocking(fd, False)

    def kill(self):
        p = self.proc
        if p is not None and p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass

    def stop(self):
        self.kill()
        p = self.proc
        if p is not None:
            try:
                p.wait(timeout=5)
            except Exception:
                pass
            for f in (p.stdin, p.stdout, p.stderr):
                try:
                    f and f.close()
                except Exception:
                    pass
        for fd in list(self.fds):
            if self.fds[fd] == "events":
                try:
                    os.close(fd)
                except OSError:
                    pass
        if self.cmd_fd is not None:
            try:
                os.close(self.cmd_fd)
            except OSError:
                pass
            self.cmd_fd = None
        self.proc = None
        self.fds = {}

    def _text(self, fd, data, final=False):
        dec = self.decoders.setdefault(fd, codecs.getincrementaldecoder("utf-8")("replace"))
        return dec.decode(data, final)

    def _pump(self, out, timeout):
        """Read what the process wrote within timeout; send stdout/stderr; return the event objects."""
        evs = []
        try:
            r, _, _ = select.select(list(self.fds), [], [], timeout)
        except (OSError, ValueError):
            return evs, True
        eof = False
        for fd in r:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            kind = self.fds.get(fd)
            if not data:
                if kind == "events":
                    eof = True
                continue
            if kind == "events":
                self.events += data
                while b"\n" in self.events:
                    line, self.events = self.events.split(b"\n", 1)
                    if line.strip():
                        try:
                            evs.append(json.loads(line))
                        except ValueError:
                            pass
            else:
                text = self._text(fd, data)
                if text:
                    out.send({"type": kind, "text": text, "timestamp": now_iso()})
        return evs, eof

    def _drain(self, out):
        """Send what is left in the stdout/stderr pipes (without waiting for more)."""
        saved = self.fds
        self.fds = {fd: k for fd, k in saved.items() if k != "events"}
        try:
            for _ in range(64):
                r, _, _ = select.select(list(self.fds), [], [], 0)
                if not r:
                    break
                self._pump(out, 0)
        finally:
            self.fds = saved

    def _status(self):
        try:
            rc = self.proc.wait(timeout=2) if self.proc else None
        except subprocess.TimeoutExpired:
            rc = None
        if rc is None:
            return "it stopped answering"
        return f"killed by signal {-rc}" if rc < 0 else f"exit status {rc}"

    def _wait_done(self, out, handle):
        """Pump until handle(event) says the run is over; True if it ended, False if the kernel died."""
        while True:
            evs, eof = self._pump(out, 0.2)
            for ev in evs:
                if handle(ev):
                    self._drain(out)
                    return True
            if eof or self.proc.poll() is not None:
                self._drain(out)
                return False
            out.poll()

    def _interrupt_and_wait(self, is_done):
        try:
            self._signal_interrupt()
        except OSError:
            pass
        try:
            if self._wait_done(Discard(INTERRUPT_GRACE), is_done):
                return
        except TimeoutError:
            pass
        log.warning("%s context %s: the kernel did not stop on interrupt, restarting it", self.language, self.id)
        self.stop()
        self.start()


class JavaScriptContext(ProcessContext):
    language = "javascript"

    def start(self):
        cmd_r, cmd_w = os.pipe()
        evt_r, evt_w = os.pipe()
        try:
            self._spawn([NODE, "--expose-internals", os.path.join(HERE, "jsrunner.js")],
                        {"SPACE_CI_CMD_FD": str(cmd_r), "SPACE_CI_EVT_FD": str(evt_w)}, (cmd_r, evt_w),
                        subprocess.DEVNULL)
        finally:
            os.close(cmd_r)
            os.close(evt_w)
        self.cmd_fd = cmd_w
        os.set_blocking(evt_r, False)
        self.fds[evt_r] = "events"
        if not self._wait_done(Discard(60, "node did not start"), lambda ev: ev.get("type") == "ready"):
            raise RuntimeError(f"node did not start ({self._status()})")
        self.started()

    def _take_identity(self, env, removed):
        # (Math.random needs nothing: jsrunner.js draws it from /dev/urandom afresh at every run)
        self._run(f"Object.assign(process.env, {json.dumps(env)});\n"
                  f"for (const k of {json.dumps(removed)}) delete process.env[k];\nundefined", {}, Discard())
        self.count -= 1

    def _signal_interrupt(self):
        os.kill(self.proc.pid, signal.SIGINT)

    def _run(self, code, env_vars, out):
        self.count += 1
        out.send({"type": "number_of_executions", "execution_count": self.count})
        line = (json.dumps({"code": code, "env": env_vars or {}}) + "\n").encode()
        try:
            while line:
                n = os.write(self.cmd_fd, line)
                line = line[n:]
        except OSError:
            self.died(out, self._status())
            return
        errored = []

        def handle(ev):
            t = ev.get("type")
            if t in ("stdout", "stderr"):
                out.send({"type": t, "text": ev.get("text", ""), "timestamp": now_iso()})
            elif t == "result":
                out.send({"type": "result", "text": ev.get("text", ""), "is_main_result": True})
            elif t == "error" and not errored:
                errored.append(1)
                out.send(error_obj(ev.get("name", "Error"), ev.get("value", ""), ev.get("traceback", "")))
            return t == "done"
        try:
            if not self._wait_done(out, handle):
                self.died(out, self._status())
        except ClientGone:
            log.info("javascript context %s: client left during a run, interrupting it", self.id)
            self._interrupt_and_wait(lambda ev: ev.get("type") == "done")
            raise


class BashContext(ProcessContext):
    language = "bash"
    cells = None

    def start(self):
        if BashContext.cells is None:
            BashContext.cells = tempfile.mkdtemp(prefix="space-ci-bash-")
        st_r, st_w = os.pipe()
        try:
            # An interactive shell (without readline) because SIGINT then ends the command being run and
            # the shell reads on, as at a terminal; a non-interactive one would exit and lose its state.
            self._spawn(["/bin/bash", "--noprofile", "--norc", "--noediting", "-i"], {"PS1": "", "PS2": ""},
                        (st_w,), subprocess.PIPE)
        finally:
            os.close(st_w)
        os.set_blocking(st_r, False)
        self.fds[st_r] = "events"
        self.st_fd = st_w
        self.cell = os.path.join(BashContext.cells, self.id + ".sh")
        self._send(f"exec 3>&{st_w} {st_w}>&-\nPS1= PS2= PROMPT_COMMAND=\nset +m +H +o history\n"
                   "printf '{\"type\":\"ready\"}\\n' >&3\n")
        if not self._wait_done(Discard(30, "bash did not start"), lambda ev: ev.get("type") == "ready"):
            raise RuntimeError(f"bash did not start ({self._status()})")
        self.started()

    def _take_identity(self, env, removed):
        lines = [f"export {k}={shlex.quote(v)}" for k, v in env.items()] + [f"unset {k}" for k in removed]
        lines.append("RANDOM=$(od -An -N2 -tu2 /dev/urandom)")
        self._run("\n".join(lines) + "\n", {}, Discard())
        self.count -= 1

    def _send(self, text):
        self.proc.stdin.write(text.encode())
        self.proc.stdin.flush()

    def _signal_interrupt(self):
        os.killpg(self.proc.pid, signal.SIGINT)

    def _run(self, code, env_vars, out):
        self.count += 1
        out.send({"type": "number_of_executions", "execution_count": self.count})
        with open(self.cell, "w") as f:
            f.write(code)
            if not code.endswith("\n"):
                f.write("\n")
        pre, post = [], []
        for i, (k, v) in enumerate((env_vars or {}).items()):
            pre.append(f'if [ -n "${{{k}+x}}" ]; then __space_ci_old{i}=${k}; __space_ci_had{i}=1; '
                       f'else __space_ci_had{i}=; fi; export {k}={shlex.quote(v)}')
            post.append(f'if [ -n "$__space_ci_had{i}" ]; then export {k}="$__space_ci_old{i}"; else unset {k}; fi; '
                        f'unset __space_ci_old{i} __space_ci_had{i}')
        script = "\n".join(pre + [f"source {shlex.quote(self.cell)} </dev/null", "__space_ci_rc=$?"] + post +
                           ['printf \'{"type":"done","status":%d}\\n\' "$__space_ci_rc" >&3', "unset __space_ci_rc", ""])
        try:
            self._send(script)
        except OSError:
            self.died(out, self._status())
            return
        status = []

        def handle(ev):
            if ev.get("type") == "done":
                status.append(ev.get("status", 0))
                return True
            return False
        try:
            if not self._wait_done(out, handle):
                self.died(out, self._status())
                return
        except ClientGone:
            log.info("bash context %s: client left during a run, interrupting it", self.id)
            self._interrupt_and_wait(lambda ev: ev.get("type") == "done")
            raise
        if status and status[0] != 0:
            out.send(error_obj("Error", f"exit status {status[0]}", ""))

    def stop(self):
        super().stop()
        try:
            os.unlink(self.cell)
        except (OSError, AttributeError):
            pass


KINDS = {"python": PythonContext, "javascript": JavaScriptContext, "bash": BashContext}


class Registry:
    def __init__(self):
        self.lock = threading.Lock()
        self.contexts = {}
        self.defaults = {}
        self.default_locks = {lang: threading.Lock() for lang in KINDS}

    def create(self, language, cwd):
        ctx = KINDS[language](cwd)
        t = time.monotonic()
        ctx.start()
        log.info("%s context %s started in %s (%.1fs)", language, ctx.id, cwd, time.monotonic() - t)
        with self.lock:
            self.contexts[ctx.id] = ctx
        return ctx

    def default(self, language):
        with self.default_locks[language]:
            ctx = self.defaults.get(language)
            if ctx is None or ctx.closed:
                ctx = self.create(language, DEFAULT_CWD)
                self.defaults[language] = ctx
            return ctx

    def get(self, cid):
        with self.lock:
            return self.contexts.get(cid)

    def remove(self, cid):
        with self.lock:
            ctx = self.contexts.pop(cid, None)
        if ctx is not None:
            with self.default_locks[ctx.language]:
                if self.defaults.get(ctx.language) is ctx:
                    del self.defaults[ctx.language]
            ctx.remove()
        return ctx

    def all(self):
        with self.lock:
            return list(self.contexts.values())


REG = Registry()


class BadRequest(Exception):
    pass


def normalize_language(value, field="language"):
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"'{field}' must be a string")
    lang = LANGUAGES.get(value.strip().lower())
    if lang is None:
        raise BadRequest(f"Language '{value}' is not supported: the languages here are {KNOWN}")
    return lang


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "space-ci/1"
    sys_version = ""

    def log_message(self, fmt, *args):
        pass

    def log_error(self, fmt, *args):
        log.info("%s: " + fmt, self.address_string(), *args)

    def reply(self, code, body=None, ctype="application/json"):
        if body is None:
            data = b""
        elif isinstance(body, str) and ctype.startswith("text/"):
            data = body.encode()
        else:
            data = json.dumps(body).encode()
        self.send_response(code)
        if code != 204:
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if code != 204:
            self.wfile.write(data)

    def text(self, code, message):
        self.reply(code, message, "text/plain; charset=utf-8")

    def body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
                if len(data) > MAX_BODY:
                    raise BadRequest("the request body is too large")
        else:
            n = int(self.headers.get("Content-Length") or 0)
            if n > MAX_BODY:
                self.close_connection = True
                raise BadRequest("the request body is too large")
            data = self.rfile.read(n) if n > 0 else b""
        if not data.strip():
            return {}
        try:
            obj = json.loads(data)
        except ValueError:
            raise BadRequest("the request body is not JSON")
        if not isinstance(obj, dict):
            raise BadRequest("the request body must be a JSON object")
        return obj

    def route(self, method):
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        parts = path.strip("/").split("/")
        try:
            if method == "GET" and path == "/health":
                return self.reply(200, "OK")
            if path == "/execute" and method == "POST":
                return self.execute()
            if path == "/contexts" and method == "POST":
                return self.create_context()
            if path == "/contexts" and method == "GET":
                return self.reply(200, [c.describe() for c in REG.all()])
            if len(parts) == 2 and parts[0] == "contexts" and method == "DELETE":
                if REG.remove(parts[1]) is None:
                    return self.text(404, f"Context {parts[1]} not found")
                log.info("context %s removed", parts[1])
                return self.reply(200, None)
            if len(parts) == 3 and parts[0] == "contexts" and parts[2] == "restart" and method == "POST":
                self.body()
                ctx = REG.get(parts[1])
                if ctx is None:
                    return self.text(404, f"Context {parts[1]} not found")
                ctx.restart()
                log.info("context %s restarted", ctx.id)
                return self.reply(200, None)
            if path in ("/health", "/execute", "/contexts") or (parts[0] == "contexts" and len(parts) in (2, 3)):
                return self.text(405, "Method Not Allowed")
            return self.text(404, "Not Found")
        except BadRequest as e:
            return self.text(400, str(e))
        except ClientGone:
            self.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as e:
            log.exception("%s %s failed", method, path)
            try:
                self.text(500, f"{type(e).__name__}: {e}")
            except Exception:
                self.close_connection = True

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_DELETE(self):
        self.route("DELETE")

    def do_PUT(self):
        self.route("PUT")

    def create_context(self):
        req = self.body()
        lang = normalize_language(req.get("language")) or "python"
        cwd = req.get("cwd")
        if cwd is None or cwd == "":
            cwd = DEFAULT_CWD
        if not isinstance(cwd, str):
            raise BadRequest("'cwd' must be a string")
        if not os.path.isabs(cwd) or not os.path.isdir(cwd):
            raise BadRequest(f"'cwd' {cwd!r} is not an existing directory (an absolute path)")
        ctx = REG.create(lang, cwd)
        self.reply(200, ctx.describe())

    def execute(self):
        req = self.body()
        code = req.get("code")
        if not isinstance(code, str):
            raise BadRequest("'code' is required and must be a string")
        cid, lang = req.get("context_id"), req.get("language")
        if cid is not None and not isinstance(cid, str):
            raise BadRequest("'context_id' must be a string")
        lang = normalize_language(lang)
        if cid and lang:
            raise BadRequest("Only one of context_id or language can be provided")
        env = req.get("env_vars")
        if env is not None:
            if not isinstance(env, dict):
                raise BadRequest("'env_vars' must be an object of strings")
            for k, v in env.items():
                if not ENV_NAME.match(k):
                    raise BadRequest(f"'env_vars': {k!r} is not a valid variable name")
                if not isinstance(v, str) or "\0" in v:
                    raise BadRequest(f"'env_vars': the value of {k!r} must be a string")
        if cid:
            ctx = REG.get(cid)
            if ctx is None:
                return self.text(404, f"Context {cid} not found")
        else:
            ctx = REG.default(lang or "python")
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.flush()
        out = Output(self)
        try:
            ctx.execute(code, env or {}, out)
        except ClientGone:
            raise
        except Exception as e:
            log.exception("execution in context %s failed", ctx.id)
            out.send(error_obj("InternalError", f"{type(e).__name__}: {e}"))
        out.send({"type": "end_of_execution"})
        out.finish()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64


def main():
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="space-ci: %(levelname)s %(message)s")
    port = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("SPACE_CI_PORT", "49999"))
    host = os.environ.get("SPACE_CI_HOST", "0.0.0.0")
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    # A server started with SIGINT ignored (a background job of a shell, some supervisors) would pass that on
    # to bash, which then cannot be interrupted: the kernels must start with SIGINT at its default.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    t = time.monotonic()
    errors = []

    def start(lang):
        try:
            REG.default(lang)
        except Exception as e:
            errors.append(f"{lang}: {e}")
    threads = [threading.Thread(target=start, args=(lang,)) for lang in ("python", "javascript")]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        log.error("default contexts failed to start: %s", "; ".join(errors))
        for ctx in REG.all():
            ctx.stop()
        sys.exit(1)
    srv = Server((host, port), Handler)
    log.info("warm in %.1fs, listening on %s:%d", time.monotonic() - t, host, port)
    try:
        srv.serve_forever()
    finally:
        for ctx in REG.all():
            ctx.stop()


if __name__ == "__main__":
    main()
