# SPDX-License-Identifier: Apache-2.0
"""What the E2B suites (py/, ci-py/) share: the daemon's native API over its unix socket, to look behind the
SDK (what state, what metadata). The socket is SPACE_TEST_SOCKET, set by the integration script."""
import http.client
import json
import os
import socket


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost")
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def space_api(method, path, body=None):
    """One request to the native API; (status, the JSON body or None)."""
    c = UnixHTTPConnection(os.environ["SPACE_TEST_SOCKET"])
    c.request(method, path, body=json.dumps(body) if body is not None else None,
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, (json.loads(data) if data else None)
