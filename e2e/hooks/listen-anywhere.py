"""Runs a hook server written to listen on a fixed port (Metacontroller's
Python examples end with HTTPServer(('', 80), Controller).serve_forever())
on a free loopback port instead, and prints "listening on PORT", so the
end-to-end tests run those hooks unchanged as local processes.

Usage: listen-anywhere.py HOOK.py
"""
import http.server
import runpy
import sys


class _Anywhere(http.server.HTTPServer):
    def server_bind(self):
        self.server_address = ("127.0.0.1", 0)
        super().server_bind()
        print("listening on %d" % self.server_port, flush=True)


http.server.HTTPServer = _Anywhere
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
