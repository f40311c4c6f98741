"""Starts real svc gateways (the binary named by SVC_BIN) for the live suite,
creates fixtures through the API, and offers a round-robin TCP balancer."""

from __future__ import annotations

import base64
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from typing import Any, Callable, Optional

ADMIN_TOKEN = "sdk-live-admin-token-" + "a" * 32
RECEIPT_SEED = bytes(range(100, 132))
RECEIPT_KEY_B64 = base64.b64encode(RECEIPT_SEED).decode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(cond: Callable[[], Any], timeout: float, interval: float = 0.05, what: str = "condition") -> Any:
    """Poll cond until it returns a truthy value; AssertionError at the deadline."""
    deadline = time.monotonic() + timeout
    last_exc: Optional[BaseException] = None
    while time.monotonic() < deadline:
        try:
            v = cond()
            if v:
                return v
        except Exception as e:  # converging: keep trying
            last_exc = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}" + (f" (last error: {last_exc!r})" if last_exc else ""))


def api(base: str, method: str, path: str, token: Optional[str] = None, body: Any = None,
        headers: Optional[dict] = None, timeout: float = 15.0) -> tuple[int, Any, dict]:
    """One plain HTTP call (operator side of the tests)."""
    u = urllib.parse.urlsplit(base)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    h = {"Accept": "application/json"}
    if token:
        h["Authorization"] = f"Bearer {token}"
    raw = None
    if body is not None:
        raw = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    h.update(headers or {})
    try:
        c.request(method, path, body=raw, headers=h)
        r = c.getresponse()
        data = r.read()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
    finally:
        c.close()
    try:
        parsed = json.loads(data) if data else None
    except ValueError:
        parsed = data
    return r.status, parsed, hdrs


class Gateway:
    """One svc process on loopback."""

    def __init__(self, bin_path: str, workdir: str, env: Optional[dict] = None, name: str = "svc") -> None:
        self.bin = bin_path
        self.workdir = workdir
        self.name = name
        self.port = free_port()
        self.debug_port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/tmp"),
            "DATABASE_URL": f"sqlite://{workdir}/svc.db",
            "SVC_LISTEN_ADDR": f"127.0.0.1:{self.port}",
            "SVC_DEBUG_ADDR": f"127.0.0.1:{self.debug_port}",
            "SVC_ADMIN_TOKEN": ADMIN_TOKEN,
            "SVC_RECEIPT_SIGNING_KEY": RECEIPT_KEY_B64,
            "SVC_CHECKPOINT_INTERVAL_SECS": "1",
            "SVC_APPROVAL_TTL_SECS": "5",
            "SVC_APPROVAL_CALLBACK_IP_LIMIT": "100000",
            "SVC_APPROVAL_ATTEMPT_LIMIT": "100000",
            "SVC_AUTH_FAILURE_LIMIT": "100000",
            "SVC_ALLOW_PRIVATE_TARGETS": "true",
            "SVC_LOG_LEVEL": "warn",
            "SVC_SHUTDOWN_TIMEOUT_SECS": "5",
        }
        self.env.update(env or {})
        self.proc: Optional[subprocess.Popen] = None
        self.log_path = os.path.join(workdir, f"{name}.log")

    def start(self, ready_timeout: float = 60.0) -> "Gateway":
        os.makedirs(self.workdir, exist_ok=True)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([self.bin, "serve"], env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=self.workdir)
        log.close()

        def ready():
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.tail()}")
            st, _, _ = api(self.url, "GET", "/readyz", timeout=2)
            return st == 200

        try:
            wait_until(ready, ready_timeout, 0.1, f"{self.name} /readyz")
        except BaseException:
            sys.stderr.write(f"--- {self.name} log ---\n{self.tail()}\n")
            self.stop()
            raise
        return self

    def tail(self, n: int = 4000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def _states(self) -> list[str]:
        assert self.proc is not None
        states = []
        task_dir = f"/proc/{self.proc.pid}/task"
        for tid in os.listdir(task_dir):
            try:
                with open(f"{task_dir}/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except OSError:
                pass
        return states

    def pause(self) -> None:
        """SIGSTOP, and wait until every thread of the process is stopped."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)
        if os.path.isdir(f"/proc/{self.proc.pid}/task"):
            wait_until(lambda: all(s == "T" for s in self._states()), 10, 0.01, f"{self.name} to stop")

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        p = self.proc
        if p is None or p.poll() is not None:
            return
        try:
            os.kill(p.pid, signal.SIGCONT)
            p.terminate()
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)
        except ProcessLookupError:
            pass


class Fixtures:
    """Tenants, agents and policies made through the API."""

    def __init__(self, url: str) -> None:
        self.url = url
        st, body, _ = api(url, "POST", "/v2/tenants", ADMIN_TOKEN, {"name": f"sdk-live-{uuid.uuid4().hex[:8]}"})
        assert st == 201, (st, body)
        self.tenant_id = body["tenant_id"]
        self.op = body["operator_token"]

    def call(self, method: str, path: str, body: Any = None, token: Optional[str] = None, url: Optional[str] = None):
        return api(url or self.url, method, path, token or self.op, body)

    def agent(self, signing: bool = True, **fields: Any) -> dict:
        body = {"name": f"agent-{uuid.uuid4().hex[:10]}", **fields}
        if signing:
            body["signing_key"] = "generate"
        st, a, _ = self.call("POST", "/v2/agents", body)
        assert st == 201, (st, a)
        return a

    def policy(self, name: str, rego: str) -> None:
        st, b, _ = self.call("POST", "/v2/policies", {"name": name, "rego": rego})
        assert st == 201, (st, b)

    def pending_approval(self, agent_id: str, timeout: float = 10.0, url: Optional[str] = None) -> dict:
        def find():
            st, rows, _ = self.call("GET", f"/v2/approvals?agent_id={agent_id}", url=url)
            if st != 200:
                return None
            for r in rows:
                if r.get("status") == "PENDING":
                    return r
            return None

        return wait_until(find, timeout, 0.05, f"a PENDING approval of agent {agent_id}")

    def decide(self, approval_id: str, action: str, params: Optional[dict] = None, url: Optional[str] = None) -> dict:
        body: dict = {"approver_user_id": "alice", "reason": f"sdk live {action}"}
        if params is not None:
            body["parameters"] = params
        st, a, _ = self.call("POST", f"/v2/approvals/{approval_id}/{action}", body, url=url)
        assert st == 200, (st, a)
        return a

    def approver(self, agent_id: str, action: str, params: Optional[dict] = None, delay: float = 0.7,
                 url: Optional[str] = None) -> "Approver":
        """A background approver: waits for the agent's PENDING approval, lets
        the agent start waiting, then approves, rejects or edits it."""
        return Approver(self, agent_id, action, params, delay, url)


class Approver(threading.Thread):
    def __init__(self, fx: Fixtures, agent_id: str, action: str, params: Optional[dict], delay: float, url: Optional[str]):
        super().__init__(daemon=True)
        self.fx, self.agent_id, self.action, self.params, self.delay, self.url = fx, agent_id, action, params, delay, url
        self.result: Optional[dict] = None
        self.t_decide = 0.0
        self.error: Optional[BaseException] = None
        self.start()

    def run(self) -> None:
        try:
            a = self.fx.pending_approval(self.agent_id, url=self.url)
            time.sleep(self.delay)
            self.t_decide = time.monotonic()
            self.result = self.fx.decide(a["approval_id"], self.action, self.params, url=self.url)
        except BaseException as e:  # reported by the test
            self.error = e

    def finish(self, timeout: float = 20.0) -> dict:
        self.join(timeout)
        if self.error:
            raise self.error
        assert self.result is not None, "approver did not finish"
        return self.result


class Balancer:
    """A threaded round-robin TCP proxy: each new connection goes to the next
    backend, so consecutive requests of a client without keep-alive reuse
    (and the approver's calls) land on different nodes."""

    def __init__(self, backends: list[tuple[str, int]]) -> None:
        self.backends = backends
        self.next = random.randrange(len(backends))
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.closed = False
        self.counts = [0] * len(backends)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                i = self.next
                self.next = (self.next + 1) % len(self.backends)
                self.counts[i] += 1
            try:
                upstream = socket.create_connection(self.backends[i], timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                try:
                    s.close()
                except OSError:
                    pass

    def close(self) -> None:
        self.closed = True
        self.sock.close()


PG_URL = os.environ.get("SVC_TEST_POSTGRES_URL", "")
VALKEY_URL = os.environ.get("SVC_TEST_VALKEY_URL", "")
PG_BIN = os.environ.get("SVC_TEST_PG_BIN", "")


def _pg_tool(name: str) -> str:
    if PG_BIN and os.access(os.path.join(PG_BIN, name), os.X_OK):
        return os.path.join(PG_BIN, name)
    return name


class TwoNodes:
    """Two svc nodes in cluster mode (SVC_CLUSTER=true) on a fresh Postgres
    database and the test Valkey, behind a round-robin Balancer. Needs
    SVC_TEST_POSTGRES_URL and SVC_TEST_VALKEY_URL (and SVC_TEST_PG_BIN for
    createdb/dropdb), as under `make test`: without them it raises SkipTest
    loudly, or AssertionError under CI=true."""

    def __init__(self, bin_path: str, prefix: str, env: Optional[dict] = None) -> None:
        import unittest
        if not (PG_URL and VALKEY_URL):
            msg = "SVC_TEST_POSTGRES_URL / SVC_TEST_VALKEY_URL not set: the TWO-NODE cases are SKIPPED"
            if os.environ.get("CI") == "true":
                raise AssertionError(msg.replace("are SKIPPED", "cannot run under CI=true"))
            print(f"\n*** {msg} ***", file=sys.stderr, flush=True)
            raise unittest.SkipTest(msg)
        u = urllib.parse.urlsplit(PG_URL)
        self.pg = dict(host=u.hostname or "127.0.0.1", port=str(u.port or 5432), user=u.username or "svc")
        self.dbname = f"{prefix}_{uuid.uuid4().hex[:12]}"
        self.nodes: list[Gateway] = []
        self.lb: Optional[Balancer] = None
        self._pg("createdb", self.dbname)
        q = f"?{u.query}" if u.query else ""
        auth = u.username + (f":{u.password}" if u.password else "") + "@" if u.username else ""
        db_url = f"{u.scheme}://{auth}{u.hostname}:{u.port or 5432}/{self.dbname}{q}"
        self.wd = make_workdir(f"{prefix}-")
        node_env = {"DATABASE_URL": db_url, "SVC_VALKEY_URL": VALKEY_URL, "SVC_CLUSTER": "true", **(env or {})}
        try:
            for i in range(2):
                self.nodes.append(Gateway(bin_path, self.wd, node_env, name=f"svc-node{i}").start(ready_timeout=90))
        except BaseException:
            self.stop()
            raise
        self.lb = Balancer([("127.0.0.1", n.port) for n in self.nodes])
        self.url = self.lb.url

    def _pg(self, tool: str, db: str) -> None:
        subprocess.run([_pg_tool(tool), "-h", self.pg["host"], "-p", self.pg["port"], "-U", self.pg["user"], db],
                       check=True, capture_output=True, timeout=60)

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()
        if self.lb is not None:
            self.lb.close()
        try:
            self._pg("dropdb", self.dbname)
        except Exception as e:  # pragma: no cover
            print(f"dropdb {self.dbname} failed: {e}", file=sys.stderr)
        remove_workdir(self.wd) if getattr(self, "wd", None) else None


def make_workdir(prefix: str) -> str:
    return tempfile.mkdtemp(prefix=prefix)


def remove_workdir(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
