# shellcheck shell=bash
# The node side of the kubelet stage (test/e2e/kubelet-stage), sourced after lib.sh: a
# containerd with its root, state and socket in $E2E_DIR/containerd (native snapshotter, no
# CNI), a local OCI image for the sandbox and the workload (no registry is reachable), and
# per node a real kubelet and topofit-node.  The kubelet is that of E2E_K8S_VERSION, the
# control plane's: 1.37.2 (the current release) or 1.20.2 (the legacy one, e2e_legacy).
#
# The kubelet keeps its device plugin registration socket at the fixed path
# /var/lib/kubelet/device-plugins/kubelet.sock (pluginapi.KubeletSocket; --root-dir does
# not move it, 1.37 included).  So that the stage touches nothing of the host's, the
# kubelet and topofit-node run in a private mount namespace (held open by one `unshare -m`
# process) where /var/lib is a bind mount of $E2E_DIR/varlib; everything else (the root
# dir, the pod resources socket, containerd) lives in $E2E_DIR and is the same path on both
# sides.  Two things stay on the host's paths: containerd 1.6's shim sockets in
# /run/containerd/s, and the container logs the kubelet asks containerd to write under
# /var/log/pods (with links in /var/log/containers).  kl_lock makes two stages on one
# machine take turns; kl_down removes the log directories of the stage's own pods (by UID).

KL_LOCK=${KL_LOCK:-/run/lock/topofit-kubelet-stage.lock}
KL_LOCK_WAIT_S=${KL_LOCK_WAIT_S:-1800}   # bound on waiting for another stage to finish

# kl_lock: takes the machine-wide lock of the kubelet stage on fd 8 (held until exit),
# waiting at most KL_LOCK_WAIT_S for a stage that holds it.
kl_lock() {
        mkdir -p "$(dirname "$KL_LOCK")" 2>/dev/null
        exec 8>>"$KL_LOCK" || return 1
        flock -n 8 && return 0
        e2e_log "another kubelet stage holds $KL_LOCK; waiting (at most ${KL_LOCK_WAIT_S}s)"
        flock -w "$KL_LOCK_WAIT_S" 8
}

E2E_IMAGE=topofit.local/e2e-sleep:1     # the workload image
E2E_PAUSE_IMAGE=topofit.local/pause:1   # the sandbox image containerd is configured with
E2E_CNI_BIN=${E2E_CNI_BIN:-/usr/lib/cni} # Debian's containernetworking-plugins

# kl_images: a static do-nothing binary (waits for SIGTERM) packed as an OCI image under
# both names, imported into containerd's k8s.io namespace, unpacked for the native
# snapshotter.
kl_images() {
        local d=$E2E_DIR/image
        mkdir -p "$d"
        cat >"$d/sleep.c" <<'C'
#include <signal.h>
#include <unistd.h>
static void bye(int s) { (void)s; _exit(0); }
int main(void) { signal(SIGTERM, bye); signal(SIGINT, bye); for (;;) pause(); }
C
        cc -static -Os -s -o "$d/sleep" "$d/sleep.c" || return 1
        python3 "$E2E_TOP/test/e2e/oci-image.py" "$d/image.tar" "$d/sleep" /sleep \
                "$E2E_IMAGE" "$E2E_PAUSE_IMAGE" || return 1
        kl_ctr images import --snapshotter native "$d/image.tar" >&2
}

# kl_ctr ARGS...: ctr against the stage's containerd, namespace k8s.io (the CRI's).
kl_ctr() {
        "${E2E_CTR:-ctr}" --address "$E2E_CTRD_SOCK" --namespace k8s.io "$@"
}

kl_containerd_version() {
        "${E2E_CONTAINERD:-containerd}" --version | awk '{print $3}'
}

# kl_containerd: containerd in $E2E_DIR/containerd, waits until the CRI answers.
kl_containerd() {
        local d=$E2E_DIR/containerd
        mkdir -p "$d/root" "$d/state" "$d/cni-conf"
        E2E_CTRD_SOCK=$d/containerd.sock
        # containerd 1.6 keeps its shims' sockets in /run/containerd/s whatever its state
        # directory; kl_down removes that directory again when this stage made it.
        [ -d /run/containerd ] || KL_MADE_RUN_CONTAINERD=1
        cat >"$d/config.toml" <<TOML
version = 2
root = "$d/root"
state = "$d/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.internal.v1.opt", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$E2E_CTRD_SOCK"
[ttrpc]
  address = "$d/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$E2E_PAUSE_IMAGE"
  disable_apparmor = true
  # The sandbox asks for oom_score_adj -998, which needs CAP_SYS_RESOURCE; where the stage
  # itself runs in a container without it, runc fails ("can't get final child's PID from
  # pipe").  Never below containerd's own value instead.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "$d/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    conf_dir = "$d/cni-conf"
    bin_dir = "$E2E_CNI_BIN"
TOML
        # Only the loopback plugin: the runtime network is ready (so is the node) and the
        # stage's pods use the host's network anyway.
        cat >"$d/cni-conf/10-loopback.conflist" <<'JSON'
{"cniVersion": "1.0.0", "name": "topofit-e2e-lo", "plugins": [{"type": "loopback"}]}
JSON
        e2e_start containerd "${E2E_CONTAINERD:-containerd}" --config "$d/config.toml" --log-level info
        e2e_wait "$E2E_WAIT_S" containerd kl_ctr version
}

# kl_ns: the mount namespace the node side runs in (see the top of this file).
kl_ns() {
        mkdir -p "$E2E_DIR/varlib/kubelet/device-plugins"
        e2e_start node-ns unshare --mount --propagation private sh -c \
                'mount --bind "$1" /var/lib && exec sleep 86400' sh "$E2E_DIR/varlib"
        e2e_wait 10 "the node mount namespace" kl_ns_ready
}

kl_ns_ready() {
        nsenter -t "$(cat "$E2E_DIR/node-ns.pid")" -m test -d /var/lib/kubelet/device-plugins
}

# kl_in_ns CMD...: CMD in the node mount namespace (nsenter execs it: same pid).
kl_in_ns() {
        nsenter -t "$(cat "$E2E_DIR/node-ns.pid")" -m -- "$@"
}

# kl_kubelet NODE: a kubelet registering NODE with the API server, identity
# system:node:NODE in group system:nodes (client certificate from the e2e CA), bound to the
# system:node ClusterRole (the API server runs RBAC only).  Restarting appends to its log.
kl_kubelet() {
        local node=$1 d=$E2E_DIR/kubelet-$1 port hport legacy=()
        mkdir -p "$d/root"
        if [ ! -f "$E2E_DIR/kubelet-$node.kubeconfig" ]; then
                e2e_identity "kubelet-$node" "system:node:$node" system:nodes system:node \
                        "topofit-e2e-kubelet-$node" || return 1
                e2e_cert "kubelet-$node-serving" "$node" "" "IP:127.0.0.1,DNS:$node"
                port=$(e2e_free_port)
                hport=$(e2e_free_port)
                kl_kubelet_config_version >"$d/config-version.yaml"
                cat - "$d/config-version.yaml" >"$d/config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $hport
tlsCertFile: $E2E_DIR/pki/kubelet-$node-serving.crt
tlsPrivateKeyFile: $E2E_DIR/pki/kubelet-$node-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $E2E_DIR/pki/ca.crt}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
resolvConf: ""
registerNode: true
nodeStatusUpdateFrequency: 2s
syncFrequency: 5s
fileCheckFrequency: 5s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Ki", nodefs.available: "0%", imagefs.available: "0%", nodefs.inodesFree: "0%"}
serializeImagePulls: false
YAML
                echo "$hport" >"$d/healthz-port"
        fi
        # 1.20 has dockershim built in and the docker runtime by default: a CRI runtime
        # (CRI v1alpha2 there, which containerd 1.6 serves beside v1) takes
        # --container-runtime remote and the endpoint as a flag.  Later releases know only the
        # CRI, its endpoint in the configuration.
        e2e_legacy && legacy=(--container-runtime remote --container-runtime-endpoint "unix://$E2E_CTRD_SOCK")
        e2e_start "kubelet-$node" nsenter -t "$(cat "$E2E_DIR/node-ns.pid")" -m -- "$E2E_BIN/kubelet" --config "$d/config.yaml" \
                --kubeconfig "$E2E_DIR/kubelet-$node.kubeconfig" --root-dir "$d/root" \
                --hostname-override "$node" --v="${E2E_KUBELET_V:-2}" "${legacy[@]}"
        e2e_wait "$E2E_WAIT_S" "kubelet $node" \
                curl -sf --max-time 2 "http://127.0.0.1:$(cat "$d/healthz-port")/healthz"
}

# kl_kubelet_config_version: the KubeletConfiguration fields that differ by release.  1.20
# has no containerRuntimeEndpoint field (1.27 moved the flag there), no
# localStorageCapacityIsolation (1.25) and no failCgroupV1 (1.31).  1.37 refuses to start
# on cgroup v1 unless failCgroupV1 is false; 1.20 predates that check.
kl_kubelet_config_version() {
        e2e_legacy && return 0
        cat <<YAML
containerRuntimeEndpoint: unix://$E2E_CTRD_SOCK
failCgroupV1: false
localStorageCapacityIsolation: false
YAML
}

# kl_node_bin: the topofit-node meson built, or failure.
kl_node_bin() {
        local b
        for b in "${E2E_NODE_BIN:-}" "$E2E_TOP/build/plugin/topofit-node"; do
                [ -n "$b" ] && [ -x "$b" ] && { echo "$b"; return 0; }
        done
        return 1
}

# kl_topofit_node NODE MATRIX: topofit-node for NODE in the node mount namespace, the GPUs
# from MATRIX (--topology-file), the API server with its own client-certificate user bound
# to the ClusterRole deploy/base ships for it; registers on the kubelet's fixed socket and
# verifies through NODE's pod resources socket every second.  Metrics in
# $E2E_DIR/topofit-node-NODE.prom.
kl_topofit_node() {
        local node=$1 matrix=$2 bin
        bin=$(kl_node_bin) || { e2e_log "topofit-node is not built"; return 1; }
        if [ ! -f "$E2E_DIR/topofit-node.kubeconfig" ]; then
                e2e_identity topofit-node topofit-node "" topofit-node topofit-e2e-node || return 1
        fi
        e2e_start "topofit-node-$node" nsenter -t "$(cat "$E2E_DIR/node-ns.pid")" -m -- "$bin" run \
                --node "$node" --kubeconfig "$E2E_DIR/topofit-node.kubeconfig" \
                --topology-file "$matrix" --no-hwloc --nvml-lib /nonexistent \
                --nvidia-smi /nonexistent \
                --pod-resources "$E2E_DIR/kubelet-$node/root/pod-resources/kubelet.sock" \
                --poll-ms 200 --verify-interval 1 --rediscover-interval 0 \
                --metrics-file "$E2E_DIR/topofit-node-$node.prom" --log-level debug
}

# kl_node_metric NODE SERIES: one series of NODE's topofit-node metrics file, or nothing.
kl_node_metric() {
        awk -v s="$2" '$1 == s { print $2 }' "$E2E_DIR/topofit-node-$1.prom" 2>/dev/null
}

# kl_allocatable NODE: the node's allocatable nvidia.com/gpu as the kubelet reports it.
kl_allocatable() {
        kubectl get node "$1" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}'
}

# kl_podres NODE [API]: what NODE's kubelet allocated, from its PodResources API (podres.py),
# version API (v1, the default, or v1alpha1: both 1.20 and 1.37 serve both).
kl_podres() {
        /usr/bin/python3 "$E2E_TOP/test/e2e/podres.py" "$E2E_DIR/kubelet-$1/root/pod-resources/kubelet.sock" \
                "$E2E_GPU_RESOURCE" "${2:-v1}"
}

# kl_pod NAME COUNT [PLACEMENT] [NODE] [GPUS_ANNOTATION]: a pod of the local image on the
# host network (no CNI is needed for it), asking for COUNT GPUs, labelled topofit-e2e=kubelet.
# With NODE it is created bound there (the scheduler and the extender never see it), with
# GPUS_ANNOTATION as its topofit.io/gpus when given.  Several "NAME COUNT" pairs after
# --many are created in one request, so the kubelet admits them together.  The UIDs of the
# pods go to $E2E_DIR/pod-uids (kl_down removes their log directories).
kl_pod() {
        /usr/bin/python3 - "$E2E_IMAGE" "$@" <<'PY' | kubectl create -o 'jsonpath={.metadata.uid}{"\n"}' -f - >>"$E2E_DIR/pod-uids"
import json, sys
image, args = sys.argv[1], sys.argv[2:]

def pod(name, count, placement="", node="", gpus=""):
    ann = {}
    if placement:
        ann["topofit.io/placement"] = placement
    if gpus:
        ann["topofit.io/gpus"] = gpus
    res = {"nvidia.com/gpu": count, "cpu": "10m", "memory": "16Mi"}
    spec = {"containers": [{"name": "main", "image": image, "imagePullPolicy": "Never",
                            "resources": {"limits": res, "requests": res}}],
            "hostNetwork": True, "terminationGracePeriodSeconds": 0}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default",
                         "labels": {"topofit-e2e": "kubelet"}, "annotations": ann},
            "spec": spec}

if args[0] == "--many":
    items = [pod(args[i], args[i + 1]) for i in range(1, len(args), 2)]
    print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
else:
    print(json.dumps(pod(*args)))
PY
}

# kl_down: what containerd started outlives it (runc shims and their containers, the
# sandboxes' /dev/shm and the rootfs mounts under $E2E_DIR): the kubelets stop first (they
# would recreate sandboxes), then every task is killed and deleted through containerd, then
# whatever is still left is found by our own socket's path (shims whose -address is
# $E2E_CTRD_SOCK, one pid at a time) and the mounts under $E2E_DIR are lazily unmounted.
# Last, the container logs of the stage's own pods go (kl_rm_pod_logs).  Run before e2e_down.
kl_down() {
        local f id pid
        [ -n "${E2E_DIR:-}" ] && [ -d "$E2E_DIR" ] || return 0
        for f in "$E2E_DIR"/topofit-node-*.pid "$E2E_DIR"/kubelet-*.pid; do
                [ -f "$f" ] || continue
                f=${f##*/}
                e2e_stop "${f%.pid}"
        done
        if [ -n "${E2E_CTRD_SOCK:-}" ] && [ -f "$E2E_DIR/containerd.pid" ]; then
                for id in $(kl_ctr tasks ls -q 2>/dev/null); do
                        kl_ctr tasks kill -s SIGKILL "$id" >/dev/null 2>&1
                done
                for id in $(kl_ctr tasks ls -q 2>/dev/null); do
                        timeout 10 "${E2E_CTR:-ctr}" --address "$E2E_CTRD_SOCK" --namespace k8s.io \
                                tasks delete --force "$id" >/dev/null 2>&1
                done
                for id in $(kl_ctr containers ls -q 2>/dev/null); do
                        kl_ctr containers delete "$id" >/dev/null 2>&1
                done
        fi
        if [ -n "${E2E_CTRD_SOCK:-}" ]; then
                for f in /proc/[0-9]*/cmdline; do
                        pid=${f#/proc/}
                        pid=${pid%/cmdline}
                        tr '\0' ' ' 2>/dev/null <"$f" | grep -q -- "-address $E2E_CTRD_SOCK " || continue
                        pkill -KILL -P "$pid" 2>/dev/null   # its containers' first processes
                        kill -KILL "$pid" 2>/dev/null
                done
        fi
        grep -F " $E2E_DIR/" /proc/mounts | awk '{ print $2 }' | sort -r |
                while read -r f; do umount -l "$f" 2>/dev/null; done
        [ "${KL_MADE_RUN_CONTAINERD:-0}" = 1 ] && rmdir /run/containerd/s /run/containerd 2>/dev/null
        kl_rm_pod_logs
        return 0
}

# kl_rm_pod_logs: the kubelet's log directories /var/log/pods/default_NAME_UID of the pods
# whose UIDs kl_pod recorded, and the links in /var/log/containers into them; nothing else.
kl_rm_pod_logs() {
        local uid d l
        [ -f "$E2E_DIR/pod-uids" ] || return 0
        while read -r uid; do
                [[ $uid =~ ^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$ ]] || continue
                for d in /var/log/pods/default_*_"$uid"; do
                        [ -d "$d" ] || continue
                        for l in /var/log/containers/*.log; do
                                [ -L "$l" ] && [[ $(readlink "$l") == "$d"/* ]] && rm -f "$l"
                        done
                        rm -rf "$d"
                done
        done <"$E2E_DIR/pod-uids"
        # 0 whatever the last test said.
        return 0
}
