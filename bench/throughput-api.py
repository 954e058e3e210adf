#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The API-server side of bench/throughput: creates the fake GPU nodes and the pending pods
# over one keep-alive TLS connection (admin client certificate of the e2e control plane),
# watches the pods until every one is bound (recording when each binding was seen), and
# checks the outcome.  Standard library only.  Subcommands (E2E_DIR and E2E_API from
# test/e2e/lib.sh in the environment):
#   nodes N GPUS ANNOTATION_FILE   N Ready nodes bench-node-NNNN with GPUS nvidia.com/gpu
#   pods N SIZES                   N pods in namespace bench, GPU counts cycling SIZES (1,1,2,4)
#   watch N TIMEOUT OUT.json       waits for N bound pods; writes the binding times
#   check GPUS_PER_NODE            every pod bound, no node over its GPUs, and where pods carry
#                                  topofit.io/gpus, no GPU index twice on a node
# Exit status 0, or 1 with the reason on stderr.
import http.client
import json
import os
import ssl
import sys
import time
import urllib.parse

NS = "bench"


def conn():
    d = os.environ["E2E_DIR"] + "/pki"
    u = urllib.parse.urlparse(os.environ["E2E_API"])
    ctx = ssl.create_default_context(cafile=d + "/ca.crt")
    ctx.load_cert_chain(d + "/admin.crt", d + "/admin.key")
    return http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=60)


def call(c, method, path, body=None, ctype="application/json", ok=(200, 201)):
    data = json.dumps(body).encode() if body is not None else None
    c.request(method, path, data, {"Content-Type": ctype} if data else {})
    r = c.getresponse()
    out = r.read()
    if r.status not in ok:
        sys.exit("throughput-api: %s %s: HTTP %d: %s" % (method, path, r.status, out[:300]))
    return json.loads(out) if out else None


def nodes(n, gpus, ann_file):
    ann = open(ann_file).read().strip() if ann_file != "-" else None
    c = conn()
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    res = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    for i in range(n):
        name = "bench-node-%04d" % i
        meta = {"name": name, "labels": {"kubernetes.io/hostname": name, "topofit.io/gpu": "true"}}
        if ann:
            meta["annotations"] = {"topofit.io/topology": ann}
        call(c, "POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": meta,
                                          "spec": {}})
        call(c, "PATCH", "/api/v1/nodes/%s/status" % name,
             {"status": {"capacity": res, "allocatable": res,
                         "conditions": [{"type": "Ready", "status": "True",
                                         "reason": "KubeletReady", "message": "bench",
                                         "lastHeartbeatTime": now, "lastTransitionTime": now}]}},
             "application/merge-patch+json")


def pods(n, sizes):
    sizes = [int(s) for s in sizes.split(",")]
    c = conn()
    call(c, "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": NS}}, ok=(201, 409))
    for i in range(n):
        g = str(sizes[i % len(sizes)])
        call(c, "POST", "/api/v1/namespaces/%s/pods" % NS, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "bench-pod-%05d" % i, "namespace": NS},
            "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"limits": {"nvidia.com/gpu": g},
                                                   "requests": {"nvidia.com/gpu": g}}}],
                     "terminationGracePeriodSeconds": 0}})


def watch(n, timeout, out):
    """Lists, then watches from that list's resourceVersion; records the wall time at which
    each pod was first seen bound."""
    c = conn()
    lst = call(c, "GET", "/api/v1/namespaces/%s/pods" % NS)
    bound = {}
    for p in lst["items"]:
        if p["spec"].get("nodeName"):
            bound[p["metadata"]["name"]] = time.time()
    rv = lst["metadata"]["resourceVersion"]
    deadline = time.time() + timeout
    while len(bound) < n and time.time() < deadline:
        c = conn()
        c.request("GET", "/api/v1/namespaces/%s/pods?watch=1&resourceVersion=%s&timeoutSeconds=%d"
                  % (NS, rv, max(1, int(deadline - time.time()))))
        r = c.getresponse()
        if r.status != 200:
            sys.exit("throughput-api: watch: HTTP %d" % r.status)
        while len(bound) < n:
            line = r.readline()
            if not line:
                break
            ev = json.loads(line)
            o = ev["object"]
            if ev["type"] == "ERROR":
                sys.exit("throughput-api: watch error: %s" % o.get("message"))
            rv = o["metadata"]["resourceVersion"]
            if o.get("spec", {}).get("nodeName") and o["metadata"]["name"] not in bound:
                bound[o["metadata"]["name"]] = time.time()
        c.close()
    json.dump({"n": n, "bound": bound}, open(out, "w"))
    if len(bound) < n:
        sys.exit("throughput-api: only %d of %d pods bound within %ds" % (len(bound), n, timeout))


def check(gpus_per_node):
    c = conn()
    lst = call(c, "GET", "/api/v1/namespaces/%s/pods" % NS)
    per_node, idx, annotated = {}, {}, 0
    for p in lst["items"]:
        node = p["spec"].get("nodeName")
        if not node:
            sys.exit("throughput-api: %s is not bound" % p["metadata"]["name"])
        g = int(p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
        per_node[node] = per_node.get(node, 0) + g
        a = (p["metadata"].get("annotations") or {}).get("topofit.io/gpus")
        if a:
            annotated += 1
            got = [i for ct in json.loads(a)["containers"] for i in ct["indices"]]
            if len(got) != g:
                sys.exit("throughput-api: %s asked %d GPUs, got %s" % (p["metadata"]["name"], g, got))
            for i in got:
                if (node, i) in idx:
                    sys.exit("throughput-api: GPU %d of %s given to %s and %s"
                             % (i, node, idx[(node, i)], p["metadata"]["name"]))
                idx[(node, i)] = p["metadata"]["name"]
    over = [n for n, g in per_node.items() if g > gpus_per_node]
    if over:
        sys.exit("throughput-api: nodes over their GPUs: %s" % over[:5])
    print("throughput-api: %d pods bound on %d nodes, none over %d GPUs; %d with topofit.io/gpus, "
          "no GPU twice" % (len(lst["items"]), len(per_node), gpus_per_node, annotated))


def main():
    cmd, a = sys.argv[1], sys.argv[2:]
    if cmd == "nodes":
        nodes(int(a[0]), int(a[1]), a[2])
    elif cmd == "pods":
        pods(int(a[0]), a[1])
    elif cmd == "watch":
        watch(int(a[0]), int(a[1]), a[2])
    elif cmd == "check":
        check(int(a[0]))
    else:
        sys.exit("throughput-api: unknown command " + cmd)


if __name__ == "__main__":
    main()
