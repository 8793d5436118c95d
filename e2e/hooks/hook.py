#!/usr/bin/env python3
"""A Metacontroller hook, written as a hook author would: plain Python 3, no
dependencies. The end-to-end tests run it as a real HTTP process.

Parents look like:
  spec:
    color: blue                 # copied into every ConfigMap's data
    configMaps: [a, b]          # one ConfigMap "<parent>-<name>" each
    service: true               # also a Service "<parent>"
    related: {resource: secrets, apiVersion: v1, labelSelector: {...}}  # customize

The hook's behaviour can be switched while it runs (POST /mode with
{"mode": ...}) so tests can break it and fix it again:
  ok, error500, timeout, garbage, undeclared, othernamespace, throttle (429 with
  Retry-After: 1)
GET /calls answers how many calls each path had.

Usage: hook.py PORT  (0 picks a free port; the chosen one is printed)
"""
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

state = {"mode": "ok", "calls": {}, "finalize_after": 2}
lock = threading.Lock()


def children_for(parent, mode):
    meta = parent.get("metadata", {})
    spec = parent.get("spec", {}) or {}
    name = meta.get("name", "")
    color = spec.get("color", "none")
    out = []
    for cm in spec.get("configMaps", []) or []:
        out.append({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "%s-%s" % (name, cm), "labels": {"app": name}},
            "data": {"color": color, "item": cm},
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


class Hook(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("hook: " + (fmt % args) + "\n")

    def reply(self, code, body, content_type="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/calls":
            with lock:
                return self.reply(200, state["calls"])
        self.reply(404, {"error": "not found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        path = self.path
        with lock:
            state["calls"][path] = state["calls"].get(path, 0) + 1
            calls = state["calls"][path]
            mode = state["mode"]
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
                "children": [] if req.get("finalizing") else children_for(parent, mode),
            }
            if req.get("finalizing"):
                resp["finalized"] = calls >= state["finalize_after"]
            return self.reply(200, resp)
        self.reply(404, {"error": "no hook at " + path})


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    server = ThreadingHTTPServer(("127.0.0.1", port), Hook)
    server.daemon_threads = True
    print("listening on %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
