# shellcheck shell=bash
# Cluster content for the end-to-end scenarios, sourced after lib.sh: GPU Nodes made from
# the real matrices in test/data/topologies (annotations produced by `topofit topo
# convert`), pods asking for GPUs, and what the API says happened to them.

E2E_DATA=$E2E_TOP/test/data

# e2e_plain_nodes N: N Nodes of 8 GPUs without a topology annotation.
e2e_plain_nodes() {
        local i
        for i in $(seq "$1"); do
                e2e_node "plain-$i" 8 || return 1
        done
}

# e2e_gpu_pod NAME COUNT [PLACEMENT] [NODE] [GPUS_ANNOTATION] [GROUP] [PRIORITY_CLASS]: a pod
# asking for COUNT GPUs in its limits (one container), labelled topofit-e2e=GROUP (default
# scenario).
# With NODE it is created already bound there (an existing workload), with GPUS_ANNOTATION
# as its topofit.io/gpus.
e2e_gpu_pod() {
        local name=$1 count=$2 placement=${3:-} node=${4:-} gpus=${5:-} group=${6:-scenario}
        python3 - "$name" "$count" "$placement" "$node" "$gpus" "$group" "${7:-}" <<'PY' |
import json, sys
name, count, placement, node, gpus, group, prio = sys.argv[1:8]
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
if prio:
    spec["priorityClassName"] = prio
pod = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": name, "namespace": "default", "labels": {"topofit-e2e": group},
                    "annotations": ann},
       "spec": spec}
print(json.dumps(pod))
PY
                kubectl create -f - >/dev/null
}

# e2e_gpu_pods PREFIX FROM TO GROUP: pods PREFIX{FROM..TO} of one GPU each, created in one
# request, so they reach the scheduler as one burst.
e2e_gpu_pods() {
        python3 - "$@" <<'PY' | kubectl create -f - >/dev/null
import json, os, sys
prefix, lo, hi, group = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
res = {"nvidia.com/gpu": "1", "cpu": "10m", "memory": "16Mi"}
items = [{"apiVersion": "v1", "kind": "Pod",
          "metadata": {"name": f"{prefix}{i}", "namespace": "default",
                       "labels": {"topofit-e2e": group}},
          "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.2",
                                   "resources": {"limits": res, "requests": res}}],
                   "terminationGracePeriodSeconds": 0}}
         for i in range(lo, hi + 1)]
if os.environ.get("E2E_SCHEDULER_NAME"):
    for it in items:
        it["spec"]["schedulerName"] = os.environ["E2E_SCHEDULER_NAME"]
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
PY
}

# e2e_gpu_pods_paced PREFIX LO HI GROUP: the same pods one API call each, in order, so a
# burst arrives over a few seconds (each call takes ~0.1 s) and a fault can land mid-way.
e2e_gpu_pods_paced() {
        local i
        for (( i = $2; i <= $3; i++ )); do
                e2e_gpu_pods "$1" "$i" "$i" "$4" || return 1
        done
}

# e2e_pod_node NAME: the node the pod is bound to ("" while pending).
e2e_pod_node() {
        kubectl get pod "$1" -o 'jsonpath={.spec.nodeName}'
}

e2e_pod_bound() {
        [ -n "$(e2e_pod_node "$1")" ]
}

# The topofit CLI that meson built, or failure.
e2e_cli_bin() {
        local b
        for b in "${E2E_CLI_BIN:-}" "$E2E_TOP/build/cli/topofit"; do
                [ -n "$b" ] && [ -x "$b" ] && { echo "$b"; return 0; }
        done
        return 1
}

# e2e_topology_node NAME MATRIX: a Node whose topofit.io/topology annotation is
# `topofit topo convert MATRIX` and whose nvidia.com/gpu count is its GPU count.
e2e_topology_node() {
        local name=$1 matrix=$2 ann=$E2E_DIR/topology-$1.json gpus
        "$E2E_CLI" topo convert "$matrix" >"$ann" || return 1
        gpus=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["gpus"]))' "$ann") ||
                return 1
        e2e_node "$name" "$gpus" "$ann" || return 1
        E2E_TOPO_NODES+=("$name:$ann")
}

# The scenario nodes: four real machines of different shapes.
e2e_topology_nodes() {
        local t=$E2E_DATA/topologies
        e2e_topology_node dgx1 "$t/dgx1-v100-sxm2-oneflow.txt" &&          # hybrid cube mesh
        e2e_topology_node h100 "$t/hgx-h100-13nic-mlx5ib-eth-penny.txt" && # NVSwitch NV18
        e2e_topology_node hgx4 "$t/hgx-a100-4gpu-sxm4-nv4-della.txt" &&    # 4x A100 all NV4
        e2e_topology_node pcie8 "$t/rtx4090-8gpu-pcie-server.txt"          # PCIe only
}

# e2e_expect COUNT [PLACEMENT]: for every topology node, what `topofit place` picks for a
# COUNT-GPU request given the GPUs that bound pods' topofit.io/gpus annotations hold now.
# Prints {"node": {place's JSON}, ...} for the nodes where a set exists.
e2e_expect() {
        local count=$1 placement=${2:-}
        kubectl get pods -o json >"$E2E_DIR/pods-now.json" || return 1
        python3 "$E2E_TOP/test/e2e/expect.py" --cli "$E2E_CLI" --pods "$E2E_DIR/pods-now.json" \
                --count "$count" --placement "$placement" "${E2E_TOPO_NODES[@]}"
}

# e2e_check_placement POD EXPECT_FILE MODE: prints a one-line verdict; fails when the pod's
# node is not among the highest-priority feasible nodes or (API mode, where the extender
# binds) its annotated GPUs differ from place's set.
e2e_check_placement() {
        local gpus=()
        kubectl get pod "$1" -o json >"$E2E_DIR/pod-$1.json" || { echo "cannot read $1"; return 1; }
        [ "${3:-api}" = api ] || gpus=(--no-gpus)
        python3 "$E2E_TOP/test/e2e/expect.py" --check "$E2E_DIR/pod-$1.json" --expect "$2" "${gpus[@]}"
}

e2e_bound_count() {
        kubectl get pods -l "topofit-e2e=$1" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' |
                grep -c .
}

e2e_pod_gone() {
        ! kubectl get pod "$1" >/dev/null 2>&1
}

e2e_no_pods() {
        [ -z "$(kubectl get pods -l "topofit-e2e=$1" -o name)" ]
}

e2e_bound_at_least() {
        [ "$(e2e_bound_count "$2")" -ge "$1" ]
}

# No (node, GPU index) on two live pods, and every bound GPU pod carries its annotation.
e2e_check_no_double_allocation() {
        kubectl get pods -o json >"$E2E_DIR/pods-final.json" || return 1
        python3 "$E2E_TOP/test/e2e/expect.py" --no-double "$E2E_DIR/pods-final.json"
}
