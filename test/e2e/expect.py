#!/usr/bin/env python3
"""What the end-to-end scenarios expect, computed with topofit's own CLI.

--count K [--placement P] NODE:ANNOTATION...: for each node, the GPUs that live pods bound
  there hold (their topofit.io/gpus annotations, from --pods, a `kubectl get pods -o json`)
  are taken; `topofit place --topology ANNOTATION --count K --free FREE [--require nvlink]
  --json` says the set it would pick and the node priority.  Prints {node: result} for the
  nodes where a set exists, each with "final": the extender's documented priority
  (docs/annotations.md, "Priority"): place's node priority averaged with the set's busbw
  relative to the best busbw of the fitting nodes, round((priority + 10 * busbw / top) / 2);
  place's priority alone when no set has bandwidth (one GPU).  The cluster term, which may
  rank first a node whose own priority is lower, is not modelled: the cases using this run
  the extender with --cluster-share 0.
  Nodes where kube-scheduler's own resource fit fails (GPU requests of the pods bound there
  plus K above the node's GPU count) are left out: the extender never sees them.
--check POD_JSON --expect FILE [--no-gpus]: the pod's node must be one of the
  highest-priority nodes in FILE, and (unless --no-gpus: an extender that does not bind)
  its annotated GPU indices exactly place's set on that node.  Prints a verdict.
--no-double PODS_JSON: no (node, GPU index) held by two live pods; every bound pod that asks
  for GPUs carries an annotation naming its node, with as many GPUs as it asked for.
"""
import argparse
import json
import subprocess
import sys

GPUS_KEY = "topofit.io/gpus"
REQUIRE = {"nvlink-required": "nvlink", "numa": "numa", "pcie-switch": "pcie-switch", "nic": "nic"}


def live(pod):
    return pod.get("status", {}).get("phase") not in ("Succeeded", "Failed") and \
        not pod["metadata"].get("deletionTimestamp")


def indices(pod):
    ann = pod["metadata"].get("annotations", {}).get(GPUS_KEY)
    if not ann:
        return None
    doc = json.loads(ann)
    return [i for c in doc["containers"] if not c.get("init") for i in c["indices"]], doc


def asked(pod):
    return sum(int(c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0))
               for c in pod["spec"]["containers"])


def expect(a):
    pods = json.load(open(a.pods))["items"]
    out = {}
    for spec in a.nodes:
        node, ann = spec.split(":", 1)
        n = len(json.load(open(ann))["gpus"])
        used = set()
        requested = 0
        for p in pods:
            if live(p) and p["spec"].get("nodeName") == node:
                requested += asked(p)
                got = indices(p)
                if got:
                    used.update(got[0])
        free = [i for i in range(n) if i not in used]
        if not free or requested + a.count > n:
            continue
        cmd = [a.cli, "place", "--topology", ann, "--count", str(a.count),
               "--free", ",".join(map(str, free)), "--json"]
        if a.placement in REQUIRE:
            cmd += ["--require", REQUIRE[a.placement]]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode == 0:
            res = json.loads(r.stdout)
            res["free"] = free
            out[node] = res
    top = max((e["busbw_gbps"] for e in out.values()), default=0)
    for e in out.values():
        e["final"] = e["priority"]
        if top > 0:
            e["final"] = max(0, min(10, int((e["priority"] + 10 * e["busbw_gbps"] / top) / 2 + 0.5)))
    json.dump(out, sys.stdout, sort_keys=True)
    print()


def check(a):
    pod = json.load(open(a.check))
    exp = json.load(open(a.expect))
    node = pod["spec"].get("nodeName")
    if not exp:
        print(f"placed on {node}, but topofit place found no feasible node")
        return 1
    best = max(e["final"] for e in exp.values())
    top = sorted(n for n, e in exp.items() if e["final"] == best)
    got = indices(pod)
    cands = ", ".join(f"{n}={e['final']} (place {e['priority']}, {e['busbw_gbps']} GB/s)"
                      for n, e in sorted(exp.items()))
    if node not in top:
        print(f"placed on {node}; topofit's best (priority {best}): {top}; all: {cands}")
        return 1
    if a.no_gpus:
        print(f"{node} (priority {best}; candidates: {cands}); GPU set not checked: the "
              f"extender does not bind; place picks {exp[node]['gpus']}")
        return 0
    if got is None:
        print(f"placed on {node} without a {GPUS_KEY} annotation")
        return 1
    want = exp[node]["gpus"]
    if sorted(got[0]) != sorted(want):
        print(f"on {node} got GPUs {sorted(got[0])}, topofit place picks {want}")
        return 1
    print(f"{node} GPUs {','.join(map(str, sorted(got[0])))} busbw {exp[node]['busbw_gbps']} GB/s "
          f"priority {best} (candidates: {cands})")
    return 0


def no_double(a):
    pods = json.load(open(a.no_double))["items"]
    held = {}
    bad = []
    for p in pods:
        node = p["spec"].get("nodeName")
        if not live(p) or not node or asked(p) == 0:
            continue
        name = p["metadata"]["name"]
        got = indices(p)
        if got is None:
            bad.append(f"{name} on {node} has no {GPUS_KEY}")
            continue
        if got[1].get("node") != node:
            bad.append(f"{name}: annotation names {got[1].get('node')}, bound to {node}")
        if len(got[0]) != asked(p):
            bad.append(f"{name}: {len(got[0])} GPUs annotated, {asked(p)} asked")
        for i in got[0]:
            if (node, i) in held:
                bad.append(f"GPU {i} of {node} is on {held[(node, i)]} and {name}")
            held[(node, i)] = name
    for b in bad:
        print(b, file=sys.stderr)
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli")
    ap.add_argument("--pods")
    ap.add_argument("--count", type=int)
    ap.add_argument("--placement", default="")
    ap.add_argument("--check")
    ap.add_argument("--expect")
    ap.add_argument("--no-gpus", action="store_true")
    ap.add_argument("--no-double")
    ap.add_argument("nodes", nargs="*")
    a = ap.parse_args()
    if a.check:
        return check(a)
    if a.no_double:
        return no_double(a)
    expect(a)
    return 0


sys.exit(main())
