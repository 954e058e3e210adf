#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the seed inputs of every libFuzzer harness from the repository's own test data.

    test/fuzz/seeds.py OUTDIR        -> OUTDIR/fuzz-<harness>/<name>

Each seed is a real capture from test/data (nvidia-smi and rocm-smi matrices, hwloc
exports, kube-scheduler v1.20 requests, bench traces) or is built from one here: the
nvidia-smi matrices again with the terminal escape sequences R550+ drivers print on a
terminal, watch streams made of the captured Node and Pod objects, and device plugin
protobuf messages packed by hand (the field numbers of plugin/api.proto and
plugin/podresources.proto).  test/fuzz/corpus/ is these seeds merged with what long
campaigns found, minimised with libFuzzer's -merge=1 (test/fuzz/README.md).
Topology annotations come from `topofit topo convert` when a build is given
(FUZZ_BUILD, default build/); without one that harness keeps only the other seeds.
"""
import glob
import json
import os
import subprocess
import sys

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
data = os.path.join(root, "test", "data")
out = sys.argv[1]


def put(harness, name, content):
    d = os.path.join(out, "fuzz-" + harness)
    os.makedirs(d, exist_ok=True)
    if isinstance(content, str):
        content = content.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(content)


def read(path):
    with open(path, "rb") as f:
        return f.read()


topos = sorted(glob.glob(os.path.join(data, "topologies", "*.txt")))
json_files = sorted(glob.glob(os.path.join(data, "kube-scheduler-v1.20", "*", "*.json")) +
                    glob.glob(os.path.join(data, "extender", "*.json")))

# --- topology text: every capture, and nvidia-smi ones with real escape sequences --------
ESC = b"\x1b"
for t in topos:
    b = read(t)
    put("topo-text", os.path.basename(t), b)
    if b"GPU0" in b and b"rocm" not in os.path.basename(t).encode():
        # As R550+ print on a terminal: the header underlined, reset after the last title;
        # a tput sgr0 "ESC ( B" and a colour CSI on the first GPU row.
        lines = b.split(b"\n")
        for i, l in enumerate(lines):
            if l.lstrip().startswith(b"GPU0") and b"\t" in l and i + 1 < len(lines):
                s = l.lstrip()
                lines[i] = l[:len(l) - len(s)] + ESC + b"[4m" + s.rstrip() + ESC + b"[0m"
                if lines[i + 1].startswith(b"GPU0"):
                    lines[i + 1] = ESC + b"[1;32m" + lines[i + 1] + ESC + b"(B" + ESC + b"[m"
                break
        e = b"\n".join(lines).replace(b"[4m" + ESC + b"[4m", ESC + b"[4m")
        if ESC in e:
            put("topo-text", os.path.basename(t)[:-4] + "-esc.txt", e)

# --- topology annotations, written by the CLI --------------------------------------------
build = os.environ.get("FUZZ_BUILD", os.path.join(root, "build"))
cli = os.path.join(build, "cli", "topofit")
annotations = []
if os.access(cli, os.X_OK):
    for t in topos:
        p = subprocess.run([cli, "topo", "convert", t], capture_output=True)
        if p.returncode == 0 and p.stdout:
            name = os.path.basename(t)[:-4] + ".json"
            put("topo-annotation", name, p.stdout)
            annotations.append((name, p.stdout))

# --- JSON: fixtures and annotations --------------------------------------------------------
for f in json_files:
    put("json", os.path.basename(os.path.dirname(f)) + "-" + os.path.basename(f), read(f))
for name, a in annotations[:8]:
    put("json", "annotation-" + name, a)
for f in json_files:
    n = os.path.basename(os.path.dirname(f)) + "-" + os.path.basename(f)
    put("ext-codec", n, read(f))
    put("kube-decode", n, read(f))

# --- the scanner's edges (common/json-scan.c, extender/ext-args.c): where cJSON alone is
# laxer than JSON, and ExtenderArgs bodies where the scanner and the tree decoder must agree
for i, t in enumerate([b'[01,1.,-,.5,1e]', b'\x01[1,\x0b2]', b'["a\x01b","a\x00b"]',
                       b'\xef\xbb\xbf[1]', b'["\\uzzzz","\\ud800","\\udc00x","\\ud800\\u0041"]',
                       b'{"a":1,"a":2,"\\u0061":3}', b'[' + b'1' * 64 + b']',
                       b'{"k":"x\\n\\u00e9\\ud83d\\ude00\\/","n":-0.5e+2,"t":[true,false,null]}']):
    put("json", "scan-%d.json" % i, t)
POD = ('{"Pod":{"metadata":{"name":"p","namespace":"d","uid":"u"},"spec":{"containers":'
       '[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}},')
NODE = '{"metadata":{"name":"%s"%s},"status":%s}'
for i, b in enumerate([
        POD + '"Nodes":{"items":[' + NODE % ("n1", ',"annotations":{"topofit.io/topology":'
                                             '"{\\"a\\":\\"\\u00e9\\"}"}',
                                             '{"capacity":{"nvidia.com/gpu":4},"allocatable":'
                                             '{"nvidia.com/gpu":"8"}}') + ']},"NodeNames":null}',
        POD + '"Nodes":{"items":[' + NODE % ("n\\u0031", "", '{"capacity":{},"capacity":{},'
                                             '"allocatable":null}') + ']}}',
        POD + '"Nodes":{"items":[1]},"NodeNames":["x","\\u0079"]}',
        POD + '"NodeNames":["a"],"Nodes":{"items":[],"items":[]},"x":[{"a":[[]]},"\\u20ac"]}',
        POD + '"Node\\u004eames":["a"],"Pod":1}']):
    put("ext-codec", "scan-%d.json" % i, b)

# --- the topofit.io/gpus record (docs/annotations.md) -------------------------------------
put("dp-gpus", "extender.json", '{"version":1,"node":"node-1","containers":[{"name":"main",'
    '"init":false,"indices":[0,1],"uuids":["GPU-0","GPU-1"]}]}')
put("dp-gpus", "init.json", '{"version":1,"containers":[{"name":"setup","init":true,'
    '"indices":[2],"uuids":[""]},{"name":"main","indices":[2,3],"uuids":["",""]}]}')
put("dp-gpus", "uuids.json", '{"version":1,"node":"node-1","containers":[{"name":"a",'
    '"uuids":["GPU-6"]},{"name":"b","uuids":["GPU-7"]}]}')
for f in glob.glob(os.path.join(data, "kube-scheduler-v1.20", "*", "pod-after-bind.json")):
    put("dp-gpus", os.path.basename(os.path.dirname(f)) + "-pod-after-bind.json", read(f))

# --- a gang member's topofit.io/group-domain record (docs/annotations.md) and a PodGroup ---
put("ext-codec", "group-record.json", '{"version":1,"group":"podgroup/ml/train","level":0,'
    '"domain":"cluster-uuid.2","size":4,"count":4,"require":0,"whole":true}')
put("ext-codec", "group-record-node.json", '{"version":1,"group":"label/ml/job-\\u0061",'
    '"level":4,"domain":"node-1","size":2,"count":8,"require":1,"whole":false}')
put("kube-decode", "podgroup-v1beta1.json",
    read(os.path.join(data, "kube", "podgroup-v1beta1.json")))

# --- bench traces and hwloc exports ---------------------------------------------------------
for f in sorted(glob.glob(os.path.join(data, "bench", "*"))):
    put("bench-trace", os.path.basename(f), read(f))
for f in sorted(glob.glob(os.path.join(data, "hwloc", "*.xml")) + glob.glob(os.path.join(data, "*.xml"))):
    put("hwloc", os.path.basename(f), read(f))

# --- watch streams: {"type","object"} lines of the captured Nodes and Pod -------------------
# The first byte is the harness's: chunk size in the low 6 bits, 0x80 for a pods watch, 0x40
# (without 0x80) for a podgroups watch.
req = json.loads(read(os.path.join(data, "kube-scheduler-v1.20", "nodecache-false", "01-filter.json")))
pod = json.loads(read(os.path.join(data, "kube-scheduler-v1.20", "nodecache-false", "pod-after-bind.json")))
nodes = req["Nodes"]["items"]


def ev(t, o):
    return json.dumps({"type": t, "object": o}, separators=(",", ":")).encode() + b"\n"


def bookmark(rv):
    return ev("BOOKMARK", {"kind": "Node", "apiVersion": "v1", "metadata": {"resourceVersion": rv}})


stream = b"".join(ev("ADDED", n) for n in nodes[:3]) + b"\n" + bookmark("9000")
put("kube-watch", "nodes-added", b"\x00" + stream)
put("kube-watch", "nodes-chunked-7", b"\x07" + stream)
mod = json.loads(json.dumps(nodes[0]))
mod["metadata"]["resourceVersion"] = "9001"
put("kube-watch", "node-modified-deleted", b"\x01" + ev("MODIFIED", mod) + ev("DELETED", mod))
put("kube-watch", "pod-lifecycle", b"\x80" + ev("ADDED", pod) + ev("MODIFIED", pod) + b"\r\n" +
    ev("DELETED", pod))
put("kube-watch", "pod-chunked-3", b"\x83" + ev("ADDED", pod))
put("kube-watch", "error-410", b"\x00" + bookmark("5") + ev("ERROR", {
    "kind": "Status", "apiVersion": "v1", "status": "Failure",
    "message": "too old resource version: 5 (9000)", "reason": "Expired", "code": 410}))
put("kube-watch", "cut-mid-event", b"\x00" + ev("ADDED", nodes[0])[:200])
# Pods another scheduler bound, whose group is named by spec.schedulingGroup, a JobSet
# label and a Volcano annotation (the keys the extender's cache keeps, fuzz-kube-node.h).
grouped = json.loads(json.dumps(pod))
grouped["spec"]["schedulingGroup"] = {"podGroupName": "train"}
grouped["metadata"].setdefault("labels", {})["jobset.sigs.k8s.io/jobset-name"] = "js"
grouped["metadata"].setdefault("annotations", {})["scheduling.k8s.io/group-name"] = "vg"
put("kube-decode", "pod-grouped.json", json.dumps(grouped))
put("kube-watch", "pod-grouped", b"\x80" + ev("ADDED", grouped) + ev("MODIFIED", grouped))
podgroup = json.loads(read(os.path.join(data, "kube", "podgroup-v1beta1.json")))
put("kube-watch", "podgroup-lifecycle", b"\x40" + ev("ADDED", podgroup) + ev("MODIFIED", podgroup) +
    ev("DELETED", podgroup))

# --- device plugin protobuf messages -------------------------------------------------------
# The first byte is the harness's: 0 Allocate, 1 GetPreferredAllocation, 2 PreStart,
# 3 PreferredAllocationResponse, 4 PodResources ListPodResourcesResponse.


def varint(n):
    b = bytearray()
    while True:
        c = n & 0x7f
        n >>= 7
        b.append(c | (0x80 if n else 0))
        if not n:
            return bytes(b)


def ld(field, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def vi(field, n):
    return varint(field << 3) + varint(n & 0xffffffffffffffff)


def strs(field, ids):
    return b"".join(ld(field, i) for i in ids)


gpus = ["GPU-%d" % i for i in range(8)]
put("dp-wire", "allocate-2x2", b"\x00" + ld(1, strs(1, gpus[:2])) + ld(1, strs(1, gpus[2:4])))
put("dp-wire", "allocate-unknown-id", b"\x00" + ld(1, strs(1, ["GPU-0", "GPU-99"])))
put("dp-wire", "preferred-4-of-8", b"\x01" + ld(1, strs(1, gpus) + strs(2, gpus[6:7]) + vi(3, 4)))
put("dp-wire", "preferred-fallback", b"\x01" + ld(1, strs(1, ["GPU-x", "GPU-y", "GPU-0"]) +
                                                  strs(2, ["GPU-y"]) + vi(3, 2)))
put("dp-wire", "preferred-negative-size", b"\x01" + ld(1, strs(1, gpus[:2]) + vi(3, -1)))
put("dp-wire", "prestart", b"\x02" + strs(1, gpus[:2]))
put("dp-wire", "preferred-response", b"\x03" + ld(1, strs(1, gpus[:4])))
cd = ld(1, "nvidia.com/gpu") + strs(2, gpus[:2])
other = ld(1, "example.com/fpga") + strs(2, ["fpga-0"])
pr = ld(1, "train-0") + ld(2, "default") + ld(3, ld(1, "main") + ld(2, cd) + ld(2, other))
put("dp-wire", "podresources-list", b"\x04" + ld(1, pr) + ld(1, ld(1, "idle") + ld(2, "kube-system")))
