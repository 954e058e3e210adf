# SPDX-License-Identifier: Apache-2.0
"""A small kube-apiserver client for the soak's churn and checker (test/soak/): HTTPS with
the e2e admin client certificate, one keep-alive connection per object, every call bounded
by a timeout; a failed call raises OSError (the API server may be down on purpose)."""
import http.client
import json
import ssl

GPU = "nvidia.com/gpu"
GPUS_KEY = "topofit.io/gpus"
PLACEMENT_KEY = "topofit.io/placement"
LABEL = "topofit-soak"


class Api:
    def __init__(self, url, ca, cert, key, timeout=10):
        hostport = url.split("://", 1)[1]
        self.host, self.port = hostport.rsplit(":", 1)
        self.ctx = ssl.create_default_context(cafile=ca)
        self.ctx.load_cert_chain(cert, key)
        self.timeout = timeout
        self.conn = None

    def call(self, method, path, body=None, ctype="application/json"):
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPSConnection(self.host, int(self.port),
                                                        context=self.ctx, timeout=self.timeout)
            try:
                hdrs = {"Accept": "application/json"}
                data = None
                if body is not None:
                    data = json.dumps(body).encode()
                    hdrs["Content-Type"] = ctype
                self.conn.request(method, path, body=data, headers=hdrs)
                r = self.conn.getresponse()
                raw = r.read()
                return r.status, (json.loads(raw) if raw else None)
            except (OSError, http.client.HTTPException, ValueError) as e:
                self.conn.close()
                self.conn = None
                if attempt == 1:
                    raise OSError(str(e))

    def pods(self):
        st, doc = self.call("GET", "/api/v1/namespaces/default/pods?labelSelector=" + LABEL)
        if st != 200:
            raise OSError("list pods: HTTP %d" % st)
        return doc


def live(pod):
    return pod.get("status", {}).get("phase") not in ("Succeeded", "Failed") and \
        not pod["metadata"].get("deletionTimestamp")


def asked(pod):
    return sum(int(c.get("resources", {}).get("limits", {}).get(GPU, 0))
               for c in pod["spec"]["containers"])


def gpus_of(pod):
    """(node named by the annotation, sorted indices), or None without the annotation."""
    ann = pod["metadata"].get("annotations", {}).get(GPUS_KEY)
    if not ann:
        return None
    doc = json.loads(ann)
    return doc.get("node"), sorted(i for c in doc["containers"] if not c.get("init")
                                   for i in c["indices"])
