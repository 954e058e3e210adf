#!/usr/bin/env python3
"""Asks a kubelet's PodResources API (List) what it allocated, as JSON on stdout.

    podres.py SOCKET RESOURCE [API]

API is v1 (the default; topofit-node's, served since 1.20) or v1alpha1 (1.13 on; 1.20.2
and 1.37.2 serve both).  v1alpha1's List carries the same fields under the same numbers,
a subset of v1's, so one set of messages reads both: only the method path differs.

Prints {"<namespace>/<pod>/<container>": ["<device id>", ...], ...} for RESOURCE, device
IDs sorted; containers without RESOURCE are left out.  The message classes are generated
from plugin/podresources.proto (the file topofit-node is built from) with
python3-grpc-tools into a temporary directory, as test/test-plugin-kubelet.py does.
"""
import json
import os
import subprocess
import sys
import tempfile

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def main():
    sock, resource = sys.argv[1], sys.argv[2]
    api = sys.argv[3] if len(sys.argv) > 3 else "v1"
    if api not in ("v1", "v1alpha1"):
        sys.exit("podres.py: unknown PodResources API %s (v1, v1alpha1)" % api)
    with tempfile.TemporaryDirectory(prefix="topofit-podres-") as stubs:
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I" + os.path.join(SRC, "plugin"),
                        "--python_out=" + stubs,
                        "podresources.proto"], check=True)
        sys.path.insert(0, stubs)
        import grpc
        import podresources_pb2
        with grpc.insecure_channel("unix://" + sock) as ch:
            list_ = ch.unary_unary(
                "/%s.PodResourcesLister/List" % api,
                request_serializer=podresources_pb2.ListPodResourcesRequest.SerializeToString,
                response_deserializer=podresources_pb2.ListPodResourcesResponse.FromString)
            resp = list_(podresources_pb2.ListPodResourcesRequest(), timeout=5)
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
