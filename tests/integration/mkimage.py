#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Test images for template imports (t17), made with the standard library only.

  mkimage.py rootfs BASE.tar OUT.tar
      BASE (the minimal template's rootfs.tar) plus /srv: a file owned by 1000:1000 mode 0640, a setuid file,
      a symlink, a hard link, and a char device and a fifo (which imports drop).
  mkimage.py oci BASE.tar LAYOUT_DIR ARCHIVE.tar
      An OCI image layout: layer 1 = BASE gzipped, layer 2 plain tar, layer 3 gzip with a whiteout of a file,
      of a directory and an opaque directory; a config with Env, User, WorkingDir, Entrypoint and Cmd; an index
      with the linux/amd64 manifest and a BuildKit-style attestation manifest. ARCHIVE is the layout as a tar
      (what `skopeo copy ... oci-archive:` writes).
  mkimage.py hostile KIND OUT.tar HOSTDIR
      One hostile archive aimed at HOSTDIR (an absolute host path): dotdot, absolute, symlink, hardlink,
      hardlink-dotdot, device.
"""
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile

MTIME = 1234567890


def add_file(tf, name, data, mode=0o644, uid=0, gid=0, mtime=MTIME):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    ti.mode = mode
    ti.uid, ti.gid = uid, gid
    ti.mtime = mtime
    tf.addfile(ti, io.BytesIO(data))


def add_dir(tf, name, mode=0o755, uid=0, gid=0):
    ti = tarfile.TarInfo(name)
    ti.type = tarfile.DIRTYPE
    ti.mode = mode
    ti.uid, ti.gid = uid, gid
    ti.mtime = MTIME
    tf.addfile(ti)


def add_special(tf, name, kind, linkname="", devmajor=0, devminor=0, mode=0o777):
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.linkname = linkname
    ti.devmajor, ti.devminor = devmajor, devminor
    ti.mode = mode
    ti.mtime = MTIME
    tf.addfile(ti)


def copy_members(tf, base):
    with tarfile.open(base) as src:
        for m in src.getmembers():
            tf.addfile(m, src.extractfile(m) if m.isfile() else None)


def rootfs(base, out):
    with tarfile.open(out, "w", format=tarfile.GNU_FORMAT) as tf:
        copy_members(tf, base)
        add_dir(tf, "./srv")
        add_dir(tf, "./srv/data", mode=0o750, uid=1000, gid=1000)
        add_file(tf, "./srv/data/hello.txt", b"hello from t17\n", mode=0o640, uid=1000, gid=1000)
        add_file(tf, "./srv/setuid", b"#!/bin/sh\necho setuid\n", mode=0o4755)
        add_special(tf, "./srv/link", tarfile.SYMTYPE, linkname="data/hello.txt")
        add_special(tf, "./srv/hard", tarfile.LNKTYPE, linkname="./srv/data/hello.txt", mode=0o640)
        add_special(tf, "./srv/null", tarfile.CHRTYPE, devmajor=1, devminor=3, mode=0o666)
        add_special(tf, "./srv/fifo", tarfile.FIFOTYPE, mode=0o644)


def tar_bytes(fill):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        fill(tf)
    return buf.getvalue()


def blob(layout, data):
    h = hashlib.sha256(data).hexdigest()
    with open(os.path.join(layout, "blobs", "sha256", h), "wb") as f:
        f.write(data)
    return {"digest": "sha256:" + h, "size": len(data)}


def oci(base, layout, archive):
    os.makedirs(os.path.join(layout, "blobs", "sha256"), exist_ok=True)
    with open(base, "rb") as f:
        l1_tar = f.read()

    def l2(tf):
        add_dir(tf, "opt")
        add_dir(tf, "opt/keep")
        add_file(tf, "opt/keep/k1", b"k1\n")
        add_dir(tf, "opt/opq")
        add_file(tf, "opt/opq/lower1", b"lower\n")
        add_dir(tf, "opt/opq/sub")
        add_file(tf, "opt/opq/sub/lower2", b"lower\n")
        add_file(tf, "opt/gone", b"gone\n")
        add_dir(tf, "opt/gonedir")
        add_file(tf, "opt/gonedir/x", b"x\n")

    def l3(tf):
        add_dir(tf, "opt")
        add_file(tf, "opt/.wh.gone", b"")
        add_file(tf, "opt/.wh.gonedir", b"")
        add_dir(tf, "opt/opq", mode=0o700)
        add_file(tf, "opt/opq/.wh..wh..opq", b"")
        add_file(tf, "opt/opq/upper", b"upper\n")
        add_file(tf, "opt/keep/k2", b"k2\n", mode=0o600, uid=1000, gid=1000)

    l2_tar, l3_tar = tar_bytes(l2), tar_bytes(l3)
    gz = lambda b: gzip.compress(b, mtime=0)
    layers = [
        dict(blob(layout, gz(l1_tar)), mediaType="application/vnd.oci.image.layer.v1.tar+gzip"),
        dict(blob(layout, l2_tar), mediaType="application/vnd.oci.image.layer.v1.tar"),
        dict(blob(layout, gz(l3_tar)), mediaType="application/vnd.oci.image.layer.v1.tar+gzip"),
    ]
    config = {
        "architecture": "amd64", "os": "linux",
        "config": {
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "T17_OCI=from-image",
                    "T17_OVER=image"],
            "User": "1000:1000", "WorkingDir": "/opt/keep",
            "Entrypoint": ["/bin/sh", "-c"], "Cmd": ["echo hi"],
        },
        "rootfs": {"type": "layers",
                   "diff_ids": ["sha256:" + hashlib.sha256(b).hexdigest() for b in (l1_tar, l2_tar, l3_tar)]},
    }
    cfg = dict(blob(layout, json.dumps(config).encode()), mediaType="application/vnd.oci.image.config.v1+json")
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": cfg, "layers": layers}
    man = dict(blob(layout, json.dumps(manifest).encode()), mediaType="application/vnd.oci.image.manifest.v1+json",
               platform={"architecture": "amd64", "os": "linux"})
    att_manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "config": dict(blob(layout, b"{}"), mediaType="application/vnd.oci.image.config.v1+json"),
                    "layers": []}
    att = dict(blob(layout, json.dumps(att_manifest).encode()),
               mediaType="application/vnd.oci.image.manifest.v1+json",
               platform={"architecture": "unknown", "os": "unknown"})
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [man, att]}
    with open(os.path.join(layout, "index.json"), "w") as f:
        json.dump(index, f)
    with open(os.path.join(layout, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    with tarfile.open(archive, "w") as tf:
        for name in ("oci-layout", "index.json", "blobs"):
            tf.add(os.path.join(layout, name), arcname=name)


def hostile(kind, out, hostdir):
    depth = "../" * 32
    with tarfile.open(out, "w", format=tarfile.GNU_FORMAT) as tf:
        add_dir(tf, "./etc")
        add_file(tf, "./etc/ok", b"ok\n")
        if kind == "dotdot":
            add_file(tf, depth + hostdir.lstrip("/") + "/dotdot", b"escaped\n")
        elif kind == "absolute":
            add_file(tf, hostdir + "/absolute", b"escaped\n")
        elif kind == "symlink":
            add_special(tf, "./evil", tarfile.SYMTYPE, linkname=hostdir)
            add_file(tf, "./evil/pwned", b"escaped\n")
        elif kind == "hardlink":
            add_special(tf, "./etc/victim", tarfile.LNKTYPE, linkname=hostdir + "/victim")
            add_file(tf, "./etc/victim", b"overwritten\n")
        elif kind == "hardlink-dotdot":
            add_special(tf, "./etc/victim", tarfile.LNKTYPE, linkname=depth + hostdir.lstrip("/") + "/victim")
            add_file(tf, "./etc/victim", b"overwritten\n")
        elif kind == "device":
            add_special(tf, "./dev/sda-evil", tarfile.BLKTYPE, devmajor=8, devminor=0, mode=0o666)
            add_special(tf, "./dev/mem-evil", tarfile.CHRTYPE, devmajor=1, devminor=1, mode=0o666)
        else:
            raise SystemExit("unknown kind " + kind)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "rootfs":
        rootfs(sys.argv[2], sys.argv[3])
    elif cmd == "oci":
        oci(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "hostile":
        hostile(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        raise SystemExit(__doc__)
