#!/usr/bin/env python3
"""Assertions of the kubelet stage (test/e2e/kubelet-stage) over what the API server and
the kubelet's PodResources API (test/e2e/podres.py) say.  Prints one line saying what it
saw; exit status 1 when the assertion does not hold.

    kubelet-check.py match PODS.json PODRES.json POD...   each POD's container "main" got
        exactly the devices its topofit.io/gpus names (UUIDs where the extender wrote them,
        else gpu<index>, topofit-node's IDs for GPUs without UUIDs)
    kubelet-check.py disjoint PODRES.json                no device on two containers
    kubelet-check.py nvlink NODE.json PODRES.json POD     every pair of the pod's GPUs is
        NVLink-connected in the node's topofit.io/topology annotation
"""
import json
import sys


def annotated_ids(pod):
    """The device IDs topofit.io/gpus names for container main, or None without one."""
    raw = pod["metadata"].get("annotations", {}).get("topofit.io/gpus")
    if raw is None:
        return None
    a = json.loads(raw)
    for c in a.get("containers", []):
        if c.get("name") == "main":
            uuids = c.get("uuids") or []
            return sorted(u if u else "gpu%d" % i
                          for i, u in zip(c["indices"], uuids + [""] * len(c["indices"])))
    return []


def got(podres, name):
    return podres.get("default/%s/main" % name, [])


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "match":
        pods = {p["metadata"]["name"]: p for p in json.load(open(args[0]))["items"]}
        podres = json.load(open(args[1]))
        bad, seen = [], []
        for name in args[2:]:
            want, have = annotated_ids(pods[name]), got(podres, name)
            seen.append("%s=%s" % (name, ",".join(have) or "-"))
            if want is None or want != have:
                bad.append("%s: annotation %s, kubelet %s" % (name, want, have))
        print("; ".join(bad) if bad else " ".join(seen))
        return 1 if bad else 0
    if cmd == "disjoint":
        podres = json.load(open(args[0]))
        owner, dup = {}, []
        for ctr, ids in podres.items():
            for i in ids:
                if i in owner:
                    dup.append("%s on %s and %s" % (i, owner[i], ctr))
                owner[i] = ctr
        print("; ".join(dup) if dup else "%d devices on %d containers, none twice" % (len(owner), len(podres)))
        return 1 if dup else 0
    if cmd == "nvlink":
        node = json.load(open(args[0]))
        topo = json.loads(node["metadata"]["annotations"]["topofit.io/topology"])
        links = [row.split() for row in topo["links"]]
        ids = got(json.load(open(args[1])), args[2])
        idx = [int(i[3:]) for i in ids if i.startswith("gpu")]
        pairs = [(a, b, links[a][b]) for a in idx for b in idx if a < b]
        bad = [p for p in pairs if not p[2].startswith("NV")]
        print("%s: %s" % (args[2], " ".join("%d-%d:%s" % p for p in pairs) or "no pairs"))
        return 1 if bad or len(idx) != len(ids) or len(idx) < 2 else 0
    print("unknown command " + cmd)
    return 2


if __name__ == "__main__":
    sys.exit(main())
