# shellcheck shell=bash
# The end-to-end control plane, as shell functions sourced by test/e2e/cluster and
# test/e2e/run: etcd + the real kube-apiserver and kube-scheduler of E2E_K8S_VERSION (the
# current release by default, from scripts/e2e-build; 1.20.2 is the legacy control plane,
# with Debian's etcd-server) + an extender, all on 127.0.0.1 with random free ports, in one
# temporary directory ($E2E_DIR) that e2e_down removes.  Certificates come from openssl: one
# CA, serving certificates for the API server and the extender, client certificates (admin,
# scheduler, extender) and a kubeconfig per client.  No controller-manager, no kubelet: Nodes
# are created through the API and their status patched (capacity, allocatable, Ready).
# Every wait is bounded (E2E_WAIT_S); every process started here is stopped by e2e_down,
# which callers run from an EXIT trap.  Logs stay in $E2E_DIR/log/ (kept with E2E_KEEP=1).

E2E_TOP=${E2E_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
E2E_WAIT_S=${E2E_WAIT_S:-60}          # bound on each "wait until ready"
E2E_GPU_RESOURCE=nvidia.com/gpu
E2E_K8S_CURRENT=1.37.2                # scripts/e2e-build's E2E_K8S_VERSION
E2E_K8S_VERSION=${E2E_K8S_VERSION:-$E2E_K8S_CURRENT}

# e2e_legacy: true for the 1.20 control plane (flags and config API versions of its day).
e2e_legacy() { [ "$E2E_K8S_VERSION" = 1.20.2 ]; }
E2E_PIDS=()                           # every process we started, stopped in reverse
E2E_APISERVER_EXTRA=()                # extra kube-apiserver flags (e2e_apiserver_restart)
E2E_APISERVER_LEGACY=()
E2E_SCHED_EXTRA=()                    # extra kube-scheduler flags (feature gates of a case)
E2E_EXT_ARGS=()                       # extra topofit-extender flags (e2e_extender)

e2e_log() { echo "e2e: $*" >&2; }

# e2e_run_case FN: runs one case of test/e2e/run or kubelet-stage; its output goes to
# E2E_RUN_LOG, else onto stderr itself (not a reopened /dev/stderr: a file opened anew has
# its own offset, and where stderr is a file opened without O_APPEND each would write over
# the other's lines).
e2e_run_case() {
        if [ -n "${E2E_RUN_LOG:-}" ]; then
                "$1" >>"$E2E_RUN_LOG" 2>&1
        else
                "$1" >&2
        fi
}

# A free TCP port on 127.0.0.1 (the kernel picks; a tiny race is acceptable in tests).
e2e_free_port() {
        python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# e2e_wait SECONDS DESCRIPTION CMD...: runs CMD every 0.2 s until it succeeds; 1 on timeout.
e2e_wait() {
        local limit=$1 what=$2 deadline
        shift 2
        deadline=$(( $(date +%s) + limit ))
        until "$@" >/dev/null 2>&1; do
                if [ "$(date +%s)" -ge "$deadline" ]; then
                        e2e_log "timed out after ${limit}s waiting for $what"
                        return 1
                fi
                sleep 0.2
        done
}

# e2e_start NAME CMD...: starts CMD in the background, logging to $E2E_DIR/log/NAME.log;
# its pid goes to $E2E_DIR/NAME.pid and E2E_PIDS.  A restart appends to the same log.
e2e_start() {
        local name=$1
        shift
        "$@" >>"$E2E_DIR/log/$name.log" 2>&1 &
        local pid=$!
        echo "$pid" >"$E2E_DIR/$name.pid"
        E2E_PIDS+=("$pid")
}

# e2e_stop NAME: stops the process started as NAME (TERM, then KILL after 5 s).
e2e_stop() {
        local f=$E2E_DIR/$1.pid pid i
        [ -f "$f" ] || return 0
        pid=$(cat "$f")
        rm -f "$f"
        kill "$pid" 2>/dev/null || return 0
        for i in $(seq 50); do
                kill -0 "$pid" 2>/dev/null || return 0
                sleep 0.1
        done
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
}

# e2e_kill NAME: SIGKILL, no grace: the crash in the restart scenario.
e2e_kill() {
        local f=$E2E_DIR/$1.pid pid
        [ -f "$f" ] || return 0
        pid=$(cat "$f")
        rm -f "$f"
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
}

e2e_down() {
        local i pid
        for (( i = ${#E2E_PIDS[@]} - 1; i >= 0; i-- )); do
                pid=${E2E_PIDS[i]}
                kill "$pid" 2>/dev/null || continue
                for _ in $(seq 50); do
                        kill -0 "$pid" 2>/dev/null || break
                        sleep 0.1
                done
                kill -9 "$pid" 2>/dev/null || true
                wait "$pid" 2>/dev/null || true
        done
        E2E_PIDS=()
        if [ -n "${E2E_DIR:-}" ] && [ -d "$E2E_DIR" ]; then
                if [ "${E2E_KEEP:-0}" = 1 ]; then
                        e2e_log "kept $E2E_DIR"
                else
                        [ -L "$E2E_DIR/etcd" ] && rm -rf "$(readlink "$E2E_DIR/etcd")"
                        rm -rf "$E2E_DIR"
                fi
        fi
}

# --- certificates ------------------------------------------------------------------------

# e2e_cert NAME CN [O] [SAN]: an EC P-256 key and a certificate signed by the e2e CA.
e2e_cert() {
        local name=$1 cn=$2 org=${3:-} san=${4:-} subj d=$E2E_DIR/pki
        subj="/CN=$cn"
        [ -n "$org" ] && subj="/O=$org$subj"
        openssl ecparam -name prime256v1 -genkey -noout -out "$d/$name.key" 2>/dev/null
        openssl req -new -key "$d/$name.key" -subj "$subj" -out "$d/$name.csr" 2>/dev/null
        {
                echo "basicConstraints=CA:FALSE"
                echo "keyUsage=critical,digitalSignature,keyEncipherment"
                if [ -n "$san" ]; then
                        echo "extendedKeyUsage=serverAuth,clientAuth"
                        echo "subjectAltName=$san"
                else
                        echo "extendedKeyUsage=clientAuth"
                fi
        } >"$d/$name.ext"
        openssl x509 -req -in "$d/$name.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" \
                -CAcreateserial -days 2 -sha256 -extfile "$d/$name.ext" \
                -out "$d/$name.crt" 2>/dev/null
        rm -f "$d/$name.csr" "$d/$name.ext"
}

e2e_pki() {
        local d=$E2E_DIR/pki
        mkdir -p "$d"
        openssl ecparam -name prime256v1 -genkey -noout -out "$d/ca.key" 2>/dev/null
        openssl req -x509 -new -key "$d/ca.key" -subj "/CN=topofit-e2e-ca" -days 2 -sha256 \
                -addext "basicConstraints=critical,CA:TRUE" \
                -addext "keyUsage=critical,keyCertSign,cRLSign" -out "$d/ca.crt" 2>/dev/null
        e2e_cert apiserver kube-apiserver "" \
                "IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default.svc"
        e2e_cert admin admin system:masters
        e2e_cert scheduler system:kube-scheduler
        e2e_cert extender topofit-extender "" "IP:127.0.0.1,DNS:localhost"
        # Service account token keys: kube-apiserver 1.20 requires them even with the
        # ServiceAccount admission plugin off.
        openssl ecparam -name prime256v1 -genkey -noout -out "$d/sa.key" 2>/dev/null
        openssl ec -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
}

# e2e_kubeconfig NAME: $E2E_DIR/NAME.kubeconfig for the client certificate pki/NAME.
e2e_kubeconfig() {
        local name=$1 d=$E2E_DIR/pki
        cat >"$E2E_DIR/$name.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: $E2E_API
    certificate-authority: $d/ca.crt
users:
- name: $name
  user:
    client-certificate: $d/$name.crt
    client-key: $d/$name.key
contexts:
- name: e2e
  context:
    cluster: e2e
    user: $name
current-context: e2e
EOF
}

# e2e_token_kubeconfig NAME TOKEN: $E2E_DIR/NAME.kubeconfig for a bearer token (a
# ServiceAccount's, from the TokenRequest API).
e2e_token_kubeconfig() {
        cat >"$E2E_DIR/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: $E2E_API
    certificate-authority: $E2E_DIR/pki/ca.crt
users:
- name: $1
  user:
    token: $2
contexts:
- name: e2e
  context:
    cluster: e2e
    user: $1
current-context: e2e
EOF
}

# --- the control plane -------------------------------------------------------------------

# Sets E2E_BIN (kube-apiserver, kube-scheduler, kubectl, etcd or Debian's, the Go peer),
# building them on first use.  Returns 77 with E2E_BIN_WHY set when they cannot be built
# here (no suitable Go): the callers report their cases as skipped with that reason.
e2e_bins() {
        local out rc
        [ -n "${E2E_BIN:-}" ] && return 0
        # The packages too (python3-yaml; etcd-server and Go 1.19 for the legacy build).
        if e2e_legacy; then
                TOPOFIT_SETUP_E2E=legacy "$E2E_TOP/scripts/setup" >&2 || return 1
        else
                TOPOFIT_SETUP_E2E=1 "$E2E_TOP/scripts/setup" >&2 || return 1
        fi
        out=$("$E2E_TOP/scripts/e2e-build" "$E2E_K8S_VERSION" 2>"$E2E_DIR/log/e2e-build.log")
        rc=$?
        cat "$E2E_DIR/log/e2e-build.log" >&2
        if [ "$rc" = 77 ]; then
                E2E_BIN_WHY=$(sed -n 's/^e2e-build: skipped: //p' "$E2E_DIR/log/e2e-build.log" | tail -1)
                return 77
        fi
        [ "$rc" = 0 ] || return 1
        E2E_BIN=$(tail -1 <<<"$out")
        export PATH="$E2E_BIN:$PATH"
}

e2e_api_healthy() {
        curl -sf --max-time 2 --cacert "$E2E_DIR/pki/ca.crt" --cert "$E2E_DIR/pki/admin.crt" \
                --key "$E2E_DIR/pki/admin.key" "$E2E_API/readyz" | grep -qx ok
}

# e2e_up: etcd + kube-apiserver, ready to take requests; sets E2E_DIR, E2E_API, KUBECONFIG.
e2e_up() {
        [ -n "${E2E_DIR:-}" ] || E2E_DIR=$(mktemp -d "${TMPDIR:-/tmp}/topofit-e2e.XXXXXX")
        mkdir -p "$E2E_DIR/log"
        e2e_bins || return 1
        e2e_pki
        local etcd_port etcd_peer api_port
        etcd_port=$(e2e_free_port)
        etcd_peer=$(e2e_free_port)
        api_port=$(e2e_free_port)
        E2E_API=https://127.0.0.1:$api_port
        local etcd_data=$E2E_DIR/etcd
        [ -d /dev/shm ] && [ -w /dev/shm ] && etcd_data=$(mktemp -d /dev/shm/topofit-e2e-etcd.XXXXXX) &&
                ln -s "$etcd_data" "$E2E_DIR/etcd"
        local etcd=etcd
        [ -x "$E2E_BIN/etcd" ] && etcd=$E2E_BIN/etcd
        e2e_start etcd "$etcd" --name e2e --data-dir "$etcd_data" \
                --listen-client-urls "http://127.0.0.1:$etcd_port" \
                --advertise-client-urls "http://127.0.0.1:$etcd_port" \
                --listen-peer-urls "http://127.0.0.1:$etcd_peer" \
                --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
                --initial-cluster "e2e=http://127.0.0.1:$etcd_peer"
        e2e_wait "$E2E_WAIT_S" etcd curl -sf "http://127.0.0.1:$etcd_port/health" || return 1

        local d=$E2E_DIR/pki legacy=()
        # 1.24 removed the insecure port and 1.26 klog's --logtostderr (stderr is the default).
        # Later releases refuse a loopback advertise address for the kubernetes Service's
        # endpoints: with no in-cluster client here, there is no endpoint to reconcile.
        if e2e_legacy; then
                legacy=(--insecure-port 0 --logtostderr=true)
        else
                legacy=(--endpoint-reconciler-type none)
        fi
        E2E_ETCD_PORT=$etcd_port E2E_API_PORT=$api_port E2E_APISERVER_LEGACY=("${legacy[@]}")
        e2e_apiserver_run || return 1
        e2e_wait "$E2E_WAIT_S" kube-apiserver e2e_api_healthy || return 1
        local who
        for who in admin scheduler; do
                e2e_kubeconfig "$who"
        done
        export KUBECONFIG=$E2E_DIR/admin.kubeconfig
        # The extender's identity gets exactly the RBAC rules that deploy/ ships.
        e2e_apply_extender_rbac || return 1
}

# e2e_apiserver_run: starts kube-apiserver on E2E_ETCD_PORT / E2E_API_PORT (set by e2e_up)
# with E2E_APISERVER_EXTRA appended (feature gates for the cases that need them).
e2e_apiserver_run() {
        local d=$E2E_DIR/pki
        e2e_start kube-apiserver kube-apiserver "${E2E_APISERVER_LEGACY[@]}" \
                --etcd-servers "http://127.0.0.1:$E2E_ETCD_PORT" \
                --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
                --secure-port "$E2E_API_PORT" \
                --cert-dir "$E2E_DIR/apiserver" \
                --tls-cert-file "$d/apiserver.crt" --tls-private-key-file "$d/apiserver.key" \
                --client-ca-file "$d/ca.crt" \
                --service-account-key-file "$d/sa.pub" \
                --service-account-signing-key-file "$d/sa.key" \
                --service-account-issuer https://kubernetes.default.svc \
                --service-cluster-ip-range 10.0.0.0/24 \
                --authorization-mode RBAC \
                --disable-admission-plugins ServiceAccount,TaintNodesByCondition \
                --enable-priority-and-fairness=false \
                --profiling=false --v=1 "${E2E_APISERVER_EXTRA[@]}"
}

# e2e_apiserver_restart [ARG...]: the same kube-apiserver on the same etcd (the cluster's
# objects stay) with ARG... added; waits until it is healthy.
e2e_apiserver_restart() {
        e2e_stop kube-apiserver
        E2E_APISERVER_EXTRA=("$@")
        e2e_apiserver_run || return 1
        e2e_wait "$E2E_WAIT_S" kube-apiserver e2e_api_healthy
}

# Applies everything deploy/base renders to (the API server validates every object; with no
# controller-manager nothing runs) and binds the extender's ClusterRole to the extender's
# client-certificate user, so the e2e proves the shipped least-privilege rules are enough.
e2e_apply_extender_rbac() {
        kubectl kustomize "$E2E_TOP/deploy/base" >"$E2E_DIR/deploy-base.yaml" || return 1
        kubectl apply -f "$E2E_DIR/deploy-base.yaml" >"$E2E_DIR/log/deploy-apply.log" || return 1
        e2e_identity extender-client topofit-extender "" topofit-extender topofit-e2e-extender
}

# e2e_identity NAME CN ORG [CLUSTERROLE BINDING]: a client of the API server: the
# certificate pki/NAME for user CN in group ORG ("" for none), $E2E_DIR/NAME.kubeconfig,
# and with CLUSTERROLE the ClusterRoleBinding BINDING of it to user CN.  The one way the
# suites make an identity: the extender here, the kubelets and topofit-node in kubelet-lib.sh.
e2e_identity() {
        local name=$1 cn=$2 org=$3 role=${4:-} binding=${5:-}
        e2e_cert "$name" "$cn" "$org"
        e2e_kubeconfig "$name"
        [ -z "$role" ] && return 0
        kubectl create clusterrolebinding "$binding" --clusterrole "$role" --user "$cn" >/dev/null
}

# e2e_node NAME GPUS [ANNOTATION_FILE] [LABELS]: a Node with GPUS nvidia.com/gpu, Ready, with the
# topology annotation read from ANNOTATION_FILE when given (may be ""), and LABELS
# ("key=value,key=value") added to its labels.
e2e_node() {
        local name=$1 gpus=$2 ann=${3:-} labels=${4:-}
        python3 - "$name" "$ann" "$labels" >"$E2E_DIR/node-$name.json" <<'EOF' || return 1
import json, sys
name, ann, labels = sys.argv[1], sys.argv[2], sys.argv[3]
meta = {"name": name, "labels": {"kubernetes.io/hostname": name, "topofit.io/gpu": "true"}}
for kv in filter(None, labels.split(",")):
    k, v = kv.split("=", 1)
    meta["labels"][k] = v
if ann:
    meta["annotations"] = {"topofit.io/topology": open(ann).read().strip()}  # TOPO_ANNOTATION_KEY
print(json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": {}}))
EOF
        kubectl create -f "$E2E_DIR/node-$name.json" >/dev/null || return 1
        local now status
        now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
        status=$(cat <<EOF
{"status":{"capacity":{"cpu":"64","memory":"512Gi","pods":"110","$E2E_GPU_RESOURCE":"$gpus"},
 "allocatable":{"cpu":"64","memory":"512Gi","pods":"110","$E2E_GPU_RESOURCE":"$gpus"},
 "conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"e2e",
   "lastHeartbeatTime":"$now","lastTransitionTime":"$now"}]}}
EOF
)
        e2e_api PATCH "/api/v1/nodes/$name/status" "$status" \
                "application/merge-patch+json" >/dev/null
}

# e2e_api METHOD PATH [BODY] [CONTENT_TYPE]: one request as admin; the body on stdout.
e2e_api() {
        local method=$1 path=$2 body=${3:-} ctype=${4:-application/json}
        local args=(-sf --max-time 10 -X "$method" --cacert "$E2E_DIR/pki/ca.crt"
                --cert "$E2E_DIR/pki/admin.crt" --key "$E2E_DIR/pki/admin.key")
        [ -n "$body" ] && args+=(-H "Content-Type: $ctype" --data-binary "$body")
        curl "${args[@]}" "$E2E_API$path"
}

# e2e_scheduler_config FILE URL_PREFIX NODE_CACHE_CAPABLE [HTTPS] [BIND]: a
# KubeSchedulerConfiguration (v1; v1beta1 on the legacy control plane) with our extender
# entry; leader election as E2E_LEADER_ELECT says (off unless set to 1).  HTTPS=1 adds enableHTTPS and a
# tlsConfig (our CA, the scheduler's client certificate for mutual TLS); BIND=0 leaves the
# bind and preempt verbs out (for an extender that has none).
e2e_scheduler_config() {
        local file=$1 url=$2 ncc=$3 https=${4:-1} bind=${5:-1} d=$E2E_DIR/pki
        {
                cat <<EOF
apiVersion: kubescheduler.config.k8s.io/$(e2e_legacy && echo v1beta1 || echo v1)
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $E2E_DIR/scheduler.kubeconfig
leaderElection:
  leaderElect: $([ "${E2E_LEADER_ELECT:-0}" = 1 ] && echo true || echo false)
percentageOfNodesToScore: 100
extenders:
- urlPrefix: $url
  filterVerb: filter
  prioritizeVerb: prioritize
EOF
                if [ "$bind" = 1 ]; then
                        echo "  bindVerb: bind"
                        echo "  preemptVerb: preempt"
                fi
                cat <<EOF
  weight: ${E2E_EXTENDER_WEIGHT:-100}
  nodeCacheCapable: $ncc
  httpTimeout: 5s
  ignorable: false
  managedResources:
  - name: $E2E_GPU_RESOURCE
    ignoredByScheduler: false
EOF
                if [ "$https" = 1 ]; then
                        cat <<EOF
  enableHTTPS: true
  tlsConfig:
    caFile: $d/ca.crt
    certFile: $d/scheduler.crt
    keyFile: $d/scheduler.key
EOF
                fi
        } >"$file"
}

e2e_scheduler_healthy() {
        curl -skf --max-time 2 "https://127.0.0.1:$E2E_SCHED_PORT/healthz" | grep -qx ok
}

# e2e_scheduler CONFIG: (re)starts kube-scheduler with CONFIG and waits for /healthz.
e2e_scheduler() {
        local config=$1
        local legacy=()
        e2e_stop kube-scheduler
        E2E_SCHED_PORT=$(e2e_free_port)
        # 1.23 removed the insecure --port and 1.26 --logtostderr.
        e2e_legacy && legacy=(--port 0 --logtostderr=true)
        e2e_start kube-scheduler kube-scheduler --config "$config" "${legacy[@]}" \
                "${E2E_SCHED_EXTRA[@]}" \
                --secure-port "$E2E_SCHED_PORT" --bind-address 127.0.0.1 \
                --cert-dir "$E2E_DIR/scheduler-certs" \
                --authentication-kubeconfig "$E2E_DIR/scheduler.kubeconfig" \
                --authorization-kubeconfig "$E2E_DIR/scheduler.kubeconfig" \
                --v="${E2E_SCHED_V:-2}"
        e2e_wait "$E2E_WAIT_S" kube-scheduler e2e_scheduler_healthy
}

# --- extenders ---------------------------------------------------------------------------

# The topofit extender that meson built, or "" when this tree has none yet.
e2e_extender_bin() {
        local b
        for b in "${E2E_EXTENDER_BIN:-}" "$E2E_TOP/build/extender/topofit-extender"; do
                [ -n "$b" ] && [ -x "$b" ] && { echo "$b"; return 0; }
        done
        return 1
}

e2e_extender_healthy() {
        curl -sf --max-time 2 --cacert "$E2E_DIR/pki/ca.crt" --cert "$E2E_DIR/pki/scheduler.crt" \
                --key "$E2E_DIR/pki/scheduler.key" "https://127.0.0.1:$E2E_EXT_PORT/readyz" >/dev/null
}

# e2e_extender_mode: "api" when the built extender reads the cluster from the API server
# (it has --kubeconfig), else "static" (--cluster FILE only).
e2e_extender_mode() {
        local bin
        bin=$(e2e_extender_bin) || return 1
        if "$bin" --help 2>&1 | grep -q -- '--kubeconfig'; then
                echo api
        else
                echo static
        fi
}

# e2e_extender [EXTRA_ARGS...]: (re)starts topofit-extender serving HTTPS with mutual TLS on
# E2E_EXT_PORT (kept across restarts) and waits until /readyz says ready.  In API mode it
# reads the cluster with its own client certificate (the identity deploy/'s RBAC is bound
# to; E2E_EXTENDER_KUBECONFIG names another kubeconfig).  In static mode it gets `kubectl get nodes,pods -o json` of the cluster as it is now
# (--cluster), so it sees the same nodes and annotated pods, but not later changes.
# E2E_EXT_ARGS (an array) comes before EXTRA_ARGS on every start while it is set.
e2e_extender() {
        local bin mode d=$E2E_DIR/pki src
        bin=$(e2e_extender_bin) || { e2e_log "topofit-extender is not built"; return 1; }
        mode=$(e2e_extender_mode)
        e2e_stop extender
        E2E_EXT_PORT=${E2E_EXT_PORT:-$(e2e_free_port)}
        if [ "$mode" = api ]; then
                src=(--kubeconfig "${E2E_EXTENDER_KUBECONFIG:-$E2E_DIR/extender-client.kubeconfig}")
        else
                kubectl get nodes,pods -o json >"$E2E_DIR/static-cluster.json" || return 1
                # Nothing commits or releases reservations without bind: keep them short.
                src=(--cluster "$E2E_DIR/static-cluster.json" --reservation-ttl 1)
        fi
        e2e_start extender "$bin" --listen "127.0.0.1:$E2E_EXT_PORT" "${src[@]}" \
                --tls-cert "$d/extender.crt" --tls-key "$d/extender.key" --client-ca "$d/ca.crt" \
                --log-level "${E2E_EXT_LOG_LEVEL:-info}" "${E2E_EXT_ARGS[@]}" "$@"
        e2e_wait "$E2E_WAIT_S" topofit-extender e2e_extender_healthy
}

# --- high availability -------------------------------------------------------------------

# e2e_ha_replica NAME: one scheduler replica of the HA set as deploy/overlays/ha runs it:
# its own topofit-extender (live mode, its own port, plain HTTP on loopback, as the sidecar
# is) and a kube-scheduler with the overlay's configuration: profile topofit-scheduler,
# leader election on the Lease topofit-system/topofit-scheduler.  Sets
# E2E_HA_EXT_PORT_<NAME> and E2E_HA_SCHED_PORT_<NAME>; processes are ha-ext-NAME and
# ha-sched-NAME.  The extender reads the API with E2E_HA_EXT_KUBECONFIG (default: its client
# certificate's kubeconfig).
e2e_ha_replica() {
        local name=$1 bin ext_port sched_port cfg
        bin=$(e2e_extender_bin) || return 1
        ext_port=$(e2e_free_port)
        sched_port=$(e2e_free_port)
        printf -v "E2E_HA_EXT_PORT_$name" '%s' "$ext_port"
        printf -v "E2E_HA_SCHED_PORT_$name" '%s' "$sched_port"
        e2e_start "ha-ext-$name" "$bin" --listen "127.0.0.1:$ext_port" \
                --kubeconfig "${E2E_HA_EXT_KUBECONFIG:-$E2E_DIR/extender-client.kubeconfig}" \
                --log-level info
        e2e_wait "$E2E_WAIT_S" "ha-ext-$name" \
                curl -sf --max-time 2 "http://127.0.0.1:$ext_port/readyz" || return 1
        # deploy/overlays/ha's own configuration, with this replica's extender address and
        # the e2e scheduler's kubeconfig in place of in-cluster credentials.
        cfg=$E2E_DIR/sched-ha-$name.yaml
        "$E2E_PY" - "$E2E_TOP/deploy/overlays/ha/kube-scheduler-config.yaml" "$cfg" \
                "http://127.0.0.1:$ext_port" "$E2E_DIR/scheduler.kubeconfig" <<'PY' || return 1
import sys, yaml
src, dst, url, kubeconfig = sys.argv[1:5]
c = yaml.safe_load(open(src))
assert len(c["extenders"]) == 1 and c["extenders"][0]["urlPrefix"].startswith("http://127.0.0.1:")
c["extenders"][0]["urlPrefix"] = url
c["clientConnection"] = {"kubeconfig": kubeconfig}
yaml.safe_dump(c, open(dst, "w"))
PY
        e2e_start "ha-sched-$name" kube-scheduler --config "$cfg" \
                --secure-port "$sched_port" --bind-address 127.0.0.1 \
                --cert-dir "$E2E_DIR/ha-sched-$name-certs" \
                --authentication-kubeconfig "$E2E_DIR/scheduler.kubeconfig" \
                --authorization-kubeconfig "$E2E_DIR/scheduler.kubeconfig" --v=2
        e2e_wait "$E2E_WAIT_S" "ha-sched-$name" \
                curl -skf --max-time 2 "https://127.0.0.1:$sched_port/healthz"
}

# e2e_ha_leader: the name (a or b) of the running replica whose scheduler has acquired the
# Lease (a scheduler that loses it exits, so at most one running replica has); 1 when none.
e2e_ha_leader() {
        local n
        for n in a b; do
                [ -f "$E2E_DIR/ha-sched-$n.pid" ] && kill -0 "$(cat "$E2E_DIR/ha-sched-$n.pid")" 2>/dev/null ||
                        continue
                grep -qi "successfully acquired lease" "$E2E_DIR/log/ha-sched-$n.log" 2>/dev/null &&
                        { echo "$n"; return 0; }
        done
        return 1
}

# e2e_extender_metric SERIES: the value of one exact series of the extender's /metrics
# (name with labels as printed), or nothing.
e2e_extender_metric() {
        curl -s --max-time 5 --cacert "$E2E_DIR/pki/ca.crt" --cert "$E2E_DIR/pki/scheduler.crt" \
                --key "$E2E_DIR/pki/scheduler.key" "https://127.0.0.1:$E2E_EXT_PORT/metrics" |
                awk -v s="$1" '$1 == s { print $2 }'
}

# e2e_goext: the Go peer extender (bench/peer-goext, built by scripts/e2e-build) on
# plain HTTP, filter and prioritize only: the control-plane plumbing check that needs no
# topofit code.
e2e_goext() {
        e2e_stop goext
        E2E_GOEXT_PORT=${E2E_GOEXT_PORT:-$(e2e_free_port)}
        e2e_start goext "$E2E_BIN/goext" -port "$E2E_GOEXT_PORT"
        e2e_wait "$E2E_WAIT_S" goext curl -sf --max-time 2 "http://127.0.0.1:$E2E_GOEXT_PORT/healthz"
}
