#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The soak's checker (test/soak/soak): watches the invariants from the API server, never
from the extender, once a second until SIGTERM, then writes what it saw as JSON to --out:

  double     no (node, GPU index) on two live pods
  annotated  every bound GPU pod carries topofit.io/gpus naming its node, with as many GPUs
             as it asked for
  pending    no pod pending for over --pending-limit s while, all that time, a node had
             free GPUs it fits (the scheduler's count fit, and for nvlink-required pods a
             set `topofit place --require nvlink` finds among the free GPUs)
  converge   after every fault (a line "TIME KIND" appended to --faults once the fault is
             over), each extender's /allocations equals the pods the server has bound
             (uid, node, GPU indices) within --converge-limit s
  resources  RSS and open descriptors of each extender process, sampled every 5 s, per
             process (a SIGKILLed and restarted extender is a new process)

Every violation is recorded once with its time and the pods involved."""
import argparse
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request

import soakapi


WARMUP_S = 30   # a process's first samples: connections and caches still filling


def proc_sample(pid):
    """(RSS KiB, open descriptors, of which sockets), or None when the process is gone."""
    try:
        rss = 0
        for line in open("/proc/%d/status" % pid):
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
        fds = os.listdir("/proc/%d/fd" % pid)
        socks = 0
        for fd in fds:
            try:
                socks += os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("socket:")
            except OSError:
                pass
        return rss, len(fds), socks
    except OSError:
        return None


class Checker:
    def __init__(self, a):
        self.a = a
        self.api = soakapi.Api(a.api, a.ca, a.cert, a.key)
        self.t0 = time.time()
        self.violations = {"double": [], "annotated": [], "pending": [], "converge": []}
        self.seen_bad = set()
        self.fit_since = {}
        self.place_cache = {}
        self.pending = []          # [fault, kind, done_at, {extender: converged_at or None}]
        self.converged = []
        self.procs = {}            # pid -> {"extender", "first", "last", "n"}
        self.polls = 0
        self.poll_failures = 0
        self.max_pending_fit_s = 0.0
        self.nodes = {}
        self.tmp = tempfile.mkdtemp(prefix="soak-check.", dir=os.environ.get("TMPDIR"))
        self.faults_read = 0
        self.extenders = []        # (name, url, pidfile)
        for spec in a.extender:
            name, port, pidfile = spec.split(":", 2)
            self.extenders.append((name, "http://127.0.0.1:%s/allocations" % port, pidfile))

    def violate(self, kind, key, what):
        if (kind, key) in self.seen_bad:
            return
        self.seen_bad.add((kind, key))
        self.violations[kind].append({"t": round(time.time() - self.t0, 1), "what": what})
        print("soak-check: VIOLATION %s: %s" % (kind, what), flush=True)

    def load_nodes(self):
        st, doc = self.api.call("GET", "/api/v1/nodes")
        if st != 200:
            raise OSError("list nodes: HTTP %d" % st)
        for n in doc["items"]:
            name = n["metadata"]["name"]
            gpus = int(n["status"].get("allocatable", {}).get(soakapi.GPU, 0))
            ann = n["metadata"].get("annotations", {}).get("topofit.io/topology")
            path = None
            if ann:
                path = os.path.join(self.tmp, name + ".json")
                open(path, "w").write(ann)
            self.nodes[name] = (gpus, path)

    def fits_nvlink(self, node, free, k):
        n, path = self.nodes[node]
        key = (node, tuple(free), k)
        if key not in self.place_cache:
            r = subprocess.run([self.a.cli, "place", "--topology", path, "--count", str(k),
                                "--free", ",".join(map(str, free)), "--require", "nvlink",
                                "--json"], capture_output=True, text=True)
            self.place_cache[key] = r.returncode == 0
        return self.place_cache[key]

    def check_pods(self, pods, now):
        used = {n: set() for n in self.nodes}
        requested = {n: 0 for n in self.nodes}
        holder = {}
        bound = {}
        for p in pods:
            if not soakapi.live(p):
                continue
            name = p["metadata"]["name"]
            node = p["spec"].get("nodeName")
            k = soakapi.asked(p)
            if not node or k == 0:
                continue
            requested[node] = requested.get(node, 0) + k
            got = soakapi.gpus_of(p)
            if got is None or got[0] != node or len(got[1]) != k:
                self.violate("annotated", name, "%s bound to %s asking %d GPUs carries %s" %
                             (name, node, k, p["metadata"].get("annotations", {}).get(
                                 soakapi.GPUS_KEY)))
                continue
            bound[p["metadata"]["uid"]] = (node, got[1])
            for i in got[1]:
                other = holder.get((node, i))
                if other:
                    self.violate("double", (node, i, other, name),
                                 "GPU %d of %s on %s and %s" % (i, node, other, name))
                holder[(node, i)] = name
                used.setdefault(node, set()).add(i)
        for p in pods:
            name = p["metadata"]["name"]
            if not soakapi.live(p) or p["spec"].get("nodeName"):
                self.fit_since.pop(name, None)
                continue
            k = soakapi.asked(p)
            placement = p["metadata"].get("annotations", {}).get(soakapi.PLACEMENT_KEY, "")
            fits = []
            for node, (n, path) in self.nodes.items():
                free = [i for i in range(n) if i not in used.get(node, ())]
                if len(free) < k or requested.get(node, 0) + k > n:
                    continue
                if placement == "nvlink-required" and \
                        (path is None or not self.fits_nvlink(node, free, k)):
                    continue
                fits.append(node)
            if not fits:
                self.fit_since.pop(name, None)
                continue
            since = self.fit_since.setdefault(name, now)
            self.max_pending_fit_s = max(self.max_pending_fit_s, now - since)
            if now - since > self.a.pending_limit:
                self.violate("pending", name, "%s (%d GPUs, %s) pending %.0f s while %s had "
                             "room for it" % (name, k, placement or "best-effort", now - since,
                                              ",".join(sorted(fits))))
        for name in list(self.fit_since):
            if name not in {p["metadata"]["name"] for p in pods}:
                del self.fit_since[name]
        return bound

    def allocations(self, url):
        try:
            with urllib.request.urlopen(url, timeout=3) as r:
                doc = json.load(r)
        except (OSError, ValueError):
            return None
        return {p["uid"]: (p["node"], sorted(p["gpus"])) for p in doc["pods"]}

    def read_faults(self):
        try:
            lines = open(self.a.faults).read().splitlines()
        except OSError:
            return
        for line in lines[self.faults_read:]:
            t, kind = line.split()[:2]
            self.pending.append({"kind": kind, "done": float(t),
                                 "ext": {name: None for name, _, _ in self.extenders}})
        self.faults_read = len(lines)

    def check_converge(self, bound, now, final=False):
        views = {}
        for name, url, _ in self.extenders:
            if any(f["ext"][name] is None for f in self.pending):
                views[name] = self.allocations(url)
        for f in self.pending:
            for name in f["ext"]:
                if f["ext"][name] is None and views.get(name) == bound:
                    f["ext"][name] = now
        left = []
        for f in self.pending:
            late = [n for n, t in f["ext"].items() if t is None]
            if not late:
                self.converged.append(round(max(f["ext"].values()) - f["done"], 1))
            elif now - f["done"] > self.a.converge_limit or final:
                diff = []
                for n in late:
                    v = views.get(n)
                    if v is None:
                        diff.append("%s: no answer from /allocations" % n)
                    else:
                        miss = set(bound) - set(v)
                        extra = set(v) - set(bound)
                        wrong = [u for u in set(v) & set(bound) if v[u] != bound[u]]
                        diff.append("%s: %d bound pods missing, %d gone pods kept, %d differ" %
                                    (n, len(miss), len(extra), len(wrong)))
                self.violate("converge", (f["kind"], f["done"]),
                             "%.0f s after the %s fault the cache still differs from the "
                             "server: %s" % (now - f["done"], f["kind"], "; ".join(diff)))
            else:
                left.append(f)
        self.pending = left

    def sample(self):
        for name, _, pidfile in self.extenders:
            try:
                pid = int(open(pidfile).read())
            except (OSError, ValueError):
                continue
            s = proc_sample(pid)
            if s is None:
                continue
            e = self.procs.setdefault(pid, {"extender": name, "samples": []})
            e["samples"].append((round(time.time() - self.t0, 1),) + s)

    def poll(self, final=False):
        now = time.time()
        try:
            pods = self.api.pods()["items"]
        except OSError:
            self.poll_failures += 1
            return False
        self.polls += 1
        bound = self.check_pods(pods, now)
        self.read_faults()
        self.check_converge(bound, now, final)
        return True

    def run(self, stop):
        while True:
            try:
                self.load_nodes()
                break
            except OSError:
                if stop.wait(1):
                    return
        last_sample = 0
        while not stop.wait(self.a.interval):
            self.poll()
            if time.time() - last_sample >= 5:
                self.sample()
                last_sample = time.time()
        self.sample()
        # The last faults: give them their time, then say what is left.
        deadline = time.time() + self.a.converge_limit
        self.read_faults()
        while self.pending and time.time() < deadline:
            self.poll()
            time.sleep(0.5)
        if self.pending:
            self.poll(final=True)

    def summary(self):
        # Per process: from its first sample WARMUP_S after it was first seen to its last.
        procs = []
        for pid, e in sorted(self.procs.items(), key=lambda kv: kv[1]["samples"][0][0]):
            xs = e["samples"]
            first = next((x for x in xs if x[0] >= xs[0][0] + WARMUP_S), xs[-1])
            last = xs[-1]
            procs.append({"extender": e["extender"], "pid": pid, "seen_s": xs[0][0],
                          "from_s": first[0], "to_s": last[0],
                          "rss_kib": [first[1], last[1]], "fds": [first[2], last[2]],
                          "sockets": [first[3], last[3]],
                          "max_rss_kib": max(x[1] for x in xs[xs.index(first):]),
                          "max_fds": max(x[2] for x in xs[xs.index(first):])})
        return {"polls": self.polls, "poll_failures": self.poll_failures,
                "violations": self.violations,
                "faults_checked": len(self.converged) + len(self.violations["converge"]),
                "converge_s": {"max": max(self.converged, default=0),
                               "mean": round(sum(self.converged) / len(self.converged), 2)
                               if self.converged else 0, "n": len(self.converged)},
                "max_pending_while_fitting_s": round(self.max_pending_fit_s, 1),
                "extender_processes": procs}


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--api", required=True)
    p.add_argument("--ca", required=True)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--cli", required=True, help="the topofit CLI")
    p.add_argument("--extender", action="append", default=[], help="NAME:PORT:PIDFILE")
    p.add_argument("--faults", required=True)
    p.add_argument("--pending-limit", type=float, default=60)
    p.add_argument("--converge-limit", type=float, default=45)
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    c = Checker(a)
    c.run(stop)
    json.dump(c.summary(), open(a.out, "w"), indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
