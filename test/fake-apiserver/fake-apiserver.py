#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A test Kubernetes API server for topofit's suites (Python 3 stdlib only).

Speaks the parts of the core/v1 protocol topofit uses, faithfully: one global
resourceVersion counter, LIST pagination (limit/continue, expired continue => 410),
chunked WATCH streams of newline-delimited {"type","object"} events with bookmarks,
field/label selectors (with the ADDED/DELETED translation a selector implies), a too-old
resourceVersion as an ERROR event with code 410, pods/binding (UID precondition, 409 when
bound, annotations copied onto the pod), merge/strategic/JSON patch and the status
subresource, Events, bearer tokens re-read from a file (a rotated token => 401), TLS with
client certificates.  Fault injection through /_control/ (see README.md).
"""
import argparse
import base64
import bisect
import copy
import json
import os
import random
import select
import socket
import ssl
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

KINDS = {"nodes": "Node", "pods": "Pod", "events": "Event", "podgroups": "PodGroup"}
NAMESPACED = {"pods", "events", "podgroups"}
PODGROUP_API = ["apis", "scheduling.k8s.io", "v1beta1"]  # served with --podgroups
MAX_BODY = 16 << 20


def now_iso():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


class ApiError(Exception):
    def __init__(self, code, reason, message):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


# --- patches -------------------------------------------------------------------------------

def merge_patch(target, patch):
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    out = dict(target)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def _pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, "Invalid", "JSON pointer must start with /: " + path)
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc, parts):
    cur = doc
    for p in parts[:-1]:
        if isinstance(cur, list):
            cur = cur[int(p)]
        elif isinstance(cur, dict) and p in cur:
            cur = cur[p]
        else:
            raise ApiError(422, "Invalid", "JSON patch path does not exist")
    return cur


def _get(doc, parts):
    cur = doc
    for p in parts:
        if isinstance(cur, list):
            cur = cur[int(p)]
        elif isinstance(cur, dict) and p in cur:
            cur = cur[p]
        else:
            raise ApiError(422, "Invalid", "JSON patch path does not exist")
    return cur


def json_patch(doc, ops):
    """RFC 6902."""
    if not isinstance(ops, list):
        raise ApiError(400, "BadRequest", "a JSON patch is an array of operations")
    doc = copy.deepcopy(doc)
    try:
        for op in ops:
            kind, parts = op.get("op"), _pointer(op.get("path", ""))
            if kind in ("add", "replace"):
                val = copy.deepcopy(op["value"])
                par = _parent(doc, parts)
                key = parts[-1]
                if isinstance(par, list):
                    if kind == "add":
                        par.insert(len(par) if key == "-" else int(key), val)
                    else:
                        par[int(key)] = val
                else:
                    if kind == "replace" and key not in par:
                        raise ApiError(422, "Invalid", "replace of a missing member")
                    par[key] = val
            elif kind == "remove":
                par = _parent(doc, parts)
                key = parts[-1]
                if isinstance(par, list):
                    del par[int(key)]
                elif key in par:
                    del par[key]
                else:
                    raise ApiError(422, "Invalid", "remove of a missing member")
            elif kind == "test":
                if _get(doc, parts) != op.get("value"):
                    raise ApiError(422, "Invalid", "JSON patch test operation failed")
            elif kind in ("move", "copy"):
                src = _pointer(op["from"])
                val = copy.deepcopy(_get(doc, src))
                if kind == "move":
                    sp = _parent(doc, src)
                    if isinstance(sp, list):
                        del sp[int(src[-1])]
                    else:
                        del sp[src[-1]]
                json_patch_inplace = json_patch(doc, [{"op": "add", "path": op["path"], "value": val}])
                doc = json_patch_inplace
            else:
                raise ApiError(400, "BadRequest", "unknown JSON patch op %r" % kind)
    except (KeyError, IndexError, ValueError, TypeError) as e:
        raise ApiError(422, "Invalid", "JSON patch failed: %s" % e)
    return doc


# --- selectors -----------------------------------------------------------------------------

def _field(obj, path):
    cur = obj
    for p in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(p)
    if cur is None:
        return ""
    return cur if isinstance(cur, str) else json.dumps(cur)


def parse_selector(text, labels):
    """Returns a predicate over objects for fieldSelector (labels=False) or labelSelector."""
    terms = []
    for t in [t.strip() for t in (text or "").split(",") if t.strip()]:
        if "!=" in t:
            k, v = t.split("!=", 1)
            terms.append((k.strip(), "!=", v.strip()))
        elif "==" in t:
            k, v = t.split("==", 1)
            terms.append((k.strip(), "=", v.strip()))
        elif "=" in t:
            k, v = t.split("=", 1)
            terms.append((k.strip(), "=", v.strip()))
        elif labels and t.startswith("!"):
            terms.append((t[1:], "absent", None))
        elif labels:
            terms.append((t, "exists", None))
        else:
            raise ApiError(400, "BadRequest", "invalid field selector %r" % t)

    def pred(obj):
        for k, op, v in terms:
            if labels:
                lab = obj.get("metadata", {}).get("labels") or {}
                have = lab.get(k)
            else:
                have = _field(obj, k)
            if op == "=" and have != v:
                return False
            if op == "!=" and have == v:
                return False
            if op == "exists" and have is None:
                return False
            if op == "absent" and have is not None:
                return False
        return True
    return pred


# --- the store -----------------------------------------------------------------------------

class Store:
    def __init__(self, history_max):
        self.cond = threading.Condition()
        self.rv = 1
        self.objects = {k: {} for k in KINDS}
        self.sorted_keys = {k: None for k in KINDS}
        self.history = []          # (rv, kind, type, obj, old)
        self.compacted = 0         # a watch from rv < compacted gets 410
        self.history_max = history_max
        self.epoch = 0             # bumps on restart: open watch streams end
        self.faults = {}

    def take_fault(self, name):
        with self.cond:
            n = self.faults.get(name, 0)
            if n > 0:
                self.faults[name] = n - 1
                return True
            return False

    def keys(self, kind):
        if self.sorted_keys[kind] is None:
            self.sorted_keys[kind] = sorted(self.objects[kind])
        return self.sorted_keys[kind]

    def _record(self, kind, typ, obj, old):
        self.history.append((self.rv, kind, typ, obj, old))
        if len(self.history) > self.history_max:
            drop = len(self.history) - self.history_max
            self.compacted = self.history[drop - 1][0]
            del self.history[:drop]
        self.cond.notify_all()

    def bump(self):
        self.rv += 1
        return str(self.rv)

    def put(self, kind, key, obj, typ=None, record=True):
        """Stores obj (new resourceVersion) and records the event; caller holds cond."""
        old = self.objects[kind].get(key)
        obj["metadata"]["resourceVersion"] = self.bump()
        if old is None:
            self.sorted_keys[kind] = None
        self.objects[kind][key] = obj
        if record:
            self._record(kind, typ or ("MODIFIED" if old else "ADDED"), obj, old)
        return obj

    def delete(self, kind, key, record=True):
        old = self.objects[kind].pop(key)
        self.sorted_keys[kind] = None
        gone = copy.deepcopy(old)
        gone["metadata"]["resourceVersion"] = self.bump()
        if record:
            self._record(kind, "DELETED", gone, old)
        return gone


def make_node(i, gpus=8):
    name = "node-%05d" % i
    topo = json.dumps({"version": 1, "gpus": gpus, "nvswitch": i % 2 == 0}, separators=(",", ":"))
    return {
        "kind": "Node", "apiVersion": "v1",
        "metadata": {"name": name, "uid": str(uuid.UUID(int=i + 1)),
                     "creationTimestamp": now_iso(),
                     "labels": {"kubernetes.io/hostname": name,
                                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                                "topology.kubernetes.io/zone": "zone-%d" % (i % 3)},
                     "annotations": {"topofit.io/topology": topo,
                                     "node.alpha.kubernetes.io/ttl": "0"}},
        "spec": {"podCIDR": "10.%d.%d.0/24" % (i // 256 % 256, i % 256)},
        "status": {"capacity": {"cpu": "96", "memory": "1056000000Ki", "nvidia.com/gpu": str(gpus),
                                "pods": "110"},
                   "allocatable": {"cpu": "95", "memory": "1050000000Ki",
                                   "nvidia.com/gpu": str(gpus), "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]},
    }


def make_pod(i, n_nodes, rng):
    ns = "ns-%02d" % (i % 50)
    name = "pod-%06d" % i
    gpus = rng.choice([0, 1, 1, 2, 4, 8])
    node = "node-%05d" % rng.randrange(n_nodes) if n_nodes and rng.random() < 0.9 else ""
    ann = {"kubectl.kubernetes.io/last-applied-configuration": "{}"}
    if node and gpus:
        ann["topofit.io/gpus"] = ",".join(str(g) for g in range(gpus))
    pod = {
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": name, "namespace": ns, "uid": str(uuid.UUID(int=(1 << 64) + i)),
                     "creationTimestamp": now_iso(), "labels": {"app": "train-%d" % (i % 100)},
                     "annotations": ann},
        "spec": {"containers": [{"name": "main", "image": "registry.example/train:1.0",
                                 "resources": {"limits": {"nvidia.com/gpu": str(gpus),
                                                          "cpu": "8"} if gpus else {"cpu": "1"},
                                               "requests": {"cpu": "1"}}}],
                 "schedulerName": "default-scheduler", "restartPolicy": "Never"},
        "status": {"phase": "Running" if node else "Pending"},
    }
    if node:
        pod["spec"]["nodeName"] = node
    return pod


def obj_key(kind, obj):
    md = obj["metadata"]
    return (md.get("namespace", ""), md["name"]) if kind in NAMESPACED else ("", md["name"])


# --- HTTP ----------------------------------------------------------------------------------

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-apiserver/1"

    def log_message(self, fmt, *args):
        if self.server.opts.verbose:
            sys.stderr.write("fake-apiserver: " + (fmt % args) + "\n")

    @property
    def store(self):
        return self.server.store

    def send_json(self, code, obj):
        body = json.dumps(obj, separators=(",", ":")).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            raise ApiError(413, "RequestEntityTooLarge", "request body too large")
        data = self.rfile.read(n) if n else b""
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError:
            raise ApiError(400, "BadRequest", "request body is not JSON")

    def authorized(self):
        opts = self.server.opts
        if isinstance(self.connection, ssl.SSLSocket) and self.connection.getpeercert():
            return True  # a client certificate signed by --client-ca
        want = None
        if opts.token_file:
            try:
                with open(opts.token_file) as f:
                    want = f.read().strip()
            except OSError:
                want = None
        elif opts.token:
            want = opts.token
        elif not opts.client_ca:
            return True
        got = self.headers.get("Authorization", "")
        return want is not None and got == "Bearer " + want

    def handle_any(self, method):
        try:
            parts = urlsplit(self.path)
            q = {k: v[-1] for k, v in parse_qs(parts.query).items()}
            path = [p for p in parts.path.split("/") if p]
            if path[:1] == ["_control"]:
                return self.control(method, path[1:], q)
            if path in (["healthz"], ["readyz"], ["livez"]):
                body = b"ok"
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(body)
                return
            if not self.authorized():
                self.server.stats["unauthorized"] += 1
                return self.send_json(401, status(401, "Unauthorized", "Unauthorized"))
            if self.server.opts.slow_ms or self.store.faults.get("slow_ms"):
                time.sleep((self.server.opts.slow_ms or self.store.faults.get("slow_ms", 0)) / 1000)
            if self.store.take_fault("error500"):
                return self.send_json(500, status(500, "InternalError", "injected failure"))
            self.server.stats["requests"] += 1
            self.server.stats["user_agent"] = self.headers.get("User-Agent", "")
            self.api(method, path, q)
        except ApiError as e:
            self.send_json(e.code, status(e.code, e.reason, e.message))
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True

    def do_GET(self):
        self.handle_any("GET")

    def do_POST(self):
        self.handle_any("POST")

    def do_PATCH(self):
        self.handle_any("PATCH")

    def do_DELETE(self):
        self.handle_any("DELETE")

    def do_PUT(self):
        self.handle_any("PUT")

    # --- routing ------------------------------------------------------------------------

    def api(self, method, path, q):
        grouped = self.server.opts.podgroups and path[:3] == PODGROUP_API
        if grouped and len(path) == 3 and method == "GET":
            return self.send_json(200, {
                "kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": "scheduling.k8s.io/v1beta1",
                "resources": [{"name": "podgroups", "singularName": "podgroup", "namespaced": True,
                               "kind": "PodGroup",
                               "verbs": ["create", "delete", "get", "list", "patch", "watch"]}]})
        if grouped:
            path = ["api", "v1"] + path[3:]
        if path[:2] != ["api", "v1"]:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        rest = path[2:]
        # PodGroups live only under their group's path, the rest only under /api/v1.
        kind_at = 2 if rest[:1] == ["namespaces"] else 0
        if (len(rest) > kind_at and rest[kind_at] == "podgroups") != grouped:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        ns = None
        if rest[:1] == ["namespaces"] and len(rest) >= 3:
            ns, rest = rest[1], rest[2:]
        if (not rest or rest[0] not in KINDS or (rest[0] in NAMESPACED and ns is None and len(rest) > 1)
                or (rest[0] not in NAMESPACED and ns is not None)):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        kind, name, sub = rest[0], rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None
        if len(rest) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if name is None:
            if method == "GET":
                if q.get("watch") in ("true", "1"):
                    return self.watch(kind, ns, q)
                return self.list(kind, ns, q)
            if method == "POST":
                return self.create(kind, ns or "", self.read_body())
            raise ApiError(405, "MethodNotAllowed", "method not allowed")
        key = (ns or "", name)
        if sub == "binding" and kind == "pods" and method == "POST":
            return self.bind(key, self.read_body())
        if sub not in (None, "status"):
            raise ApiError(404, "NotFound", "unknown subresource")
        if method == "GET":
            with self.store.cond:
                obj = self.store.objects[kind].get(key)
                if obj is None:
                    raise ApiError(404, "NotFound", '%s "%s" not found' % (kind, name))
                return self.send_json(200, obj)
        if method == "PATCH":
            return self.patch(kind, key, sub, self.read_body())
        if method == "DELETE":
            with self.store.cond:
                if key not in self.store.objects[kind]:
                    raise ApiError(404, "NotFound", '%s "%s" not found' % (kind, name))
                gone = self.store.delete(kind, key)
            return self.send_json(200, gone)
        raise ApiError(405, "MethodNotAllowed", "method not allowed")

    def create(self, kind, ns, obj):
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
            raise ApiError(400, "BadRequest", "object has no metadata")
        md = obj["metadata"]
        if not md.get("name"):
            raise ApiError(422, "Invalid", "metadata.name: Required value")
        if kind in NAMESPACED:
            md["namespace"] = ns
        md.setdefault("uid", str(uuid.uuid4()))
        md.setdefault("creationTimestamp", now_iso())
        obj.setdefault("kind", KINDS[kind])
        obj.setdefault("apiVersion", "v1")
        key = obj_key(kind, obj)
        with self.store.cond:
            if key in self.store.objects[kind]:
                raise ApiError(409, "AlreadyExists", '%s "%s" already exists' % (kind, md["name"]))
            self.store.put(kind, key, obj)
        self.send_json(201, obj)

    def patch(self, kind, key, sub, body):
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        with self.store.cond:
            old = self.store.objects[kind].get(key)
            if old is None:
                raise ApiError(404, "NotFound", '%s "%s" not found' % (kind, key[1]))
            if ctype in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
                new = merge_patch(old, body)
            elif ctype == "application/json-patch+json":
                new = json_patch(old, body)
            else:
                raise ApiError(415, "UnsupportedMediaType",
                               "the body of the request was in an unknown format")
            if not isinstance(new, dict):
                raise ApiError(422, "Invalid", "patch result is not an object")
            # The status subresource changes only status; the main resource never does.
            if sub == "status":
                merged = copy.deepcopy(old)
                merged["status"] = new.get("status", {})
                new = merged
            else:
                new["status"] = copy.deepcopy(old.get("status", {}))
            md = new.setdefault("metadata", {})
            for f in ("name", "namespace", "uid", "creationTimestamp"):
                if f in old["metadata"]:
                    md[f] = old["metadata"][f]
            self.store.put(kind, key, new)
        self.send_json(200, new)

    def bind(self, key, body):
        if not isinstance(body, dict) or not isinstance(body.get("target"), dict):
            raise ApiError(400, "BadRequest", "binding has no target")
        target = body["target"].get("name")
        if not target:
            raise ApiError(422, "Invalid", "target.name: Required value")
        md = body.get("metadata") or {}
        with self.store.cond:
            pod = self.store.objects["pods"].get(key)
            if pod is None:
                raise ApiError(404, "NotFound", 'pods "%s" not found' % key[1])
            uid = md.get("uid")
            if uid and uid != pod["metadata"]["uid"]:
                raise ApiError(409, "Conflict",
                               "Precondition failed: UID in precondition: %s, UID in object meta: %s"
                               % (uid, pod["metadata"]["uid"]))
            if pod["spec"].get("nodeName"):
                raise ApiError(409, "Conflict", "pod %s is already assigned to node %s"
                               % (key[1], pod["spec"]["nodeName"]))
            new = copy.deepcopy(pod)
            new["spec"]["nodeName"] = target
            anns = md.get("annotations") or {}
            if anns:
                new["metadata"].setdefault("annotations", {}).update(anns)
            new.setdefault("status", {}).setdefault("conditions", []).append(
                {"type": "PodScheduled", "status": "True"})
            self.store.put("pods", key, new)
        self.send_json(201, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                             "status": "Success", "code": 201})

    def list(self, kind, ns, q):
        fsel = parse_selector(q.get("fieldSelector"), False)
        lsel = parse_selector(q.get("labelSelector"), True)
        limit = int(q.get("limit") or 0)
        cont = q.get("continue")
        st = self.store
        with st.cond:
            if cont:
                try:
                    tok = json.loads(base64.urlsafe_b64decode(cont.encode()))
                    list_rv, start = int(tok["rv"]), tuple(tok["start"])
                except (ValueError, KeyError, TypeError):
                    raise ApiError(400, "BadRequest", "invalid continue token")
                if list_rv < st.compacted:
                    raise ApiError(410, "Expired", "The provided continue parameter is too old "
                                   "to display a consistent list result. You can start a new list "
                                   "without the continue parameter.")
            else:
                list_rv, start = st.rv, None
            keys = st.keys(kind)
            i = bisect.bisect_right(keys, start) if start is not None else 0
            items, last = [], None
            while i < len(keys) and (limit <= 0 or len(items) < limit):
                k = keys[i]
                i += 1
                if ns is not None and k[0] != ns:
                    continue
                o = st.objects[kind][k]
                if fsel(o) and lsel(o):
                    items.append(o)
                    last = k
            more = i < len(keys) and limit > 0 and len(items) >= limit
            meta = {"resourceVersion": str(list_rv)}
            if more:
                meta["continue"] = base64.urlsafe_b64encode(
                    json.dumps({"rv": list_rv, "start": list(last)}).encode()).decode()
            body = json.dumps({"kind": KINDS[kind] + "List", "apiVersion": "v1",
                               "metadata": meta, "items": items}, separators=(",", ":")).encode()
        self.server.stats["lists"] += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    # --- watch --------------------------------------------------------------------------

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def event(self, typ, obj):
        return json.dumps({"type": typ, "object": obj}, separators=(",", ":")).encode() + b"\n"

    def watch(self, kind, ns, q):
        st = self.store
        fsel = parse_selector(q.get("fieldSelector"), False)
        lsel = parse_selector(q.get("labelSelector"), True)
        timeout = min(int(q.get("timeoutSeconds") or 1800), 3600)
        bookmarks = q.get("allowWatchBookmarks") == "true"
        rv_text = q.get("resourceVersion") or ""
        self.server.stats["watches"] += 1
        if st.take_fault("gone_status"):
            raise ApiError(410, "Expired", "too old resource version (injected)")

        def match(o):
            if o is None:
                return False
            if ns is not None and o["metadata"].get("namespace") != ns:
                return False
            return fsel(o) and lsel(o)

        initial = []
        with st.cond:
            epoch = st.epoch
            if rv_text in ("", "0"):
                since = st.rv
                for k in st.keys(kind):
                    if match(st.objects[kind][k]):
                        initial.append(("ADDED", st.objects[kind][k]))
            else:
                try:
                    since = int(rv_text)
                except ValueError:
                    raise ApiError(400, "BadRequest", "invalid resourceVersion")
            expired = since < st.compacted or since > st.rv
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if st.take_fault("gone_event") or expired:
            self.chunk(self.event("ERROR", status(410, "Expired", "too old resource version: %s (%d)"
                                                  % (rv_text, st.compacted))))
            self.chunk(b"")
            return
        for typ, o in initial:
            self.chunk(self.event(typ, o))
        deadline = time.monotonic() + timeout
        interval = self.server.opts.bookmark_interval
        next_bookmark = time.monotonic() + interval
        while True:
            out = []
            with st.cond:
                while True:
                    now = time.monotonic()
                    if st.epoch != epoch:
                        # A restart: the connection dies without a clean end.
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    if st.history and st.history[-1][0] > since:
                        break
                    if now >= deadline or (bookmarks and now >= next_bookmark):
                        break
                    st.cond.wait(min(deadline, next_bookmark if bookmarks else deadline) - now)
                if since < st.compacted:
                    out.append(("ERROR", status(410, "Expired", "too old resource version")))
                else:
                    i = bisect.bisect_right(st.history, since, key=lambda h: h[0])
                    for rv, k, typ, o, old in st.history[i:]:
                        since = rv
                        if k != kind:
                            continue
                        now_m, was_m = match(o) if typ != "DELETED" else False, match(old)
                        if typ == "DELETED":
                            if was_m:
                                out.append(("DELETED", o))
                        elif now_m and was_m:
                            out.append(("MODIFIED", o))
                        elif now_m:
                            out.append(("ADDED", o))
                        elif was_m:
                            gone = copy.deepcopy(o)
                            out.append(("DELETED", gone))
                    since = max(since, st.rv) if not out else since
            for typ, o in out:
                if typ == "ERROR":
                    self.chunk(self.event(typ, o))
                    self.chunk(b"")
                    return
                self.send_event(typ, o)
            now = time.monotonic()
            if now >= deadline:
                self.chunk(b"")
                return
            if bookmarks and now >= next_bookmark:
                self.chunk(self.event("BOOKMARK", {"kind": KINDS[kind], "apiVersion": "v1",
                                                   "metadata": {"resourceVersion": str(since)}}))
                next_bookmark = now + interval

    def client_gone(self):
        # A watch client sends nothing after its request: readable means it hung up.
        try:
            r, _, _ = select.select([self.connection], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(r)

    def send_event(self, typ, o):
        st = self.store
        if self.client_gone():
            # Faults are meant for live watchers, not for streams nobody reads any more.
            self.close_connection = True
            raise ConnectionResetError("watch client went away")
        data = self.event(typ, o)
        if st.faults.get("slow_ms"):
            time.sleep(st.faults["slow_ms"] / 1000)
        if st.take_fault("drop"):
            if st.take_fault("compact_on_drop"):
                # The history the client needs to resume is gone by the time it reconnects.
                with st.cond:
                    st.compacted = st.rv
                    st.history.clear()
            # Announce the whole chunk, send half of it, and cut the connection.
            self.wfile.write(b"%x\r\n%s" % (len(data), data[: len(data) // 2]))
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            raise ConnectionResetError("injected drop")
        if st.take_fault("truncate"):
            # A well-framed chunk whose event is cut short: malformed JSON on the line.
            self.chunk(data[: len(data) // 2] + b"\n")
            return
        self.chunk(data)

    # --- control ------------------------------------------------------------------------

    def control(self, method, path, q):
        st = self.store
        body = self.read_body() if method == "POST" else None
        what = path[0] if path else ""
        if what == "faults" and method == "POST":
            with st.cond:
                for k, v in (body or {}).items():
                    st.faults[k] = int(v)
            return self.send_json(200, st.faults)
        if what == "state":
            with st.cond:
                return self.send_json(200, {"resourceVersion": str(st.rv),
                                            "nodes": [st.objects["nodes"][k] for k in st.keys("nodes")],
                                            "pods": [st.objects["pods"][k] for k in st.keys("pods")],
                                            "stats": self.server.stats})
        if what == "churn" and method == "POST":
            n = self.churn(int((body or {}).get("n", 10)), int((body or {}).get("seed", 1)),
                           record=not (body or {}).get("silent", False))
            return self.send_json(200, {"changes": n, "resourceVersion": str(st.rv)})
        if what == "compact" and method == "POST":
            with st.cond:
                st.compacted = st.rv
                st.history.clear()
                st.cond.notify_all()
            return self.send_json(200, {"compacted": str(st.compacted)})
        if what == "restart" and method == "POST":
            # As if etcd was restored or the server restarted: streams die, versions jump,
            # state changed while no one watched, old versions are gone.
            b = body or {}
            self.churn(int(b.get("changes", 0)), int(b.get("seed", 7)), record=False)
            with st.cond:
                st.rv += int(b.get("rv_jump", 1000))
                st.epoch += 1
                st.history.clear()
                st.compacted = st.rv
                st.cond.notify_all()
            return self.send_json(200, {"resourceVersion": str(st.rv)})
        if what == "oversize" and method == "POST":
            # A real change whose watch event is larger than the client's per-event cap.
            size = int((body or {}).get("bytes", (4 << 20) + 4096))
            with st.cond:
                keys = st.keys("pods")
                if not keys:
                    raise ApiError(404, "NotFound", "no pods")
                k = keys[len(keys) // 2]
                o = copy.deepcopy(st.objects["pods"][k])
                o["metadata"].setdefault("annotations", {})["example.com/blob"] = "x" * size
                o["metadata"]["annotations"]["topofit.io/oversized"] = "yes"
                st.put("pods", k, o)
            return self.send_json(200, {"pod": list(k)})
        raise ApiError(404, "NotFound", "unknown control endpoint")

    def churn(self, n, seed, record=True):
        st = self.store
        rng = random.Random(seed)
        with st.cond:
            pods = list(st.keys("pods"))   # kept in step below; re-sorting per change is slow
            nodes = st.keys("nodes")
            for _ in range(n):
                op = rng.random()
                if op < 0.3 or not pods:
                    i = self.server.next_pod
                    self.server.next_pod += 1
                    p = make_pod(i, len(nodes), rng)
                    if nodes and p["spec"].get("nodeName"):
                        p["spec"]["nodeName"] = rng.choice(nodes)[1]
                    k = obj_key("pods", p)
                    st.put("pods", k, p, record=record)
                    pods.append(k)
                elif op < 0.5:
                    j = rng.randrange(len(pods))
                    pods[j], pods[-1] = pods[-1], pods[j]
                    st.delete("pods", pods.pop(), record=record)
                elif op < 0.8:
                    k = rng.choice(pods)
                    p = copy.deepcopy(st.objects["pods"][k])
                    p["status"]["phase"] = rng.choice(["Running", "Succeeded", "Failed", "Pending"])
                    p["metadata"].setdefault("annotations", {})["topofit.io/gpus"] = str(rng.randrange(8))
                    if rng.random() < 0.2:
                        p["metadata"]["deletionTimestamp"] = now_iso()
                    st.put("pods", k, p, record=record)
                elif nodes:
                    k = rng.choice(nodes)
                    o = copy.deepcopy(st.objects["nodes"][k])
                    o["status"]["conditions"][0]["status"] = rng.choice(["True", "False"])
                    o["status"]["allocatable"]["nvidia.com/gpu"] = str(rng.choice([0, 4, 8]))
                    o["spec"]["unschedulable"] = rng.random() < 0.3
                    st.put("nodes", k, o, record=record)
        return n


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def get_request(self):
        sock, addr = super().get_request()
        if self.tls is not None:
            sock.settimeout(10)
            try:
                sock = self.tls.wrap_socket(sock, server_side=True)
            finally:
                pass
            sock.settimeout(None)
        return sock, addr

    def handle_error(self, request, client_address):
        if self.opts.verbose:
            super().handle_error(request, client_address)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0, help="0: any free port")
    ap.add_argument("--port-file", help="write the chosen port here once listening")
    ap.add_argument("--nodes", type=int, default=0, help="generate this many nodes")
    ap.add_argument("--pods", type=int, default=0, help="generate this many pods")
    ap.add_argument("--gpus", type=int, default=8, help="GPUs per generated node")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--token", help="the bearer token to accept")
    ap.add_argument("--token-file", help="accept the token in this file (re-read per request)")
    ap.add_argument("--tls-cert", help="serve HTTPS with this certificate")
    ap.add_argument("--tls-key")
    ap.add_argument("--client-ca", help="accept client certificates signed by this CA")
    ap.add_argument("--history", type=int, default=100000, help="watch events kept")
    ap.add_argument("--bookmark-interval", type=float, default=1.0, help="seconds")
    ap.add_argument("--slow-ms", type=int, default=0, help="delay every API response")
    ap.add_argument("--podgroups", action="store_true",
                    help="serve scheduling.k8s.io/v1beta1 podgroups (list, watch, create, delete)")
    ap.add_argument("--verbose", action="store_true")
    opts = ap.parse_args()

    store = Store(opts.history)
    rng = random.Random(opts.seed)
    with store.cond:
        for i in range(opts.nodes):
            n = make_node(i, opts.gpus)
            store.put("nodes", obj_key("nodes", n), n, record=False)
        for i in range(opts.pods):
            p = make_pod(i, opts.nodes, rng)
            store.put("pods", obj_key("pods", p), p, record=False)
        store.compacted = store.rv

    srv = Server(("127.0.0.1", opts.port), Handler)
    srv.opts, srv.store, srv.next_pod = opts, store, opts.pods
    srv.stats = {"requests": 0, "lists": 0, "watches": 0, "unauthorized": 0}
    srv.tls = None
    if opts.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(opts.tls_cert, opts.tls_key)
        if opts.client_ca:
            ctx.load_verify_locations(opts.client_ca)
            ctx.verify_mode = ssl.CERT_OPTIONAL
        srv.tls = ctx
    port = srv.server_address[1]
    if opts.port_file:
        with open(opts.port_file + ".tmp", "w") as f:
            f.write("%d\n" % port)
        os.rename(opts.port_file + ".tmp", opts.port_file)
    print("fake-apiserver listening on 127.0.0.1:%d" % port, flush=True)
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
