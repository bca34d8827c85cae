#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""HTTP servers for the secret binding tests (t50): each ADDR:PORT given answers every request with "ok N" and
records what arrived: the request line's path, every header as sent (names and values, in order) and the
client's port, so a test can tell two requests on one kept-alive connection from two connections. HTTP/1.1
with keep-alive. GET /_seen on any of them (from the host) answers the records of all as JSON and is not
recorded itself; POST /_reset clears them. Prints one line "ready" when all listen. Standard library only.
A spec "https://ADDR:PORT=CERT,KEY" serves TLS there with that pair (the HTTPS tests, t52); its records' server
is "https://ADDR:PORT". GET /_echo answers the request's headers as its body (a destination that echoes)."""
import json
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SEEN = []
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def answer(self, body, ctype="text/plain"):
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        if self.path == "/_seen":
            with LOCK:
                return self.answer(json.dumps(SEEN), "application/json")
        if self.path == "/_reset":
            with LOCK:
                SEEN.clear()
            return self.answer("reset")
        if self.path == "/_echo":
            return self.answer("".join("%s: %s\n" % (k, v) for k, v in self.headers.items()))
        with LOCK:
            SEEN.append({"server": self.server.name, "path": self.path,
                         "headers": [[k, v] for k, v in self.headers.items()], "client_port": self.client_address[1]})
            count = len(SEEN)
        self.answer("ok %d\n" % count)

    do_GET = do_POST = do_PUT = handle_any


def main():
    servers = []
    for spec in sys.argv[1:]:
        tls = spec.startswith("https://")
        if tls:
            spec, pair = spec[len("https://"):].split("=", 1)
        addr, port = spec.rsplit(":", 1)
        s = ThreadingHTTPServer((addr, int(port)), Handler)
        s.daemon_threads = True
        s.name = ("https://" if tls else "") + "%s:%s" % (addr, port)
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*pair.split(","))
            s.socket = ctx.wrap_socket(s.socket, server_side=True)
        servers.append(s)
        threading.Thread(target=s.serve_forever, daemon=True).start()
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
