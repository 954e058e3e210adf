# shellcheck shell=bash
# The end-to-end cases run by test/e2e/run, one function each, in the order of run's table.
# A case returns 0 (pass, or skip when it sets E2E_SKIP to the reason) or 1 (fail, with
# E2E_WHY saying what the API showed).  Cases share one cluster, built up as they go.

E2E_PY=/usr/bin/python3           # Debian's, for python3-yaml
E2E_CLI=""                        # the topofit CLI, once found
E2E_TOPO_NODES=()                 # name:file of the topology nodes

# E2E_SKIP, E2E_WHY and E2E_NOTE are read by test/e2e/run.
# shellcheck disable=SC2034
skip() { E2E_SKIP=$1; return 0; }
# shellcheck disable=SC2034
fail() { E2E_WHY=$1; e2e_log "FAIL: $1"; return 1; }

# Every case needs the scratch directory; the cluster cases need the control plane.
e2e_scratch() {
        if [ -z "${E2E_DIR:-}" ]; then
                E2E_DIR=$(mktemp -d "${TMPDIR:-/tmp}/topofit-e2e.XXXXXX")
                mkdir -p "$E2E_DIR/log"
                e2e_log "working in $E2E_DIR"
        fi
}
need_cluster() { [ -n "${E2E_API:-}" ] || fail "the control plane is not up (see the earlier case)"; }

# --- build and deploy/ ----------------------------------------------------------------------

t_build() {
        e2e_scratch
        local rc b v etcd_v
        e2e_bins
        rc=$?
        [ "$rc" = 77 ] && { skip "$E2E_BIN_WHY"; return; }
        [ "$rc" = 0 ] || { fail "scripts/e2e-build failed (log/e2e-build.log)"; return; }
        for b in kube-apiserver kube-scheduler; do
                v=$("$b" --version 2>&1) || { fail "$b --version failed"; return; }
                [ "$v" = "Kubernetes v$E2E_K8S_VERSION" ] || { fail "$b says '$v'"; return; }
        done
        v=$(kubectl version --client -o json 2>/dev/null |
                "$E2E_PY" -c 'import json,sys; print(json.load(sys.stdin)["clientVersion"]["gitVersion"])')
        [ "$v" = "v$E2E_K8S_VERSION" ] || { fail "kubectl says '$v'"; return; }
        if [ -x "$E2E_BIN/etcd" ]; then
                etcd_v=$("$E2E_BIN/etcd" --version | sed -n 's/^etcd Version: //p')
        else
                etcd_v=$(etcd --version 2>/dev/null | sed -n 's/^etcd Version: //p')
        fi
        # shellcheck disable=SC2034
        E2E_NOTE="Kubernetes v$E2E_K8S_VERSION, etcd ${etcd_v:-?}"
}

# The kubectl built for the tested release, not one a machine happens to have on PATH.
need_bins() {
        [ -n "${E2E_BIN:-}" ] && return 0
        skip "${E2E_BIN_WHY:-the binaries of the tested release are not built (see the first case)}"
        return 1
}

t_kustomize_base() {
        e2e_scratch
        need_bins || return 0
        kubectl kustomize "$E2E_TOP/deploy/base" >"$E2E_DIR/render-base.yaml" ||
                { fail "kubectl kustomize deploy/base failed"; return; }
        local k
        for k in Namespace ServiceAccount ClusterRole ClusterRoleBinding Deployment Service DaemonSet; do
                grep -qx "kind: $k" "$E2E_DIR/render-base.yaml" || { fail "no $k rendered"; return; }
        done
}

t_kustomize_overlays() {
        e2e_scratch
        need_bins || return 0
        local d name n=0 left=""
        for d in "$E2E_TOP"/deploy/overlays/*/; do
                name=$(basename "$d")
                # The HA overlay is for 1.25+ (v1 scheduler configuration) and uses
                # kustomize's `patches`, which kubectl 1.20's kustomize v2 does not know.
                if [ "$name" = ha ] && e2e_legacy; then
                        left+=" $name"
                        continue
                fi
                kubectl kustomize "$d" >"$E2E_DIR/render-$name.yaml" ||
                        { fail "kubectl kustomize deploy/overlays/$name failed"; return; }
                grep -q "name: topofit-scheduler-config" "$E2E_DIR/render-$name.yaml" ||
                        { fail "overlay $name has no scheduler ConfigMap"; return; }
                n=$((n + 1))
        done
        [ "$n" -ge 2 ] || { fail "expected at least two overlays, found $n"; return; }
        # shellcheck disable=SC2034
        [ -z "$left" ] || E2E_NOTE="$n rendered; left to the current release:$left"
}

t_deploy_hardened() {
        e2e_scratch
        ls "$E2E_DIR"/render-*.yaml >/dev/null 2>&1 || { fail "nothing rendered"; return; }
        "$E2E_PY" - "$E2E_DIR"/render-*.yaml <<'PY' || { fail "see the log for the offending fields"; return; }
import sys, yaml
bad = []
# The node daemon must run as root (the kubelet's device-plugin directory is root-owned);
# everything else holds for it too.
root_ok = {"topofit-node"}
for path in sys.argv[1:]:
    for doc in yaml.safe_load_all(open(path)):
        if not doc or doc.get("kind") not in ("Deployment", "DaemonSet"):
            continue
        name = doc["metadata"]["name"]
        pod = doc["spec"]["template"]["spec"]
        psc = pod.get("securityContext", {})
        if psc.get("seccompProfile", {}).get("type") != "RuntimeDefault":
            bad.append(f"{path}: {name}: no RuntimeDefault seccomp profile")
        if name not in root_ok and psc.get("runAsNonRoot") is not True:
            bad.append(f"{path}: {name}: runAsNonRoot is not true")
        if not pod.get("serviceAccountName"):
            bad.append(f"{path}: {name}: no dedicated service account")
        for c in pod.get("containers", []) + pod.get("initContainers", []):
            sc = c.get("securityContext", {})
            where = f"{path}: {name}/{c['name']}"
            # A bare name is a kustomize images: entry that did not apply (it would be
            # pulled from Docker Hub): every image names a registry and a tag or digest.
            image = c.get("image", "")
            last = image.split("/")[-1]
            if "/" not in image or (":" not in last and "@" not in last):
                bad.append(f"{where}: image {image!r} names no registry or no tag")
            if sc.get("allowPrivilegeEscalation") is not False:
                bad.append(f"{where}: allowPrivilegeEscalation is not false")
            if sc.get("readOnlyRootFilesystem") is not True:
                bad.append(f"{where}: readOnlyRootFilesystem is not true")
            if sc.get("privileged"):
                bad.append(f"{where}: privileged")
            if "ALL" not in sc.get("capabilities", {}).get("drop", []):
                bad.append(f"{where}: capabilities not dropped")
            if sc.get("capabilities", {}).get("add"):
                bad.append(f"{where}: adds capabilities")
            res = c.get("resources", {})
            for kind in ("requests", "limits"):
                for r in ("cpu", "memory"):
                    if r not in res.get(kind, {}):
                        bad.append(f"{where}: no {r} {kind[:-1]}")
for b in bad:
    print(b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

# Every flag a rendered manifest passes (container command after the executable, and
# args) must be one the binary documents in --help: topofit's from build/, kube-scheduler's
# (the HA overlay runs its own) from the tested release.  Containers are told apart by image.
t_deploy_flags() {
        local image flag help bin missing="" checked=0 bad=""
        ls "$E2E_DIR"/render-*.yaml >/dev/null 2>&1 || { fail "nothing rendered"; return; }
        while read -r image flag; do
                case $image in
                extender | topofit-extender) bin=$E2E_TOP/build/extender/topofit-extender ;;
                node | topofit-node) bin=$E2E_TOP/build/plugin/topofit-node ;;
                kube-scheduler) bin=$E2E_BIN/kube-scheduler ;;
                *) bad+=" $image:$flag(unknown image)"; continue ;;
                esac
                if [ ! -x "$bin" ]; then
                        [[ $missing == *" $bin"* ]] || missing+=" $bin"
                        continue
                fi
                help=$("$bin" --help 2>&1)
                grep -q -- "${flag}[ =,]" <<<"$help" || bad+=" $image:$flag"
                checked=$((checked + 1))
        done < <("$E2E_PY" - "$E2E_DIR"/render-*.yaml <<'PY'
import sys, yaml
seen = set()
for path in sys.argv[1:]:
    for doc in yaml.safe_load_all(open(path)):
        if not doc or doc.get("kind") not in ("Deployment", "DaemonSet"):
            continue
        for c in doc["spec"]["template"]["spec"]["containers"]:
            image = c["image"].split("/")[-1].split(":")[0].split("@")[0]
            for a in (c.get("command") or [])[1:] + (c.get("args") or []):
                if a.startswith("--") and (image, a.split("=", 1)[0]) not in seen:
                    seen.add((image, a.split("=", 1)[0]))
                    print(image, a.split("=", 1)[0])
PY
)
        [ -z "$bad" ] || { fail "flags the binaries' --help does not list:$bad"; return; }
        [ "$checked" -gt 0 ] || { fail "no flag checked"; return; }
        [ -n "$missing" ] && skip "not built:$missing"
        # shellcheck disable=SC2034
        E2E_NOTE="$checked flags checked"
        return 0
}

# The executable() names in a module's meson.build, one per line.
meson_executables() {
        grep -o "executable('[^']*'" "$E2E_TOP/$1/meson.build" 2>/dev/null | sed "s/executable('//; s/'$//"
}

t_deploy_images() {
        local f dir bin missing=""
        for f in extender:extender/topofit-extender node:plugin/topofit-node; do
                local df=$E2E_TOP/deploy/docker/${f%%:*}.Dockerfile
                bin=${f#*:}
                dir=${bin%%/*}
                [ -f "$df" ] || { fail "no $df"; return; }
                grep -q "build/$bin " "$df" || { fail "$df does not copy build/$bin"; return; }
                grep -Eq '^USER [0-9]+(:[0-9]+)?$' "$df" || { fail "$df has no numeric non-root USER"; return; }
                grep -q "^USER 0" "$df" && { fail "$df runs as root"; return; }
                [ "$(grep -c '^FROM ' "$df")" -ge 2 ] || { fail "$df is not multi-stage"; return; }
                if [ -z "$(meson_executables "$dir")" ]; then
                        missing+=" $dir/meson.build declares no executable yet;"
                elif ! meson_executables "$dir" | grep -qx "${bin#*/}"; then
                        { fail "$dir/meson.build builds $(meson_executables "$dir" | tr '\n' ' ')but $df copies ${bin#*/}"; return; }
                fi
        done
        [ -n "$missing" ] && skip "Dockerfiles checked; name cross-check pending:$missing"
        return 0
}

# A kubeconfig and CA that let kube-scheduler load a configuration without a cluster.
e2e_offline_sched_files() {
        local d=$E2E_DIR/offline
        mkdir -p "$d"
        openssl ecparam -name prime256v1 -genkey -noout -out "$d/ca.key" 2>/dev/null
        openssl req -x509 -new -key "$d/ca.key" -subj "/CN=offline" -days 1 -out "$d/ca.crt" 2>/dev/null
        cat >"$d/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:9", certificate-authority: $d/ca.crt}}]
users: [{name: u, user: {token: offline}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
EOF
}

# The scheduler configuration deploy/ ships for this control plane's version, loaded by the
# real kube-scheduler and written back: v1 (overlays/kubernetes-1.25-plus) on the current
# release, v1beta1 (overlays/kubernetes-1.20) on the legacy one.
t_sched_config_real() {
        e2e_scratch
        e2e_offline_sched_files
        local overlay=kubernetes-1.25-plus legacy=()
        e2e_legacy && overlay=kubernetes-1.20 legacy=(--port 0)
        local src=$E2E_TOP/deploy/overlays/$overlay/kube-scheduler-config.yaml d=$E2E_DIR/offline
        sed -e "s|/etc/kubernetes/scheduler.conf|$d/kubeconfig|" \
            -e "s|/etc/kubernetes/topofit/ca.crt|$d/ca.crt|" "$src" >"$d/config.yaml"
        timeout 60 kube-scheduler --config "$d/config.yaml" --write-config-to "$d/written.yaml" \
                "${legacy[@]}" --secure-port 0 >"$E2E_DIR/log/sched-config-check.log" 2>&1 ||
                { fail "kube-scheduler rejected $src (log/sched-config-check.log)"; return; }
        "$E2E_PY" - "$d/written.yaml" <<'PY' || { fail "the written configuration lost extender fields"; return; }
import sys, yaml
cfg = yaml.safe_load(open(sys.argv[1]))
e = cfg["extenders"]
assert len(e) == 1, e
e = e[0]
assert e["urlPrefix"] == "https://topofit-extender.topofit-system.svc:8443", e
for verb in ("filter", "prioritize", "bind", "preempt"):
    assert e[verb + "Verb"] == verb, (verb, e)
# Written back with omitempty: false booleans are left out.
assert e["nodeCacheCapable"] is True and not e.get("ignorable") and e["enableHTTPS"] is True, e
assert e["managedResources"] == [{"name": "nvidia.com/gpu"}], e
assert e["tlsConfig"]["serverName"] == "topofit-extender.topofit-system.svc", e
PY
}

t_sched_config_v1() {
        "$E2E_PY" - "$E2E_TOP/deploy/overlays/kubernetes-1.25-plus/kube-scheduler-config.yaml" \
                "$E2E_TOP/deploy/overlays/kubernetes-1.20/kube-scheduler-config.yaml" <<'PY' ||
import sys, yaml
v1, v1beta1 = (yaml.safe_load(open(p)) for p in sys.argv[1:3])
assert v1["apiVersion"] == "kubescheduler.config.k8s.io/v1", v1["apiVersion"]
assert v1beta1["apiVersion"] == "kubescheduler.config.k8s.io/v1beta1", v1beta1["apiVersion"]
assert v1["extenders"] == v1beta1["extenders"], "extender entries differ"
assert v1["clientConnection"] == v1beta1["clientConnection"]
PY
                fail "v1 and v1beta1 scheduler configurations differ"
        # Each is loaded by the real scheduler of its era in t_sched_config_real.
}

# --- control plane ----------------------------------------------------------------------------

t_control_plane() {
        e2e_scratch
        e2e_up || { fail "the control plane did not come up (log/)"; return; }
        local v
        v=$(kubectl version -o json | "$E2E_PY" -c 'import json,sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])')
        [ "$v" = "v$E2E_K8S_VERSION" ] || fail "the API server says $v"
}

t_deploy_applied() {
        need_cluster || return 1
        local o
        for o in namespace/topofit-system clusterrole/topofit-extender clusterrole/topofit-node \
                 serviceaccount/topofit-extender deployment/topofit-extender service/topofit-extender \
                 daemonset/topofit-node; do
                kubectl -n topofit-system get "$o" >/dev/null 2>&1 || { fail "$o is missing"; return; }
        done
}

t_rbac_least_privilege() {
        need_cluster || return 1
        local row verb res want got
        # verb resource expected-answer
        for row in "list nodes yes" "watch nodes yes" "get pods yes" "watch pods yes" \
                   "create pods/binding yes" "create events yes" \
                   "patch pods no" "update pods no" "delete pods no" "create pods no" \
                   "patch nodes no" "get secrets no" "list configmaps no"; do
                read -r verb res want <<<"$row"
                if [[ $res == */* ]]; then
                        got=$(kubectl auth can-i "$verb" "${res%/*}" --subresource "${res#*/}" --as topofit-extender 2>/dev/null)
                else
                        got=$(kubectl auth can-i "$verb" "$res" --as topofit-extender 2>/dev/null)
                fi
                [ "$got" = "$want" ] || { fail "can-i $verb $res: $got, want $want"; return; }
        done
}

t_nodes_ready() {
        need_cluster || return 1
        e2e_plain_nodes 2 || { fail "creating nodes failed"; return; }
        local out
        out=$(kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.name}={.status.allocatable.nvidia\.com/gpu}/{.status.conditions[?(@.type=="Ready")].status} {end}')
        [ "$out" = "plain-1=8/True plain-2=8/True " ] || fail "nodes: $out"
}

t_goext_schedules() {
        need_cluster || return 1
        e2e_goext || { fail "goext did not start"; return; }
        e2e_scheduler_config "$E2E_DIR/sched-goext.yaml" "http://127.0.0.1:$E2E_GOEXT_PORT" true 0 0
        e2e_scheduler "$E2E_DIR/sched-goext.yaml" || { fail "kube-scheduler did not start"; return; }
        e2e_gpu_pod gx-1 2 || { fail "creating the pod failed"; return; }
        e2e_wait 30 "gx-1 bound" e2e_pod_bound gx-1 || { fail "gx-1 was not placed in 30s"; return; }
        # 1.20 logs "Creating extender with config {URLPrefix:...}", later releases
        # "Creating extender" extender=... with the same URL.
        grep "Creating extender" "$E2E_DIR/log/kube-scheduler.log" |
                grep -q "http://127.0.0.1:$E2E_GOEXT_PORT" || fail "the scheduler did not load the extender"
}

e2e_pod_failed_with() {
        kubectl get events --field-selector "involvedObject.name=$1,reason=FailedScheduling" \
                -o jsonpath='{range .items[*]}{.message}{"\n"}{end}' | grep -qi "$2"
}

t_extender_down_blocks() {
        need_cluster || return 1
        e2e_stop goext
        e2e_gpu_pod gx-2 1 || { fail "creating the pod failed"; return; }
        e2e_wait 30 "gx-2 FailedScheduling" e2e_pod_failed_with gx-2 "127.0.0.1:$E2E_GOEXT_PORT" ||
                { fail "no FailedScheduling event naming the extender"; return; }
        e2e_pod_bound gx-2 && { fail "gx-2 was placed without the extender"; return; }
        e2e_goext || { fail "goext did not restart"; return; }
        # Nothing else happens in this cluster, so this also shows kube-scheduler 1.20's own
        # retry: a pod that failed on an extender error waits in the unschedulable queue
        # until the periodic flush (after 60 s, checked every 30 s).
        e2e_wait 120 "gx-2 bound" e2e_pod_bound gx-2 || fail "gx-2 was not placed after the extender came back"
}

# --- topofit ----------------------------------------------------------------------------------

t_topology_nodes() {
        need_cluster || return 1
        E2E_CLI=$(e2e_cli_bin) || { skip "the topofit CLI is not built in build/cli (branch scoring)"; return; }
        # Retire the plumbing-check nodes and pods: topofit judges unannotated nodes by policy.
        kubectl delete pod gx-1 gx-2 --grace-period=0 --force >/dev/null 2>&1
        kubectl delete node plain-1 plain-2 >/dev/null || { fail "deleting plain nodes failed"; return; }
        e2e_stop goext
        e2e_topology_nodes || { fail "creating topology nodes failed"; return; }
        local spec name
        for spec in "${E2E_TOPO_NODES[@]}"; do
                name=${spec%%:*}
                [ -n "$(kubectl get node "$name" -o "jsonpath={.metadata.annotations.topofit\.io/topology}")" ] ||
                        { fail "$name has no topology annotation"; return; }
        done
        # Existing workload: GPUs 0 and 4 of the DGX-1 are taken (the additive-score trap).
        e2e_gpu_pod busy-dgx1 2 "" dgx1 \
                '{"version":1,"node":"dgx1","containers":[{"name":"main","indices":[0,4],"uuids":["",""]}]}' ||
                fail "creating the existing pod failed"
}

t_topofit_extender_up() {
        need_cluster || return 1
        [ -n "$E2E_CLI" ] || { skip "no topology nodes (the topofit CLI is not built)"; return; }
        e2e_extender_bin >/dev/null || { skip "topofit-extender is not built in build/extender (branch extender)"; return; }
        E2E_EXT_MODE=$(e2e_extender_mode)
        # The placement cases up to t_node_cache_false compare each pod with `topofit place`
        # on every node alone, so the cluster term (which may rank a node with a lower
        # priority of its own first, to keep scarce sets whole) is off until then;
        # t_stranding tests it on, as deploy/ runs it.
        E2E_EXT_ARGS=(--cluster-share 0)
        e2e_extender || { fail "topofit-extender did not become ready (log/extender.log)"; return; }
        # Static mode cannot bind (it has no API access): the scheduler binds, and the GPU
        # annotation, bind and restart cases are skipped.
        local bind=1
        [ "$E2E_EXT_MODE" = api ] || bind=0
        e2e_scheduler_config "$E2E_DIR/sched-topofit.yaml" "https://127.0.0.1:$E2E_EXT_PORT" true 1 "$bind"
        e2e_scheduler_config "$E2E_DIR/sched-full.yaml" "https://127.0.0.1:$E2E_EXT_PORT" false 1 "$bind"
        e2e_scheduler "$E2E_DIR/sched-topofit.yaml" || { fail "kube-scheduler did not start"; return; }
        E2E_TOPOFIT_UP=1
        # Mutual TLS: without a client certificate the extender refuses the connection.
        curl -s --max-time 5 --cacert "$E2E_DIR/pki/ca.crt" \
                "https://127.0.0.1:$E2E_EXT_PORT/filter" -d '{}' -o /dev/null -w '%{http_code}' |
                grep -qx 200 && { fail "the extender answered a client without a certificate"; return; }
        return 0
}

t_extender_api_mode() {
        need_topofit || return 0
        [ "$E2E_EXT_MODE" = api ] ||
                { skip "this extender build has only static mode (--cluster, no --kubeconfig): it ran on a snapshot of the cluster"; return; }
        # Its identity is the client certificate that deploy/'s ClusterRole is bound to; a
        # ready extender has listed nodes and pods with it.
        e2e_extender_healthy || fail "the extender is not ready"
}

need_api_mode() {
        [ "${E2E_EXT_MODE:-}" = api ] && return 0
        skip "needs topofit-extender's API mode (--kubeconfig, bindVerb); this build has only static mode"
        return 1
}

need_topofit() {
        [ "${E2E_TOPOFIT_UP:-0}" = 1 ] && return 0
        # Where the control plane cannot be built, that is the reason, not a missing part
        # of topofit.
        skip "${E2E_BIN_WHY:-needs the topofit extender and CLI (see the earlier skipped cases)}"
        return 1
}

# e2e_place_case NAME COUNT PLACEMENT: creates the pod, waits until it is bound, and checks
# it against `topofit place` over the state just before it.
e2e_place_case() {
        local name=$1 count=$2 placement=${3:-} verdict
        # Static mode never binds, so prioritize's reservations are never committed; they
        # run out after --reservation-ttl (1 s there) and must be gone before we compare.
        [ "${E2E_EXT_MODE:-}" = static ] && sleep 1.5
        e2e_expect "$count" "$placement" >"$E2E_DIR/expect-$name.json" ||
                { fail "computing the expectation failed"; return; }
        grep -q '"priority"' "$E2E_DIR/expect-$name.json" ||
                { fail "no node can take $name (scenario setup): $(cat "$E2E_DIR/expect-$name.json")"; return; }
        e2e_gpu_pod "$name" "$count" "$placement" || { fail "creating $name failed"; return; }
        e2e_wait 30 "$name bound" e2e_pod_bound "$name" || { fail "$name was not placed in 30s"; return; }
        verdict=$(e2e_check_placement "$name" "$E2E_DIR/expect-$name.json" "${E2E_EXT_MODE:-}") ||
                { fail "$verdict"; return; }
        e2e_log "$name: $verdict"
        # shellcheck disable=SC2034
        [ "${E2E_EXT_MODE:-}" = api ] ||
                E2E_NOTE="node checked; the GPU set needs the extender to bind (API mode)"
        echo "# $name: $verdict" >>"$E2E_DIR/placements.txt"
}

t_place_8_nvlink() { need_topofit || return 0; e2e_place_case p8-nvlink 8 nvlink-required; }

t_impossible_pending() {
        need_topofit || return 0
        local msg placed=0
        e2e_gpu_pod p8-impossible 8 nvlink-required || { fail "creating the pod failed"; return; }
        e2e_wait 30 "p8-impossible FailedScheduling" e2e_pod_failed_with p8-impossible "nodes are available"
        sleep 2
        e2e_pod_bound p8-impossible && placed=1
        msg=$(kubectl get events --field-selector involvedObject.name=p8-impossible,reason=FailedScheduling \
                -o jsonpath='{range .items[*]}{.message}{"\n"}{end}' | tail -1)
        e2e_log "p8-impossible: $msg"
        echo "# p8-impossible: $msg" >>"$E2E_DIR/placements.txt"
        kubectl delete pod p8-impossible --grace-period=0 --force >/dev/null 2>&1
        [ "$placed" = 0 ] || { fail "p8-impossible was placed"; return; }
        [ -n "$msg" ] || { fail "no FailedScheduling event"; return; }
        # The reason must be topofit's (it names the NVLink constraint), not only the
        # scheduler's own resource count.
        echo "$msg" | grep -qi nvlink || { fail "the event does not carry topofit's reason: $msg"; return; }
        e2e_legacy && return 0
        # 1.21+ reads FailedAndUnresolvableNodes: a node topofit calls unresolvable (no
        # all-NVLink set of this size exists there at all) is one preemption cannot help,
        # so the event's preemption part counts it as "not helpful" rather than looking for
        # victims on it.
        local unres verdict
        unres=$(e2e_extender_metric 'topofit_extender_decisions_total{verb="filter",outcome="unresolvable"}')
        verdict=$("$E2E_PY" - "$msg" "${unres:-0}" <<'PY'
import re, sys
msg, unres = sys.argv[1], float(sys.argv[2])
nv = re.search(r"(\d+) require nvlink", msg)
nothelp = re.search(r"preemption:.*?(\d+) Preemption is not helpful", msg)
if unres < 1:
    sys.exit("topofit reported no node as unresolvable")
if not nv or not nothelp or int(nothelp.group(1)) < int(nv.group(1)):
    sys.exit(f"the scheduler did not treat topofit's unresolvable node(s) as such: {msg}")
print(f"{nv.group(1)} node(s) unresolvable by topofit, {nothelp.group(1)} where preemption is not helpful")
PY
) || { fail "$verdict"; return; }
        # shellcheck disable=SC2034
        E2E_NOTE=$verdict
}

t_place_8() {
        need_topofit || return 0
        e2e_place_case p8 8 || return 1
        # It finishes: the later cases need the room.
        kubectl delete pod p8 --grace-period=0 --force >/dev/null 2>&1
        e2e_wait 30 "p8 gone" e2e_pod_gone p8
}

t_place_4_nvlink() { need_topofit || return 0; e2e_place_case p4-nvlink 4 nvlink-required; }
t_place_4() { need_topofit || return 0; e2e_place_case p4 4; }
t_place_2_nvlink() { need_topofit || return 0; e2e_place_case p2-nvlink 2 nvlink-required; }
t_place_2() { need_topofit || return 0; e2e_place_case p2 2; }
t_place_1() { need_topofit || return 0; e2e_place_case p1 1; }

t_annotation_with_binding() {
        need_topofit || return 0
        need_api_mode || return 0
        # The extender's identity cannot patch or update pods (t_rbac_least_privilege), so an
        # annotation on a pod it bound can only have come with the Binding.
        local p node ann
        for p in p8-nvlink p4-nvlink p4 p2-nvlink p2 p1; do
                node=$(e2e_pod_node "$p")
                ann=$(kubectl get pod "$p" -o 'jsonpath={.metadata.annotations.topofit\.io/gpus}')
                [ -n "$node" ] && [ -n "$ann" ] || { fail "$p: node '$node', annotation '$ann'"; return; }
                [ "$(echo "$ann" | "$E2E_PY" -c 'import json,sys; print(json.load(sys.stdin)["node"])')" = "$node" ] ||
                        { fail "$p: the annotation names another node than $node"; return; }
        done
}

t_node_cache_false() {
        need_topofit || return 0
        # Room again: the best-effort and NVLink pods placed so far leave.
        kubectl delete pod -l topofit-e2e=scenario --grace-period=0 --force >/dev/null 2>&1
        e2e_wait 30 "scenario pods gone" e2e_no_pods scenario || { fail "pods did not go away"; return; }
        e2e_scheduler "$E2E_DIR/sched-full.yaml" || { fail "kube-scheduler did not restart"; return; }
        e2e_place_case f2-nvlink 2 nvlink-required || return 1
        e2e_place_case f1 1 || return 1
        # Back to the recommended mode and the default cluster term for what follows.
        E2E_EXT_ARGS=()
        e2e_extender || { fail "the extender did not restart"; return; }
        e2e_scheduler "$E2E_DIR/sched-topofit.yaml" || fail "kube-scheduler did not restart"
}

t_burst_restart() {
        need_topofit || return 0
        need_api_mode || return 0
        local i bound
        # Room for the burst: four more 8-GPU NVSwitch nodes and the earlier pods gone.
        kubectl delete pod -l topofit-e2e=scenario --grace-period=0 --force >/dev/null 2>&1
        e2e_wait 30 "scenario pods gone" e2e_no_pods scenario || { fail "pods did not go away"; return; }
        for i in 1 2 3 4; do
                e2e_topology_node "burst-$i" "$E2E_DATA/topologies/hgx-nv18-8gpu-12nic-cpuset-mooncake.txt" ||
                        { fail "creating burst-$i failed"; return; }
        done
        # The first half arrives and the extender dies (SIGKILL) while it does; the
        # second half arrives while it is down, then it comes back and rebuilds its view
        # from the API.  Pods in flight at the kill fail their filter/bind and are retried.
        # kube-scheduler places a pod in a few milliseconds, faster than any poll here: the
        # kill comes at a fixed delay after the first batch starts arriving.
        e2e_gpu_pods_paced b 1 25 burst &
        local creator=$!
        # Mid-burst: once the first few are bound (or after 20 s, whichever comes first).
        e2e_wait 20 "the first burst pods bound" e2e_bound_at_least "${E2E_KILL_AFTER:-3}" burst
        e2e_kill extender
        bound=$(e2e_bound_count burst)
        wait "$creator" || { fail "creating the first 25 pods failed"; return; }
        e2e_log "killed the extender with $bound of 50 bound"
        e2e_gpu_pods b 26 50 burst || { fail "creating the last 25 pods failed"; return; }
        sleep 2
        e2e_extender || { fail "the extender did not come back"; return; }
        # kube-scheduler 1.20 retries pods that failed on the extender from its
        # unschedulable queue after 60 s at the latest.
        e2e_wait 120 "all burst pods bound" e2e_bound_at_least 50 burst ||
                { fail "only $(e2e_bound_count burst) of 50 pods placed 120s after the restart"; return; }
        e2e_check_no_double_allocation || { fail "a GPU is on two pods (log)"; return; }
        echo "# burst: $bound of 50 bound when the extender was killed (the first 25 arriving one by one); all 50 placed after its restart, no GPU on two pods" \
                >>"$E2E_DIR/placements.txt"
        # shellcheck disable=SC2034
        E2E_NOTE="extender SIGKILLed with $bound of 50 bound; all 50 placed after its restart"
}

t_preempt() {
        need_topofit || return 0
        need_api_mode || return 0
        local n victims=() gone=0 node ann
        # Only hgx4 (4x A100, all pairs NV4) stays schedulable, full with four low-priority
        # one-GPU pods already bound there; terminationGracePeriodSeconds 0 lets their
        # eviction complete without a kubelet.
        kubectl delete pod -l topofit-e2e=burst --grace-period=0 --force >/dev/null 2>&1
        kubectl delete pod -l topofit-e2e=scenario --grace-period=0 --force >/dev/null 2>&1
        for n in $(kubectl get nodes -o name); do
                [ "$n" = node/hgx4 ] || kubectl cordon "${n#node/}" >/dev/null || { fail "cordon $n failed"; return; }
        done
        for n in 0 1 2 3; do
                e2e_gpu_pod "low-$n" 1 "" hgx4 \
                        "{\"version\":1,\"node\":\"hgx4\",\"containers\":[{\"name\":\"main\",\"indices\":[$n],\"uuids\":[\"\"]}]}" \
                        victims || { fail "creating low-$n failed"; return; }
                victims+=("low-$n")
        done
        kubectl create priorityclass topofit-e2e-high --value 1000 >/dev/null 2>&1
        # Let the extender's watch see the four pods before the preemptor arrives.
        sleep 2
        e2e_gpu_pod high 2 nvlink-required "" "" scenario topofit-e2e-high ||
                { fail "creating the high-priority pod failed"; return; }
        # The scheduler retries as soon as it sees the victims go; if the extender's watch has
        # not seen them yet, the filter fails once more and 1.20 parks the pod in its
        # unschedulable queue, flushed after 60 s: allow for one such round.
        e2e_wait 120 "high bound" e2e_pod_bound high ||
                { fail "the high-priority pod was not placed in 120s (log/kube-scheduler.log)"; return; }
        node=$(e2e_pod_node high)
        [ "$node" = hgx4 ] || { fail "high landed on $node"; return; }
        for n in "${victims[@]}"; do
                e2e_pod_gone "$n" && gone=$((gone + 1))
        done
        [ "$gone" -ge 2 ] || { fail "only $gone victims were evicted for 2 GPUs"; return; }
        ann=$(kubectl get pod high -o 'jsonpath={.metadata.annotations.topofit\.io/gpus}')
        e2e_check_no_double_allocation || { fail "a GPU is on two pods after preemption"; return; }
        local calls
        calls=$(e2e_extender_metric 'topofit_extender_request_duration_seconds_count{verb="preempt"}')
        echo "# preempt: high (2 GPUs, nvlink-required) on $node after $gone of 4 low-priority pods were evicted; $ann; preempt verb calls: ${calls:-?}" \
                >>"$E2E_DIR/placements.txt"
        # The GPUs it got form an all-NVLink set (hgx4: every pair NV4) of freed GPUs.
        "$E2E_PY" - "$ann" <<'PY' || { fail "high's GPUs are not two distinct GPUs of hgx4: $ann"; return; }
import json, sys
a = json.loads(sys.argv[1])
idx = [i for c in a["containers"] for i in c["indices"]]
sys.exit(0 if a["node"] == "hgx4" and len(set(idx)) == 2 else 1)
PY
        # kube-scheduler 1.20.2 never hands its extenders to the framework
        # (frameworkruntime.WithExtenders is not called), so its DefaultPreemption does not
        # call the preempt verb: recorded there, asserted on later releases.
        e2e_legacy && return 0
        [ "${calls%.*}" -ge 1 ] 2>/dev/null || { fail "kube-scheduler never called the preempt verb"; return; }
        # shellcheck disable=SC2034
        E2E_NOTE="preempt verb called ${calls%.*} time(s); $gone of 4 victims evicted; GPUs $(sed 's/.*"indices":\[\([0-9,]*\)\].*/\1/' <<<"$ann")"
}

# --- high availability ------------------------------------------------------------------------

# e2e_ha_bound REPLICA: binds the replica's extender has made (its /metrics, plain HTTP).
e2e_ha_bound() {
        local port_var=E2E_HA_EXT_PORT_$1
        curl -s --max-time 2 "http://127.0.0.1:${!port_var}/metrics" |
                awk '$1 == "topofit_extender_decisions_total{verb=\"bind\",outcome=\"bound\"}" { print int($2) }'
}
e2e_ha_bound_at_least() { [ "$(e2e_ha_bound "$1")" -ge "$2" ] 2>/dev/null; }

# e2e_ha_lease: "HOLDER TRANSITIONS" of the Lease topofit-system/topofit-scheduler, read
# through the API; 1 when there is none or it has no holder.
e2e_ha_lease() {
        local out
        out=$(kubectl -n topofit-system get lease topofit-scheduler \
                -o 'jsonpath={.spec.holderIdentity} {.spec.leaseTransitions}' 2>/dev/null) || return 1
        [ -n "${out%% *}" ] || return 1
        # leaseTransitions is left out while it is 0.
        [ -n "${out#* }" ] || out+="0"
        echo "$out"
}

# e2e_ha_lease_acquired_after EPOCH: seconds from EPOCH (date +%s.%N) to the Lease's
# acquireTime, one decimal.
e2e_ha_lease_acquired_after() {
        kubectl -n topofit-system get lease topofit-scheduler -o 'jsonpath={.spec.acquireTime}' |
                "$E2E_PY" -c '
import datetime, sys
t = datetime.datetime.strptime(sys.stdin.read().strip(), "%Y-%m-%dT%H:%M:%S.%fZ")
t = t.replace(tzinfo=datetime.timezone.utc).timestamp()
print(f"{t - float(sys.argv[1]):.1f}")' "$1"
}

t_ha_failover() {
        need_topofit || return 0
        need_api_mode || return 0
        local n leader other bound_at_kill t_kill t_first pods=24
        e2e_legacy && { skip "deploy/overlays/ha configures kube-scheduler with kubescheduler.config.k8s.io/v1 (1.25+)"; return; }
        # A clean cluster: earlier pods gone, every node schedulable, the single scheduler
        # and its extender stopped.
        kubectl delete pod -l 'topofit-e2e in (scenario,victims,burst)' --grace-period=0 --force >/dev/null 2>&1
        for n in $(kubectl get nodes -o name); do kubectl uncordon "${n#node/}" >/dev/null; done
        e2e_stop kube-scheduler
        e2e_stop extender
        # The overlay's objects, accepted by the API server; its leader-election Role is all
        # the e2e scheduler identity gets for the Lease (the bootstrap role covers only
        # kube-system/kube-scheduler).
        kubectl kustomize "$E2E_TOP/deploy/overlays/ha" >"$E2E_DIR/render-ha-apply.yaml" &&
                kubectl apply -f "$E2E_DIR/render-ha-apply.yaml" >"$E2E_DIR/log/ha-apply.log" 2>&1 ||
                { fail "the API server refused deploy/overlays/ha (log/ha-apply.log)"; return; }
        kubectl -n topofit-system create rolebinding topofit-e2e-ha-lease \
                --role topofit-scheduler-leader-election --user system:kube-scheduler >/dev/null ||
                { fail "binding the leader-election Role failed"; return; }
        # The overlay's admission policy lets only the sidecars' identity, the ServiceAccount
        # topofit-scheduler, bind with topofit.io/gpus: the extenders run with its token.
        local sa_token
        sa_token=$(kubectl -n topofit-system create token topofit-scheduler --duration 1h) ||
                { fail "no token for the ServiceAccount topofit-scheduler"; return; }
        e2e_token_kubeconfig ha-sidecar "$sa_token"
        export E2E_HA_EXT_KUBECONFIG=$E2E_DIR/ha-sidecar.kubeconfig
        export E2E_SCHEDULER_NAME=topofit-scheduler
        e2e_ha_replica a || { fail "replica a did not start (log/ha-*-a.log)"; return; }
        e2e_ha_replica b || { fail "replica b did not start (log/ha-*-b.log)"; return; }
        e2e_wait 30 "a scheduler leader" e2e_ha_leader || { fail "no scheduler acquired the lease"; return; }
        leader=$(e2e_ha_leader)
        other=a
        [ "$leader" = a ] && other=b
        # The Lease as the API server holds it: the new leader must take it over.
        local lease_before lease_after
        lease_before=$(e2e_ha_lease) || { fail "no Lease topofit-system/topofit-scheduler"; return; }
        e2e_gpu_pods_paced h 1 "$pods" ha &
        local creator=$!
        unset E2E_SCHEDULER_NAME
        e2e_wait 30 "the first HA pods bound" e2e_bound_at_least 4 ha ||
                { fail "the leader ($leader) placed fewer than 4 pods in 30 s"; return; }
        # The leader and its extender die together, as a scheduler pod with its sidecar does.
        t_kill=$(date +%s.%N)
        e2e_kill "ha-sched-$leader"
        e2e_kill "ha-ext-$leader"
        bound_at_kill=$(e2e_bound_count ha)
        e2e_wait 60 "replica $other binds" e2e_ha_bound_at_least "$other" 1 ||
                { fail "replica $other made no bind within 60 s of the leader's death"; return; }
        t_first=$(date +%s.%N)
        wait "$creator" || { fail "creating the HA pods failed"; return; }
        [ "$(e2e_ha_leader)" = "$other" ] || { fail "replica $other does not hold the lease"; return; }
        lease_after=$(e2e_ha_lease)
        [ "${lease_after%% *}" != "${lease_before%% *}" ] && [ "${lease_after#* }" -gt "${lease_before#* }" ] ||
                { fail "the Lease did not change hands: before '$lease_before', after '$lease_after'"; return; }
        e2e_wait 120 "all HA pods bound" e2e_bound_at_least "$pods" ha ||
                { fail "only $(e2e_bound_count ha) of $pods placed 120 s after the failover"; return; }
        e2e_check_no_double_allocation || { fail "a GPU is on two pods (log)"; return; }
        local missing
        missing=$(kubectl get pods -l topofit-e2e=ha -o json | "$E2E_PY" -c '
import json, sys
print(" ".join(p["metadata"]["name"] for p in json.load(sys.stdin)["items"]
      if "topofit.io/gpus" not in p["metadata"].get("annotations", {})))')
        [ -z "$missing" ] || { fail "bound without topofit.io/gpus: $missing"; return; }
        local after=$(( pods - bound_at_kill )) by_new
        by_new=$(e2e_ha_bound "$other")
        [ "${by_new:-0}" -ge "$after" ] ||
                { fail "replica $other bound ${by_new:-0} pods, $after were left at the kill"; return; }
        local fo taken
        fo=$(awk -v a="$t_kill" -v b="$t_first" 'BEGIN { printf "%.1f", b - a }')
        taken=$(e2e_ha_lease_acquired_after "$t_kill")
        echo "# ha: leader $leader killed with its extender at $bound_at_kill of $pods bound; Lease (holder leaseTransitions) '$lease_before' -> '$lease_after', taken ${taken}s after the kill; replica $other bound its first pod ${fo}s after the kill and $by_new in all; no GPU on two pods" \
                >>"$E2E_DIR/placements.txt"
        # shellcheck disable=SC2034
        E2E_NOTE="failover ${fo}s from kill to the new leader's first bind, Lease taken over after ${taken}s; $bound_at_kill of $pods bound at the kill, $by_new by the new leader"
}

# --- cluster-level placement (issue 11, docs/placement.md) --------------------------------

e2e_no_pods_at_all() { [ -z "$(kubectl get pods -o name 2>/dev/null)" ]; }

# A clean cluster for the cases below: every pod gone, the HA replicas (which serve only pods
# named for them) stopped, and the single scheduler and its extender started afresh (with
# E2E_SCHED_EXTRA's flags).
e2e_placement_reset() {
        local r n
        for r in a b; do
                e2e_stop "ha-sched-$r"
                e2e_stop "ha-ext-$r"
        done
        kubectl delete pod --all --grace-period=0 --force >/dev/null 2>&1
        e2e_wait 60 "no pods left" e2e_no_pods_at_all || return 1
        # The HA case applied deploy/overlays/ha, its admission policies included.
        e2e_adm_remove_policies || return 1
        for n in $(kubectl get nodes -o name); do kubectl uncordon "${n#node/}" >/dev/null; done
        e2e_extender || return 1
        e2e_scheduler "$E2E_DIR/sched-topofit.yaml"
}

# e2e_cordon_all_but NODE...: every other node unschedulable.
e2e_cordon_all_but() {
        local n keep
        for n in $(kubectl get nodes -o name); do
                n=${n#node/}
                for keep in "$@"; do [ "$n" = "$keep" ] && continue 2; done
                kubectl cordon "$n" >/dev/null || return 1
        done
}

# e2e_pod_gpus NAME: the GPU indices of the pod's topofit.io/gpus, comma-separated.
e2e_pod_gpus() {
        kubectl get pod "$1" -o json | "$E2E_PY" -c '
import json, sys
a = json.load(sys.stdin)["metadata"].get("annotations", {}).get("topofit.io/gpus")
print(",".join(str(i) for c in json.loads(a)["containers"] for i in c["indices"]) if a else "")'
}

# The issue's stranding case through the real scheduler: the HGX H100 is the only node with
# an 8-GPU all-NVLink set; the DGX-1's is broken (one quad busy) and the 4x A100 node is all
# NVLink.  A best-effort 4-GPU pod must not take the H100, and still gets an all-NVLink four;
# the 8-GPU nvlink-required pod after it then fits there.
# e2e_stranding: the stranding case on the four scenario machines, the scheduler and the
# extender (E2E_EXT_ARGS) restarted first; sets E2E_NOTE, or fails.
e2e_stranding() {
        local node gpus
        e2e_placement_reset || { fail "restarting the scheduler and its extender failed"; return; }
        # Only the four scenario machines take pods (earlier cases added more nodes).
        e2e_cordon_all_but dgx1 h100 hgx4 pcie8 || { fail "cordoning the other nodes failed"; return; }
        e2e_gpu_pod strand-busy-dgx1 4 "" dgx1 \
                '{"version":1,"node":"dgx1","containers":[{"name":"main","indices":[0,1,2,3],"uuids":["","","",""]}]}' strand &&
        e2e_gpu_pod strand-busy-pcie8 8 "" pcie8 \
                '{"version":1,"node":"pcie8","containers":[{"name":"main","indices":[0,1,2,3,4,5,6,7],"uuids":["","","","","","","",""]}]}' strand ||
                { fail "creating the existing pods failed"; return; }
        sleep 2 # the extender's watch sees them
        e2e_gpu_pod strand-4 4 "" "" "" strand || { fail "creating strand-4 failed"; return; }
        e2e_wait 30 "strand-4 bound" e2e_pod_bound strand-4 || { fail "strand-4 was not placed in 30 s"; return; }
        node=$(e2e_pod_node strand-4)
        gpus=$(e2e_pod_gpus strand-4)
        [ "$node" != h100 ] || { fail "the 4-GPU pod took the only 8-GPU NVLink set (h100, GPUs $gpus)"; return; }
        case $node:$gpus in
        dgx1:4,5,6,7 | hgx4:0,1,2,3) ;;
        *) fail "the 4-GPU pod got $node GPUs '$gpus', not an all-NVLink four"; return ;;
        esac
        e2e_gpu_pod strand-8 8 nvlink-required "" "" strand || { fail "creating strand-8 failed"; return; }
        e2e_wait 30 "strand-8 bound" e2e_pod_bound strand-8 ||
                { fail "the 8-GPU nvlink-required pod stayed pending (stranded)"; return; }
        [ "$(e2e_pod_node strand-8)" = h100 ] || { fail "strand-8 went to $(e2e_pod_node strand-8)"; return; }
        e2e_check_no_double_allocation || { fail "a GPU is on two pods"; return; }
        # shellcheck disable=SC2034
        E2E_NOTE="4-GPU pod on $node GPUs $gpus, 8-GPU nvlink-required pod on h100"
}

t_stranding() {
        need_topofit || return 0
        need_api_mode || return 0
        # The cluster term on, as deploy/ runs it (t_topofit_extender_up turned it off for
        # the placement cases, and t_node_cache_false back on: this case can run without it).
        E2E_EXT_ARGS=()
        e2e_stranding
}

# The stranding case again with the deciding filter (--filter-best 1): the filter passes only
# the node topofit ranks first, so kube-scheduler binds there without scoring and never
# calls prioritize (the extender's prioritize count stays 0 while both pods are placed).
t_filter_best() {
        need_topofit || return 0
        need_api_mode || return 0
        local prio narrowed rc=0
        E2E_EXT_ARGS=(--filter-best 1)
        e2e_stranding || rc=1
        prio=$(e2e_extender_metric 'topofit_extender_request_duration_seconds_count{verb="prioritize"}')
        narrowed=$(e2e_extender_metric topofit_extender_filter_narrowed_total)
        E2E_EXT_ARGS=()
        [ "$rc" = 0 ] || return 1
        [ "${prio:-x}" = 0 ] || { fail "kube-scheduler called prioritize ${prio:-?} times"; return; }
        [ "${narrowed:-0}" -ge 1 ] 2>/dev/null ||
                { fail "no filter answer was narrowed (topofit_extender_filter_narrowed_total '${narrowed}')"; return; }
        E2E_NOTE="$E2E_NOTE; $narrowed filter answers narrowed to one node, no prioritize call"
}

# e2e_gang NAME PODS: a PodGroup (gang of PODS) and its pods of 4 GPUs each, domain-required,
# topofit.io/group-size set (the extender does not read PodGroups), created in one request.
e2e_gang() {
        "$E2E_PY" - "$1" "$2" "${3:-all}" <<'PY' | kubectl create -f - >/dev/null
import json, sys
name, n, part = sys.argv[1], int(sys.argv[2]), sys.argv[3]
res = {"nvidia.com/gpu": "4", "cpu": "10m", "memory": "16Mi"}
items = []
if part in ("all", "podgroup"):
    items.append({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                  "metadata": {"name": name, "namespace": "default"},
                  "spec": {"schedulingPolicy": {"gang": {"minCount": n}}}})
ann = {"topofit.io/placement": "domain-required"}
if part == "all":
    ann["topofit.io/group-size"] = str(n)
for i in range(n if part != "podgroup" else 0):
    items.append({"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": f"{name}-{i}", "namespace": "default",
                               "labels": {"topofit-e2e": name},
                               "annotations": ann},
                  "spec": {"schedulingGroup": {"podGroupName": name},
                           "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.2",
                                           "resources": {"limits": res, "requests": res}}],
                           "terminationGracePeriodSeconds": 0}})
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
PY
}

# (e2e_gang NAME N [all|podgroup|pods]: "podgroup" creates only the PodGroup, "pods" only
# the pods, without topofit.io/group-size: their size is the PodGroup's minCount.)

# e2e_gang_domains NAME: the NVLink domains (clique labels) of the gang's nodes, sorted, unique.
e2e_gang_domains() {
        local n
        for n in $(kubectl get pods -l "topofit-e2e=$1" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}'); do
                kubectl get node "$n" -o 'jsonpath={.metadata.labels.nvidia\.com/gpu\.clique}{"\n"}'
        done | sort -u
}

# e2e_gang_cluster: gang scheduling on 1.37 (GenericWorkload on the API server and the
# scheduler, whose GangScheduling plugin comes with it; the PodGroup API
# scheduling.k8s.io/v1beta1; TopologyAwareWorkloadScheduling on the API server only, which
# otherwise drops a PodGroup's spec.schedulingConstraints when it stores it, while the
# scheduler without it leaves those constraints to the extender), two NVLink domains of four GB200 trays (clique labels
# e2e-cluster.1 and .2), every pod gone, the scheduler and extender started afresh, and
# only the trays and the four scenario machines schedulable.  The gates and trays are made
# once; the next gang case only resets.
e2e_gang_cluster() {
        local d i
        if [ "${E2E_GANG_UP:-0}" != 1 ]; then
                e2e_apiserver_restart \
                        --feature-gates GenericWorkload=true,TopologyAwareWorkloadScheduling=true \
                        --runtime-config scheduling.k8s.io/v1beta1=true ||
                        { E2E_WHY="kube-apiserver did not come back with GenericWorkload (log/kube-apiserver.log)"; return 1; }
                E2E_SCHED_EXTRA=(--feature-gates GenericWorkload=true)
        fi
        e2e_placement_reset || { E2E_WHY="restarting the scheduler and its extender failed"; return 1; }
        kubectl get podgroups.v1beta1.scheduling.k8s.io >/dev/null 2>&1 ||
                { E2E_WHY="the API server does not serve scheduling.k8s.io/v1beta1 PodGroups"; return 1; }
        if [ "${E2E_GANG_UP:-0}" != 1 ]; then
                "$E2E_CLI" topo convert "$E2E_DATA/topologies/gb200-tray-4gpu-8nic-gpu-numa-id.txt" \
                        >"$E2E_DIR/topology-tray.json" || { E2E_WHY="converting the tray topology failed"; return 1; }
                for d in 1 2; do
                        for i in 1 2 3 4; do
                                e2e_node "tray-$d-$i" 4 "$E2E_DIR/topology-tray.json" \
                                        "nvidia.com/gpu.clique=e2e-cluster.$d" ||
                                        { E2E_WHY="creating tray-$d-$i failed"; return 1; }
                        done
                done
                E2E_GANG_UP=1
        fi
        e2e_cordon_all_but dgx1 h100 hgx4 pcie8 tray-1-1 tray-1-2 tray-1-3 tray-1-4 \
                tray-2-1 tray-2-2 tray-2-3 tray-2-4 || { E2E_WHY="cordoning the other nodes failed"; return 1; }
        sleep 2 # the extender's watch sees the trays
}

# e2e_tray_pod NAME NODE: an existing workload holding all four GPUs of the tray NODE.
e2e_tray_pod() {
        e2e_gpu_pod "$1" 4 "" "$2" \
                "{\"version\":1,\"node\":\"$2\",\"containers\":[{\"name\":\"main\",\"indices\":[0,1,2,3],\"uuids\":[\"\",\"\",\"\",\"\"]}]}" \
                tray-busy
}

# e2e_nodes_of LABEL: the nodes the pods labelled topofit-e2e=LABEL are bound to, one a line.
e2e_nodes_of() {
        kubectl get pods -l "topofit-e2e=$1" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep .
}

# Two NVLink domains of four trays.  A gang of 4 pods lands in one domain (its members'
# picks must not hold trays: kube-scheduler breaks the tie among the domain's trays its own
# way, so its trays differ from the extender's picks); a second gang of 4 then fits only in
# the other, and single 4-GPU pods created right after it do not take that domain's trays.
t_gang_domains() {
        need_topofit || return 0
        need_api_mode || return 0
        e2e_legacy && { skip "PodGroups need Kubernetes 1.35 or later"; return; }
        e2e_gang_two_domains gang-a gang-b
}

# e2e_gang_two_domains A B: t_gang_domains' case with gangs named A and B (PodGroups are
# not deleted between cases: each case names its own) on a freshly reset gang cluster (the
# extender started with E2E_EXT_ARGS); sets E2E_NOTE, or fails.
e2e_gang_two_domains() {
        local a=$1 b=$2 dom_a dom_b
        e2e_gang_cluster || { fail "$E2E_WHY"; return; }
        e2e_gang "$a" 4 || { fail "creating $a failed"; return; }
        e2e_wait 60 "$a bound" e2e_bound_at_least 4 "$a" ||
                { fail "$a: $(e2e_bound_count "$a") of 4 pods bound in 60 s"; return; }
        dom_a=$(e2e_gang_domains "$a")
        [ "$(echo "$dom_a" | wc -l)" = 1 ] && [ -n "$dom_a" ] ||
                { fail "$a spans domains: $(echo $dom_a)"; return; }
        e2e_gang "$b" 4 || { fail "creating $b failed"; return; }
        e2e_gpu_pods_4 single 1 4 || { fail "creating the single pods failed"; return; }
        e2e_wait 60 "$b bound" e2e_bound_at_least 4 "$b" ||
                { fail "$b: $(e2e_bound_count "$b") of 4 pods bound in 60 s"; return; }
        dom_b=$(e2e_gang_domains "$b")
        [ "$(echo "$dom_b" | wc -l)" = 1 ] && [ -n "$dom_b" ] && [ "$dom_b" != "$dom_a" ] ||
                { fail "$b is in '$(echo $dom_b)', $a in '$dom_a'"; return; }
        e2e_wait 60 "the single pods bound" e2e_bound_at_least 4 single ||
                { fail "$(e2e_bound_count single) of 4 single pods bound in 60 s"; return; }
        e2e_check_no_double_allocation || { fail "a GPU is on two pods"; return; }
        # shellcheck disable=SC2034
        E2E_NOTE="$a in $dom_a on $(e2e_nodes_of "$a" | sort | tr '\n' ' '); $b in $dom_b; 4 single pods on $(e2e_nodes_of single | sort | tr '\n' ' ')"
}

# The gang's size from Kubernetes' PodGroup alone: only the trays schedulable (the 8-GPU
# machines, cordoned, would each hold the whole pair on one node), two of domain 1's trays
# busy, and a gang of 2 pods whose only size is its PodGroup's minCount (no
# topofit.io/group-size) goes to domain 1, where it fits with nothing to spare.  Without the
# minCount its size would be unknown and it would go to the domain with the most room,
# domain 2.  This shape also found the cordon bug (issue 11): the pair was given a cordoned
# 8-GPU node as its domain and bound nowhere; cordoned nodes now hold no room for groups.
t_gang_podgroup_size() {
        need_topofit || return 0
        need_api_mode || return 0
        e2e_legacy && { skip "PodGroups need Kubernetes 1.35 or later"; return; }
        local dom
        e2e_gang_cluster || { fail "$E2E_WHY"; return; }
        e2e_cordon_all_but tray-1-1 tray-1-2 tray-1-3 tray-1-4 tray-2-1 tray-2-2 tray-2-3 tray-2-4 ||
                { fail "cordoning all but the trays failed"; return; }
        e2e_tray_pod busy-1-1 tray-1-1 || { fail "creating busy-1-1 failed"; return; }
        e2e_tray_pod busy-1-2 tray-1-2 || { fail "creating busy-1-2 failed"; return; }
        e2e_gang gang-p 2 podgroup || { fail "creating the PodGroup gang-p failed"; return; }
        sleep 2 # the extender's watch sees the busy trays, the cordons and the PodGroup
        e2e_gang gang-p 2 pods || { fail "creating gang-p's pods failed"; return; }
        e2e_wait 60 "gang-p bound" e2e_bound_at_least 2 gang-p ||
                { fail "gang-p: $(e2e_bound_count gang-p) of 2 pods bound in 60 s (given a cordoned node as its domain?)"; return; }
        dom=$(e2e_gang_domains gang-p)
        [ "$dom" = e2e-cluster.1 ] ||
                { fail "gang-p is in '$(echo $dom)' on $(e2e_nodes_of gang-p | sort | tr '\n' ' '), not e2e-cluster.1 alone (its size from the PodGroup not used?)"; return; }
        e2e_check_no_double_allocation || { fail "a GPU is on two pods"; return; }
        # shellcheck disable=SC2034
        E2E_NOTE="gang-p (size only from its PodGroup) on $(e2e_nodes_of gang-p | sort | tr '\n' ' ')"
}

# A gang's domain survives an extender restart (issue 11): a group by topofit.io/group (no
# PodGroup, so its pods bind one by one) of three 4-GPU domain-required pods; one tray of
# domain 1 busy, so the group is given domain 1 (three free trays: nothing to spare).  Its
# first pod binds there, the extender is stopped and started afresh, then the other two are
# created.  From the group record on the bound pod (topofit.io/group-domain) the restarted
# extender keeps them to domain 1; a fresh choice would give them domain 2, the only domain
# with room for all three then (the gang would split).
t_gang_restart() {
        need_topofit || return 0
        need_api_mode || return 0
        e2e_legacy && { skip "the gang cluster needs Kubernetes 1.35 or later"; return; }
        local dom first log=$E2E_DIR/log/extender.log before after
        e2e_gang_cluster || { fail "$E2E_WHY"; return; }
        e2e_tray_pod busy-1-1 tray-1-1 || { fail "creating busy-1-1 failed"; return; }
        sleep 2 # the extender's watch sees the busy tray
        e2e_group_pods gang-r 3 0 0 || { fail "creating gang-r-0 failed"; return; }
        e2e_wait 60 "gang-r-0 bound" e2e_bound_at_least 1 gang-r ||
                { fail "gang-r-0 not bound in 60 s"; return; }
        first=$(e2e_nodes_of gang-r)
        case "$first" in
        tray-1-*) ;;
        *) fail "gang-r-0 is on '$first', not a free tray of domain 1"; return ;;
        esac
        kubectl get pod gang-r-0 -o 'jsonpath={.metadata.annotations.topofit\.io/group-domain}' |
                grep -q '"domain":"e2e-cluster.1"' ||
                { fail "gang-r-0 carries no group record naming e2e-cluster.1"; return; }
        before=$(grep -c "group holds restored" "$log" 2>/dev/null)
        e2e_extender || { fail "the extender did not come back"; return; }
        e2e_group_pods gang-r 3 1 2 || { fail "creating gang-r-1, gang-r-2 failed"; return; }
        e2e_wait 60 "gang-r bound" e2e_bound_at_least 3 gang-r ||
                { fail "gang-r: $(e2e_bound_count gang-r) of 3 pods bound in 60 s"; return; }
        dom=$(e2e_gang_domains gang-r)
        [ "$dom" = e2e-cluster.1 ] ||
                { fail "gang-r split after the restart: '$(echo $dom)' on $(e2e_nodes_of gang-r | sort | tr '\n' ' ')"; return; }
        after=$(grep -c "group holds restored" "$log" 2>/dev/null)
        [ "${after:-0}" -gt "${before:-0}" ] && grep "group holds restored" "$log" | tail -1 | grep -q "groups=1" ||
                { fail "the restarted extender logged no restored group: $(grep "group holds restored" "$log" | tail -1)"; return; }
        e2e_check_no_double_allocation || { fail "a GPU is on two pods"; return; }
        # shellcheck disable=SC2034
        E2E_NOTE="gang-r-0 on $first before the restart; all on $(e2e_nodes_of gang-r | sort | tr '\n' ' ')"
}

# e2e_group_pods NAME SIZE FROM TO: pods NAME-FROM..NAME-TO of a group by topofit.io/group
# (size SIZE by topofit.io/group-size, no PodGroup), 4 GPUs each, domain-required.
e2e_group_pods() {
        "$E2E_PY" - "$@" <<'PY' | kubectl create -f - >/dev/null
import json, sys
name, size, lo, hi = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
res = {"nvidia.com/gpu": "4", "cpu": "10m", "memory": "16Mi"}
items = [{"apiVersion": "v1", "kind": "Pod",
          "metadata": {"name": f"{name}-{i}", "namespace": "default",
                       "labels": {"topofit-e2e": name, "topofit.io/group": name},
                       "annotations": {"topofit.io/placement": "domain-required",
                                       "topofit.io/group-size": size}},
          "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.2",
                                   "resources": {"limits": res, "requests": res}}],
                   "terminationGracePeriodSeconds": 0}}
         for i in range(lo, hi + 1)]
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
PY
}

# A gang that fits nowhere yet is not blocked by single pods that arrive while it waits:
# domain 1 is full and one of domain 2's trays busy, so the gang (4 pods, domain-required)
# fails its PodGroup cycle; four single 4-GPU pods created then (they would take a tray:
# a GB200 four is the fastest set on offer) must go elsewhere, domain 2's three free trays
# being held for the gang; once the busy tray's pod is gone the gang lands in domain 2.
t_gang_waits() {
        need_topofit || return 0
        need_api_mode || return 0
        e2e_legacy && { skip "PodGroups need Kubernetes 1.35 or later"; return; }
        local i on dom
        e2e_gang_cluster || { fail "$E2E_WHY"; return; }
        for i in 1 2 3 4; do
                e2e_tray_pod "busy-1-$i" "tray-1-$i" || { fail "creating busy-1-$i failed"; return; }
        done
        e2e_tray_pod busy-2-4 tray-2-4 || { fail "creating busy-2-4 failed"; return; }
        sleep 2 # the extender's watch sees them
        e2e_gang gang-w 4 || { fail "creating gang-w failed"; return; }
        e2e_wait 30 "gang-w FailedScheduling" e2e_pod_failed_with gang-w-0 "" ||
                { fail "gang-w-0 has no FailedScheduling event in 30 s"; return; }
        [ "$(e2e_bound_count gang-w)" = 0 ] || { fail "gang-w bound with only three trays free"; return; }
        e2e_gpu_pods_4 lone 1 4 || { fail "creating the single pods failed"; return; }
        e2e_wait 60 "the single pods bound" e2e_bound_at_least 4 lone ||
                { fail "$(e2e_bound_count lone) of 4 single pods bound in 60 s"; return; }
        on=$(e2e_nodes_of lone | sort | tr '\n' ' ')
        case " $on" in
        *" tray-2-"*) fail "a single pod took a tray held for gang-w: $on"; return ;;
        esac
        kubectl delete pod busy-2-4 --grace-period=0 --force >/dev/null 2>&1
        e2e_wait 90 "gang-w bound" e2e_bound_at_least 4 gang-w ||
                { fail "gang-w: $(e2e_bound_count gang-w) of 4 pods bound 90 s after its fourth tray came free"; return; }
        dom=$(e2e_gang_domains gang-w)
        [ "$dom" = e2e-cluster.2 ] || { fail "gang-w is in '$(echo $dom)', not e2e-cluster.2 alone"; return; }
        e2e_check_no_double_allocation || { fail "a GPU is on two pods"; return; }
        # shellcheck disable=SC2034
        E2E_NOTE="single pods on $on while gang-w waited; gang-w in $dom once tray-2-4 came free"
}

# e2e_log_grew FILE PATTERN N: FILE has more than N lines matching PATTERN.
e2e_log_grew() { [ "$(grep -c "$2" "$1" 2>/dev/null)" -gt "$3" ]; }

# e2e_pod_intact NAME: the pod is bound and not being deleted.
e2e_pod_intact() {
        e2e_pod_bound "$1" && [ -z "$(kubectl get pod "$1" -o 'jsonpath={.metadata.deletionTimestamp}' 2>/dev/null)" ]
}

# e2e_gang_v_judged LOG N: the extender logged a dropped tray for splitting a gang (more than
# N such lines), or a member of gang-v is gone or going (a split).
e2e_gang_v_judged() {
        e2e_log_grew "$1" "split a bound pod group" "$2" || ! e2e_pod_intact gang-v-0 || ! e2e_pod_intact gang-v-1
}

# Preempt never splits a bound gang (issue 11): only tray-1-1 and tray-1-2 open, a group of
# two 4-GPU pods (topofit.io/group, priority 0) bound one on each, so each tray's only
# victim for a 4-GPU pod of higher priority is one gang member.  Evicting it would strand
# the other member: topofit's preempt drops both trays (without the rule kube-scheduler
# evicts one member), the gang stays whole and the pod waits.  Then tray-1-3, holding a
# lone priority-0 pod, is uncordoned: the pod preempts that one and lands there.
t_gang_preempt() {
        need_topofit || return 0
        need_api_mode || return 0
        e2e_legacy && { skip "the gang cluster needs Kubernetes 1.35 or later"; return; }
        local log=$E2E_DIR/log/extender.log before p node
        e2e_gang_cluster || { fail "$E2E_WHY"; return; }
        e2e_cordon_all_but tray-1-1 tray-1-2 || { fail "cordoning all but two trays failed"; return; }
        e2e_tray_pod lone tray-1-3 || { fail "creating the lone pod on tray-1-3 failed"; return; }
        sleep 2 # the extender's watch sees the cordons
        e2e_group_pods gang-v 2 0 1 || { fail "creating gang-v failed"; return; }
        e2e_wait 60 "gang-v bound" e2e_bound_at_least 2 gang-v ||
                { fail "gang-v: $(e2e_bound_count gang-v) of 2 pods bound in 60 s"; return; }
        for p in gang-v-0 gang-v-1; do
                kubectl get pod "$p" -o 'jsonpath={.metadata.annotations.topofit\.io/group-domain}' |
                        grep -q '"group":"topofit/default/gang-v"' ||
                        { fail "$p carries no group record of gang-v"; return; }
        done
        kubectl create priorityclass topofit-e2e-high --value 1000 >/dev/null 2>&1
        before=$(grep -c "split a bound pod group" "$log" 2>/dev/null)
        sleep 2 # the extender's view shows both members with their records
        e2e_gpu_pod urgent 4 "" "" "" scenario topofit-e2e-high ||
                { fail "creating the high-priority pod failed"; return; }
        e2e_wait 60 "the preemption judged" e2e_gang_v_judged "$log" "${before:-0}" ||
                { fail "neither a dropped tray nor an eviction in 60 s (log/kube-scheduler.log)"; return; }
        sleep 5 # time for an eviction, were one answered
        for p in gang-v-0 gang-v-1; do
                e2e_pod_intact "$p" || { fail "$p was evicted: the gang was split"; return; }
        done
        e2e_log_grew "$log" "split a bound pod group" "${before:-0}" ||
                { fail "the extender's preempt never dropped a tray for splitting gang-v (log/extender.log)"; return; }
        e2e_pod_bound urgent && { fail "urgent bound with no tray free"; return; }
        kubectl uncordon tray-1-3 >/dev/null || { fail "uncordoning tray-1-3 failed"; return; }
        e2e_wait 120 "urgent bound" e2e_pod_bound urgent ||
                { fail "urgent not placed 120 s after tray-1-3 opened (log/kube-scheduler.log)"; return; }
        node=$(e2e_pod_node urgent)
        [ "$node" = tray-1-3 ] || { fail "urgent landed on $node"; return; }
        e2e_pod_gone lone || { fail "urgent is on tray-1-3 but lone was not evicted"; return; }
        [ "$(e2e_bound_count gang-v)" = 2 ] || { fail "gang-v lost a member"; return; }
        e2e_check_no_double_allocation || { fail "a GPU is on two pods"; return; }
        # shellcheck disable=SC2034
        E2E_NOTE="gang-v on $(e2e_nodes_of gang-v | sort | tr '\n' ' ')kept whole; urgent waited, then preempted lone on tray-1-3"
}

# e2e_gang_keyed NAME N KEY [podgroup|pods]: a PodGroup (gang, minCount N) whose topology
# constraint names the node label KEY, or its N pods of 4 GPUs with spec.schedulingGroup only
# (no topofit token, no topofit.io/group-size: the size and the constraint come from it).
e2e_gang_keyed() {
        "$E2E_PY" - "$@" <<'PY' | kubectl create -f - >/dev/null
import json, sys
name, n, key, part = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
res = {"nvidia.com/gpu": "4", "cpu": "10m", "memory": "16Mi"}
items = []
if part == "podgroup":
    items.append({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                  "metadata": {"name": name, "namespace": "default"},
                  "spec": {"schedulingPolicy": {"gang": {"minCount": n}},
                           "schedulingConstraints": {"topology": [{"key": key}]}}})
for i in range(n if part == "pods" else 0):
    items.append({"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": f"{name}-{i}", "namespace": "default",
                               "labels": {"topofit-e2e": name}},
                  "spec": {"schedulingGroup": {"podGroupName": name},
                           "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.2",
                                           "resources": {"limits": res, "requests": res}}],
                           "terminationGracePeriodSeconds": 0}})
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
PY
}

# e2e_label_values KEY LABEL: the values of node label KEY on the nodes of the pods labelled
# topofit-e2e=LABEL, sorted, unique ("-" for a node without it).
e2e_label_values() {
        local n
        for n in $(e2e_nodes_of "$2"); do
                kubectl get node "$n" -o json | "$E2E_PY" -c '
import json, sys
print(json.load(sys.stdin)["metadata"].get("labels", {}).get(sys.argv[1], "-"))' "$1"
        done | sort -u
}

# A PodGroup's topology constraint on a node label key that is no default tier (issue 11, a
# key level): example.com/block groups the trays across the NVLink domains, b1 = tray-1-1,
# tray-1-2, tray-2-1, tray-2-2 and b2 = the rest.  Only the trays open; tray-1-2, tray-1-4,
# tray-2-1 and tray-2-3 busy, so each NVLink domain has one free tray in each block.  A gang
# of two 4-GPU pods (PodGroup minCount 2, topology key example.com/block, no topofit token)
# must land inside one block value, hence across the two NVLink domains: without the key it
# would keep to one NVLink domain, crossing blocks.  The API server keeps the constraint
# only with TopologyAwareWorkloadScheduling (alpha, on there: e2e_gang_cluster); the
# scheduler runs without it, so keeping to the block is the extender's doing.
t_gang_label_key() {
        need_topofit || return 0
        need_api_mode || return 0
        e2e_legacy && { skip "PodGroups need Kubernetes 1.35 or later"; return; }
        local key=example.com/block n blocks stored
        e2e_gang_cluster || { fail "$E2E_WHY"; return; }
        e2e_cordon_all_but tray-1-1 tray-1-2 tray-1-3 tray-1-4 tray-2-1 tray-2-2 tray-2-3 tray-2-4 ||
                { fail "cordoning all but the trays failed"; return; }
        for n in tray-1-1 tray-1-2 tray-2-1 tray-2-2; do
                kubectl label node "$n" --overwrite "$key=b1" >/dev/null || { fail "labelling $n failed"; return; }
        done
        for n in tray-1-3 tray-1-4 tray-2-3 tray-2-4; do
                kubectl label node "$n" --overwrite "$key=b2" >/dev/null || { fail "labelling $n failed"; return; }
        done
        for n in 1-2 1-4 2-1 2-3; do
                e2e_tray_pod "busy-$n" "tray-$n" || { fail "creating busy-$n failed"; return; }
        done
        e2e_gang_keyed gang-k 2 "$key" podgroup || { fail "creating the PodGroup gang-k failed"; return; }
        stored=$(kubectl get podgroups.v1beta1.scheduling.k8s.io gang-k -o 'jsonpath={.spec.schedulingConstraints.topology[0].key}' 2>/dev/null)
        if [ "$stored" != "$key" ]; then
                e2e_unlabel_blocks "$key"
                skip "the API server dropped the PodGroup's spec.schedulingConstraints (stored key '$stored'; TopologyAwareWorkloadScheduling not on?)"
                return
        fi
        sleep 2 # the extender's watch sees the labels, the busy trays, the cordons and the PodGroup
        e2e_gang_keyed gang-k 2 "$key" pods || { fail "creating gang-k's pods failed"; return; }
        e2e_wait 60 "gang-k bound" e2e_bound_at_least 2 gang-k ||
                { fail "gang-k: $(e2e_bound_count gang-k) of 2 pods bound in 60 s"; return; }
        blocks=$(e2e_label_values "$key" gang-k)
        [ "$(echo "$blocks" | wc -l)" = 1 ] && [ "$blocks" != - ] ||
                { fail "gang-k spans $key values '$(echo $blocks)' on $(e2e_nodes_of gang-k | sort | tr '\n' ' ')"; return; }
        e2e_check_no_double_allocation || { fail "a GPU is on two pods"; return; }
        # shellcheck disable=SC2034
        E2E_NOTE="gang-k inside $key=$blocks on $(e2e_nodes_of gang-k | sort | tr '\n' ' ')(NVLink domains $(e2e_gang_domains gang-k | tr '\n' ' '))"
        e2e_unlabel_blocks "$key"
}

# e2e_unlabel_blocks KEY: the trays without label KEY again.
e2e_unlabel_blocks() {
        local n
        for n in tray-1-1 tray-1-2 tray-1-3 tray-1-4 tray-2-1 tray-2-2 tray-2-3 tray-2-4; do
                kubectl label node "$n" "$1-" >/dev/null 2>&1
        done
}

# e2e_gpu_pods_4 PREFIX FROM TO: best-effort pods of 4 GPUs each, labelled PREFIX, one request.
e2e_gpu_pods_4() {
        "$E2E_PY" - "$@" <<'PY' | kubectl create -f - >/dev/null
import json, sys
prefix, lo, hi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
res = {"nvidia.com/gpu": "4", "cpu": "10m", "memory": "16Mi"}
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
    {"apiVersion": "v1", "kind": "Pod",
     "metadata": {"name": f"{prefix}-{i}", "namespace": "default", "labels": {"topofit-e2e": prefix}},
     "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.2",
                              "resources": {"limits": res, "requests": res}}],
              "terminationGracePeriodSeconds": 0}} for i in range(lo, hi + 1)]}))
PY
}

# The gang case again with the deciding filter (--filter-best 1): inside kube-scheduler's
# PodGroup cycle each member's filter passes only the node topofit plans for it, so the
# scheduler takes it without scoring (no prioritize call); the gangs still land one domain
# each, the single pods beside them.
t_gang_filter_best() {
        need_topofit || return 0
        need_api_mode || return 0
        e2e_legacy && { skip "PodGroups need Kubernetes 1.35 or later"; return; }
        local prio rc=0
        E2E_EXT_ARGS=(--filter-best 1)
        e2e_gang_two_domains gang-fa gang-fb || rc=1
        prio=$(e2e_extender_metric 'topofit_extender_request_duration_seconds_count{verb="prioritize"}')
        E2E_EXT_ARGS=()
        [ "$rc" = 0 ] || return 1
        [ "${prio:-x}" = 0 ] || { fail "kube-scheduler called prioritize ${prio:-?} times"; return; }
        E2E_NOTE="$E2E_NOTE; no prioritize call"
}
