# shellcheck shell=bash
# The admission-policy cases of test/e2e/run (sourced after cases.sh): the
# ValidatingAdmissionPolicies that deploy/admission ships (through
# overlays/kubernetes-1.30-plus) applied to the real API server and every rule exercised
# with real identities: ServiceAccount tokens from the TokenRequest API, bound to Pods that
# are bound to Nodes where the node-name claim matters.  Each refusal must be the policy's
# (HTTP 403 whose message names the policy and its binding and carries the policy's text),
# never RBAC's: every identity that is refused holds the RBAC rights for the request.
# The last case removes the policies again, so later cases (which create annotated pods as
# the e2e administrator) run as before; the HA case applies its overlay's own copy.
# 1.20 has no ValidatingAdmissionPolicy: every case there is skipped with that reason.

E2E_ADM_NS=default
E2E_ADM_GPUS_POLICY=topofit-gpus-annotation
E2E_ADM_NODE_POLICY=topofit-node-scope
E2E_ADM_GPUS_MSG="only the topofit extender may set, change or remove the topofit.io/gpus and topofit.io/group-domain annotations"
E2E_ADM_NODE_MSG="a topofit node daemon may only write its own Node"
E2E_ADM_CLAIM_MSG="a topofit node daemon must use a token bound to its pod on its node"

# need_vap: the tested API server serves admissionregistration.k8s.io/v1
# ValidatingAdmissionPolicy (GA in 1.30); skips with the reason otherwise.
need_vap() {
        need_cluster || return 1
        local served
        served=$(kubectl get --raw /apis/admissionregistration.k8s.io/v1 2>/dev/null |
                "$E2E_PY" -c 'import json,sys; print(" ".join(r["name"] for r in json.load(sys.stdin)["resources"] if "/" not in r["name"]))' 2>/dev/null)
        [[ " $served " == *" validatingadmissionpolicies "* ]] && return 0
        skip "Kubernetes v$E2E_K8S_VERSION serves no ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1 since 1.30; this API server's admissionregistration.k8s.io/v1 has: ${served:-nothing})"
        return 1
}

# e2e_adm_req CREDENTIAL METHOD PATH [BODY] [CONTENT_TYPE]: one API request as CREDENTIAL (a
# bearer token, "admin" for the administrator's client certificate, cert:NAME for pki/NAME's).
# The HTTP status goes to E2E_ADM_CODE, the body to $E2E_DIR/adm-resp.json.
e2e_adm_req() {
        local cred=$1 method=$2 path=$3 body=${4:-} ctype=${5:-application/merge-patch+json}
        local args=(-s -o "$E2E_DIR/adm-resp.json" -w '%{http_code}' --max-time 10 -X "$method"
                --cacert "$E2E_DIR/pki/ca.crt")
        [ "$cred" = admin ] && cred=cert:admin
        if [[ $cred == cert:* ]]; then
                args+=(--cert "$E2E_DIR/pki/${cred#cert:}.crt" --key "$E2E_DIR/pki/${cred#cert:}.key")
        else
                args+=(-H "Authorization: Bearer $cred")
        fi
        [ -n "$body" ] && args+=(-H "Content-Type: $ctype" --data-binary "$body")
        E2E_ADM_CODE=$(curl "${args[@]}" "$E2E_API$path")
}

# e2e_adm_passed WHAT: the last request succeeded (2xx); else prints why.
e2e_adm_passed() {
        [[ $E2E_ADM_CODE == 2?? ]] && return 0
        echo "$1: HTTP $E2E_ADM_CODE $(head -c 400 "$E2E_DIR/adm-resp.json")"
        return 1
}

# e2e_adm_denied WHAT POLICY MESSAGE: the last request was refused by POLICY: HTTP 403, a
# Status whose message names the policy and its binding and carries MESSAGE.  Else prints why.
e2e_adm_denied() {
        "$E2E_PY" - "$E2E_DIR/adm-resp.json" "$E2E_ADM_CODE" "$2" "$3" "$1" <<'PY'
import json, sys
path, code, policy, msg, what = sys.argv[1:6]
try:
    st = json.load(open(path))
except ValueError:
    st = {}
m = st.get("message", "")
want = f"ValidatingAdmissionPolicy '{policy}' with binding '{policy}' denied request: "
if code == "403" and st.get("reason") == "Forbidden" and want in m and msg in m.split(want, 1)[1]:
    sys.exit(0)
print(f"{what}: expected the policy {policy} to refuse it, got HTTP {code}: {m or open(path).read()[:400]}")
sys.exit(1)
PY
}

# e2e_adm_token SA NAMESPACE [POD]: a token of the ServiceAccount from the TokenRequest API,
# bound to POD when given (kubectl create token --bound-object-kind Pod).
e2e_adm_token() {
        local bound=()
        [ -n "${3:-}" ] && bound=(--bound-object-kind Pod --bound-object-name "$3")
        kubectl -n "$2" create token "$1" --duration 30m "${bound[@]}"
}

# e2e_adm_pod NAMESPACE NAME SERVICE_ACCOUNT NODE [ANNOTATIONS_JSON]: a pod without GPUs,
# created bound to NODE, running as SERVICE_ACCOUNT.
e2e_adm_pod_json() {
        "$E2E_PY" - "$@" <<'PY'
import json, sys
ns, name, sa, node = sys.argv[1:5]
ann = json.loads(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[5] else {}
print(json.dumps({"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": name, "namespace": ns, "annotations": ann,
                               "labels": {"topofit-e2e": "admission"}},
                  "spec": {"serviceAccountName": sa, "nodeName": node,
                           "terminationGracePeriodSeconds": 0,
                           "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.2"}]}}))
PY
}

# The JSON of a merge patch that sets one annotation.
e2e_adm_ann_patch() {
        "$E2E_PY" -c 'import json,sys; print(json.dumps({"metadata": {"annotations": {sys.argv[1]: sys.argv[2]}}}))' "$1" "$2"
}

# e2e_adm_enforced: the gpus policy refuses a server-side dry run of an annotated pod (the
# API server loads new policies asynchronously).
e2e_adm_enforced() {
        e2e_adm_req admin POST "/api/v1/namespaces/$E2E_ADM_NS/pods?dryRun=All" \
                "$(e2e_adm_pod_json "$E2E_ADM_NS" adm-probe default adm-a '{"topofit.io/gpus":"GPU-probe"}')" \
                application/json
        [ "$E2E_ADM_CODE" = 403 ] && grep -q "$E2E_ADM_GPUS_POLICY" "$E2E_DIR/adm-resp.json"
}

t_admission_applied() {
        need_vap || return 0
        local out=$E2E_DIR/render-kubernetes-1.30-plus-apply.yaml kinds
        kubectl kustomize "$E2E_TOP/deploy/overlays/kubernetes-1.30-plus" >"$out" 2>/dev/null ||
                { fail "kubectl kustomize deploy/overlays/kubernetes-1.30-plus failed"; return; }
        kinds=$(grep -c '^kind: ValidatingAdmissionPolicy' "$out")
        [ "$kinds" = 4 ] || { fail "the overlay renders $kinds policy objects, want 2 policies and 2 bindings"; return; }
        # The whole overlay, as an install applies it: the base again (unchanged) and the policies.
        kubectl apply -f "$out" >"$E2E_DIR/log/admission-apply.log" 2>&1 ||
                { fail "the API server refused deploy/overlays/kubernetes-1.30-plus (log/admission-apply.log)"; return; }
        # Two nodes of our own; the workload and the node agents run on them.
        local n
        for n in adm-a adm-b; do
                kubectl get node "$n" >/dev/null 2>&1 || e2e_node "$n" 0 || { fail "creating node $n failed"; return; }
        done
        e2e_wait 30 "the admission policies enforced" e2e_adm_enforced ||
                { fail "the policy does not refuse an annotated pod 30 s after it was applied: HTTP $E2E_ADM_CODE $(head -c 300 "$E2E_DIR/adm-resp.json")"; return; }
        # The policies' type checking found nothing to warn about.
        local warn
        warn=$(kubectl get validatingadmissionpolicies "$E2E_ADM_GPUS_POLICY" "$E2E_ADM_NODE_POLICY" \
                -o jsonpath='{range .items[*]}{.status.typeChecking.expressionWarnings}{end}')
        [ -z "$warn" ] || { fail "type checking warns: $warn"; return; }
}

# A workload's own identity: a ServiceAccount with RBAC rights to patch pods in its
# namespace, and a token bound to its own pod.
t_admission_pod_self() {
        need_vap || return 0
        kubectl get validatingadmissionpolicybinding "$E2E_ADM_GPUS_POLICY" >/dev/null 2>&1 ||
                { fail "the policies are not applied (see the earlier case)"; return; }
        local ns=$E2E_ADM_NS tok why
        kubectl -n "$ns" create serviceaccount e2e-workload >/dev/null 2>&1
        kubectl -n "$ns" create role e2e-workload-pods --verb get,patch,update --resource pods,pods/status \
                >/dev/null 2>&1
        kubectl -n "$ns" create rolebinding e2e-workload-pods --role e2e-workload-pods \
                --serviceaccount "$ns:e2e-workload" >/dev/null 2>&1
        e2e_adm_pod_json "$ns" adm-self e2e-workload adm-a | kubectl create -f - >/dev/null ||
                { fail "creating the workload pod failed"; return; }
        tok=$(e2e_adm_token e2e-workload "$ns" adm-self) || { fail "no token bound to adm-self"; return; }
        # RBAC lets it patch its pod: a refusal below is the policy's.
        [ "$(kubectl auth can-i patch pods -n "$ns" --as "system:serviceaccount:$ns:e2e-workload")" = yes ] ||
                { fail "the workload's Role does not allow patch pods"; return; }
        e2e_adm_req "$tok" PATCH "/api/v1/namespaces/$ns/pods/adm-self" \
                "$(e2e_adm_ann_patch topofit.io/gpus '{"version":1,"node":"adm-a","containers":[{"name":"main","indices":[0]}]}')"
        why=$(e2e_adm_denied "the pod setting its own topofit.io/gpus" "$E2E_ADM_GPUS_POLICY" "$E2E_ADM_GPUS_MSG") ||
                { fail "$why"; return; }
        # The same through the status subresource (it can change metadata too).
        e2e_adm_req "$tok" PATCH "/api/v1/namespaces/$ns/pods/adm-self/status" \
                "$(e2e_adm_ann_patch topofit.io/gpus GPU-x)"
        why=$(e2e_adm_denied "the pod setting topofit.io/gpus through pods/status" "$E2E_ADM_GPUS_POLICY" "$E2E_ADM_GPUS_MSG") ||
                { fail "$why"; return; }
        # A forged group record (a restarted extender would hold room from it).
        e2e_adm_req "$tok" PATCH "/api/v1/namespaces/$ns/pods/adm-self" \
                "$(e2e_adm_ann_patch topofit.io/group-domain '{"version":1,"group":"podgroup/default/x","level":0,"domain":"d","size":4,"count":1,"require":0,"whole":true}')"
        why=$(e2e_adm_denied "the pod setting its own topofit.io/group-domain" "$E2E_ADM_GPUS_POLICY" "$E2E_ADM_GPUS_MSG") ||
                { fail "$why"; return; }
        # Its other annotations are its own business.
        e2e_adm_req "$tok" PATCH "/api/v1/namespaces/$ns/pods/adm-self" \
                "$(e2e_adm_ann_patch example.com/note hello)"
        why=$(e2e_adm_passed "the pod setting another annotation") || { fail "$why"; return; }
        [ "$(kubectl -n "$ns" get pod adm-self -o 'jsonpath={.metadata.annotations.example\.com/note}')" = hello ] ||
                { fail "the other annotation did not land"; return; }
        [ -z "$(kubectl -n "$ns" get pod adm-self -o 'jsonpath={.metadata.annotations.topofit\.io/gpus}')" ] ||
                { fail "adm-self carries topofit.io/gpus after all"; return; }
}

# Nobody but the extender: the cluster administrator, a pod created with the annotation, a
# Binding by another identity (kube-scheduler's own), and removing or changing an
# annotation the extender wrote.
t_admission_others() {
        need_vap || return 0
        kubectl get validatingadmissionpolicybinding "$E2E_ADM_GPUS_POLICY" >/dev/null 2>&1 ||
                { fail "the policies are not applied (see the earlier case)"; return; }
        local ns=$E2E_ADM_NS why
        e2e_adm_req admin POST "/api/v1/namespaces/$ns/pods" \
                "$(e2e_adm_pod_json "$ns" adm-preset default adm-a '{"topofit.io/gpus":"GPU-0"}')" application/json
        why=$(e2e_adm_denied "creating a pod with topofit.io/gpus (administrator)" "$E2E_ADM_GPUS_POLICY" "$E2E_ADM_GPUS_MSG") ||
                { fail "$why"; return; }
        e2e_adm_req admin PATCH "/api/v1/namespaces/$ns/pods/adm-self" "$(e2e_adm_ann_patch topofit.io/gpus GPU-0)"
        why=$(e2e_adm_denied "the administrator patching topofit.io/gpus" "$E2E_ADM_GPUS_POLICY" "$E2E_ADM_GPUS_MSG") ||
                { fail "$why"; return; }
        # A Binding carrying the annotation, by the scheduler's identity (it may bind pods).
        e2e_adm_pod_json "$ns" adm-unbound default "" | "$E2E_PY" -c '
import json, sys
p = json.load(sys.stdin); del p["spec"]["nodeName"]; p["spec"]["schedulerName"] = "nobody"; print(json.dumps(p))' |
                kubectl create -f - >/dev/null || { fail "creating an unbound pod failed"; return; }
        e2e_adm_req cert:scheduler POST "/api/v1/namespaces/$ns/pods/adm-unbound/binding" \
                "$(e2e_adm_binding_json adm-unbound adm-a '{"version":1,"node":"adm-a","containers":[{"name":"main","indices":[0]}]}')" \
                application/json
        why=$(e2e_adm_denied "kube-scheduler's identity binding with topofit.io/gpus" "$E2E_ADM_GPUS_POLICY" "$E2E_ADM_GPUS_MSG") ||
                { fail "$why"; return; }
        [ -z "$(e2e_pod_node adm-unbound)" ] || { fail "adm-unbound was bound despite the refusal"; return; }
        # The same identity binding without the annotation is unaffected.
        e2e_adm_req cert:scheduler POST "/api/v1/namespaces/$ns/pods/adm-unbound/binding" \
                "$(e2e_adm_binding_json adm-unbound adm-a "")" application/json
        why=$(e2e_adm_passed "kube-scheduler binding without the annotation") || { fail "$why"; return; }
        # A pod the extender bound earlier in the suite: its annotation can be neither changed
        # nor removed, while its other annotations can.
        local bound
        bound=$(kubectl get pods -A -o json | "$E2E_PY" -c '
import json, sys
for p in json.load(sys.stdin)["items"]:
    if "topofit.io/gpus" in p["metadata"].get("annotations", {}) and p["spec"].get("nodeName"):
        print(p["metadata"]["namespace"] + "/" + p["metadata"]["name"]); break')
        if [ -z "$bound" ]; then
                # shellcheck disable=SC2034
                E2E_NOTE="no pod bound by the extender left to try change and removal on"
                return 0
        fi
        e2e_adm_req admin PATCH "/api/v1/namespaces/${bound%/*}/pods/${bound#*/}" \
                '{"metadata":{"annotations":{"topofit.io/gpus":null}}}'
        why=$(e2e_adm_denied "removing topofit.io/gpus from $bound" "$E2E_ADM_GPUS_POLICY" "$E2E_ADM_GPUS_MSG") ||
                { fail "$why"; return; }
        e2e_adm_req admin PATCH "/api/v1/namespaces/${bound%/*}/pods/${bound#*/}" "$(e2e_adm_ann_patch topofit.io/gpus GPU-other)"
        why=$(e2e_adm_denied "changing topofit.io/gpus of $bound" "$E2E_ADM_GPUS_POLICY" "$E2E_ADM_GPUS_MSG") ||
                { fail "$why"; return; }
        e2e_adm_req admin PATCH "/api/v1/namespaces/${bound%/*}/pods/${bound#*/}" "$(e2e_adm_ann_patch example.com/note ok)"
        why=$(e2e_adm_passed "another annotation on $bound") || { fail "$why"; return; }
        # shellcheck disable=SC2034
        E2E_NOTE="tried on $bound as well"
}

# e2e_adm_binding_json POD NODE GPUS: a Binding of POD to NODE, with topofit.io/gpus GPUS
# when not empty (as the extender writes it).
e2e_adm_binding_json() {
        "$E2E_PY" -c '
import json, sys
pod, node, gpus = sys.argv[1:4]
md = {"name": pod}
if gpus:
    md["annotations"] = {"topofit.io/gpus": gpus}
print(json.dumps({"apiVersion": "v1", "kind": "Binding", "metadata": md,
                  "target": {"apiVersion": "v1", "kind": "Node", "name": node}}))' "$@"
}

# The extender's identity (its ServiceAccount's token, which deploy/base binds to the
# extender's ClusterRole): a Binding with the annotation passes; and the real topofit-extender
# running as that ServiceAccount places a GPU pod through kube-scheduler with the policy on.
t_admission_extender() {
        need_vap || return 0
        kubectl get validatingadmissionpolicybinding "$E2E_ADM_GPUS_POLICY" >/dev/null 2>&1 ||
                { fail "the policies are not applied (see the earlier case)"; return; }
        local ns=$E2E_ADM_NS tok why ann
        tok=$(e2e_adm_token topofit-extender topofit-system) || { fail "no token for topofit-extender"; return; }
        e2e_adm_pod_json "$ns" adm-ext default "" | "$E2E_PY" -c '
import json, sys
p = json.load(sys.stdin); del p["spec"]["nodeName"]; p["spec"]["schedulerName"] = "nobody"; print(json.dumps(p))' |
                kubectl create -f - >/dev/null || { fail "creating an unbound pod failed"; return; }
        ann='{"version":1,"node":"adm-b","containers":[{"name":"main","indices":[0]}]}'
        e2e_adm_req "$tok" POST "/api/v1/namespaces/$ns/pods/adm-ext/binding" \
                "$(e2e_adm_binding_json adm-ext adm-b "$ann")" application/json
        why=$(e2e_adm_passed "the extender's identity binding with topofit.io/gpus") || { fail "$why"; return; }
        [ "$(kubectl -n "$ns" get pod adm-ext -o 'jsonpath={.metadata.annotations.topofit\.io/gpus}')" = "$ann" ] ||
                { fail "adm-ext does not carry the Binding's annotation"; return; }
        # Even the extender cannot patch pods: RBAC, not the policy, is what stops that.
        e2e_adm_req "$tok" PATCH "/api/v1/namespaces/$ns/pods/adm-ext" "$(e2e_adm_ann_patch topofit.io/gpus GPU-x)"
        [ "$E2E_ADM_CODE" = 403 ] && ! grep -q ValidatingAdmissionPolicy "$E2E_DIR/adm-resp.json" ||
                { fail "the extender patching a pod: HTTP $E2E_ADM_CODE $(head -c 300 "$E2E_DIR/adm-resp.json")"; return; }
        # The real extender under that identity, through kube-scheduler.
        if [ "${E2E_TOPOFIT_UP:-0}" != 1 ] || [ "${E2E_EXT_MODE:-}" != api ]; then
                # shellcheck disable=SC2034
                E2E_NOTE="the Binding by its token checked; the extender binary in API mode is not available here"
                return 0
        fi
        e2e_token_kubeconfig extender-sa "$tok"
        local n
        for n in $(kubectl get nodes -o name); do kubectl uncordon "${n#node/}" >/dev/null; done
        E2E_EXTENDER_KUBECONFIG=$E2E_DIR/extender-sa.kubeconfig e2e_extender ||
                { fail "topofit-extender did not start with the ServiceAccount token"; return; }
        e2e_gpu_pod adm-gpu 1 || { fail "creating adm-gpu failed"; return; }
        e2e_wait 60 "adm-gpu bound" e2e_pod_bound adm-gpu
        ann=$(kubectl get pod adm-gpu -o 'jsonpath={.metadata.annotations.topofit\.io/gpus}')
        # Back to the client-certificate identity for the cases that follow.
        e2e_extender || { fail "topofit-extender did not come back"; return; }
        [ -n "$(e2e_pod_node adm-gpu)" ] && [ -n "$ann" ] ||
                { fail "adm-gpu: node '$(e2e_pod_node adm-gpu)', annotation '$ann' (log/extender.log)"; return; }
        # shellcheck disable=SC2034
        E2E_NOTE="a Binding with the annotation by the extender's token passed; topofit-extender as topofit-system:topofit-extender placed adm-gpu on $(e2e_pod_node adm-gpu)"
}

# The node daemon's identity: tokens of topofit-system:topofit-node bound to a pod on adm-a.
t_admission_node_scope() {
        need_vap || return 0
        local rc
        e2e_adm_node_scope
        rc=$?
        e2e_adm_cleanup
        return $rc
}

e2e_adm_node_scope() {
        kubectl get validatingadmissionpolicybinding "$E2E_ADM_NODE_POLICY" >/dev/null 2>&1 ||
                { fail "the policies are not applied (see the earlier case)"; return; }
        local tok plain why claim topo
        e2e_adm_pod_json topofit-system adm-agent-a topofit-node adm-a | kubectl create -f - >/dev/null ||
                { fail "creating the node agent's pod failed"; return; }
        tok=$(e2e_adm_token topofit-node topofit-system adm-agent-a) || { fail "no token bound to adm-agent-a"; return; }
        # The API server put the pod's node into the token (ServiceAccountTokenPodNodeInfo).
        e2e_adm_req "$tok" POST /apis/authentication.k8s.io/v1/selfsubjectreviews \
                '{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}' application/json
        claim=$("$E2E_PY" -c '
import json, sys
u = json.load(open(sys.argv[1]))["status"]["userInfo"]
print(u["username"], ",".join(u.get("extra", {}).get("authentication.kubernetes.io/node-name", [])))' \
                "$E2E_DIR/adm-resp.json" 2>/dev/null)
        [ "$claim" = "system:serviceaccount:topofit-system:topofit-node adm-a" ] ||
                { fail "the token's identity and node-name claim: '$claim'"; return; }
        # RBAC lets topofit-node patch every Node: a refusal below is the policy's.
        [ "$(kubectl auth can-i patch nodes --as system:serviceaccount:topofit-system:topofit-node)" = yes ] ||
                { fail "deploy/base's topofit-node ClusterRole does not allow patch nodes"; return; }
        topo='{"version":1,"gpus":[]}'
        [ -f "$E2E_DIR/topology-hgx4.json" ] && topo=$(cat "$E2E_DIR/topology-hgx4.json")
        e2e_adm_req "$tok" PATCH /api/v1/nodes/adm-b "$(e2e_adm_ann_patch topofit.io/topology "$topo")"
        why=$(e2e_adm_denied "adm-a's agent writing adm-b's topology" "$E2E_ADM_NODE_POLICY" \
                "$E2E_ADM_NODE_MSG: the token is for node adm-a, the request is for node adm-b") ||
                { fail "$why"; return; }
        e2e_adm_req "$tok" PATCH /api/v1/nodes/adm-a "$(e2e_adm_ann_patch topofit.io/topology "$topo")"
        why=$(e2e_adm_passed "adm-a's agent writing its own topology") || { fail "$why"; return; }
        e2e_adm_req "$tok" PATCH /api/v1/nodes/adm-a "$(e2e_adm_ann_patch example.com/agent ok)"
        why=$(e2e_adm_passed "adm-a's agent writing another annotation of its own Node") || { fail "$why"; return; }
        # A topofit-node token that is bound to no pod carries no node name: no Node at all.
        plain=$(e2e_adm_token topofit-node topofit-system) || { fail "no plain token for topofit-node"; return; }
        e2e_adm_req "$plain" PATCH /api/v1/nodes/adm-a "$(e2e_adm_ann_patch topofit.io/topology "$topo")"
        why=$(e2e_adm_denied "topofit-node without a node-name claim" "$E2E_ADM_NODE_POLICY" "$E2E_ADM_CLAIM_MSG") ||
                { fail "$why"; return; }
        # Other identities are not the node policy's business.
        e2e_adm_req admin PATCH /api/v1/nodes/adm-b "$(e2e_adm_ann_patch example.com/admin ok)"
        why=$(e2e_adm_passed "the administrator writing adm-b") || { fail "$why"; return; }
        # The real daemon with the pod-bound token: it publishes adm-a's topology, and the same
        # token cannot publish adm-b's.
        local node_bin=$E2E_TOP/build/plugin/topofit-node
        if [ ! -x "$node_bin" ]; then
                # shellcheck disable=SC2034
                E2E_NOTE="API requests checked; build/plugin/topofit-node is not built"
                return 0
        fi
        e2e_token_kubeconfig node-agent-a "$tok"
        # Whatever the requests above wrote goes (as the administrator), so the daemon has
        # something to write rather than finding its annotation unchanged.
        kubectl annotate node adm-a topofit.io/topology- >/dev/null ||
                { fail "removing adm-a's topology annotation failed"; return; }
        e2e_adm_agent adm-a || { fail "topofit-node --node adm-a did not publish adm-a's topology (log/adm-agent-adm-a.log)"; return; }
        e2e_adm_agent adm-b
        grep -q "topology annotation patch failed.*$E2E_ADM_NODE_POLICY.*$E2E_ADM_NODE_MSG" "$E2E_DIR/log/adm-agent-adm-b.log" ||
                { fail "topofit-node --node adm-b with adm-a's token: no refusal by the policy in log/adm-agent-adm-b.log"; return; }
        # shellcheck disable=SC2034
        E2E_NOTE="topofit-node with a token bound to a pod on adm-a published adm-a and was refused adm-b"
}

# e2e_adm_agent NODE: runs topofit-node for NODE with adm-a's agent token until it has
# published NODE's topology (0) or logged a failed patch (1); 10 s at most.
e2e_adm_agent() {
        local node=$1 dir=$E2E_DIR/adm-agent-$1 log=$E2E_DIR/log/adm-agent-$1.log
        mkdir -p "$dir"
        e2e_start "adm-agent-$node" "$E2E_TOP/build/plugin/topofit-node" --node "$node" \
                --kubeconfig "$E2E_DIR/node-agent-a.kubeconfig" --device-plugin-dir "$dir" \
                --pod-resources "$dir/none.sock" --verify-interval 0 --rediscover-interval 0 \
                --topology-file "$E2E_DATA/topologies/hgx-a100-4gpu-sxm4-nv4-della.txt"
        e2e_wait 10 "topofit-node for $node" grep -q "topology annotation \(written\|patch failed\)" "$log"
        e2e_stop "adm-agent-$node"
        grep -q "topology annotation written" "$log" &&
                [ -n "$(kubectl get node "$node" -o 'jsonpath={.metadata.annotations.topofit\.io/topology}')" ]
}

# Removes the admission policies where they are applied (by the admission cases, or with
# deploy/overlays/ha by the HA case) and waits until the API server no longer enforces them:
# later cases create pods carrying topofit.io/gpus as the administrator.
e2e_adm_remove_policies() {
        kubectl get validatingadmissionpolicy "$E2E_ADM_GPUS_POLICY" >/dev/null 2>&1 ||
                kubectl get validatingadmissionpolicy "$E2E_ADM_NODE_POLICY" >/dev/null 2>&1 ||
                return 0
        kubectl delete validatingadmissionpolicybinding "$E2E_ADM_GPUS_POLICY" "$E2E_ADM_NODE_POLICY" \
                --ignore-not-found >/dev/null 2>&1
        kubectl delete validatingadmissionpolicy "$E2E_ADM_GPUS_POLICY" "$E2E_ADM_NODE_POLICY" \
                --ignore-not-found >/dev/null 2>&1
        e2e_wait 30 "the admission policies gone" e2e_adm_not_enforced
}

# Removes what the admission cases made: the policies, the pods, the workload's identity.
# The nodes stay (nothing can be placed on them).
e2e_adm_cleanup() {
        kubectl delete pod -A -l topofit-e2e=admission --grace-period=0 --force >/dev/null 2>&1
        kubectl delete pod adm-gpu --grace-period=0 --force --ignore-not-found >/dev/null 2>&1
        kubectl -n "$E2E_ADM_NS" delete rolebinding,role e2e-workload-pods --ignore-not-found >/dev/null 2>&1
        kubectl -n "$E2E_ADM_NS" delete serviceaccount e2e-workload --ignore-not-found >/dev/null 2>&1
        e2e_adm_remove_policies
}

e2e_adm_not_enforced() {
        e2e_adm_req admin POST "/api/v1/namespaces/$E2E_ADM_NS/pods?dryRun=All" \
                "$(e2e_adm_pod_json "$E2E_ADM_NS" adm-probe default adm-a '{"topofit.io/gpus":"GPU-probe"}')" \
                application/json
        [[ $E2E_ADM_CODE == 2?? ]]
}
