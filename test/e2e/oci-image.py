#!/usr/bin/env python3
"""Writes an OCI image layout tarball holding one static binary, for `ctr images import`.

    oci-image.py OUT.tar BINARY PATH_IN_IMAGE NAME [NAME...]

One layer (uncompressed tar with the binary at PATH_IN_IMAGE, mode 0755, owned by root),
a config whose entrypoint is that path, one manifest, and an index entry per NAME
(io.containerd.image.name), so the same bytes import as e.g. the sandbox (pause) image and a
workload image.  No registry is reachable in the end-to-end stage: this is how it gets images.
"""
import hashlib
import io
import json
import sys
import tarfile


def blob(tar, data):
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest}")
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
    return {"digest": f"sha256:{digest}", "size": len(data)}


def main():
    out, binary, path, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    exe = open(binary, "rb").read()
    layer_io = io.BytesIO()
    with tarfile.open(fileobj=layer_io, mode="w", format=tarfile.PAX_FORMAT) as lt:
        info = tarfile.TarInfo(path.lstrip("/"))
        info.size, info.mode = len(exe), 0o755
        lt.addfile(info, io.BytesIO(exe))
    layer = layer_io.getvalue()
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = {"architecture": "amd64", "os": "linux",
              "config": {"Entrypoint": [path], "Env": ["PATH=/"]},
              "rootfs": {"type": "layers", "diff_ids": [diff_id]}}
    with tarfile.open(out, "w") as tar:
        lay = blob(tar, layer)
        cfg = blob(tar, json.dumps(config).encode())
        manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "config": dict(mediaType="application/vnd.oci.image.config.v1+json", **cfg),
                    "layers": [dict(mediaType="application/vnd.oci.image.layer.v1.tar", **lay)]}
        man = blob(tar, json.dumps(manifest).encode())
        index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                 "manifests": [dict(mediaType="application/vnd.oci.image.manifest.v1+json",
                                    platform={"architecture": "amd64", "os": "linux"},
                                    annotations={"io.containerd.image.name": n,
                                                 "org.opencontainers.image.ref.name": n.rsplit(":", 1)[-1]},
                                    **man) for n in names]}
        for name, data in (("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'),
                           ("index.json", json.dumps(index).encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


if __name__ == "__main__":
    main()
