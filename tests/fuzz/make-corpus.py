#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the seed corpus of every fuzz target into tests/fuzz/corpus/<target>/: a handful of small valid inputs
and edge cases per parser, in each target's input format (see the comment at the top of tests/fuzz/<target>.c).
The files are committed; run this again after changing a format, then commit what changed.

Usage: tests/fuzz/make-corpus.py [OUTDIR]   (default: corpus/ next to this script)"""

import gzip
import hashlib
import io
import json
import lzma
import os
import shutil
import struct
import sys
import tarfile

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")

# lib/proto.h
HELLO, PING, PONG, INIT, OK, ERROR, EXEC, STARTED, DATA, EOF, CREDIT, SIGNAL, RESIZE, EXIT, CLOSE, RELEASE, ADOPT, FILE = range(1, 19)
WINDOW = 256 * 1024


def frame(ftype, stream=0, fd=0, payload=b""):
    return struct.pack("<IIBBH", len(payload), stream, ftype, fd, 0) + payload


def kv(*recs):
    return b"".join(r.encode() if isinstance(r, str) else r for r in recs for r in (r, b"\0"))


def write(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def frames_corpus():
    t = "fuzz-frames"
    write(t, "hello", b"\x00" + frame(HELLO, 0, 0, kv("version=2", "agent=space-agent")))
    write(t, "exec-session", b"\x03" + frame(STARTED, 1, 0, kv("pid=42", "cwd=/root")) +
          frame(DATA, 1, 1, b"hello\n") + frame(DATA, 1, 2, b"oops\n") + frame(CREDIT, 1, 0, struct.pack("<I", 5)) +
          frame(EOF, 1, 1) + frame(EOF, 1, 2) + frame(EXIT, 1, 0, kv("code=0")) + frame(CLOSE, 1))
    write(t, "error", b"\x10" + frame(ERROR, 2, 0, kv("errno=2", "message=no such file", "stage=exec", "code=x")))
    write(t, "pong", b"\xff" + frame(PONG, 3, 0, b"x" * 64))
    write(t, "data-big", b"\x01" + frame(DATA, 5, 1, b"\0" * 4096) + frame(DATA, 5, 1, b"\1" * 4096))
    write(t, "credit-lie", b"\x02" + frame(CREDIT, 6, 0, struct.pack("<I", 0xffffffff)) + frame(CREDIT, 6, 1, b"\1\2"))
    write(t, "bad-length", b"\x00" + struct.pack("<IIBBH", 65537, 1, DATA, 1, 0))
    write(t, "bad-type", b"\x00" + struct.pack("<IIBBH", 0, 1, 99, 0, 0))
    write(t, "bad-fd", b"\x00" + struct.pack("<IIBBH", 0, 1, DATA, 3, 0))
    write(t, "reserved", b"\x00" + struct.pack("<IIBBH", 0, 1, EOF, 1, 1))
    write(t, "kv-edge", b"\x07" + frame(STARTED, 9, 0, b"pid=1\0=x\0novalue\0k=\0unterminated"))
    write(t, "kv-many", b"\x05" + frame(EXEC, 9, 0, b"a=b\0" * 1000))
    write(t, "guest-stream", b"\x04" + frame(DATA, 0x80000001, 1, b"x") + frame(CLOSE, 0x80000001))
    # the answers to PING "freeze" (version 4): frozen, an older agent's echo, a refusal with a made-up errno
    write(t, "freeze-answers", b"\x06" + frame(PONG, 7, 0, b"frozen") + frame(PONG, 7, 0, b"freeze") +
          frame(ERROR, 7, 0, kv("errno=999999", "message=" + "x" * 300)) + frame(PONG, 7, 0, b""))


ENTRY = ("type=file", "mode=420", "size=5", "mtime=86400", "uid=0", "gid=0")
OPS = ["stat", "list", "read", "write", "remove", "mkdir", "move", "symlink", "attrs"]


def file_input(op, frames, eof_after=0, read_size=3, root=False):
    return bytes([OPS.index(op) | (0x80 if root else 0), (eof_after << 4) | read_size]) + b"".join(frames)


def watch_corpus():
    t = "fuzz-watch-events"
    s = 7
    write(t, "events", b"\x01" + frame(DATA, s, 1, kv("ev=create", "name=a", "ev=write", "name=sub/a", *ENTRY,
                                                     "owner=user", "group=user", "ev=remove", "name=.")) +
          frame(DATA, s, 1, kv("ev=rename", "name=b", "ev=chmod", "name=b c")) +
          frame(ERROR, s, 0, kv("errno=75", "message=overflow", "code=overflow")))
    write(t, "unarmed", b"\x00" + frame(DATA, s, 1, kv("ev=create", "name=a")))
    write(t, "bad-names", b"\x01" + frame(DATA, s, 1, kv("ev=create", "name=../x")) +
          frame(DATA, s, 1, kv("ev=create", "name=a/../../etc")))
    write(t, "too-many", b"\x01" + frame(ERROR, s, 0, kv("errno=31", "message=m", "code=too_many_watches")))


def file_corpus():
    t = "fuzz-file-protocol"
    s = 7
    write(t, "stat", file_input("stat", [frame(OK, s, 0, kv(*ENTRY))]))
    write(t, "stat-symlink", file_input("stat", [frame(OK, s, 0, kv("type=symlink", "mode=511", "size=3", "mtime=1",
                                                                     "uid=0", "gid=0", b"target=/\xff\xfeetc"))]))
    write(t, "stat-meta", file_input("stat", [frame(OK, s, 0, kv(*ENTRY, "meta_key=owner", "meta_value=alice",
                                                                  "meta_key=k=2", "meta_value="))]))
    write(t, "stat-meta-bad", file_input("stat", [frame(OK, s, 0, kv(*ENTRY, "meta_key=a", "mode=420",
                                                                      b"meta_key=\xff", "meta_value=b"))]))
    write(t, "stat-resolved", file_input("stat", [frame(OK, s, 0, kv("type=symlink", "mode=511", "size=3", "mtime=1",
                                                                      "uid=0", "gid=0", "target=a/b", "resolved=/r/b",
                                                                      "target_type=dir", "target_mode=493"))]))
    write(t, "list-meta", file_input("list", [frame(OK, s, 0, kv("count=2")),
                                              frame(DATA, s, 1, kv("rel=a", *ENTRY, "meta_key=x", "meta_value=1",
                                                                   "rel=l", "type=symlink", "mode=511", "size=1",
                                                                   "mtime=1", "uid=0", "gid=0", "target=a",
                                                                   "resolved=")),
                                              frame(EOF, s, 1)]))
    write(t, "stat-bad", file_input("stat", [frame(OK, s, 0, kv("type=fifo", "mode=8192", "size=-5", "mtime=1x",
                                                                 "uid=4294967296"))]))
    write(t, "error", file_input("stat", [frame(ERROR, s, 0, kv("errno=2", "message=a\nb\x1b[31mc"))]))
    write(t, "error-limit", file_input("list", [frame(ERROR, s, 0, kv("errno=7", "code=too_many_entries"))]))
    write(t, "list", file_input("list", [frame(OK, s, 0, kv("count=3")),
                                         frame(DATA, s, 1, kv("rel=a", *ENTRY, "rel=b", "type=dir", "mode=493", "size=0",
                                                              "mtime=1", "uid=0", "gid=0")),
                                         frame(DATA, s, 1, kv("rel=b/c d", *ENTRY, "extra=ignored")),
                                         frame(EOF, s, 1)]))
    write(t, "list-root", file_input("list", [frame(OK, s, 0, kv("count=1")), frame(DATA, s, 1, kv("rel=etc", *ENTRY)),
                                              frame(EOF, s, 1)], root=True))
    write(t, "list-bad-names", file_input("list", [frame(OK, s, 0, kv("count=2")),
                                                   frame(DATA, s, 1, kv("rel=..", *ENTRY, "rel=a//b", *ENTRY))]))
    write(t, "read", file_input("read", [frame(OK, s, 0, kv(*ENTRY)), frame(DATA, s, 1, b"hello"), frame(EOF, s, 1)]))
    write(t, "read-chunks", file_input("read", [frame(OK, s, 0, kv(*ENTRY))] +
                                       [frame(DATA, s, 1, b"\0" * 4096) for _ in range(3)], read_size=0))
    write(t, "read-early-data", file_input("read", [frame(DATA, s, 1, b"abc"), frame(OK, s, 0, kv(*ENTRY))]))
    write(t, "write", file_input("write", [frame(OK, s, 0, b""), frame(CREDIT, s, 0, struct.pack("<I", 1000)),
                                           frame(OK, s, 0, kv(*ENTRY))], eof_after=2))
    write(t, "write-early", file_input("write", [frame(OK, s, 0, b""), frame(OK, s, 0, kv(*ENTRY))]))
    write(t, "mkdir", file_input("mkdir", [frame(OK, s, 0, kv("type=dir", "mode=493", "size=0", "mtime=1", "uid=0",
                                                              "gid=0"))]))
    write(t, "remove", file_input("remove", [frame(OK, s, 0, b"")]))


def fnv1a(h, data):
    for c in data:
        h = ((h ^ c) * 16777619) & 0xffffffff
    return h


def plog_record(rid, rtype, payload, check=None):
    if check is None:
        check = fnv1a(fnv1a(2166136261, bytes([rtype]) + struct.pack("<Q", rid)), payload)
    return struct.pack("<IB3xQI", len(payload), rtype, rid, check) + payload


def plog_file(first, records):
    return b"SPACELOG" + struct.pack("<Q", first) + b"".join(records)


def plog_corpus():
    t = "fuzz-process-log"
    started = b'{"pid":1,"argv":["sh"]}'
    recs = [plog_record(1, 1, started), plog_record(2, 2, b"hello\n"), plog_record(3, 3, b"oops\n"),
            plog_record(4, 4, b'{"code":0}')]
    write(t, "one-file", plog_file(1, recs))
    write(t, "empty-log", plog_file(1, []))
    write(t, "torn-tail", plog_file(1, recs)[:-3])
    write(t, "bad-check", plog_file(1, recs[:2] + [plog_record(3, 2, b"x", check=1)]))
    write(t, "rotated", plog_file(3, [plog_record(3, 2, b"c"), plog_record(4, 2, b"d")]) + b"\n--OLD--\n" +
          plog_file(1, [plog_record(1, 1, started), plog_record(2, 2, b"b")]))
    write(t, "gap", plog_file(9, [plog_record(9, 2, b"x")]) + b"\n--OLD--\n" + plog_file(1, [plog_record(1, 2, b"a")]))
    write(t, "only-old", b"garbage" + b"\n--OLD--\n" + plog_file(5, [plog_record(5, 5, b'{"message":"x"}')]))
    write(t, "huge-ids", plog_file(0xffffffffffffffff, [plog_record(0xffffffffffffffff, 2, b"x")]))
    write(t, "big-length", plog_file(1, [struct.pack("<IB3xQI", 65537, 2, 1, 0)]))
    write(t, "not-a-log", b"SPACELOX" + b"\0" * 8)


def json_corpus():
    t = "fuzz-json-body"
    bodies = {
        "exec": {"argv": ["sh", "-c", "echo hi"], "env": {"A": "1"}, "cwd": "/root", "user": "1000:1000",
                 "stdin": True, "timeout": 30, "pty": True, "rows": 24, "cols": 80},
        "exec-env-array": {"argv": ["ls"], "env": ["A=1", "B=2=3"]},
        "exec-bad": {"argv": [""], "env": {"": "x"}, "cwd": "rel", "user": "a:b:c", "rows": 0, "cols": 1e99},
        "exec-nul": {"argv": ["a\u0000b"], "env": {"K\u0000": "v"}},
        "create": {"template": "minimal", "name": "x", "vcpu": 2, "memory_mib": 512, "disk_mib": 2048,
                   "env": {"PATH": "/bin"}, "metadata": {"k": "v"}, "timeout": 600, "on_timeout": "pause",
                   "idle_timeout": 60},
        "create-float": {"vcpu": 1.5, "memory_mib": -1, "timeout": 1e308},
        "import": {"source": "/tmp/x.tar", "tag": "t:1", "config": {"env": ["A=1"], "entrypoint": ["sh"]}},
        "unknown-field": {"argv": ["x"], "nope": 1},
    }
    for name, o in bodies.items():
        write(t, name, json.dumps(o).encode())
    write(t, "empty", b"")
    write(t, "not-object", b"[1,2,3]")
    write(t, "syntax-error", b'{"argv": ["sh",}')
    write(t, "deep", b"[" * 2000 + b"]" * 2000)
    write(t, "trailing", b'{"argv":["a"]} x')
    write(t, "dup-keys", b'{"argv":["a"],"argv":5}')
    write(t, "utf8", b'{"argv":["\\u00e9\\ud83d\\ude00\\udc00"], "cwd":"/\xff\xfe"}')


def recipe_corpus():
    t = "fuzz-recipe"
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "templates")
    for name in ("minimal", "seed"):
        p = os.path.join(src, name, "template.conf")
        if os.path.exists(p):
            with open(p, "rb") as f:
                data = f.read()
            # tree.sh is not in the scratch recipe directory: name the build.sh the harness makes
            write(t, name, data.replace(b"build = tree.sh", b"build = build.sh"))
    write(t, "scratch", b"from = scratch\nbuild = build.sh\nname = a/b.c\nfile = files/motd /etc/motd 0644\n"
                        b"entrypoint = /bin/sh -l\nrun = echo hi\n")
    write(t, "debian", b"# c\nfrom = debian:bookworm\npackages = bash, coreutils:amd64=9.1-1 libc6\n"
                       b"env = PATH=/bin\nuser = nobody:nogroup\nworkdir = /srv\nvcpu = 2\nmemory_mib = 512\n"
                       b"disk_mib = 4096\ndescription = x\n")
    write(t, "errors", b"from = debian\nname = Bad Name\nfile = ../x /etc\nbuild = /abs\nvcpu = 0x10\n")
    write(t, "twice", b"from = scratch\nfrom = debian:sid\n")
    write(t, "long-line", b"description = " + b"x" * 5000 + b"\nfrom = scratch\n")
    write(t, "nul", b"from = scratch\0junk\nbuild = build.sh\n")
    write(t, "no-eq", b"from scratch\n")


def sha(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


def oci_corpus():
    t = "fuzz-oci"
    sep = b"\n--BLOB--\n"
    layer = "sha256:" + "ab" * 32
    index = json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "@D1@", "size": 0,
         "platform": {"os": "linux", "architecture": "amd64"}}]}).replace('"size": 0', '"size": @S1@').encode()
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": "@D2@",
                                      "size": 0},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer,
                                       "size": 123}]}).replace('"size": 0', '"size": @S2@').encode()
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "config": {"Env": ["PATH=/bin"], "User": "1000", "WorkingDir": "/app",
                                    "Entrypoint": ["/bin/sh"], "Cmd": ["-c", "true"]}}).encode()
    write(t, "image", index + sep + manifest + sep + config)
    # a nested index: index -> index (blob 1) -> manifest (blob 2) -> config (blob 3)
    nested = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "@D2@", "size": 0,
         "platform": {"os": "linux", "architecture": "amd64"}},
        {"digest": "sha256:" + "00" * 32, "size": 1, "platform": {"os": "unknown", "architecture": "unknown"}}]}
    ).replace('"size": 0', '"size": @S2@').encode()
    index_of_index = index.replace(b"application/vnd.oci.image.manifest.v1+json",
                                   b"application/vnd.oci.image.index.v1+json")
    write(t, "nested", index_of_index + sep + nested + sep + manifest.replace(b"@D2@", b"@D3@").replace(b"@S2@", b"@S3@") +
          sep + config)
    multi = json.dumps({"manifests": [
        {"digest": "@D1@", "size": 1, "platform": {"os": "linux", "architecture": "arm64"}},
        {"digest": "@D1@", "size": 1, "platform": {"os": "windows", "architecture": "amd64"}}]}).encode()
    write(t, "no-amd64", multi + sep + manifest + sep + config)
    write(t, "bad-digest", json.dumps({"manifests": [{"digest": "sha256:xyz", "size": -1}]}).encode())
    write(t, "foreign-layer", index + sep + manifest.replace(b"tar+gzip", b"tar.nondistributable") + sep + config)
    write(t, "not-json", b"{" + sep + b"[]")
    write(t, "empty", b"")


def tar_bytes(entries, fmt=tarfile.PAX_FORMAT):
    bio = io.BytesIO()
    with tarfile.open(fileobj=bio, mode="w", format=fmt) as tf:
        for e in entries:
            ti = tarfile.TarInfo(e["name"])
            ti.type = e.get("type", tarfile.REGTYPE)
            ti.mode = e.get("mode", 0o644)
            ti.uid = e.get("uid", 0)
            ti.gid = e.get("gid", 0)
            ti.mtime = e.get("mtime", 86400)
            ti.linkname = e.get("link", "")
            data = e.get("data", b"")
            if ti.type == tarfile.REGTYPE:
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
            else:
                tf.addfile(ti)
    return bio.getvalue()


def tar_corpus():
    t = "fuzz-tar"
    D, S, L, C, F = tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.FIFOTYPE
    rootfs = [{"name": "./", "type": D, "mode": 0o755}, {"name": "etc", "type": D, "mode": 0o755},
              {"name": "etc/passwd", "data": b"root:x:0:0::/root:/bin/sh\n"},
              {"name": "bin", "type": D}, {"name": "bin/sh", "mode": 0o4755, "data": b"\x7fELF"},
              {"name": "bin/ash", "type": L, "link": "bin/sh"}, {"name": "usr/bin/env", "data": b"#!"},
              {"name": "lib", "type": S, "link": "usr/lib"}, {"name": "dev/null", "type": C},
              {"name": "run/fifo", "type": F}]
    plain = tar_bytes(rootfs)
    write(t, "rootfs", b"\x00" + plain)
    write(t, "rootfs-gnu", b"\x00" + tar_bytes(rootfs, tarfile.GNU_FORMAT))
    write(t, "rootfs-gz", b"\x00" + gzip.compress(plain, mtime=0))
    write(t, "rootfs-xz", b"\x00" + lzma.compress(plain))
    write(t, "whiteouts", b"\x01" + tar_bytes([{"name": "etc/.wh.passwd"}, {"name": "usr/.wh..wh..opq"},
                                               {"name": "usr/new", "data": b"n"}]))
    write(t, "hostile", b"\x00" + tar_bytes([{"name": "/etc/abs", "data": b"x"}, {"name": "../up", "data": b"x"},
                                             {"name": "a/../../b", "data": b"x"}]))
    write(t, "through-symlink", b"\x00" + tar_bytes([{"name": "l", "type": S, "link": "/"},
                                                     {"name": "l/etc/evil", "data": b"x"},
                                                     {"name": "m", "type": S, "link": "../.."},
                                                     {"name": "m/evil", "data": b"x"}]))
    write(t, "hardlink-bad", b"\x00" + tar_bytes([{"name": "d", "type": D}, {"name": "h", "type": L, "link": "d"},
                                                  {"name": "h2", "type": L, "link": "nowhere"}]))
    write(t, "replace", b"\x00" + tar_bytes([{"name": "x", "type": D}, {"name": "x/y", "data": b"y"},
                                             {"name": "x", "data": b"file now"}, {"name": "x", "type": S, "link": "z"}]))
    write(t, "control-chars", b"\x00" + tar_bytes([{"name": "a\nb", "data": b"x"}, {"name": "c\x1b[1m", "data": b""}]))
    write(t, "long-name", b"\x00" + tar_bytes([{"name": "d/" * 60 + "f" * 200, "data": b"x"}]))
    write(t, "truncated", b"\x00" + plain[:700])
    write(t, "empty", b"\x00")


def envelope(msg, flags=0):
    body = msg if isinstance(msg, bytes) else json.dumps(msg, separators=(",", ":")).encode()
    return struct.pack(">BI", flags, len(body)) + body


def e2b_envelopes_corpus():
    """fuzz-e2b-envelopes: byte 0 the largest slice - 1, byte 1 the slices' seed, then a body (as the SDKs send
    them: /work/shared/reference/e2b-protocol.md section 3)."""
    t = "fuzz-e2b-envelopes"
    uid = "a" * 32
    run = {"process": {"cmd": "/bin/bash", "args": ["-l", "-c", "echo hello; sleep 1"], "envs": {"A": "1"},
                       "cwd": "/home/user"}, "stdin": False}
    pty = {"process": {"cmd": "/bin/bash", "args": ["-i", "-l"], "envs": {"TERM": "xterm-256color"}},
           "pty": {"size": {"cols": 80, "rows": 24}}}
    # streaming calls (Start, Connect, WatchDir): one envelope
    write(t, "start-run", b"\xff\x00" + envelope(run))
    write(t, "start-pty", b"\xff\x00" + envelope(pty))
    # Python sends pretty-printed JSON, and a tag; a cwd with ~
    write(t, "start-python", b"\x10\x01" + envelope(json.dumps(
        {"process": {"cmd": "/bin/bash", "args": ["-l", "-c", "ls"], "envs": {}, "cwd": "~/src"},
         "tag": "job-1", "stdin": True}, indent=2).encode()))
    write(t, "start-bad", b"\x03\x02" + envelope({"process": {"cmd": "", "args": "x", "envs": {"A=B": 1}},
                                                  "pty": {"size": {"cols": 70000, "rows": -1}}, "stdin": "yes"}))
    write(t, "connect-pid", b"\xff\x00" + envelope({"process": {"pid": 42}}))
    write(t, "connect-tag", b"\xff\x00" + envelope({"process": {"tag": "job-1"}, "replay": True}))
    write(t, "connect-both", b"\xff\x00" + envelope({"process": {"pid": "42", "tag": "x"}}))
    write(t, "watchdir", b"\xff\x00" + envelope({"path": "/home/user", "recursive": True}))
    write(t, "envelope-compressed", b"\xff\x00" + envelope(run, flags=1))
    write(t, "envelope-short", b"\xff\x00" + envelope(run)[:-3])
    write(t, "envelope-empty", b"\xff\x00" + envelope(b""))
    # unary calls: the JSON itself
    write(t, "sendinput-stdin", b"\xff\x00" + json.dumps({"process": {"pid": 42},
                                                          "input": {"stdin": "aGVsbG8K"}}).encode())
    write(t, "sendinput-pty-urlsafe", b"\xff\x00" + json.dumps({"process": {"pid": "7"},
                                                                "input": {"pty": "-_8"}}).encode())
    write(t, "sendinput-bad", b"\xff\x00" + json.dumps({"process": {"pid": 4294967296},
                                                        "input": {"stdin": "a===", "pty": "YQ"}}).encode())
    write(t, "sendsignal", b"\xff\x00" + json.dumps({"process": {"pid": 42}, "signal": "SIGNAL_SIGKILL"}).encode())
    write(t, "sendsignal-number", b"\xff\x00" + json.dumps({"process": {"tag": "t"}, "signal": "15"}).encode())
    write(t, "update-pty", b"\xff\x00" + json.dumps({"process": {"pid": 42},
                                                     "pty": {"size": {"cols": "120", "rows": 40}}}).encode())
    write(t, "list", b"\xff\x00{}")
    # StreamInput: a sequence of envelopes, in slices of every size
    stream = (envelope({"start": {"process": {"pid": 42}}}) + envelope({"data": {"input": {"stdin": "aGk="}}}) +
              envelope({"keepalive": {}}) + envelope({"data": {"input": {"pty": "BA=="}}}))
    write(t, "streaminput", b"\x00\x00" + stream)
    write(t, "streaminput-slices", b"\x06\x2a" + stream)
    write(t, "streaminput-whole", b"\xff\x07" + stream)
    write(t, "streaminput-no-start", b"\x02\x05" + envelope({"data": {"input": {"stdin": "eA=="}}}))
    write(t, "streaminput-too-long", b"\x04\x01" + envelope({"keepalive": {}}) +
          struct.pack(">BI", 0, 1024 * 1024 + 1) + b"{}")
    write(t, "streaminput-flagged", b"\x04\x01" + envelope({"keepalive": {}}) + envelope({"keepalive": {}}, 2))
    write(t, "streaminput-cut", b"\x01\x03" + stream + b"\x00\x00\x00")
    # POST /sandboxes: NewSandbox as JS and Python send it
    write(t, "newsandbox-js", b"\xff\x00" + json.dumps(
        {"templateID": "seed", "metadata": {"user": "u1"}, "envVars": {"FOO": "bar"}, "timeout": 120,
         "secure": True, "allow_internet_access": True, "autoPause": False}).encode())
    write(t, "newsandbox-python", b"\xff\x00" + json.dumps(
        {"templateID": "base", "metadata": {}, "envVars": {}, "timeout": 300, "secure": True,
         "allow_internet_access": True, "autoPause": False}, indent=2).encode())
    write(t, "newsandbox-pause", b"\xff\x00" + json.dumps(
        {"templateID": uid, "timeout": 15, "autoPause": True, "autoResume": {"enabled": True}}).encode())
    write(t, "newsandbox-unsupported", b"\xff\x00" + json.dumps(
        {"templateID": "seed", "network": {"allowOut": ["1.1.1.1"], "allowPublicTraffic": False},
         "mcp": {"x": 1}, "volumeMounts": [{"name": "v", "path": "/v"}]}).encode())
    write(t, "newsandbox-bad", b"\xff\x00" + json.dumps(
        {"templateID": "", "timeout": -1, "envVars": {"A=": "x"}, "autoResume": {"enabled": True, "x": 1},
         "metadata": {"": 1}}).encode())


def egress_corpus():
    """fuzz-egress: port (2 bytes), flags (1: the daemon's API is on that port), profiles up to a newline, then
    destinations, one a line: a literal, or a name, a space and an address."""
    t = "fuzz-egress"

    def seed(name, port, flags, profiles, *dests):
        write(t, name, struct.pack(">HB", port, flags) + profiles.encode() + b"\n" + "\n".join(dests).encode())

    local = "local: allow 127.0.0.5:8080, 10.1.0.0/16:5432; deny 10.1.2.3"
    seed("explicit-ip", 8080, 0, local, "127.0.0.5", "0x7f000005", "127.0.5", "::ffff:127.0.0.5", "64:ff9b::7f00:5")
    seed("literals-loopback", 80, 0, "wide: allow 0.0.0.0/0, ::/0", "2130706433", "0177.0.0.1", "0x7f.1", "127.1",
         "::1", "::ffff:127.0.0.1", "64:ff9b::7f00:1", "::127.0.0.1", "2002:7f00:1::1", "2001:0:5db8:d822::80ff:fffe")
    seed("literals-metadata", 80, 0, "meta: allow 169.254.0.0/16", "169.254.169.254", "2852039166", "0xa9fea9fe",
         "0251.0376.0251.0376", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe", "fd00:ec2::254", "[fd00:ec2::254]")
    seed("deny-wins", 5432, 0, local + "; other: allow 10.0.0.0/8", "10.1.2.3", "::ffff:10.1.2.3", "64:ff9b::a01:203",
         "10.1.9.9")
    seed("names", 443, 0, "web: allow example.com, 93.184.216.0/24:443; deny bad.example.com",
         "example.com 93.184.216.34", "EXAMPLE.COM. 127.0.0.1", "bad.example.com 93.184.216.34",
         "example.com 10.0.0.1", "other.org 93.184.216.34")
    seed("smtp", 25, 0, "mail: allow 93.184.216.40, smtp.example.net:587; all: allow 0.0.0.0/0",
         "93.184.216.40", "8.8.8.8", "smtp.example.net 93.184.216.41")
    seed("smtp-587", 587, 0, "mail: allow smtp.example.net:587", "smtp.example.net 93.184.216.41")
    seed("self-port", 7070, 1, "wide: allow 127.0.0.0/8, 0.0.0.0/8", "127.0.0.1", "0.0.0.0", "::ffff:127.0.0.1",
         "127.3.2.1")
    seed("wildcard", 443, 0, "wild: allow *.example.com", "93.184.216.34")
    seed("bad-rules", 443, 0, "x: allow 10.1.2.3/16; y: allow 0x7f.1; z: allow a.com:0; allow [::1", "1.1.1.1")
    seed("ipv6-ranges", 80, 0, "v6: allow [2606:2800::/32]:80-90, [fd12::/16]:80, fe80::/10", "2606:2800::1",
         "fd12::1", "fe80::1", "fc00::1", "ff02::1", "2001:db8::1", "64:ff9b:1::1")
    # regression: "a.." was taken for the name "a." and its canonical text did not parse back
    seed("trailing-dots", 8080, 0, "local: allow 127.0nn50..:8080, a.b..:80, example.com.:443", "127.0.0.1")
    seed("base-clauses", 53, 0, "deny 8.8.4.0/24; allow 9.9.9.9:53, 1.1.1.1", "9.9.9.9", "8.8.4.4", "1.1.1.1")


def sniff_corpus():
    """fuzz-sniff: a connection's first bytes: ClientHellos and HTTP request heads."""
    t = "fuzz-sniff"

    def hello(name):
        """A TLS 1.3 ClientHello as clients send them (supported_versions, key_share, SNI), fixed bytes so that
        the corpus is the same on every run."""
        def ext(typ, body):
            return struct.pack(">HH", typ, len(body)) + body
        exts = ext(43, b"\x04\x03\x04\x03\x03") + ext(10, b"\x00\x02\x00\x1d")
        exts += ext(51, struct.pack(">HHH", 36, 0x1d, 32) + bytes(range(32)))
        if name is not None:
            n = name.encode()
            exts = ext(0, struct.pack(">HBH", len(n) + 3, 0, len(n)) + n) + exts
        body = b"\x03\x03" + bytes(range(32)) + b"\x20" + bytes(32) + b"\x00\x04\x13\x01\x13\x02" + b"\x01\x00"
        body += struct.pack(">H", len(exts)) + exts
        hs = b"\x01" + struct.pack(">I", len(body))[1:] + body
        return b"\x16\x03\x01" + struct.pack(">H", len(hs)) + hs

    write(t, "tls-sni", hello("allowed.test"))
    write(t, "tls-no-sni", hello(None))
    write(t, "tls-long-name", hello("a" * 60 + "." + "b" * 60 + ".example"))
    write(t, "http-host", b"GET / HTTP/1.1\r\nHost: allowed.test:8080\r\nAccept: */*\r\n\r\n")
    write(t, "http-literal", b"GET /x HTTP/1.1\r\nhost: [::1]:80\r\n\r\n")
    write(t, "http-two-hosts", b"GET / HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n")
    write(t, "http-absolute", b"GET http://other.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
    write(t, "http-no-host", b"GET / HTTP/1.0\r\n\r\n")
    write(t, "other", b"SSH-2.0-OpenSSH_9.2\r\n")
    # the requests after the first on a plain HTTP connection (http-stream.c)
    write(t, "stream-pipelined", b"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\nGET /2 HTTP/1.1\r\nHost: other.test\r\n\r\n")
    write(t, "stream-length", b"POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 32\r\n\r\n"
          b"GET / HTTP/1.1\r\nHost: b.test\r\n\r\nGET / HTTP/1.1\r\nHost: c.test\r\n\r\n\x01")
    write(t, "stream-chunked", b"POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n5;n=v\r\nhello\r\n"
          b"a\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\nGET / HTTP/1.1\r\nHost: b.test\r\n\r\n\x02")
    write(t, "stream-upgrade", b"GET /ws HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
          b"GET / HTTP/1.1\r\nHost: b.test\r\n\r\n\x83")
    write(t, "stream-smuggle", b"POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
          b"0\r\n\r\nGET / HTTP/1.1\r\nHost: b.test\r\n\r\n")
    # regression: a second SNI made the verdict BAD but left the first one's name in it
    write(t, "regress-bad-keeps-name", bytes.fromhex(
        "1603010200010001fc0303cce2cc4b7d6c507f0418d3afbe97dead533fdf30fc52d312fb16627311ff0716209eb2d25adba5"
        "633276911444b7406dbe49422ba992b0d98324cd6d51dbe2fa670024130213031301c02cc030c02bc02fcca9cca8c024c028"
        "c023c027009f009e006b006700ff0100018f0000008600840000816161616161616161616161616161616161616161616161"
        "616161616161616161616161616161616161616161616161616161616161616161616161612e626262626262626262626262"
        "6262626262626262626262626262626262626262626262626262626262626262626262626262626262626262626262622e65"
        "78616d706c65000b000403000102000a00160014001d0017001e001900180100010101020103010400230000001600000017"
        "0000000d002a0028040305030603080708080809080a080b0d0a0d0a0806040105010601030303010302040205020602002b"
        "00050400000304032d03020101003300260024001d002057eaab62590bf55781504457e922c32bba77c6d398609323293efc"
        "8b4657f8080015006c0000000000000000000000000000000000000000000000000000000000000000000000000000000000"
        "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
        "0000000000000000000000000000000000"
    ))


def e2b_http_corpus():
    """fuzz-e2b-http: one string, as a header or a decoded query value holds it."""
    t = "fuzz-e2b-http"
    uid = "0123456789abcdef0123456789abcdef"
    for name, v in {
        "host-envd": f"49983-{uid}.localhost",
        "host-port": f"3000-{uid}.e2b.example.com:3000",
        "host-upper": f"49983-{uid}.E2B.LOCAL:49983",
        "host-bad-id": "49983-" + "A" * 32 + ".localhost",
        "host-plain": "127.0.0.1:8080",
        "host-v6": "[::1]:80",
        "basic-root": "Basic cm9vdDo=",
        "basic-user-password": "basic \tdXNlcjpzZWNyZXQ=",
        "basic-nul": "Basic YQBiOg==",
        "basic-long": "Basic " + "QUFB" * 70,
        "timeout": "60000",
        "timeout-max": "9999999999",
        "timeout-negative": "-1",
        # regression: strtoull() took a blank, then the sign: ULLONG_MAX milliseconds
        "timeout-blank-minus": "\r-1",
        "metadata": "userId%3D123%26env%3Ddev",
        "metadata-pairs": "a=1&b=two+words&c=%2541",
        "metadata-bad": "a=%4&=x&b",
        "metadata-nul": "a=%2500",
        # regression: a pair past METADATA_FILTER_MAX freed key[64], one past the array
        "metadata-over-limit": "&".join(f"k{i}=v" for i in range(65)),
        "path-abs": "/home/user/a.txt",
        "path-rel": "src/b.txt",
        "path-dir": "/tmp/",
        "path-control": "a\x1bb",
        "path-long": "/" + "d/" * 2100 + "f",
        "signature": "v1_eWvs4k8mK6uHLxRmn4SejQ0Xo4u8ceHbRPxTD0eW3IY",
        "expiration": "1700000000",
        "expiration-long": "123456789012345678901",
        "meminfo": "MemTotal:         223768 kB\nMemFree:          179144 kB\nMemAvailable:     182840 kB\n"
                   "Buffers:             100 kB\nCached:             1000 kB\n",
        "meminfo-signed": "MemTotal: -1 kB\nMemAvailable: 18446744073709551615 kB\nCached:12",
    }.items():
        write(t, name, v.encode())


def dns_corpus():
    """fuzz-dns: one query datagram, as the guest's DNS stub receives it."""
    t = "fuzz-dns"

    def q(name, qtype=1, flags=0x0100, qd=1, ident=0x1234, extra=b""):
        m = struct.pack(">HHHHHH", ident, flags, qd, 0, 0, 1 if extra else 0)
        for label in name.split(".") if name else []:
            m += bytes([len(label)]) + label.encode()
        return m + b"\0" + struct.pack(">HH", qtype, 1) + extra

    write(t, "a", q("example.com"))
    write(t, "aaaa", q("Example.COM", 28))
    write(t, "mx", q("example.com", 15))
    write(t, "root", q(""))
    write(t, "edns", q("a.example", 1, extra=b"\0\0\x29\x04\xd0\0\0\0\0\0\0"))
    write(t, "response", q("example.com", flags=0x8180))
    write(t, "status-opcode", q("example.com", flags=0x1000))
    write(t, "two-questions", q("example.com", qd=2))
    write(t, "pointer", struct.pack(">HHHHHH", 1, 0, 1, 0, 0, 0) + b"\xc0\x0c\0\1\0\1")
    write(t, "long-name", q(".".join(["b" * 63] * 3 + ["c" * 61])))
    write(t, "short", b"\x12\x34\x01")
    write(t, "localhost", q("localhost"))
    write(t, "chaos", q("version.bind", 16)[:-2] + b"\0\3")


def proxy_request_corpus():
    """fuzz-proxy-request: the bytes a client sends the guest's HTTP proxy."""
    t = "fuzz-proxy-request"
    for name, v in {
        "connect": b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nUser-Agent: curl/7.88\r\n\r\n",
        "connect-v6": b"CONNECT [2001:db8::1]:443 HTTP/1.1\r\n\r\n",
        "connect-eager": b"CONNECT a.test:443 HTTP/1.1\r\n\r\n\x16\x03\x01\x00\x05hello",
        "get": b"GET http://example.com/a?b#c HTTP/1.1\r\nHost: example.com\r\nProxy-Authorization: Basic eA==\r\n"
               b"Proxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n",
        "post-body": b"POST http://example.com:8080/x HTTP/1.1\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\nabc",
        "websocket": b"GET http://a.test/ws HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
        "lf-only": b"HEAD http://a.test?q HTTP/1.0\n\n",
        "userinfo": b"GET http://allowed.test@evil.test/ HTTP/1.1\r\n\r\n",
        "https": b"GET https://a.test/ HTTP/1.1\r\n\r\n",
        "origin": b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n",
        "folded": b"GET http://a.test/ HTTP/1.1\r\nA: b\r\n c\r\n\r\n",
        "bare-cr": b"GET http://a.test/ HTTP/1.1\r\nA: b\rc\r\n\r\n",
        "zone": b"CONNECT [fe80::1%25eth0]:443 HTTP/1.1\r\n\r\n",
    }.items():
        write(t, name, v)


def proxy_answer_corpus():
    """fuzz-proxy-answer: what a server in a sandbox answers the port proxy. Bytes 0-2: flags (1 upgrade, 2 HEAD),
    read size - 1, body bytes per call - 1."""
    t = "fuzz-proxy-answer"
    early = b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
    for name, (flags, v) in {
        "length": (0, b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello"),
        "chunked": (0, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n7;ext=1\r\n-chunks\r\n"
                       b"0\r\nX-Trailer: t\r\n\r\n"),
        "close": (0, b"HTTP/1.0 200 OK\nServer: x\n\nuntil the end"),
        "interim": (0, early + b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"),
        "interim-flood": (0, early * 1200 + b"HTTP/1.1 200 OK\r\n\r\n"),
        "switch": (1, b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      b"Sec-WebSocket-Accept: x\r\n\r\n\x81\x02hi"),
        "switch-unasked": (0, b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"),
        "head": (2, b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n"),
        "no-content": (0, b"HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\nabc"),
        "two-lengths": (0, b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"),
        "gzip-chunked": (0, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n"),
        "coding-close": (0, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 2\r\n\r\nabcd"),
        "folded": (0, b"HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n"),
        "garbage": (0, b"SSH-2.0-not-http\r\n\r\n"),
        "trailer-flood": (0, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + b"X-T: abc\r\n" * 2000),
        "long-size-line": (0, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;" + b"e" * 1100 + b"\r\nx\r\n"),
    }.items():
        write(t, name, bytes([flags, 15, 63]) + v)
    write(t, "byte-reads", bytes([0, 0, 0]) + early + b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc")


def migstream_corpus():
    """fuzz-migstream: a checkpoint's state file as QEMU 7.2 writes it (lib/migstream.c): magic, configuration,
    the "ram" setup, pages, device sections. The "mem" block is 16 pages, as the target's memory file."""
    t = "fuzz-migstream"
    page_size, mem_pages, rom = 4096, 16, "/rom@etc/acpi/tables"
    ZERO, MEM_SIZE, PAGE, EOS, CONT = 0x02, 0x04, 0x08, 0x10, 0x20

    def name(n):
        return struct.pack(">B", len(n)) + n.encode()

    def prologue(caps=("x-ignore-shared",), extra=b""):
        b = struct.pack(">II", 0x5145564D, 3) + b"\x07" + struct.pack(">I", 7) + b"microvm"
        b += b"\x05" + name("configuration/capabilities") + struct.pack(">II", 1, len(caps))
        b += b"".join(name(c) for c in caps)
        return b + extra

    def section(typ, sid=2):
        return struct.pack(">BI", typ, sid)

    def footer(sid=2):
        return struct.pack(">BI", 0x7E, sid)

    def eos():
        return struct.pack(">Q", EOS) + footer()

    def setup(mem_len=mem_pages * page_size, rom_pages=2):
        b = section(0x01) + name("ram") + struct.pack(">II", 0, 4)
        b += struct.pack(">Q", (mem_len + rom_pages * page_size) | MEM_SIZE)
        b += name("mem") + struct.pack(">QQ", mem_len, 0)
        b += name(rom) + struct.pack(">QQ", rom_pages * page_size, 0)
        return b + eos()

    def page(block, off, data=None, fill=0):
        b = struct.pack(">Q", off | (PAGE if data is not None else ZERO) | (0 if block else CONT))
        if block:
            b += name(block)
        return b + (data if data is not None else bytes([fill]))

    def zeros(first=0):
        return page("mem", first * page_size) + b"".join(page(None, i * page_size) for i in range(first + 1, mem_pages))

    def devices():
        desc = b'{"page_size": 4096, "devices": []}'
        b = section(0x04, 3) + name("timer") + struct.pack(">IIQ", 0, 2, 0x0123456789ABCDEF) + footer(3)
        b += section(0x04, 4) + name("cpu") + struct.pack(">II", 0, 17) + bytes(i * 7 % 256 for i in range(300))
        b += footer(4) + b"\x00\x06" + struct.pack(">I", len(desc)) + desc
        return b

    data = bytes((i * 13 + 1) % 256 for i in range(page_size))
    romdata = bytes((0x52 + i) % 256 for i in range(page_size))
    all_zero = prologue() + setup() + section(0x02) + zeros() + eos() + section(0x03) + eos() + devices()
    write(t, "all-zero", all_zero)
    mixed = prologue() + setup() + section(0x02)
    mixed += page("mem", 0, data) + page(None, page_size, data[::-1]) + page(None, 2 * page_size)
    mixed += page(rom, 0, romdata) + page("mem", 3 * page_size, data) + page(rom, page_size, fill=0)
    mixed += page("mem", 4 * page_size) + b"".join(page(None, i * page_size) for i in range(5, mem_pages)) + eos()
    mixed += section(0x02) + page(rom, page_size, romdata) + page("mem", page_size, data) + page(None, 0) + eos()
    mixed += section(0x03) + page("mem", 5 * page_size, fill=0x5A) + eos() + devices()
    write(t, "mixed", mixed)
    subsections = b"\x05" + name("configuration/target-page-bits") + struct.pack(">II", 1, 12)
    subsections += b"\x05" + name("configuration/uuid") + struct.pack(">I", 1) + bytes(range(16))
    write(t, "uuid-page-bits", prologue(("x-ignore-shared", "validate-uuid"), subsections) + setup() +
          section(0x02) + zeros() + eos() + section(0x03) + eos() + devices())
    # refused: what the tests name, as starting points
    write(t, "no-ignore-shared", prologue(("postcopy-ram",)) + setup() + section(0x03) + zeros() + eos() + devices())
    write(t, "page-past-block", prologue() + setup() + section(0x03) + page("mem", mem_pages * page_size, data) +
          zeros() + eos() + devices())
    write(t, "truncated", all_zero[:len(all_zero) // 2])
    write(t, "block-section", prologue() + section(0x01, 1) + name("block") + struct.pack(">II", 0, 1))

def accel_cache_corpus():
    """fuzz-accel-cache: the accelerator probe's cache file (spaced/vm/accel-cache.c)."""
    t = "fuzz-accel-cache"
    key = ("accel=kvm qemu=7.2.22 kernel=6.1 microcode=0x1 cpuid=0123456789abcdef guest-kernel=sha256:aa "
           "initramfs=sha256:bb")

    def cache(result="fail", outcome="no agent hello within 5 s", when="1799999000", k=key):
        return f"space-accel-probe 1\nkey {k}\ntime {when}\nresult {result}\noutcome {outcome}\n".encode()

    write(t, "failure", cache())
    write(t, "success", cache("ok", "the agent said hello in 310 ms", "1700000000"))
    write(t, "old-failure", cache(when="1700000000"))
    write(t, "other-key", cache(k=key.replace("cpuid=0123456789abcdef", "cpuid=0000000000000000")))
    write(t, "future", cache(when="1900000000"))
    write(t, "exited", cache(outcome="QEMU exited before the agent said hello: qemu-system-x86_64: failed to "
                                     "initialize kvm: Permission denied"))
    write(t, "garbage", b"garbage\n")
    write(t, "cut", cache()[:-1])


def vm_events_corpus():
    """fuzz-vm-events: what QEMU sends on the run-state monitor, as QEMU 7.2 sends it."""
    t = "fuzz-vm-events"
    ts = '"timestamp": {"seconds": 1765100000, "microseconds": 123456}, '
    greeting = ('{"QMP": {"version": {"qemu": {"micro": 22, "minor": 2, "major": 7}, "package": '
                '"Debian 1:7.2+dfsg-7+deb12u18"}, "capabilities": ["oob"]}}')
    caps = '{"return": {}, "id": "caps"}'
    def status(s):
        return '{"return": {"status": "%s", "singlestep": false, "running": %s}, "id": "status"}' % (
            s, "true" if s == "running" else "false")
    def console(text):
        return json.dumps({"return": text, "id": "console"})
    stop = '{' + ts + '"event": "STOP"}'
    start = [greeting, caps, status("running")]
    def session(name, lines):
        write(t, name, ("\n".join(start + lines) + "\n").encode())
    session("pause", [stop, status("paused"), '{' + ts + '"event": "RESUME"}'])
    session("internal-error", [stop, status("internal-error"), console("[ 3.1] guest text\r\n"), console("")])
    session("pvpanic", ['{' + ts + '"event": "GUEST_PANICKED", "data": {"action": "pause"}}',
                        console("[ 2.0] Kernel panic - not syncing: Fatal exception\r\n"), console("")])
    session("reset", ['{' + ts + '"event": "SHUTDOWN", "data": {"guest": true, "reason": "guest-reset"}}', stop,
                      status("shutdown"), console("Kernel panic - not syncing: sysrq triggered crash\r\n"),
                      console("")])
    session("refused", [stop, '{"error": {"class": "GenericError", "desc": "no"}, "id": "status"}'])
    write(t, "bad-json", (greeting + "\n{\"event\": \"STOP\", oops}\n").encode())
    write(t, "cr-lines", ("\r\n".join(start) + "\r\n").encode())


def volume_path_corpus():
    """fuzz-volume-path: paths in a volume (spaced/volume/volume-path.c), from a client or, later, a guest."""
    t = "fuzz-volume-path"
    write(t, "root", b"/")
    write(t, "plain", b"/docs/a/hello.txt")
    write(t, "messy", b"//docs/./a//hello.txt/")
    write(t, "dotdot", b"/a/../../etc/passwd")
    write(t, "dotnames", b"/..b/c../.../x")
    write(t, "long-name", b"/" + b"n" * 256)
    write(t, "long-path", b"/aaaaaaa" * 600)
    write(t, "name", b"data.v1_x-2")


def volume_guest_corpus():
    """fuzz-volume-guest: a guest's VOLUME requests (spaced/volume/volume-guest*.c) on a volume holding a, d/b and
    links etc -> /etc, passwd -> ../../../../../../etc/passwd, out -> a directory outside."""
    t = "fuzz-volume-guest"

    def vol(*records, data=b""):
        kv = b"".join(k.encode() + b"=" + v.encode() + b"\0" for k, v in records)
        return struct.pack("<I", len(kv)) + kv + data

    def seq(name, *payloads):
        write(t, name, b"\n--REQ--\n".join(payloads))

    seq("lookup", vol(("op", "lookup"), ("path", "a")))
    seq("getattr-root", vol(("op", "getattr"), ("path", "")))
    seq("readdir", vol(("op", "readdir"), ("path", ""), ("cookie", "0")),
        vol(("op", "readdir"), ("path", "d"), ("cookie", "0")))
    seq("read", vol(("op", "read"), ("path", "a"), ("offset", "0"), ("size", "100")))
    seq("write", vol(("op", "write"), ("path", "a"), ("offset", "5"), data=b"XYZ"),
        vol(("op", "read"), ("path", "a"), ("offset", "0"), ("size", "32768")))
    seq("create-rename", vol(("op", "create"), ("path", "n"), ("mode", "420"), ("uid", "1000"), ("gid", "1000"),
                             ("exclusive", "1")),
        vol(("op", "write"), ("path", "n"), ("offset", "0"), data=b"0123456789"),
        vol(("op", "rename"), ("path", "n"), ("to", "a"), ("noreplace", "0")),
        vol(("op", "rename"), ("path", "d"), ("to", "e"), ("noreplace", "1")))
    seq("mkdir-symlink", vol(("op", "mkdir"), ("path", "x"), ("mode", "493"), ("uid", "0"), ("gid", "0")),
        vol(("op", "symlink"), ("path", "x/l"), ("target", "/etc"), ("uid", "0"), ("gid", "0")),
        vol(("op", "readlink"), ("path", "x/l")),
        vol(("op", "lookup"), ("path", "x/l/passwd")))
    seq("setattr", vol(("op", "setattr"), ("path", "a"), ("size", "1000"), ("mode", "1517"), ("uid", "7"),
                       ("atime", "now"), ("mtime", "-5"), ("mtime_nsec", "7")),
        vol(("op", "setattr"), ("path", "passwd"), ("mtime", "5"), ("uid", "1")))
    seq("remove", vol(("op", "rmdir"), ("path", "d")), vol(("op", "unlink"), ("path", "d/b")),
        vol(("op", "rmdir"), ("path", "d")), vol(("op", "unlink"), ("path", "etc")))
    seq("statfs-fsync", vol(("op", "statfs"), ("path", "")), vol(("op", "fsync"), ("path", "a")),
        vol(("op", "fsync"), ("path", "")))
    seq("through-links", vol(("op", "read"), ("path", "etc/passwd"), ("offset", "0"), ("size", "100")),
        vol(("op", "read"), ("path", "passwd"), ("offset", "0"), ("size", "100")),
        vol(("op", "write"), ("path", "out/keep"), ("offset", "0"), data=b"x"),
        vol(("op", "create"), ("path", "out/new"), ("mode", "420"), ("uid", "0"), ("gid", "0")),
        vol(("op", "setattr"), ("path", "passwd"), ("size", "0")))
    seq("bad-paths", vol(("op", "lookup"), ("path", "../a")), vol(("op", "lookup"), ("path", "a//b")),
        vol(("op", "lookup"), ("path", "/a")), vol(("op", "lookup"), ("path", "a" * 300)))
    seq("limits", vol(("op", "write"), ("path", "a"), ("offset", "9223372036854775807"), data=b"x"),
        vol(("op", "setattr"), ("path", "a"), ("size", "300000")),
        vol(("op", "read"), ("path", "a"), ("offset", "0"), ("size", "32769")),
        vol(("op", "readdir"), ("path", ""), ("cookie", "123456789")))
    seq("records", vol(("op", "getattr"), ("op", "unlink"), ("path", "a")), vol(("path", "a")),
        struct.pack("<I", 9) + b"op=statfs")
    # the target bounds the volume to 12 entries: it holds 6, these make 6 more, the seventh is refused (ENOSPC)
    seq("entries", vol(("op", "mkdir"), ("path", "x"), ("mode", "493"), ("uid", "0"), ("gid", "0")),
        *(vol(("op", "create"), ("path", p), ("mode", "420"), ("uid", "0"), ("gid", "0")) for p in ("x/1", "x/2", "y")),
        vol(("op", "symlink"), ("path", "x/l"), ("target", "/a")),
        vol(("op", "mkdir"), ("path", "x/d"), ("mode", "493"), ("uid", "0"), ("gid", "0")),
        vol(("op", "create"), ("path", "z"), ("mode", "420"), ("uid", "0"), ("gid", "0")),
        vol(("op", "rename"), ("path", "y"), ("to", "a")))


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    frames_corpus()
    file_corpus()
    watch_corpus()
    plog_corpus()
    json_corpus()
    recipe_corpus()
    oci_corpus()
    tar_corpus()
    e2b_envelopes_corpus()
    e2b_http_corpus()
    egress_corpus()
    sniff_corpus()
    dns_corpus()
    proxy_request_corpus()
    proxy_answer_corpus()
    migstream_corpus()
    accel_cache_corpus()
    vm_events_corpus()
    volume_path_corpus()
    volume_guest_corpus()
    for d in sorted(os.listdir(OUT)):
        print(f"{d}: {len(os.listdir(os.path.join(OUT, d)))} inputs")


main()
