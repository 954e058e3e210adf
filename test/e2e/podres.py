#!/usr/bin/env python3
"""Asks a kubelet's PodResources API (v1 List) what it allocated, as JSON on stdout.

    podres.py SOCKET RESOURCE

Prints {"<namespace>/<pod>/<container>": ["<device id>", ...], ...} for RESOURCE, device
IDs sorted; containers without RESOURCE are left out.  The gRPC stubs are generated from
plugin/podresources.proto (the file topofit-node is built from) with python3-grpc-tools
into a temporary directory, as test/test-plugin-kubelet.py does.
"""
import json
import os
import subprocess
import sys
import tempfile

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def main():
    sock, resource = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="topofit-podres-") as stubs:
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I" + os.path.join(SRC, "plugin"),
                        "--python_out=" + stubs, "--grpc_python_out=" + stubs,
                        "podresources.proto"], check=True)
        sys.path.insert(0, stubs)
        import grpc
        import podresources_pb2
        import podresources_pb2_grpc
        with grpc.insecure_channel("unix://" + sock) as ch:
            stub = podresources_pb2_grpc.PodResourcesListerStub(ch)
            resp = stub.List(podresources_pb2.ListPodResourcesRequest(), timeout=5)
    out = {}
    for pod in resp.pod_resources:
        for c in pod.containers:
            ids = sorted(i for d in c.devices if d.resource_name == resource for i in d.device_ids)
            if ids:
                out[f"{pod.namespace}/{pod.name}/{c.name}"] = ids
    json.dump(out, sys.stdout, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
