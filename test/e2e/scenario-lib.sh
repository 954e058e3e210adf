# shellcheck shell=bash
# Cluster content for the end-to-end scenarios, sourced after lib.sh: GPU Nodes made from
# the real matrices in ../shared/topologies (annotations produced by `topofit topo
# convert`), pods asking for GPUs, and what the API says happened to them.

E2E_SHARED=${TOPOFIT_SHARED:-$E2E_TOP/../shared}

# e2e_plain_nodes N: N Nodes of 8 GPUs without a topology annotation.
e2e_plain_nodes() {
        local i
        for i in $(seq "$1"); do
                e2e_node "plain-$i" 8 || return 1
        done
}

# e2e_gpu_pod NAME COUNT [PLACEMENT] [NODE] [GPUS_ANNOTATION]: a pod asking for COUNT GPUs
# in its limits (one container).  With NODE it is created already bound there (an existing
# workload), with GPUS_ANNOTATION as its topofit.io/gpus.
e2e_gpu_pod() {
        local name=$1 count=$2 placement=${3:-} node=${4:-} gpus=${5:-}
        /usr/bin/python3 - "$name" "$count" "$placement" "$node" "$gpus" <<'PY' |
import json, sys
name, count, placement, node, gpus = sys.argv[1:6]
ann = {}
if placement:
    ann["topofit.io/placement"] = placement
if gpus:
    ann["topofit.io/gpus"] = gpus
res = {"nvidia.com/gpu": count, "cpu": "10m", "memory": "16Mi"}
spec = {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.2",
                        "resources": {"limits": res, "requests": res}}],
        "terminationGracePeriodSeconds": 0}
if node:
    spec["nodeName"] = node
pod = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": name, "namespace": "default", "labels": {"topofit-e2e": "true"},
                    "annotations": ann},
       "spec": spec}
print(json.dumps(pod))
PY
                kubectl create -f - >/dev/null
}

# e2e_pod_node NAME: the node the pod is bound to ("" while pending).
e2e_pod_node() {
        kubectl get pod "$1" -o 'jsonpath={.spec.nodeName}'
}

e2e_pod_bound() {
        [ -n "$(e2e_pod_node "$1")" ]
}
