"""The live operations of the conformance driver (sdk/README.md): one client,
driven line by line, so that one live suite and the cross-language matrix can
drive every SDK the same way. Not part of the public API.
"""

from __future__ import annotations

import logging
import threading
import warnings
from typing import Any, Callable, Mapping, Optional

from ._http import Cancel, Cancelled
from .client import Approval, Client, Decision
from .errors import SvcError
from .redaction import _NO_MASK

__all__ = ["Session", "LIVE_OPS"]

_AUTHORIZE_OPTS = ("mutates_state", "source_trust", "trace", "environment", "request_id", "approval_id", "dry_run",
                   "webhook")


class _Fail(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[dict[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if "FAIL-OPEN" in msg:
            kind = "fail_open"
        elif "deprecated" in msg:
            kind = "deprecation"
        elif "action_hash" in msg and ("mismatch" in msg or "differs" in msg):
            kind = "hash_mismatch"
        else:
            kind = "other"
        self.records.append({"kind": kind, "message": msg})


def decision_json(d: Optional[Decision]) -> Optional[dict[str, Any]]:
    if d is None:
        return None
    return {
        "decision": d.decision, "reason": d.reason, "decision_id": d.decision_id, "action_hash": d.action_hash,
        "local_action_hash": d.local_action_hash, "hash_certain": d.hash_certain, "hash_mismatch": d.hash_mismatch,
        "redacted_fields": list(d.redacted_fields), "approval_id": d.approval_id,
        "approval_expires_at": d.approval_expires_at, "receipt_id": d.receipt_id, "receipt_hash": d.receipt_hash,
        "root_trust_level": d.root_trust_level, "matched_policies": list(d.matched_policies),
        "request_id": d.request_id, "status": d.status, "message": d.message or None, "fail_open": d.fail_open,
        "dry_run": d.dry_run, "mutates_state": d.mutates_state, "tool_call": d.tool_call, "raw": d.raw,
    }


def decision_from_json(v: Any) -> Decision:
    if not isinstance(v, Mapping) or not isinstance(v.get("decision"), str):
        raise _Fail("invalid_input")
    return Decision(
        decision=v["decision"], reason=v.get("reason") or "", decision_id=v.get("decision_id"),
        action_hash=v.get("action_hash"), redacted_fields=list(v.get("redacted_fields") or []),
        approval_id=v.get("approval_id"), approval_expires_at=v.get("approval_expires_at"),
        receipt_id=v.get("receipt_id"), receipt_hash=v.get("receipt_hash"), root_trust_level=v.get("root_trust_level"),
        matched_policies=list(v.get("matched_policies") or []), request_id=v.get("request_id"),
        dry_run=v.get("dry_run") is True, raw=v.get("raw"), status=v.get("status"), message=v.get("message") or "",
        local_action_hash=v.get("local_action_hash"), hash_certain=v.get("hash_certain") is not False,
        hash_mismatch=v.get("hash_mismatch") is True, fail_open=v.get("fail_open") is True,
        tool_call=dict(v["tool_call"]) if isinstance(v.get("tool_call"), Mapping) else None,
        mutates_state=v.get("mutates_state") is True,
    )


def approval_json(a: Optional[Approval]) -> Optional[dict[str, Any]]:
    if a is None:
        return None
    return {"approval_id": a.approval_id, "status": a.status, "decision_id": a.decision_id,
            "action_hash": a.action_hash, "reason": a.reason, "expires_at": a.expires_at, "tool_call": a.tool_call,
            "edited": a.edited, "call": a.call, "raw": a.raw}


def error_json(e: BaseException) -> dict[str, Any]:
    if isinstance(e, Cancelled):
        return {"type": "Cancelled", "error_code": "cancelled", "status": None, "message": "cancelled", "headers": {},
                "decision": None, "approval": None}
    assert isinstance(e, SvcError)
    return {
        "type": type(e).__name__, "error_code": e.error_code, "status": e.status, "message": e.message,
        "headers": {str(k).lower(): str(v) for k, v in (e.headers or {}).items()},
        "decision": decision_json(getattr(e, "decision", None)),
        "approval": approval_json(getattr(e, "approval", None)),
    }


def _seconds(req: Mapping[str, Any], name: str) -> Optional[float]:
    v = req.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _Fail("invalid_input")
    return float(v)


def _call(req: Mapping[str, Any]) -> dict[str, Any]:
    tc = req.get("tool_call")
    if not isinstance(tc, Mapping):
        raise _Fail("missing_field" if tc is None else "invalid_input")
    return dict(tc)


class Session:
    """The driver's one client and what it logged during the current op."""

    def __init__(self) -> None:
        self.client: Optional[Client] = None
        self.capture = _Capture()
        self.log = logging.getLogger("svc_sdk.driver")
        self.log.propagate = False
        self.log.setLevel(logging.DEBUG)
        self.log.addHandler(self.capture)

    def handle(self, op: str, req: Mapping[str, Any]) -> dict[str, Any]:
        fn: Callable[[Mapping[str, Any]], dict[str, Any]] = getattr(self, "_op_" + op)
        if op != "client" and self.client is None:
            return {"error": "no_client"}
        self.capture.records = []
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                answer = fn(req)
        except _Fail as f:
            return {"error": f.code}
        except (SvcError, Cancelled) as e:
            answer = {"raised": error_json(e)}
            if op in ("run", "guard"):
                answer["ran"] = False
        answer["warnings"] = list(self.capture.records)
        return answer

    def _op_client(self, req: Mapping[str, Any]) -> dict[str, Any]:
        url, token = req.get("base_url"), req.get("agent_token")
        if not isinstance(url, str) or not isinstance(token, str):
            raise _Fail("invalid_input")
        if self.client is not None:
            self.client.close()
        fo = []
        for t in req.get("fail_open_tools") or []:
            fo.append(t if isinstance(t, str) else tuple(t))
        kw: dict[str, Any] = {}
        for name in ("timeout", "approval_timeout"):
            if req.get(name) is not None:
                kw[name] = _seconds(req, name)
        if req.get("retries") is not None:
            kw["retries"] = int(req["retries"])
        try:
            self.client = Client(url, token, signing_key=req.get("signing_key"),
                                 receipt_public_key=req.get("receipt_public_key"),
                                 api_version=req.get("api_version") or "v2", fail_open_tools=fo, logger=self.log, **kw)
        except ValueError:
            raise _Fail("invalid_input") from None
        return {"ok": True}

    @staticmethod
    def _opts(req: Mapping[str, Any], allowed: tuple[str, ...] = _AUTHORIZE_OPTS) -> dict[str, Any]:
        return {k: req[k] for k in allowed if req.get(k) is not None}

    def _op_authorize(self, req: Mapping[str, Any]) -> dict[str, Any]:
        assert self.client is not None
        tc = _call(req)
        d = self.client.authorize(tc.get("tool"), tc.get("action"), tc.get("resource"), tc.get("parameters"),  # type: ignore[arg-type]
                                  **self._opts(req))
        return {"decision": decision_json(d)}

    def _run(self, tc: dict[str, Any], req: Mapping[str, Any], opts: dict[str, Any]) -> dict[str, Any]:
        # Client.run's steps, keeping the decision that let the tool run.
        c = self.client
        assert c is not None
        if opts.get("dry_run"):
            raise _Fail("invalid_input")
        mask = req["mask"] if "mask" in req else _NO_MASK
        call, d = c._start(tc, opts)
        if d.decision == "require_approval":
            c._pre_wait(d, req.get("wait") is not False)
            a = c.wait_for_approval(d, timeout=_seconds(req, "approval_timeout"))
            call, d = c._present(a, d, opts)
        params = c._finish(call, d, mask)
        return {"ran": True, "parameters": params, "decision": decision_json(d)}

    def _op_run(self, req: Mapping[str, Any]) -> dict[str, Any]:
        return self._run(_call(req), req, self._opts(req))

    def _op_guard(self, req: Mapping[str, Any]) -> dict[str, Any]:
        tool, action, args = req.get("tool"), req.get("action"), req.get("arguments")
        if not isinstance(tool, str) or not isinstance(action, str) or not isinstance(args or {}, Mapping):
            raise _Fail("invalid_input")
        tc = {"tool": tool, "action": action, "resource": req.get("resource"), "parameters": dict(args or {})}
        opts = self._opts(req, ("mutates_state", "source_trust", "trace", "environment", "request_id", "webhook"))
        opts["mutates_state"] = req.get("mutates_state") is True
        return self._run(tc, req, opts)

    def _op_wait_for_approval(self, req: Mapping[str, Any]) -> dict[str, Any]:
        assert self.client is not None
        ref: Any = decision_from_json(req["decision"]) if req.get("decision") is not None else req.get("approval_id")
        cancel = None
        after = _seconds(req, "cancel_after")
        timer = None
        if after is not None:
            cancel = Cancel()
            timer = threading.Timer(after, cancel.cancel)
            timer.daemon = True
            timer.start()
        try:
            a = self.client._wait_for_approval(ref, _seconds(req, "timeout"), cancel)
        finally:
            if timer is not None:
                timer.cancel()
        return {"approval": approval_json(a)}

    def _op_get_receipt(self, req: Mapping[str, Any]) -> dict[str, Any]:
        assert self.client is not None
        rid = req.get("receipt_id")
        if not isinstance(rid, str):
            raise _Fail("invalid_input")
        return {"receipt": self.client.get_receipt(rid)}

    def _op_get_receipt_public_key(self, req: Mapping[str, Any]) -> dict[str, Any]:
        assert self.client is not None
        return {"public_key": self.client.get_receipt_public_key()}

    def _op_verify_decision_receipt(self, req: Mapping[str, Any]) -> dict[str, Any]:
        assert self.client is not None
        d = decision_from_json(req.get("decision"))
        tc = req.get("tool_call")
        return {"receipt": self.client.verify_receipt(d, dict(tc) if isinstance(tc, Mapping) else None)}

    def _op_verify_receipt_inclusion(self, req: Mapping[str, Any]) -> dict[str, Any]:
        assert self.client is not None
        rid = req.get("receipt_id")
        if not isinstance(rid, str):
            raise _Fail("invalid_input")
        r = self.client.verify_inclusion(rid)
        return {"inclusion": {"checkpoint_valid": r.checkpoint_valid, "proof_valid": r.proof_valid, "origin": r.origin,
                              "tree_size": r.tree_size}}

    def _op_stats(self, req: Mapping[str, Any]) -> dict[str, Any]:
        assert self.client is not None
        return {"fail_open_count": self.client.fail_open_count}


LIVE_OPS = frozenset({"client", "authorize", "run", "guard", "wait_for_approval", "get_receipt", "get_receipt_public_key",
                      "verify_decision_receipt", "verify_receipt_inclusion", "stats"})
