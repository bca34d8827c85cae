#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Your first sandbox over space's HTTP API, with nothing but the Python standard library.

    export SPACE_API_URL=http://127.0.0.1:7070
    export SPACE_API_KEY=$(spacectl key create --name first-sandbox)
    python3 examples/first_sandbox.py                 # runs a small demo command
    python3 examples/first_sandbox.py uname -a        # or your own

It creates a sandbox from a template (SPACE_TEMPLATE, default "minimal"), polls the create operation until it
is done, creates a command session, attaches to the session's server-sent event stream, decodes the output,
and deletes the sandbox again. It counts success only when a `process_exited` event reports exit code 0 and no
`error` event came. A dropped connection is resumed with `Last-Event-ID`, so no output is lost or repeated.
Exit status: 0 on success, 1 otherwise.
"""

import base64
import http.client
import json
import os
import sys
import time
import urllib.parse

DEMO = ["sh", "-c", 'echo "hello from $(uname -n), a $(uname -m) microVM"; echo "kernel $(uname -r)"; '
        'echo "a line on stderr" >&2']


class ApiError(Exception):
    def __init__(self, status, body):
        self.status = status
        try:
            d = json.loads(body)
            msg = "%s: %s" % (d.get("code"), d.get("message"))
        except ValueError:
            msg = body[:200].decode(errors="replace") if isinstance(body, bytes) else str(body)
        super().__init__("HTTP %d %s" % (status, msg))


class Client:
    def __init__(self, url, key):
        u = urllib.parse.urlsplit(url)
        if u.scheme != "http" or not u.hostname:
            raise ValueError("SPACE_API_URL must look like http://127.0.0.1:7070, not %r" % url)
        self.host, self.port = u.hostname, u.port or 80
        self.prefix = u.path.rstrip("/")
        self.key = key

    def _conn(self, timeout=120):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def call(self, method, path, body=None, ok=(200, 201, 202, 204)):
        """One JSON request with the API key; returns the decoded body (None when empty)."""
        c = self._conn()
        headers = {"Authorization": "Bearer " + self.key, "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            c.request(method, self.prefix + path, body=data, headers=headers)
            r = c.getresponse()
            raw = r.read()
        finally:
            c.close()
        if r.status not in ok:
            raise ApiError(r.status, raw)
        return json.loads(raw) if raw else None

    def events(self, path, token, last_event_id=None):
        """Yields (id, event, data) from an SSE stream; authenticates with the session's attach token."""
        c = self._conn(timeout=600)
        headers = {"Authorization": "Bearer " + token, "Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        try:
            c.request("GET", self.prefix + path, headers=headers)
            r = c.getresponse()
            if r.status != 200:
                raise ApiError(r.status, r.read())
            eid, event, data = None, "message", []
            while True:
                line = r.readline()
                if not line:
                    return  # the stream ended
                line = line.rstrip(b"\r\n")
                if not line:  # a blank line ends an event
                    if data or eid is not None:
                        yield eid, event, b"\n".join(data)
                    eid, event, data = None, "message", []
                elif line.startswith(b":"):
                    continue  # a comment (keep-alive)
                else:
                    field, _, value = line.partition(b":")
                    value = value[1:] if value.startswith(b" ") else value
                    if field == b"id":
                        eid = int(value)
                    elif field == b"event":
                        event = value.decode()
                    elif field == b"data":
                        data.append(value)
        finally:
            c.close()


def wait_operation(api, op, timeout=300):
    """Polls an operation until it succeeded or failed (long-polling with ?wait)."""
    deadline = time.monotonic() + timeout
    while op["state"] not in ("succeeded", "failed"):
        if time.monotonic() > deadline:
            raise TimeoutError("operation %s still %s after %d s" % (op["id"], op["state"], timeout))
        op = api.call("GET", "/v1/operations/%s?wait=5" % op["id"])
    if op["state"] == "failed":
        err = op.get("error") or {}
        raise RuntimeError("operation %s failed: %s: %s" % (op["id"], err.get("code"), err.get("message")))
    return op


def run_session(api, sandbox_id, argv):
    """Creates a command session, attaches, returns (exit_code or None, stdout, stderr, errors)."""
    s = api.call("POST", "/v1/sandboxes/%s/sessions" % sandbox_id, {"argv": argv, "stdin": False})
    print("session %s: pid %d in the guest" % (s["session_id"], s["pid"]), file=sys.stderr)
    out, err, errors = bytearray(), bytearray(), []
    exit_code, last_id = None, None
    for attempt in range(5):
        try:
            for eid, event, data in api.events(s["stream_url"], s["attach_token"], last_id):
                last_id = eid if eid is not None else last_id
                if event == "stdout":
                    out += base64.b64decode(data)
                elif event == "stderr":
                    err += base64.b64decode(data)
                elif event == "process_exited":
                    d = json.loads(data)
                    exit_code = d["exit_code"]
                    if d.get("signal"):
                        errors.append({"code": "signal", "message": "killed by signal %d" % d["signal"]})
                elif event == "error":
                    errors.append(json.loads(data))
            return exit_code, bytes(out), bytes(err), errors
        except (ConnectionError, http.client.IncompleteRead, TimeoutError) as e:
            # The process keeps running; reattach and continue after the last event we saw.
            print("stream dropped (%s), resuming after event %s" % (e, last_id), file=sys.stderr)
            time.sleep(0.5 * (attempt + 1))
    errors.append({"code": "stream_lost", "message": "could not reattach to the stream"})
    return exit_code, bytes(out), bytes(err), errors


def main():
    url = os.environ.get("SPACE_API_URL")
    key = os.environ.get("SPACE_API_KEY")
    if not url or not key:
        print("first_sandbox.py: set SPACE_API_URL (e.g. http://127.0.0.1:7070) and SPACE_API_KEY "
              "(from `spacectl key create`)", file=sys.stderr)
        return 1
    argv = sys.argv[1:] or DEMO
    api = Client(url, key)

    created = api.call("POST", "/v1/sandboxes", {"template": os.environ.get("SPACE_TEMPLATE", "minimal")})
    sandbox_id = created["sandbox"]["id"]
    print("sandbox %s: creating (operation %s)" % (sandbox_id, created["operation"]["id"]), file=sys.stderr)
    ok = False
    try:
        t0 = time.monotonic()
        wait_operation(api, created["operation"])
        print("sandbox %s: running after %.2f s" % (sandbox_id, time.monotonic() - t0), file=sys.stderr)
        exit_code, out, err, errors = run_session(api, sandbox_id, argv)
        sys.stdout.buffer.write(out)
        sys.stdout.flush()
        sys.stderr.buffer.write(err)
        for e in errors:
            print("error: %s: %s" % (e.get("code"), e.get("message")), file=sys.stderr)
        ok = exit_code == 0 and not errors
        print("exit code %s: %s" % (exit_code, "success" if ok else "failure"), file=sys.stderr)
    finally:
        try:
            op = api.call("DELETE", "/v1/sandboxes/%s?wait=60" % sandbox_id)
            wait_operation(api, op["operation"])
            print("sandbox %s: deleted" % sandbox_id, file=sys.stderr)
        except Exception as e:
            print("could not delete sandbox %s: %s" % (sandbox_id, e), file=sys.stderr)
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # one line, not a traceback
        print("first_sandbox.py: %s" % e, file=sys.stderr)
        sys.exit(1)
