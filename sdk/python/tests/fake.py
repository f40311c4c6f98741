"""A scripted stand-in for svc, for deterministic client tests."""
import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


@dataclass
class Req:
    method: str
    path: str
    headers: dict
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


def reply(status: int = 200, body: Any = None, headers: dict | None = None):
    raw = body if isinstance(body, bytes) else (b"" if body is None else json.dumps(body).encode())
    return status, dict(headers or {}), raw


def envelope(status: int, reason: str, code: str = "", message: str = "m") -> dict:
    d = {"kind": "Status", "apiVersion": "v2", "status": "Failure", "message": message, "reason": reason, "details": {}, "code": status}
    if code:
        d["details"]["error"] = code
    return d


class _H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        with self.server.fake.lock:
            self.server.fake.connections += 1

    def _serve(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        req = Req(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        fake = self.server.fake
        with fake.lock:
            fake.requests.append(req)
        status, headers, raw = fake.handler(req)
        try:
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)
        except OSError:
            pass

    do_GET = do_POST = _serve

    def log_message(self, *a):
        pass


class Fake:
    def __init__(self, handler: Callable[[Req], tuple] | None = None):
        self.lock = threading.Lock()
        self.requests: list[Req] = []
        self.connections = 0
        self.handler = handler or (lambda r: reply(200, {"decision": "allow", "reason": "ok"}))
        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), _H)
        self.srv.daemon_threads = True
        self.srv.fake = self
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"
        self.thread = threading.Thread(target=self.srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def script(self, *answers):
        """Answer requests in turn with these (status, headers, body); the last repeats."""
        it = list(answers)

        def h(req):
            with self.lock:
                a = it.pop(0) if len(it) > 1 else it[0]
            return a(req) if callable(a) else a

        self.handler = h

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()
