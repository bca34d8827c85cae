# SPDX-License-Identifier: Apache-2.0
"""Fixtures for the code interpreter suite (tests/integration/t44-code-interpreter.sh): the unmodified
e2b-code-interpreter SDK finds the daemon through the environment only, either E2B_API_URL and E2B_SANDBOX_URL
or E2B_DOMAIN with TLS, as a user's program would."""
import json
import os
import socket
import http.client

import pytest
from e2b_code_interpreter import Sandbox


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost")
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def space_api(method, path, body=None):
    """The daemon's native API over its unix socket, to look behind the SDK."""
    c = UnixHTTPConnection(os.environ["SPACE_TEST_SOCKET"])
    c.request(method, path, body=json.dumps(body) if body is not None else None,
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, (json.loads(data) if data else None)


@pytest.fixture(scope="module")
def sbx():
    """One sandbox from the SDK's default template (code-interpreter-v1) for a module's tests."""
    s = Sandbox.create(timeout=900)
    yield s
    s.kill()
