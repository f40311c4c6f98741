"""A small thread-safe HTTP/1.1 transport over http.client with keep-alive reuse.

One connection is used by one request at a time; idle connections wait in a
bounded pool. A request on a reused connection that the server had already
closed (keep-alive race) is sent once more on a fresh connection.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import time
import urllib.parse
from typing import Any, Mapping, Optional

__all__ = ["Transport", "Response", "NetworkError", "Cancel", "Cancelled"]


class NetworkError(Exception):
    """No (complete) answer: connection refused or reset, timeout, bad framing."""


class Cancelled(Exception):
    """The request was cancelled through its :class:`Cancel`."""


class Cancel:
    """Cancels a long request from another thread (the async client's task
    cancellation): sets a flag and shuts down the sockets in use."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self._lock = threading.Lock()
        self._conns: set[http.client.HTTPConnection] = set()

    def is_set(self) -> bool:
        return self.event.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True when cancelled meanwhile."""
        return self.event.wait(max(0.0, seconds))

    def cancel(self) -> None:
        self.event.set()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            sock = getattr(c, "sock", None)
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _add(self, c: http.client.HTTPConnection) -> None:
        with self._lock:
            self._conns.add(c)
        if self.event.is_set():
            self.cancel()

    def _remove(self, c: http.client.HTTPConnection) -> None:
        with self._lock:
            self._conns.discard(c)


class Response:
    """A complete answer: status, headers (lower-case names), body bytes."""

    __slots__ = ("status", "headers", "body", "elapsed", "_json", "_parsed")

    def __init__(self, status: int, headers: Mapping[str, str], body: bytes, elapsed: float) -> None:
        self.status = status
        self.headers = dict(headers)
        self.body = body
        self.elapsed = elapsed
        self._parsed = False
        self._json: Any = None

    def header(self, name: str) -> Optional[str]:
        return self.headers.get(name.lower())

    def json(self) -> Any:
        """The body parsed as JSON, or None when it is empty or not JSON."""
        if not self._parsed:
            self._parsed = True
            try:
                self._json = json.loads(self.body.decode("utf-8")) if self.body else None
            except (ValueError, UnicodeDecodeError):
                self._json = None
        return self._json

    def __repr__(self) -> str:
        return f"Response(status={self.status}, body={self.body[:200]!r})"


_RESET = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError, http.client.BadStatusLine)


class Transport:
    """Keep-alive connections to one base URL (``http://`` or ``https://``)."""

    def __init__(self, base_url: str, max_idle: int = 8, ssl_context: Optional[ssl.SSLContext] = None) -> None:
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"base_url must be an absolute http or https URL, not {base_url!r}")
        self.scheme = u.scheme
        self.host = u.hostname
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.prefix = u.path.rstrip("/")
        self.ssl_context = ssl_context
        self.max_idle = max_idle
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closed = False

    def _new(self, timeout: float) -> http.client.HTTPConnection:
        if self.scheme == "https":
            ctx = self.ssl_context or ssl.create_default_context()
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=ctx)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def _get(self, timeout: float) -> tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            while self._idle:
                c = self._idle.pop()
                if c.sock is not None:
                    return c, True
                c.close()
        return self._new(timeout), False

    def _put(self, c: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self.max_idle and c.sock is not None:
                self._idle.append(c)
                return
        c.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()

    def request(
        self,
        method: str,
        path: str,
        body: Optional[bytes] = None,
        headers: Optional[Mapping[str, str]] = None,
        timeout: float = 10.0,
        cancel: Optional[Cancel] = None,
    ) -> Response:
        """Send one request and read the whole answer. Raises NetworkError
        (or Cancelled) when no complete answer arrives."""
        timeout = max(0.001, timeout)
        for round_ in range(2):
            if cancel is not None and cancel.is_set():
                raise Cancelled()
            conn, reused = self._get(timeout)
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            if cancel is not None:
                cancel._add(conn)
            start = time.monotonic()
            try:
                conn.request(method, self.prefix + path, body=body, headers=dict(headers or {}))
                resp = conn.getresponse()
                data = resp.read()
                hdrs = {k.lower(): v for k, v in resp.getheaders()}
            except _RESET as e:
                conn.close()
                if cancel is not None and cancel.is_set():
                    raise Cancelled() from None
                if reused and round_ == 0:
                    continue  # the server closed an idle keep-alive connection
                raise NetworkError(f"{type(e).__name__}: {e}") from e
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                if cancel is not None and cancel.is_set():
                    raise Cancelled() from None
                raise NetworkError(f"{type(e).__name__}: {e}") from e
            finally:
                if cancel is not None:
                    cancel._remove(conn)
            if resp.will_close:
                conn.close()
            else:
                self._put(conn)
            return Response(resp.status, hdrs, data, time.monotonic() - start)
        raise NetworkError("connection closed")  # pragma: no cover
