"""DriverClient: another SDK, driven through its conformance driver's live
operations (sdk/README.md), behind the Python Client's API, so that the live
suite written once against the Python client runs unchanged against every SDK.

Answers become the Python SDK's own Decision, Approval and error types; a
tool "run" by the driver is an echo of the parameters the SDK would pass it,
and the test's function is then called here with exactly those parameters.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import queue
import subprocess
import threading
import warnings
from types import SimpleNamespace
from typing import Any, Callable, Iterable, Mapping, Optional

from svc_sdk import errors
from svc_sdk._live import decision_from_json
from svc_sdk.client import Approval, Decision, _bind
from svc_sdk.redaction import _NO_MASK

#: The driver of the SDK under test (its conformance-driver), when the live
#: suite runs against another SDK; unset: the Python Client itself.
DRIVER = os.environ.get("SVC_SDK_LIVE_DRIVER", "")

#: How long one op may take before the driver is declared hung (the longest
#: op is an approval wait, bounded by SVC_APPROVAL_TTL_SECS=5 in the suite).
OP_TIMEOUT = float(os.environ.get("SVC_SDK_LIVE_OP_TIMEOUT", "90"))


class Cancelled(Exception):
    """The driver's SDK reported a wait cancelled through the language's own
    cancellation (AbortSignal, context.Context, the Python Cancel)."""


_ERRORS: dict[str, type] = {name: getattr(errors, name) for name in errors.__all__}


def approval_from_json(v: Any) -> Optional[Approval]:
    if not isinstance(v, Mapping):
        return None
    return Approval(
        approval_id=v.get("approval_id") or "", status=v.get("status") or "", decision_id=v.get("decision_id"),
        tool_call=v.get("tool_call"), action_hash=v.get("action_hash"), reason=v.get("reason"),
        expires_at=v.get("expires_at"), raw=v.get("raw"), edited=v.get("edited") is True,
        call=dict(v["call"]) if isinstance(v.get("call"), Mapping) else None)


def _decision(v: Any) -> Optional[Decision]:
    return decision_from_json(v) if isinstance(v, Mapping) else None


def error_from_json(e: Mapping[str, Any]) -> BaseException:
    """The Python SDK's error for a driver's `raised` object."""
    typ = e.get("type")
    msg = e.get("message") or str(typ)
    if typ == "Cancelled":
        return Cancelled(msg)
    cls = _ERRORS.get(typ) if isinstance(typ, str) else None
    if cls is None or not (isinstance(cls, type) and issubclass(cls, errors.SvcError)):
        return AssertionError(f"the driver raised an unknown error type {typ!r}: {e}")
    kw: dict[str, Any] = {"status": e.get("status"), "error_code": e.get("error_code"), "headers": e.get("headers") or {}}
    d, a = _decision(e.get("decision")), approval_from_json(e.get("approval"))
    if cls in (errors.Denied, errors.ApprovalRequired):
        err = cls(msg, d, **kw)
    elif cls in (errors.ApprovalRejected, errors.ApprovalExpired):
        err = cls(msg, approval=a, decision=d, **kw)
    else:
        err = cls(msg, **kw)
    err.remote = dict(e)  # type: ignore[attr-defined]
    return err


class DriverClient:
    """The Python Client's API over another SDK's driver process."""

    def __init__(
        self,
        base_url: str,
        agent_token: str,
        signing_key: Optional[str] = None,
        timeout: float = 3.0,
        retries: int = 2,
        receipt_public_key: Optional[str] = None,
        api_version: str = "v2",
        fail_open_tools: Iterable[Any] = (),
        logger: Optional[logging.Logger] = None,
        *,
        approval_timeout: Optional[float] = None,
        driver: str = "",
    ) -> None:
        self.driver = driver or DRIVER
        self.log = logger or logging.getLogger("svc_sdk.remote")
        self.base_url = base_url
        self.proc = subprocess.Popen([self.driver], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None,
                                     cwd=os.path.dirname(os.path.abspath(self.driver)))
        self._lines: "queue.Queue[Optional[bytes]]" = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        ans = self._op({
            "op": "client", "base_url": base_url, "agent_token": agent_token, "signing_key": signing_key,
            "timeout": timeout, "retries": retries, "receipt_public_key": receipt_public_key,
            "api_version": api_version, "approval_timeout": approval_timeout,
            "fail_open_tools": [t if isinstance(t, str) else list(t) for t in fail_open_tools],
        })
        if ans.get("ok") is not True:
            self.close()
            raise ValueError(f"the driver refused the client: {ans}")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _op(self, req: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(req).encode() + b"\n")
        self.proc.stdin.flush()
        try:
            line = self._lines.get(timeout=OP_TIMEOUT)
        except queue.Empty:
            raise AssertionError(f"the driver {self.driver} did not answer {req.get('op')} within {OP_TIMEOUT}s") from None
        if line is None:
            raise AssertionError(f"the driver {self.driver} exited (status {self.proc.poll()}) during {req.get('op')}")
        ans = json.loads(line)
        if not isinstance(ans, dict):
            raise AssertionError(f"the driver answered a non-object: {line!r}")
        if "error" in ans:
            raise AssertionError(f"the driver could not handle {req.get('op')}: {ans}")
        for w in ans.get("warnings") or []:
            kind, message = w.get("kind"), w.get("message", "")
            self.log.warning("%s", f"[{kind}] {message}")
            if kind == "deprecation":
                warnings.warn(f"svc: {message}", DeprecationWarning, stacklevel=4)
        if "raised" in ans:
            raise error_from_json(ans["raised"])
        return ans

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> "DriverClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- the Client API ---------------------------------------------------

    @staticmethod
    def _opts(opts: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in opts.items() if v is not None}

    def authorize(self, tool: Any, action: Any, resource: Any = None, parameters: Any = None, **opts: Any) -> Decision:
        tc = {"tool": tool, "action": action, "resource": resource, "parameters": parameters}
        ans = self._op({"op": "authorize", "tool_call": tc, **self._opts(opts)})
        return decision_from_json(ans["decision"])

    def _ran(self, ans: Mapping[str, Any], fn: Callable[..., Any]) -> Any:
        if ans.get("ran") is not True or not isinstance(ans.get("parameters"), Mapping):
            raise AssertionError(f"the driver neither ran the tool nor raised: {ans}")
        return fn(**ans["parameters"])

    def run(self, tool_call: Mapping[str, Any], fn: Callable[..., Any], *, wait: bool = True,
            approval_timeout: Optional[float] = None, mask: Any = _NO_MASK, **opts: Any) -> Any:
        req = {"op": "run", "tool_call": dict(tool_call), "wait": wait, "approval_timeout": approval_timeout,
               **self._opts(opts)}
        if mask is not _NO_MASK:
            req["mask"] = mask
        return self._ran(self._op(req), fn)

    def guard(self, tool: str, action: str, resource: Any = None, mutates_state: bool = False, *, wait: bool = True,
              approval_timeout: Optional[float] = None, mask: Any = _NO_MASK, **opts: Any) -> Callable[..., Any]:
        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            sig = inspect.signature(fn)

            def wrapper(*args: Any, **kwargs: Any) -> Any:
                params = _bind(sig, args, kwargs)
                res = resource(dict(params)) if callable(resource) else resource
                req = {"op": "guard", "tool": tool, "action": action, "resource": res, "mutates_state": mutates_state,
                       "arguments": params, "wait": wait, "approval_timeout": approval_timeout, **self._opts(opts)}
                if mask is not _NO_MASK:
                    req["mask"] = mask
                return self._ran(self._op(req), fn)

            return wrapper

        return deco

    def _wait(self, ref: Any, timeout: Optional[float], cancel_after: Optional[float]) -> Approval:
        req: dict[str, Any] = {"op": "wait_for_approval", "timeout": timeout, "cancel_after": cancel_after}
        if isinstance(ref, Decision):
            from svc_sdk._live import decision_json
            req["decision"] = decision_json(ref)
        elif isinstance(ref, Approval):
            req["approval_id"] = ref.approval_id
        else:
            req["approval_id"] = ref
        a = approval_from_json(self._op(self._opts(req))["approval"])
        assert a is not None
        return a

    def wait_for_approval(self, ref: Any, timeout: Optional[float] = None) -> Approval:
        return self._wait(ref, timeout, None)

    def wait_for_approval_cancelled_after(self, ref: Any, seconds: float) -> Approval:
        """Wait, and cancel the wait after ``seconds`` through the SDK's own
        cancellation (raises Cancelled)."""
        return self._wait(ref, None, seconds)

    def get_receipt(self, receipt_id: str) -> dict[str, Any]:
        return self._op({"op": "get_receipt", "receipt_id": receipt_id})["receipt"]

    def get_receipt_public_key(self) -> dict[str, Any]:
        return self._op({"op": "get_receipt_public_key"})["public_key"]

    def verify_receipt(self, d: Decision, call: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
        from svc_sdk._live import decision_json
        req: dict[str, Any] = {"op": "verify_decision_receipt", "decision": decision_json(d)}
        if call is not None:
            req["tool_call"] = dict(call)
        return self._op(req)["receipt"]

    def verify_inclusion(self, receipt_id: str) -> Any:
        """The SDK's receipt log check (`verify_receipt_inclusion`): an object
        with checkpoint_valid, proof_valid, origin, tree_size and valid."""
        got = self._op({"op": "verify_receipt_inclusion", "receipt_id": receipt_id})["inclusion"]
        return SimpleNamespace(checkpoint_valid=got["checkpoint_valid"], proof_valid=got["proof_valid"], origin=got["origin"],
                               tree_size=got["tree_size"], valid=got["checkpoint_valid"] and got["proof_valid"])

    def verify_receipt_object(self, receipt: Mapping[str, Any], public_key: str) -> dict[str, Any]:
        """CONTRACT §14's pure `verify_receipt` op."""
        return self._op({"op": "verify_receipt", "receipt": dict(receipt), "public_key": public_key})

    @property
    def fail_open_count(self) -> int:
        return int(self._op({"op": "stats"})["fail_open_count"])
