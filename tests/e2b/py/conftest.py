# SPDX-License-Identifier: Apache-2.0
"""Fixtures for the E2B SDK suite: the SDK finds the daemon through E2B_API_KEY, E2B_API_URL and
E2B_SANDBOX_URL (set by tests/integration/t29-e2b.sh), or in its domain mode through E2B_DOMAIN and
E2B_API_KEY over TLS, exactly as a user's program would."""
import json
import os
import socket
import http.client

import pytest
from e2b import Sandbox

TEMPLATE = os.environ.get("SPACE_E2B_TEMPLATE", "seed")


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost")
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def space_api(method, path, body=None):
    """The daemon's native API over its unix socket: to look behind the SDK (what state, what metadata)."""
    c = UnixHTTPConnection(os.environ["SPACE_TEST_SOCKET"])
    c.request(method, path, body=json.dumps(body) if body is not None else None,
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, (json.loads(data) if data else None)


@pytest.fixture(scope="module")
def sbx():
    """One sandbox for a module's tests (they must not depend on each other's leftovers)."""
    s = Sandbox.create(TEMPLATE, timeout=900)
    yield s
    s.kill()
