#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Integration test of topofit-node against a fake kubelet, printing TAP.

The fake kubelet is Python gRPC (Debian's python3-grpcio) with stubs generated at test time
by python3-grpc-tools from plugin/api.proto and plugin/podresources.proto, the very files
the plugin is built from.  It serves Registration on <dir>/kubelet.sock (calling
GetDevicePluginOptions on the plugin before it answers, as the kubelet does) and
PodResources on a socket of its own, and drives ListAndWatch, GetPreferredAllocation and
Allocate against the real topofit-node binary.  NVML comes from test/fake-nvml.c.  Pods come from the kube-client test API
server (test/fake-apiserver), bound with their topofit.io/gpus annotation the way the
extender binds them.  Usage: test-plugin-kubelet.py TOPOFIT_NODE_BINARY FAKE_NVML_LIBRARY
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent import futures

SRC = os.environ.get("TOPOFIT_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), ".."))
DATA = os.environ.get("TOPOFIT_TEST_DATA", os.path.join(SRC, "test", "data"))
BINARY = sys.argv[1] if len(sys.argv) > 1 else os.path.join(SRC, "build", "plugin", "topofit-node")
FAKE_NVML = sys.argv[2] if len(sys.argv) > 2 else os.path.join(SRC, "build", "test", "fake-nvml.so")
TOPOLOGY = os.path.join(DATA, "topologies", "dgx1-v100-sxm2-32gb-4nic-microway.txt")
NODE = "node-1"
RESOURCE = "nvidia.com/gpu"
UUIDS = ["GPU-%08d-1111-2222-3333-44444444444%d" % (i, i) for i in range(8)]

TMP = tempfile.mkdtemp(prefix="topofit-plugin-")
STUBS = os.path.join(TMP, "stubs")
os.makedirs(STUBS)
subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I" + os.path.join(SRC, "plugin"),
                "--python_out=" + STUBS, "--grpc_python_out=" + STUBS, "api.proto",
                "podresources.proto"], check=True)
sys.path.insert(0, STUBS)
import grpc  # noqa: E402
import api_pb2  # noqa: E402
import api_pb2_grpc  # noqa: E402
import podresources_pb2  # noqa: E402
import podresources_pb2_grpc  # noqa: E402

DPDIR = os.path.join(TMP, "dp")
os.makedirs(DPDIR)
PODRES = os.path.join(TMP, "podres.sock")
PLUGIN_SOCK = os.path.join(DPDIR, "topofit.sock")
METRICS = os.path.join(TMP, "metrics.prom")
LOG = os.path.join(TMP, "plugin.log")

results = []


def check(name, cond, detail=""):
    results.append((name, bool(cond), detail))
    line = "%s %d - %s" % ("ok" if cond else "not ok", len(results), name)
    print(line, flush=True)
    if not cond and detail:
        for dl in str(detail).splitlines():
            print("# " + dl, flush=True)


def wait_for(fn, timeout=10.0, step=0.05):
    end = time.time() + timeout
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(step)
    return fn()


# --- the fake kubelet ------------------------------------------------------------------------

class Registration(api_pb2_grpc.RegistrationServicer):
    def __init__(self, kubelet):
        self.kubelet = kubelet

    def Register(self, request, context):
        # The kubelet asks for the plugin's options before it answers Register.
        ch = grpc.insecure_channel("unix:" + os.path.join(DPDIR, request.endpoint))
        try:
            opts = api_pb2_grpc.DevicePluginStub(ch).GetDevicePluginOptions(
                api_pb2.Empty(), timeout=3)
        except grpc.RpcError as e:
            opts = e
        finally:
            ch.close()
        self.kubelet.registrations.append((request, opts))
        return api_pb2.Empty()


class PodResources(podresources_pb2_grpc.PodResourcesListerServicer):
    def __init__(self):
        self.answer = podresources_pb2.ListPodResourcesResponse()
        self.calls = 0

    def List(self, request, context):
        self.calls += 1
        return self.answer


class FakeKubelet:
    def __init__(self):
        self.registrations = []
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        api_pb2_grpc.add_RegistrationServicer_to_server(Registration(self), self.server)
        self.server.add_insecure_port("unix:" + os.path.join(DPDIR, "kubelet.sock"))
        self.server.start()

    def stop(self):
        self.server.stop(0).wait()


def plugin_stub():
    """A channel to the plugin, once it connects (up to 10 s): a socket file that exists
    while its server is being started again refuses connections for a moment, and a call
    on a channel that has just been refused fails at once (seen under an ASan build)."""
    ch = grpc.insecure_channel("unix:" + PLUGIN_SOCK)
    try:
        grpc.channel_ready_future(ch).result(timeout=10)
    except grpc.FutureTimeoutError:
        pass  # the call below fails and says why
    return ch, api_pb2_grpc.DevicePluginStub(ch)


def preferred(stub, available, size, must=()):
    req = api_pb2.PreferredAllocationRequest(container_requests=[
        api_pb2.ContainerPreferredAllocationRequest(available_deviceIDs=list(available),
                                                    must_include_deviceIDs=list(must),
                                                    allocation_size=size)])
    resp = stub.GetPreferredAllocation(req, timeout=5)
    return list(resp.container_responses[0].deviceIDs)


def gpus(*idx):
    return [UUIDS[i] for i in idx]


def metric(name):
    try:
        with open(METRICS) as f:
            for line in f:
                if line.startswith(name + " ") or line.startswith(name + "{"):
                    return line
    except OSError:
        pass
    return None


def metric_value(name):
    line = metric(name)
    return float(line.split()[-1]) if line else None


# --- the API server ----------------------------------------------------------------------------

class Api:
    def __init__(self):
        portfile = os.path.join(TMP, "api.port")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(SRC, "test", "fake-apiserver", "fake-apiserver.py"),
             "--port-file", portfile, "--bookmark-interval", "0.5"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(TMP, "api.log"), "w"))
        wait_for(lambda: os.path.exists(portfile), 10)
        self.base = "http://127.0.0.1:%s" % open(portfile).read().strip()
        self.kubeconfig = os.path.join(TMP, "kubeconfig")
        with open(self.kubeconfig, "w") as f:
            f.write("apiVersion: v1\nkind: Config\ncurrent-context: t\n"
                    "clusters:\n- name: c\n  cluster:\n    server: %s\n"
                    "users:\n- name: u\n  user: {}\n"
                    "contexts:\n- name: t\n  context:\n    cluster: c\n    user: u\n" % self.base)

    def call(self, method, path, body=None, ctype="application/json"):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": ctype})
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read() or b"null")

    def pod(self, name, count, annotation, phase="Pending"):
        self.call("POST", "/api/v1/namespaces/default/pods", {
            "metadata": {"name": name},
            "spec": {"containers": [{"name": "main", "resources": {
                "limits": {RESOURCE: str(count)}}}]},
            "status": {"phase": phase}})
        self.call("POST", "/api/v1/namespaces/default/pods/%s/binding" % name, {
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name, "annotations": {"topofit.io/gpus": annotation}},
            "target": {"apiVersion": "v1", "kind": "Node", "name": NODE}})

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def start_plugin(extra=()):
    args = [BINARY, "--node", NODE, "--device-plugin-dir", DPDIR, "--pod-resources", PODRES,
            "--kubeconfig", API.kubeconfig, "--topology-file", TOPO_FILE, "--poll-ms", "100",
            "--verify-interval", "1", "--rediscover-interval", "1", "--metrics-file", METRICS, "--label", "--annotate-mismatch",
            *extra]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(LOG, "a"))


def log_text():
    with open(LOG) as f:
        return f.read()


# --- setup: a DGX-1 topology (NVLink hybrid cube mesh) with UUIDs ------------------------------

disc = subprocess.run([BINARY, "discover", "--topology-file", TOPOLOGY], capture_output=True,
                      text=True)
ann = json.loads(disc.stdout)
for i, g in enumerate(ann["gpus"]):
    g["uuid"] = UUIDS[i]
TOPO_FILE = os.path.join(TMP, "topology.json")
with open(TOPO_FILE, "w") as f:
    json.dump(ann, f)
LINKS = [row.split() for row in ann["links"]]

API = Api()
API.call("POST", "/api/v1/nodes", {"metadata": {"name": NODE}})


def record(*idx, node=NODE):
    """The one topofit.io/gpus form (docs/annotations.md), as the extender writes it."""
    rec = {"version": 1, "node": node, "containers": [
        {"name": "main", "indices": list(idx), "uuids": gpus(*idx)}]}
    if node is None:
        del rec["node"]
    return json.dumps(rec)


API.pod("pod-a", 1, record(5))
API.pod("pod-b", 2, record(1, 4))
API.pod("pod-c", 2, json.dumps({"version": 1, "containers": [          # UUIDs only
    {"name": "main", "uuids": gpus(6, 7)}]}))
API.pod("pod-foreign", 1, json.dumps({"version": 1, "containers": [    # untrusted content
    {"name": "main", "indices": [0], "uuids": ["GPU-not-on-this-node"]}]}))

podres = PodResources()
podres_server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
podresources_pb2_grpc.add_PodResourcesListerServicer_to_server(podres, podres_server)
podres_server.add_insecure_port("unix:" + PODRES)
podres_server.start()

plugin = None
kubelet = None
try:
    # The kubelet is not there yet: the plugin serves and waits.
    plugin = start_plugin()
    check("plugin_serves_its_socket_while_no_kubelet_is_running",
          wait_for(lambda: os.path.exists(PLUGIN_SOCK), 10), log_text())
    time.sleep(0.3)
    check("plugin_survives_an_absent_kubelet", plugin.poll() is None, log_text())

    kubelet = FakeKubelet()
    wait_for(lambda: kubelet.registrations, 10)
    reg, opts = kubelet.registrations[0] if kubelet.registrations else (None, None)
    check("plugin_registers_once_the_kubelet_appears", reg is not None, log_text())
    check("register_carries_version_endpoint_and_resource_name",
          reg is not None and reg.version == "v1beta1" and reg.endpoint == "topofit.sock"
          and reg.resource_name == RESOURCE and reg.options.get_preferred_allocation_available,
          str(reg))
    check("get_device_plugin_options_is_answered_while_register_is_in_flight",
          isinstance(opts, api_pb2.DevicePluginOptions)
          and opts.get_preferred_allocation_available and not opts.pre_start_required, str(opts))

    ch, stub = plugin_stub()
    stream = stub.ListAndWatch(api_pb2.Empty(), timeout=30)
    first = next(stream)
    check("list_and_watch_lists_every_gpu_by_uuid_as_healthy",
          sorted(d.ID for d in first.devices) == sorted(UUIDS)
          and all(d.health == "Healthy" for d in first.devices), str(first))

    # Wait until the pod cache has the pods (the watch delivers them).
    wait_for(lambda: "pod annotation rejected" in log_text(), 10)
    got = preferred(stub, UUIDS, 1)
    check("preferred_allocation_returns_the_annotated_uuid_of_a_bound_pod", got == gpus(5), got)

    got = preferred(stub, UUIDS, 2)
    got2 = preferred(stub, [u for u in UUIDS if u not in got], 2)
    sets = sorted([sorted(got), sorted(got2)])
    check("two_pods_of_the_same_size_admitted_in_turn_get_their_own_disjoint_sets",
          sets == sorted([sorted(gpus(1, 4)), sorted(gpus(6, 7))]), sets)

    # Both requests at once, the same offer: the answers must still differ.
    out = [None, None]

    def ask(k):
        c, s = plugin_stub()
        out[k] = sorted(preferred(s, UUIDS, 2))
        c.close()
    threads = [threading.Thread(target=ask, args=(k,)) for k in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    check("concurrent_admissions_of_two_same_size_pods_get_disjoint_sets",
          out[0] and out[1] and not set(out[0]) & set(out[1])
          and sorted(out) == sorted([sorted(gpus(1, 4)), sorted(gpus(6, 7))]), out)

    # No pending pod has 2 GPUs inside this offer: the scoring fallback picks an NVLink pair.
    offer = gpus(0, 2, 3, 5)
    got = preferred(stub, offer, 2)
    i, j = (UUIDS.index(u) for u in got)
    check("fallback_picks_the_best_connected_pair_when_no_pod_matches",
          len(got) == 2 and set(got) <= set(offer) and LINKS[i][j] == "NV2", (got, LINKS[i][j]))

    got = preferred(stub, gpus(0, 1, 3, 6), 2, must=gpus(0))
    check("fallback_keeps_must_include_and_adds_its_best_peer", sorted(got) == sorted(gpus(0, 3)),
          got)

    got = preferred(stub, gpus(0, 1, 2), 1)
    check("annotation_naming_a_foreign_gpu_is_refused_and_never_offered",
          len(got) == 1 and got[0] in gpus(0, 1, 2) and "pod-foreign" in log_text()
          and "does not have" in log_text(), got)

    resp = stub.Allocate(api_pb2.AllocateRequest(container_requests=[
        api_pb2.ContainerAllocateRequest(devices_ids=gpus(6, 1))]), timeout=5)
    c0 = resp.container_responses[0]
    check("allocate_returns_exactly_the_ids_it_was_given_as_env_and_cdi_names",
          dict(c0.envs) == {"NVIDIA_VISIBLE_DEVICES": ",".join(gpus(6, 1))}
          and [d.name for d in c0.cdi_devices] == ["nvidia.com/gpu=" + u for u in gpus(6, 1)],
          str(resp))

    try:
        stub.Allocate(api_pb2.AllocateRequest(container_requests=[
            api_pb2.ContainerAllocateRequest(devices_ids=["GPU-bogus"])]), timeout=5)
        code = None
    except grpc.RpcError as e:
        code = e.code()
    check("allocate_refuses_an_id_this_node_does_not_have",
          code == grpc.StatusCode.INVALID_ARGUMENT, code)

    raw = ch.unary_unary("/v1beta1.DevicePlugin/GetPreferredAllocation",
                         request_serializer=lambda b: b, response_deserializer=lambda b: b)
    try:
        raw(b"\xff\xff\xff\xff\x0f", timeout=5)
        code = None
    except grpc.RpcError as e:
        code = e.code()
    ok = stub.GetDevicePluginOptions(api_pb2.Empty(), timeout=5).get_preferred_allocation_available
    check("malformed_request_gets_invalid_argument_and_the_plugin_keeps_serving",
          code == grpc.StatusCode.INVALID_ARGUMENT and ok, code)

    # Hostile sizes: too many IDs, a message over DP_MAX_MESSAGE_BYTES, too many streams.
    codes = []
    for req in (api_pb2.AllocateRequest(container_requests=[
                    api_pb2.ContainerAllocateRequest(devices_ids=["GPU-%d" % i for i in range(300)])]),
                api_pb2.AllocateRequest(container_requests=[
                    api_pb2.ContainerAllocateRequest(devices_ids=["x" * (5 << 20)])])):
        try:
            stub.Allocate(req, timeout=5)
            codes.append(None)
        except grpc.RpcError as e:
            codes.append(e.code())
    extra = [stub.ListAndWatch(api_pb2.Empty(), timeout=10) for _ in range(8)]
    over = None
    try:
        for s_ in extra:
            next(s_)
    except grpc.RpcError as e:
        over = e.code()
    for s_ in extra:
        s_.cancel()
    alive = stub.GetDevicePluginOptions(api_pb2.Empty(), timeout=5).get_preferred_allocation_available
    check("oversized_requests_and_excess_streams_are_refused_and_the_plugin_keeps_serving",
          codes == [grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED]
          and over == grpc.StatusCode.RESOURCE_EXHAUSTED and alive, (codes, over))

    check("pre_start_container_is_a_no_op",
          stub.PreStartContainer(api_pb2.PreStartContainerRequest(devices_ids=gpus(0)),
                                 timeout=5) == api_pb2.PreStartContainerResponse())

    # Verification: the kubelet reports pod-a got GPU 6 though its annotation says GPU 5.
    podres.answer = podresources_pb2.ListPodResourcesResponse(pod_resources=[
        podresources_pb2.PodResources(name="pod-a", namespace="default", containers=[
            podresources_pb2.ContainerResources(name="main", devices=[
                podresources_pb2.ContainerDevices(resource_name=RESOURCE, device_ids=gpus(6))])]),
        podresources_pb2.PodResources(name="pod-c", namespace="default", containers=[
            # As the real kubelet lists them: one ContainerDevices per device.
            podresources_pb2.ContainerResources(name="main", devices=[
                podresources_pb2.ContainerDevices(resource_name=RESOURCE, device_ids=gpus(7)),
                podresources_pb2.ContainerDevices(resource_name=RESOURCE,
                                                  device_ids=gpus(6))])])])

    def observed():
        p = API.call("GET", "/api/v1/namespaces/default/pods/pod-a")
        return p["metadata"].get("annotations", {}).get("topofit.io/gpus-observed")
    obs = wait_for(observed, 10)
    check("verification_annotates_a_pod_whose_gpus_differ_from_its_annotation",
          obs == "main=" + UUIDS[6], obs)
    evs = API.call("GET", "/api/v1/namespaces/default/events")["items"]
    mism = [e for e in evs if e.get("reason") == "GPUMismatch"]
    check("verification_sends_one_warning_event_naming_the_pod",
          len(mism) == 1 and mism[0]["involvedObject"]["name"] == "pod-a"
          and mism[0]["type"] == "Warning" and UUIDS[6] in mism[0]["message"], evs)
    pc = API.call("GET", "/api/v1/namespaces/default/pods/pod-c")
    wait_for(lambda: (metric_value("topofit_node_gpu_mismatch_total") or 0) >= 1, 5)
    check("verification_counts_one_mismatch_and_accepts_a_matching_pod_in_any_order",
          metric_value("topofit_node_gpu_mismatch_total") == 1
          and "topofit.io/gpus-observed" not in pc["metadata"].get("annotations", {}),
          metric("topofit_node_gpu_mismatch_total"))

    # Health: GPU 2 turns bad in discovery; the open stream gets the new list, then recovers.
    def write_topology(bad):
        a = json.loads(json.dumps(ann))
        if bad is not None:
            a["gpus"][bad]["ok"] = False
        with open(TOPO_FILE + ".tmp", "w") as f:
            json.dump(a, f)
        os.rename(TOPO_FILE + ".tmp", TOPO_FILE)

    def next_update(s):
        box = []
        t = threading.Thread(target=lambda: box.append(next(s, None)), daemon=True)
        t.start()
        t.join(10)
        return box[0] if box else None
    write_topology(2)
    upd = next_update(stream)
    health = {d.ID: d.health for d in upd.devices} if upd else {}
    check("list_and_watch_pushes_a_gpu_turning_unhealthy",
          health.get(UUIDS[2]) == "Unhealthy"
          and all(health.get(u) == "Healthy" for u in UUIDS if u != UUIDS[2]), upd)
    write_topology(None)
    upd = next_update(stream)
    check("list_and_watch_pushes_the_gpu_healthy_again",
          upd is not None and all(d.health == "Healthy" for d in upd.devices), upd)

    def published_ok():
        n = API.call("GET", "/api/v1/nodes/" + NODE)
        a = json.loads(n["metadata"].get("annotations", {}).get("topofit.io/topology", "{}"))
        return all(g.get("ok", True) for g in a.get("gpus", [])) and "device health changed" in log_text()
    wait_for(published_ok, 10)
    time.sleep(0.3)

    node = API.call("GET", "/api/v1/nodes/" + NODE)
    pub = node["metadata"].get("annotations", {}).get("topofit.io/topology")
    check("topology_annotation_is_published_with_the_class_label",
          pub is not None and json.loads(pub)["gpus"][3]["uuid"] == UUIDS[3]
          and len(node["metadata"].get("labels", {}).get("topofit.io/topology-class", "")) == 16,
          node["metadata"])

    # Kubelet restart: it wipes the directory (our socket too) and serves a new kubelet.sock.
    stream.cancel()
    ch.close()
    kubelet.stop()
    for name in os.listdir(DPDIR):
        os.unlink(os.path.join(DPDIR, name))
    kubelet = FakeKubelet()
    wait_for(lambda: kubelet.registrations, 10)
    ch, stub = plugin_stub()
    try:
        first = next(stub.ListAndWatch(api_pb2.Empty(), timeout=5))
    except grpc.RpcError as e:
        first = e
    check("kubelet_restart_makes_the_plugin_serve_and_register_again",
          len(kubelet.registrations) == 1 and isinstance(first, api_pb2.ListAndWatchResponse)
          and len(first.devices) == 8, (kubelet.registrations, first))
    ch.close()

    rv = node["metadata"]["resourceVersion"]
    plugin.send_signal(signal.SIGTERM)
    code = plugin.wait(10)
    check("plugin_exits_cleanly_on_sigterm_and_removes_its_socket",
          code == 0 and not os.path.exists(PLUGIN_SOCK), code)
    plugin = start_plugin()
    wait_for(lambda: "topology annotation unchanged" in log_text(), 10)
    node = API.call("GET", "/api/v1/nodes/" + NODE)
    check("an_unchanged_topology_is_not_written_again",
          node["metadata"]["resourceVersion"] == rv and "topology annotation unchanged" in log_text(),
          node["metadata"]["resourceVersion"])

    # --- the node side under faults (docs/plugin.md, "Faults") ----------------------------------
    # The earlier pods start running, so only the pods made here are waiting for admission.
    for name in ("pod-a", "pod-b", "pod-c"):
        API.call("PATCH", "/api/v1/namespaces/default/pods/%s/status" % name,
                 {"status": {"phase": "Running"}}, "application/merge-patch+json")
    wait_for(lambda: kubelet.registrations and "registered with the kubelet" in log_text(), 10)

    def ext_ann(*idx):
        return json.dumps({"version": 1, "node": NODE, "containers": [
            {"name": "main", "indices": list(idx), "uuids": gpus(*idx)}]})

    def counters():
        return {k: metric_value(k) or 0 for k in (
            'topofit_node_preferred_total{source="annotation"}',
            'topofit_node_preferred_total{source="fallback"}',
            "topofit_node_gpu_mismatch_total", "topofit_node_registrations_total")}

    def fresh_counters():
        # The metrics file is rewritten after each verification (every second here).
        try:
            os.unlink(METRICS)
        except OSError:
            pass
        wait_for(lambda: os.path.exists(METRICS), 5)
        return counters()

    def half_sent_allocate(ids):
        """What the plugin sees when the kubelet dies in the middle of Allocate: an HTTP/2
        connection with the call's headers and half of its request message, then closed."""
        def lit(idx, value):  # HPACK literal without indexing, indexed name
            head = bytes([idx]) if idx < 15 else bytes([15, idx - 15])
            return head + bytes([len(value)]) + value

        def frame(typ, flags, stream, payload):
            return (len(payload).to_bytes(3, "big") + bytes([typ, flags])
                    + stream.to_bytes(4, "big") + payload)
        msg = api_pb2.AllocateRequest(container_requests=[
            api_pb2.ContainerAllocateRequest(devices_ids=list(ids))]).SerializeToString()
        hdrs = (bytes([0x83, 0x86]) + lit(4, b"/v1beta1.DevicePlugin/Allocate")
                + lit(1, b"localhost") + lit(31, b"application/grpc")
                + b"\x00\x02te\x08trailers")
        grpc_msg = b"\x00" + len(msg).to_bytes(4, "big") + msg
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        wait_for(lambda: s.connect_ex(PLUGIN_SOCK) == 0, 10)
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b"")
                  + frame(1, 4, 1, hdrs) + frame(0, 0, 1, grpc_msg[:len(grpc_msg) // 2]))
        return s

    # (a) The kubelet restarts while it admits a pod.  fault-x and fault-y both wait for 2 GPUs;
    # the kubelet asks for fault-x's (the oldest), dies in the middle of Allocate and comes
    # back: it admits fault-x again from the start.
    API.pod("fault-x", 2, ext_ann(2, 3))
    API.pod("fault-y", 2, ext_ann(0, 5))
    wait_for(lambda: "fault-y" in json.dumps(API.call("GET", "/api/v1/namespaces/default/pods")), 5)
    time.sleep(0.5)  # the watch delivers them
    ch, stub = plugin_stub()
    before_x = preferred(stub, UUIDS, 2)
    socks = [half_sent_allocate(before_x)]
    time.sleep(0.2)
    # The half-sent calls are real calls: 70 of them hold every call slot (DP_MAX_CALLS, 64),
    # so another call waits; once their connections die they are freed.
    held = [half_sent_allocate(before_x) for _ in range(70)]

    def another_call_waits():
        try:
            stub.GetDevicePluginOptions(api_pb2.Empty(), timeout=0.5)
            return None
        except grpc.RpcError as e:
            return e.code()
    blocked = wait_for(another_call_waits, 10, 0.1)  # until the server has taken them all
    for s_ in held:
        s_.close()
    try:
        alive = stub.GetDevicePluginOptions(api_pb2.Empty(), timeout=5).get_preferred_allocation_available
    except grpc.RpcError as e:
        alive = e
    check("calls_cut_off_in_the_middle_of_allocate_are_freed_and_the_plugin_keeps_answering",
          blocked == grpc.StatusCode.DEADLINE_EXCEEDED and alive is True and plugin.poll() is None,
          (blocked, alive))
    ch.close()
    regs = len(kubelet.registrations)
    for s_ in socks:
        s_.close()
    kubelet.stop()
    for name in os.listdir(DPDIR):
        os.unlink(os.path.join(DPDIR, name))
    kubelet = FakeKubelet()
    wait_for(lambda: kubelet.registrations, 10)
    ch, stub = plugin_stub()
    try:
        again_x = preferred(stub, UUIDS, 2)
        resp = stub.Allocate(api_pb2.AllocateRequest(container_requests=[
            api_pb2.ContainerAllocateRequest(devices_ids=again_x)]), timeout=5)
        env = dict(resp.container_responses[0].envs).get("NVIDIA_VISIBLE_DEVICES")
        then_y = preferred(stub, [u for u in UUIDS if u not in again_x], 2)
    except grpc.RpcError as e:
        again_x, env, then_y = e, None, None
    check("kubelet_restarted_during_allocate_the_plugin_registers_again_and_serves",
          len(kubelet.registrations) == 1 and regs >= 1 and plugin.poll() is None, kubelet.registrations)
    check("after_a_kubelet_restart_the_pod_admitted_again_gets_its_annotated_gpus",
          sorted(before_x) == sorted(gpus(2, 3)) and isinstance(again_x, list)
          and sorted(again_x) == sorted(gpus(2, 3)) and env == ",".join(again_x)
          and sorted(then_y or []) == sorted(gpus(0, 5)), (before_x, again_x, env, then_y))
    ch.close()

    # (b) topofit-node dies (SIGKILL) and restarts while pods run.  The kubelet lists what it
    # gave them; fault-x and fault-y got their annotated GPUs, pod-a the GPU 6 reported
    # (and annotated topofit.io/gpus-observed) earlier.
    for name in ("fault-x", "fault-y"):
        API.call("PATCH", "/api/v1/namespaces/default/pods/%s/status" % name,
                 {"status": {"phase": "Running"}}, "application/merge-patch+json")

    def listed(pod, idx):
        return podresources_pb2.PodResources(name=pod, namespace="default", containers=[
            podresources_pb2.ContainerResources(name="main", devices=[
                podresources_pb2.ContainerDevices(resource_name=RESOURCE, device_ids=[UUIDS[i]])
                for i in idx])])
    podres.answer = podresources_pb2.ListPodResourcesResponse(pod_resources=[
        listed("fault-x", (2, 3)), listed("fault-y", (0, 5)), listed("pod-a", (6,))])
    events_before = len([e for e in API.call("GET", "/api/v1/namespaces/default/events")["items"]
                         if e.get("reason") == "GPUMismatch"])
    regs = len(kubelet.registrations)
    calls_before = podres.calls
    plugin.kill()
    plugin.wait(10)
    plugin = start_plugin()
    wait_for(lambda: len(kubelet.registrations) > regs, 10)
    wait_for(lambda: podres.calls >= calls_before + 3, 10)  # three verifications by the new one
    c = fresh_counters()
    ch, stub = plugin_stub()
    try:
        lw = next(stub.ListAndWatch(api_pb2.Empty(), timeout=5))
        # No pod waits for 2 GPUs now: the running pods' sets are not handed out again.
        spare = preferred(stub, gpus(1, 4, 6, 7), 2)
    except grpc.RpcError as e:
        lw, spare = e, None
    c2 = fresh_counters()
    events_after = len([e for e in API.call("GET", "/api/v1/namespaces/default/events")["items"]
                        if e.get("reason") == "GPUMismatch"])
    check("topofit_node_restarted_with_pods_running_registers_again_with_every_gpu",
          len(kubelet.registrations) == regs + 1 and isinstance(lw, api_pb2.ListAndWatchResponse)
          and len(lw.devices) == 8 and all(d.health == "Healthy" for d in lw.devices),
          (kubelet.registrations[regs:], lw))
    check("after_its_restart_running_pods_keep_their_gpus_and_no_mismatch_is_reported_again",
          c["topofit_node_gpu_mismatch_total"] == 0 and events_after == events_before == 1
          and c2['topofit_node_preferred_total{source="annotation"}'] == 0
          and c2['topofit_node_preferred_total{source="fallback"}'] == 1 and len(spare or []) == 2,
          (c, c2, events_before, events_after, spare))
    ch.close()

    # (c) A pod deleted between its binding and its admission: its set is not handed to the
    # next pod of that size (which gets the fallback), whether the pod is gone at once or
    # only marked for deletion; Allocate, stateless, still answers what the kubelet passes.
    API.pod("fault-gone", 1, ext_ann(4))
    API.pod("fault-going", 1, ext_ann(7))
    time.sleep(0.5)
    API.call("DELETE", "/api/v1/namespaces/default/pods/fault-gone")
    API.call("PATCH", "/api/v1/namespaces/default/pods/fault-going",
             {"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}},
             "application/merge-patch+json")
    time.sleep(0.5)
    c = fresh_counters()
    ch, stub = plugin_stub()
    answers = [preferred(stub, gpus(4, 1), 1), preferred(stub, gpus(7, 6), 1)]
    resp = stub.Allocate(api_pb2.AllocateRequest(container_requests=[
        api_pb2.ContainerAllocateRequest(devices_ids=gpus(4))]), timeout=5)
    c2 = fresh_counters()
    check("a_pod_deleted_before_admission_does_not_lend_its_gpus_to_the_next_pod",
          c2['topofit_node_preferred_total{source="annotation"}']
          == c['topofit_node_preferred_total{source="annotation"}']
          and c2['topofit_node_preferred_total{source="fallback"}']
          == c['topofit_node_preferred_total{source="fallback"}'] + 2
          and all(len(a) == 1 for a in answers)
          and "source=fallback" in log_text(), (c, c2, answers))
    check("allocate_after_the_pod_is_gone_answers_what_the_kubelet_passes",
          dict(resp.container_responses[0].envs) == {"NVIDIA_VISIBLE_DEVICES": UUIDS[4]}, str(resp))
    ch.close()

    # (d) PodResources disagrees with the annotation: fault-x is listed with a GPU this node
    # does not have, a pod without an annotation is listed too.  One mismatch, one Event naming
    # the device, and the observed annotation; the unannotated pod is nobody's business.
    API.call("POST", "/api/v1/namespaces/default/pods", {
        "metadata": {"name": "fault-plain"}, "spec": {"nodeName": NODE, "containers": [
            {"name": "main"}]}, "status": {"phase": "Running"}})
    c = fresh_counters()
    podres.answer = podresources_pb2.ListPodResourcesResponse(pod_resources=[
        podresources_pb2.PodResources(name="fault-x", namespace="default", containers=[
            podresources_pb2.ContainerResources(name="main", devices=[
                podresources_pb2.ContainerDevices(resource_name=RESOURCE, device_ids=[UUIDS[2]]),
                podresources_pb2.ContainerDevices(resource_name=RESOURCE,
                                                  device_ids=["GPU-not-here"])])]),
        listed("fault-y", (0, 5)), listed("fault-plain", (1,))])
    calls_before = podres.calls
    wait_for(lambda: podres.calls >= calls_before + 3, 10)
    c2 = fresh_counters()
    evs = [e for e in API.call("GET", "/api/v1/namespaces/default/events")["items"]
           if e.get("reason") == "GPUMismatch" and e["involvedObject"]["name"] != "pod-a"]
    obs = API.call("GET", "/api/v1/namespaces/default/pods/fault-x")["metadata"].get(
        "annotations", {}).get("topofit.io/gpus-observed")
    check("podresources_naming_a_device_the_node_lacks_is_one_mismatch_event_and_annotation",
          c2["topofit_node_gpu_mismatch_total"] == c["topofit_node_gpu_mismatch_total"] + 1
          and len(evs) == 1 and evs[0]["involvedObject"]["name"] == "fault-x"
          and "GPU-not-here" in evs[0]["message"]
          and obs == "main=%s,GPU-not-here" % UUIDS[2], (c, c2, evs, obs))

    # Without an API server: pods from a static file, re-read when it changes.
    dir2 = os.path.join(TMP, "static")
    os.makedirs(dir2)
    pods_file = os.path.join(TMP, "pods.json")

    def write_pods(gpu):
        with open(pods_file + ".tmp", "w") as f:
            json.dump({"kind": "PodList", "items": [{"metadata": {
                "uid": "u-static", "namespace": "default", "name": "static",
                "annotations": {"topofit.io/gpus": record(gpu, node=None)}}, "status": {"phase": "Pending"}}]}, f)
        os.rename(pods_file + ".tmp", pods_file)
    write_pods(3)
    static = subprocess.Popen([BINARY, "--no-kube", "--pods-file", pods_file, "--device-plugin-dir",
                               dir2, "--topology-file", TOPO_FILE, "--poll-ms", "50",
                               "--verify-interval", "0"],
                              stdout=subprocess.DEVNULL, stderr=open(LOG, "a"))
    try:
        wait_for(lambda: os.path.exists(os.path.join(dir2, "topofit.sock")), 10)
        c2 = grpc.insecure_channel("unix:" + os.path.join(dir2, "topofit.sock"))
        s2 = api_pb2_grpc.DevicePluginStub(c2)
        first_static = preferred(s2, UUIDS, 1)
        time.sleep(0.05)  # a new mtime for the rewrite
        write_pods(6)
        second_static = preferred(s2, UUIDS, 1)
        c2.close()
    finally:
        static.send_signal(signal.SIGTERM)
        static_code = static.wait(10)
    # NVML discovery and critical-Xid events, from the stand-in library.
    dir3 = os.path.join(TMP, "nvml")
    os.makedirs(dir3)
    xid_file = os.path.join(TMP, "xid")
    nv = subprocess.Popen([BINARY, "--no-kube", "--device-plugin-dir", dir3, "--nvml-lib", FAKE_NVML,
                           "--no-hwloc", "--poll-ms", "50", "--verify-interval", "0",
                           "--rediscover-interval", "0"],
                          stdout=subprocess.DEVNULL, stderr=open(LOG, "a"),
                          env=dict(os.environ, FAKE_NVML_XID_FILE=xid_file))
    try:
        wait_for(lambda: os.path.exists(os.path.join(dir3, "topofit.sock")), 10)
        c3 = grpc.insecure_channel("unix:" + os.path.join(dir3, "topofit.sock"))
        s3 = api_pb2_grpc.DevicePluginStub(c3).ListAndWatch(api_pb2.Empty(), timeout=30)
        nv_first = next(s3)
        fake_ids = ["GPU-fa4e0000-0000-0000-0000-00000000000%d" % i for i in range(4)]

        def xid(line):
            with open(xid_file + ".tmp", "w") as f:
                f.write(line)
            os.rename(xid_file + ".tmp", xid_file)
            wait_for(lambda: not os.path.exists(xid_file), 5)
        wait_for(lambda: "watching NVML critical Xid events" in log_text(), 5)
        xid("1 13\n")   # an application's fault: the GPU is fine
        xid("2 79\n")   # fallen off the bus
        nv_upd = next_update(s3)
        s3.cancel()
        c3.close()
    finally:
        nv.send_signal(signal.SIGTERM)
        nv_code = nv.wait(10)
    nv_health = {d.ID: d.health for d in nv_upd.devices} if nv_upd else {}
    check("nvml_discovery_lists_the_fake_library_gpus",
          sorted(d.ID for d in nv_first.devices) == fake_ids, nv_first)
    check("a_critical_xid_marks_that_gpu_unhealthy_and_an_application_xid_does_not",
          nv_health == {fake_ids[0]: "Healthy", fake_ids[1]: "Healthy", fake_ids[2]: "Unhealthy",
                        fake_ids[3]: "Healthy"} and nv_code == 0, (nv_health, nv_code))

    check("without_an_api_server_a_pods_file_feeds_the_cache_and_is_re_read",
          first_static == gpus(3) and second_static == gpus(6) and static_code == 0,
          (first_static, second_static, static_code))

    # The Node may not exist yet when topofit-node starts (the kubelet registers it), or the
    # API server may be down: the annotation is written once it can be, not tried once.
    plugin.send_signal(signal.SIGTERM)
    plugin.wait(10)
    API.call("DELETE", "/api/v1/nodes/" + NODE)
    seen = len(log_text())
    plugin = start_plugin()
    wait_for(lambda: "cannot read the node" in log_text()[seen:], 10)
    missing_first = "cannot read the node" in log_text()[seen:]
    API.call("POST", "/api/v1/nodes", {"metadata": {"name": NODE}})

    def annotation_now():
        n = API.call("GET", "/api/v1/nodes/" + NODE)
        return n["metadata"].get("annotations", {}).get("topofit.io/topology")
    wait_for(annotation_now, 15)
    late = annotation_now()
    check("topology_annotation_is_written_once_the_node_exists",
          missing_first and late is not None and json.loads(late)["gpus"][3]["uuid"] == UUIDS[3],
          (missing_first, late))
finally:
    if plugin and plugin.poll() is None:
        plugin.send_signal(signal.SIGTERM)
        try:
            plugin.wait(10)
        except subprocess.TimeoutExpired:
            plugin.kill()
    if kubelet:
        kubelet.stop()
    podres_server.stop(0)
    API.stop()
    print("1..%d" % len(results), flush=True)
    failed = [r for r in results if not r[1]]
    if failed or os.environ.get("TOPOFIT_KEEP_TMP"):
        print("# plugin log follows (%s)" % TMP)
        for line in open(LOG).read().splitlines()[-60:]:
            print("# " + line)
    if not os.environ.get("TOPOFIT_KEEP_TMP"):
        shutil.rmtree(TMP, ignore_errors=True)
sys.exit(1 if [r for r in results if not r[1]] else 0)
