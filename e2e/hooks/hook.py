#!/usr/bin/env python3
"""A Metacontroller hook, written as a hook author would: plain Python 3, no
dependencies. The end-to-end tests run it as a real HTTP process.

Parents look like:
  spec:
    color: blue                 # copied into every ConfigMap's data
    configMaps: [a, b]          # one ConfigMap "<parent>-<name>" each
    service: true               # also a Service "<parent>"
    widgets: [a, b]             # one Widget "<parent>-<name>" each, in order
    related: {resource: secrets, apiVersion: v1, labelSelector: {...}}  # customize
    configMapPerRelated: true   # also a ConfigMap "<parent>-rel-<name>" per related object
    data: {k: v}, labels: {k: v}  # extra data keys and labels of every ConfigMap
    resyncAfter: 60             # the answer's resyncAfterSeconds

The hook's behaviour can be switched while it runs (POST /mode with
{"mode": ...}) so tests can break it and fix it again:
  ok, error500, timeout, garbage, undeclared, othernamespace, throttle (429 with
  Retry-After: 1), etag (as ok, but /sync answers carry an ETag, a hash of the
  answer, and a request whose If-None-Match is that ETag gets 304 Not Modified
  with no body, as RFC 7232 has it)
GET /calls answers how many calls each path had, and each path for each
parent ("/sync ns/name").
GET /times answers, with the same keys, when each call came (Unix seconds,
as floats, in the order the calls came).
GET /etags answers, per path, the If-None-Match of every call in etag mode
("" when there was none) and how many were answered 304.

DecoratorControllers' hooks are /decorate and /decorate-finalize. The decorated
object's annotations say what to answer:
  attach: a,b          # one Secret "<object>-<name>" each, data {object: <name>}
  drop-label: k        # the label k is answered null (removed)
Every object gets the label decorated=yes and the annotation
decorated-by=hook.py; an object with a status subresource (a Hello) also the
status {decorated: true, attachments: <observed>}. The finalize hook answers
finalized with no attachments. /sync-crd-role is Metacontroller's crd-roles
example hook.

Usage: hook.py PORT  (0 picks a free port; the chosen one is printed)
"""
import base64
import hashlib
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

state = {"mode": "ok", "calls": {}, "times": {}, "finalize_after": 2,
         "etags": {"ifNoneMatch": {}, "notModified": {}}}
lock = threading.Lock()


def children_for(parent, mode, related=None):
    meta = parent.get("metadata", {})
    spec = parent.get("spec", {}) or {}
    name = meta.get("name", "")
    color = spec.get("color", "none")
    out = []
    if spec.get("configMapPerRelated"):
        # Children made from related objects, as Metacontroller's
        # secret-replicator example makes them: an empty world answers none.
        for group in (related or {}).values():
            for obj in group.values():
                rel = obj.get("metadata", {}).get("name", "")
                out.append({
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "%s-rel-%s" % (name, rel), "labels": {"app": name}},
                    "data": {"from": rel},
                })
    for cm in spec.get("configMaps", []) or []:
        data = {"color": color, "item": cm}
        data.update(spec.get("data") or {})
        labels = {"app": name}
        labels.update(spec.get("labels") or {})
        out.append({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "%s-%s" % (name, cm), "labels": labels},
            "data": data,
        })
    for w in spec.get("widgets", []) or []:
        # Widgets (widgets.example.com, a CRD with a status) in the order
        # listed: the children of the rolling update tests.
        out.append({
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "%s-%s" % (name, w), "labels": {"app": name}},
            "spec": {"color": color},
        })
    if spec.get("service"):
        out.append({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}]},
        })
    if mode == "undeclared":
        out.append({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name + "-sneaky"}})
    if mode == "othernamespace":
        out.append({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name + "-elsewhere", "namespace": "kube-system"}, "data": {}})
    return out


def decorate(req):
    obj = req.get("object", {})
    meta = obj.get("metadata", {})
    ann = meta.get("annotations") or {}
    observed = sum(len(group) for group in (req.get("attachments") or {}).values())
    resp = {"labels": {"decorated": "yes"}, "annotations": {"decorated-by": "hook.py"},
            "status": None, "attachments": []}
    if ann.get("drop-label"):
        resp["labels"][ann["drop-label"]] = None
    if obj.get("kind") == "Hello":
        resp["status"] = {"decorated": True, "attachments": observed}
    if req.get("finalizing"):
        resp["finalized"] = True
        return resp
    for item in [a for a in ann.get("attach", "").split(",") if a]:
        resp["attachments"].append({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "%s-%s" % (meta.get("name", ""), item)},
            "data": {"object": base64.b64encode(meta.get("name", "").encode()).decode()},
        })
    return resp


def new_cluster_role(crd):
    """Metacontroller's examples/crd-roles hook (manifest/sync.py), as it is
    there: a reader ClusterRole, with no rules yet, for each CRD."""
    cr = dict()
    cr['apiVersion'] = 'rbac.authorization.k8s.io/v1'
    cr['kind'] = "ClusterRole"
    cr['metadata'] = {}
    cr['metadata']['name'] = crd['metadata']['name'] + "-reader"
    cr['rules'] = []
    return cr


class Hook(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("hook: " + (fmt % args) + "\n")

    def reply(self, code, body, content_type="application/json", headers=None):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/calls":
            with lock:
                return self.reply(200, state["calls"])
        if self.path == "/times":
            with lock:
                return self.reply(200, state["times"])
        if self.path == "/etags":
            with lock:
                return self.reply(200, state["etags"])
        self.reply(404, {"error": "not found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        path = self.path
        now = time.time()
        with lock:
            state["times"].setdefault(path, []).append(now)
            state["calls"][path] = state["calls"].get(path, 0) + 1
            calls = state["calls"][path]
            mode = state["mode"]
        req_parent = {}
        if path != "/mode":
            try:
                decoded = json.loads(body)
                req_parent = decoded.get("parent") or decoded.get("object") or {}
            except ValueError:
                pass
        if req_parent:
            # Calls per parent too ("/sync ns/name"), so that a test can
            # tell which parents a change re-synced.
            meta = req_parent.get("metadata", {})
            key = "%s %s/%s" % (path, meta.get("namespace", ""), meta.get("name", ""))
            with lock:
                state["times"].setdefault(key, []).append(now)
                state["calls"][key] = state["calls"].get(key, 0) + 1
        if path == "/mode":
            with lock:
                state["mode"] = json.loads(body)["mode"]
            return self.reply(200, {"mode": state["mode"]})
        req = json.loads(body)
        if mode == "error500":
            return self.reply(500, b"hook is broken on purpose", "text/plain")
        if mode == "throttle":
            data = b"slow down"
            self.send_response(429)
            self.send_header("Retry-After", "1")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if mode == "timeout":
            time.sleep(30)
            return self.reply(200, {})
        if mode == "garbage":
            return self.reply(200, b"{this is not json", "text/plain")
        if path == "/sync-crd-role":
            return self.reply(200, {'attachments': [new_cluster_role(req['object'])]})
        if path in ("/decorate", "/decorate-finalize"):
            return self.reply(200, decorate(req))
        parent = req.get("parent", {})
        if path == "/customize":
            related = (parent.get("spec", {}) or {}).get("related")
            return self.reply(200, {"relatedResources": [related] if related else []})
        if path in ("/sync", "/finalize"):
            observed = sum(len(group) for group in (req.get("children") or {}).values())
            related = sum(len(group) for group in (req.get("related") or {}).values())
            resp = {
                "status": {"observedChildren": observed, "relatedObjects": related,
                           "color": (parent.get("spec", {}) or {}).get("color", "none")},
                "children": [] if req.get("finalizing") else children_for(parent, mode, req.get("related")),
            }
            if req.get("finalizing"):
                resp["finalized"] = calls >= state["finalize_after"]
                resp["status"]["finalizing"] = True
            resync = (parent.get("spec", {}) or {}).get("resyncAfter")
            if resync:
                resp["resyncAfterSeconds"] = resync
            if mode == "etag" and path == "/sync":
                return self.reply_etag(path, resp)
            return self.reply(200, resp)
        self.reply(404, {"error": "no hook at " + path})

    def reply_etag(self, path, resp):
        data = json.dumps(resp, sort_keys=True).encode()
        etag = '"%s"' % hashlib.sha256(data).hexdigest()[:16]
        if_none_match = self.headers.get("If-None-Match", "")
        with lock:
            etags = state["etags"]
            etags["ifNoneMatch"].setdefault(path, []).append(if_none_match)
            if if_none_match == etag:
                etags["notModified"][path] = etags["notModified"].get(path, 0) + 1
        if if_none_match == etag:
            # A 304 has no body, not even a Content-Length of one.
            self.send_response(304)
            self.send_header("ETag", etag)
            self.end_headers()
            return
        self.reply(200, data, headers={"ETag": etag})


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    server = ThreadingHTTPServer(("127.0.0.1", port), Hook)
    server.daemon_threads = True
    print("listening on %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
