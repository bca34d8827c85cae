#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A guest that floods its egress gateway (t32-egress-enforce.sh): runs inside a sandbox until the file
/tmp/egress-flood.stop exists (or SECONDS passed) and, as fast as the guest goes, sends DNS questions to the
agent's stub (127.0.0.53) and opens connections to private addresses (captured, each a CONNECT the gateway
must refuse). Standard library only.

Usage: egress-flood.py SECONDS [NAME,...]
  NAME: a name to ask for; one that starts with a dot is asked with a new label in front each time
        (f1.flood.test, f2.flood.test, ...), so that no answer could be reused. Default: .flood.test
Prints one line at the end: "questions=N answered=N connects=N".
"""

import os
import select
import socket
import struct
import sys
import time

IN_FLIGHT = 48      # questions the agent's stub holds at once (SPACE_RESOLVES_MAX is 64)
CONNECTING = 64     # connections open at once
STOP = "/tmp/egress-flood.stop"


def query(name, qid):
    head = struct.pack(">HHHHHH", qid & 0xFFFF, 0x0100, 1, 0, 0, 0)
    labels = b"".join(bytes([len(label)]) + label.encode() for label in name.split("."))
    return head + labels + b"\0" + struct.pack(">HH", 1, 1)


def main():
    seconds = float(sys.argv[1])
    names = sys.argv[2].split(",") if len(sys.argv) > 2 else [".flood.test"]
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.setblocking(False)
    end = time.time() + seconds
    sent = answered = connects = 0
    pending = []
    checked = 0
    while time.time() < end:
        if time.time() - checked > 0.2:
            if os.path.exists(STOP):
                break
            checked = time.time()
        while sent - answered < IN_FLIGHT:
            n = names[sent % len(names)]
            name = "f%d%s" % (sent, n) if n.startswith(".") else n
            try:
                udp.sendto(query(name, sent), ("127.0.0.53", 53))
            except BlockingIOError:
                break
            sent += 1
        while len(pending) < CONNECTING:
            t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            t.setblocking(False)
            connects += 1
            try:
                t.connect(("10.%d.%d.%d" % ((connects >> 16) & 255, (connects >> 8) & 255, connects & 255 or 1), 80))
            except BlockingIOError:
                pass
            except OSError:
                t.close()
                continue
            pending.append(t)
        readable, writable, _ = select.select([udp], pending, [], 0.05)
        if readable:
            while True:
                try:
                    udp.recv(600)
                    answered += 1
                except BlockingIOError:
                    break
        for t in writable:
            pending.remove(t)
            t.close()
    print("questions=%d answered=%d connects=%d" % (sent, answered, connects))


main()
