#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The soak's load (test/soak/soak): GPU pods arriving at random (Poisson, --rate a second)
in several shapes (1-8 GPUs; best effort, nvlink-required, nvlink-preferred, none), each
deleted a random time after it was first seen bound (exponential, mean --lifetime s).  A
pod still pending after --give-up s is deleted too (the checker has had its minute to call
that a violation where GPUs it fits were free).  Calls that fail (the API server is
restarted on purpose) are counted and retried on the next round.  Runs until SIGTERM, then
writes its counters as JSON to --out."""
import argparse
import json
import random
import signal
import threading
import time

import soakapi

# (GPUs, placement, weight): the shapes of the churn.
SHAPES = [
    (1, "", 4), (1, "none", 1), (2, "", 2), (2, "nvlink-required", 2),
    (2, "nvlink-preferred", 1), (4, "", 1), (4, "nvlink-required", 1),
    (8, "", 0.5), (8, "nvlink-required", 0.5),
]


def pod(name, count, placement, scheduler):
    res = {soakapi.GPU: str(count), "cpu": "10m", "memory": "16Mi"}
    meta = {"name": name, "namespace": "default", "labels": {soakapi.LABEL: "churn"}}
    if placement:
        meta["annotations"] = {soakapi.PLACEMENT_KEY: placement}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"schedulerName": scheduler, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.2",
                                     "resources": {"limits": res, "requests": res}}]}}


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--api", required=True)
    p.add_argument("--ca", required=True)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--rate", type=float, default=1.5)
    p.add_argument("--lifetime", type=float, default=8.0)
    p.add_argument("--give-up", type=float, default=150.0)
    p.add_argument("--scheduler", default="topofit-scheduler")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", required=True)
    a = p.parse_args()

    rng = random.Random(a.seed)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stats = {"created": 0, "deleted_bound": 0, "deleted_pending": 0, "bound_seen": 0,
             "create_failed": 0, "delete_failed": 0, "list_failed": 0,
             "by_shape": {}}
    lock = threading.Lock()
    weights = [w for _, _, w in SHAPES]

    def creator():
        api = soakapi.Api(a.api, a.ca, a.cert, a.key)
        n = 0
        while not stop.wait(rng.expovariate(a.rate)):
            count, placement, _ = rng.choices(SHAPES, weights)[0]
            n += 1
            name = "s%05d-%d%s" % (n, count, {"nvlink-required": "r", "nvlink-preferred": "p",
                                              "none": "n"}.get(placement, "b"))
            try:
                st, _ = api.call("POST", "/api/v1/namespaces/default/pods",
                                 pod(name, count, placement, a.scheduler))
                ok = st == 201
            except OSError:
                ok = False
            with lock:
                if ok:
                    stats["created"] += 1
                    key = "%d %s" % (count, placement or "best-effort")
                    stats["by_shape"][key] = stats["by_shape"].get(key, 0) + 1
                else:
                    stats["create_failed"] += 1

    def reaper():
        api = soakapi.Api(a.api, a.ca, a.cert, a.key)
        first_seen = {}   # name -> (created at, bound at or None, lifetime)
        while not stop.wait(0.5):
            try:
                pods = api.pods()["items"]
            except OSError:
                with lock:
                    stats["list_failed"] += 1
                continue
            now = time.time()
            names = set()
            for pd in pods:
                name = pd["metadata"]["name"]
                names.add(name)
                if name not in first_seen:
                    first_seen[name] = [now, None, rng.expovariate(1.0 / a.lifetime)]
                fs = first_seen[name]
                bound = bool(pd["spec"].get("nodeName"))
                if bound and fs[1] is None:
                    fs[1] = now
                    with lock:
                        stats["bound_seen"] += 1
                due = (fs[1] is not None and now - fs[1] >= fs[2]) or \
                      (fs[1] is None and now - fs[0] >= a.give_up)
                if not due:
                    continue
                try:
                    st, _ = api.call("DELETE", "/api/v1/namespaces/default/pods/%s" % name,
                                     {"kind": "DeleteOptions", "apiVersion": "v1",
                                      "gracePeriodSeconds": 0})
                    ok = st in (200, 202, 404)
                except OSError:
                    ok = False
                with lock:
                    if not ok:
                        stats["delete_failed"] += 1
                    elif fs[1] is not None:
                        stats["deleted_bound"] += 1
                    else:
                        stats["deleted_pending"] += 1
            for name in list(first_seen):
                if name not in names:
                    del first_seen[name]

    threads = [threading.Thread(target=creator, daemon=True),
               threading.Thread(target=reaper, daemon=True)]
    for t in threads:
        t.start()
    while not stop.wait(1):
        pass
    time.sleep(0.6)
    with lock:
        json.dump(stats, open(a.out, "w"), indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
