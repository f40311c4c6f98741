"""The synchronous client: authorize, wait for approvals, run and guard tools.

Fail closed everywhere: a tool runs only on an ``allow`` (or ``redact``, with
the redaction applied) that this client received and understood. Everything
else raises one of :mod:`svc_sdk.errors`.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import hmac
import inspect
import json
import logging
import math
import re
import secrets
import threading
import time
import uuid
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

from . import canonical, receiptlog, receipts, retry, signing
from ._http import Cancel, Cancelled, NetworkError, Response, Transport
from .errors import (
    ActionHashMismatch,
    ApprovalExpired,
    ApprovalRejected,
    ApprovalRequired,
    Denied,
    InvalidRequest,
    ReceiptInvalid,
    SvcAuthError,
    SvcError,
    SvcUnavailable,
)
from .redaction import _NO_MASK, redact

__all__ = ["Client", "Decision", "Approval", "DECISIONS", "uuid7", "new_nonce", "outcome", "__version__"]

__version__ = "0.1.0"

DECISIONS = frozenset({"allow", "deny", "require_approval", "redact", "quarantine"})
MAX_BODY_BYTES = 1 << 20
MAX_WAIT = 25  # CONTRACT 14: ?wait=N, N from 0 to 25
TERMINAL = frozenset({"APPROVED", "REJECTED", "EXPIRED"})

ToolCall = Mapping[str, Any]


def uuid7() -> str:
    """A time-ordered UUID version 7 (RFC 9562), lower-case text."""
    ms = time.time_ns() // 1_000_000
    r = secrets.token_bytes(10)
    b = ms.to_bytes(6, "big") + bytes([0x70 | (r[0] & 0x0F), r[1], 0x80 | (r[2] & 0x3F)]) + r[3:10]
    return str(uuid.UUID(bytes=b))


def new_nonce() -> str:
    """A fresh random nonce (32 URL-safe characters; CONTRACT 4 allows 8 to 128)."""
    return secrets.token_urlsafe(24)


_FRACTION_RE = re.compile(r"(\.\d{1,6})\d*")


def parse_time(value: Any) -> Optional[_dt.datetime]:
    """An RFC 3339 timestamp as an aware datetime (None when absent/malformed)."""
    if not isinstance(value, str) or not value:
        return None
    v = _FRACTION_RE.sub(lambda m: m.group(1), value.strip(), count=1)
    if v.endswith(("Z", "z")):
        v = v[:-1] + "+00:00"
    try:
        t = _dt.datetime.fromisoformat(v)
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return t


def _str(v: Any) -> Optional[str]:
    return v if isinstance(v, str) and v != "" else None


def _int(v: Any) -> Optional[int]:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _strs(v: Any) -> list[str]:
    return [x for x in v if isinstance(x, str)] if isinstance(v, list) else []


@dataclass
class Decision:
    """What svc decided about one call. ``allowed`` is true only for allow and
    redact. ``raw`` is the body as received."""

    decision: str
    reason: str = ""
    decision_id: Optional[str] = None
    action_hash: Optional[str] = None
    redacted_fields: list[str] = field(default_factory=list)
    approval_id: Optional[str] = None
    approval_expires_at: Optional[str] = None
    receipt_id: Optional[str] = None
    receipt_hash: Optional[str] = None
    root_trust_level: Optional[str] = None
    matched_policies: list[str] = field(default_factory=list)
    composite_risk_score: Optional[int] = None
    risk_score: Optional[int] = None
    request_id: Optional[str] = None
    dry_run: bool = False
    raw: Any = None
    #: HTTP status of the answer (200; 403 for a refusal before policy).
    status: Optional[int] = None
    #: The server's message for a refusal without decision (403).
    message: str = ""
    #: svc-jcs-1 of the call as this client computed it.
    local_action_hash: Optional[str] = None
    #: False when the call's identifiers hold code points this Python's
    #: Unicode tables do not assign: the server's hash is then trusted.
    hash_certain: bool = True
    #: The server's action_hash differs from local_action_hash.
    hash_mismatch: bool = False
    #: A local allow because svc was unavailable and the tool is listed in
    #: fail_open_tools (read-only only). No decision_id, no receipt.
    fail_open: bool = False
    #: The call as asked (tool, action, resource, parameters).
    tool_call: Optional[dict[str, Any]] = None
    mutates_state: bool = False
    #: The receipt, when it was fetched and verified.
    receipt: Optional[dict[str, Any]] = None

    @property
    def allowed(self) -> bool:
        return self.decision in ("allow", "redact")

    @property
    def expires_at(self) -> Optional[_dt.datetime]:
        return parse_time(self.approval_expires_at)

    @classmethod
    def from_body(cls, body: Any, status: int = 200, **extra: Any) -> "Decision":
        """Read a 200 authorize body. A missing or unknown decision value is
        read as deny (SPEC 7.4)."""
        if not isinstance(body, Mapping):
            return cls(decision="deny", reason="unreadable_answer", raw=body, status=status, **extra)
        dec = body.get("decision")
        reason = body.get("reason") if isinstance(body.get("reason"), str) else ""
        if dec not in DECISIONS:
            reason = f"unknown_decision:{dec}" if isinstance(dec, str) else "missing_decision"
            dec = "deny"
        return cls(
            decision=dec,
            reason=reason,
            decision_id=_str(body.get("decision_id")),
            action_hash=_str(body.get("action_hash")),
            redacted_fields=_strs(body.get("redacted_fields")),
            approval_id=_str(body.get("approval_id")),
            approval_expires_at=_str(body.get("approval_expires_at")),
            receipt_id=_str(body.get("receipt_id")),
            receipt_hash=_str(body.get("receipt_hash")),
            root_trust_level=_str(body.get("root_trust_level")),
            matched_policies=_strs(body.get("matched_policies")),
            composite_risk_score=_int(body.get("composite_risk_score")),
            risk_score=_int(body.get("risk_score")),
            request_id=_str(body.get("request_id")),
            dry_run=body.get("dry_run") is True,
            raw=body,
            status=status,
            **extra,
        )


def outcome(body: Any) -> str:
    """What a client does with a 200 authorize body: ``run``, ``run_redacted``,
    ``deny`` or ``wait_approval`` (the conformance op ``outcome``).
    require_approval without an approval_id, a redact whose redacted_fields is
    not a list of well-formed paths, and any unknown value are ``deny``."""
    if not isinstance(body, Mapping):
        return "deny"
    d = body.get("decision")
    if d == "allow":
        return "run"
    if d == "redact":
        fields = body.get("redacted_fields", [])
        if fields is None:
            fields = []
        if not isinstance(fields, list):
            return "deny"
        try:
            redact({}, fields)
        except SvcError:
            return "deny"
        return "run_redacted"
    if d == "require_approval":
        aid = body.get("approval_id")
        return "wait_approval" if isinstance(aid, str) and aid != "" else "deny"
    return "deny"


@dataclass
class Approval:
    """An approval as read from ``GET /v2/approvals/:id`` (CONTRACT 5).

    ``call`` is the call to present again: the call as asked, with the
    parameters the approver granted (``edited`` when they differ)."""

    approval_id: str
    status: str
    decision_id: Optional[str] = None
    agent_id: Optional[str] = None
    tool_call: Optional[dict[str, Any]] = None
    action_hash: Optional[str] = None
    reason: Optional[str] = None
    approver_user_id: Optional[str] = None
    created_at: Optional[str] = None
    decided_at: Optional[str] = None
    expires_at: Optional[str] = None
    consumed_at: Optional[str] = None
    raw: Any = None
    edited: bool = False
    call: Optional[dict[str, Any]] = None

    @property
    def parameters(self) -> dict[str, Any]:
        src = self.call if self.call is not None else (self.tool_call or {})
        p = src.get("parameters")
        return dict(p) if isinstance(p, Mapping) else {}

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> "Approval":
        tc = body.get("tool_call")
        return cls(
            approval_id=str(body.get("approval_id") or ""),
            status=str(body.get("status") or ""),
            decision_id=_str(body.get("decision_id")),
            agent_id=_str(body.get("agent_id")),
            tool_call=dict(tc) if isinstance(tc, Mapping) else None,
            action_hash=_str(body.get("action_hash")),
            reason=body.get("reason") if isinstance(body.get("reason"), str) else None,
            approver_user_id=_str(body.get("approver_user_id")),
            created_at=_str(body.get("created_at")),
            decided_at=_str(body.get("decided_at")),
            expires_at=_str(body.get("expires_at")),
            consumed_at=_str(body.get("consumed_at")),
            raw=body,
        )


def _has_nul(v: Any, depth: int = 0) -> bool:
    if isinstance(v, str):
        return "\x00" in v
    if isinstance(v, Mapping):
        return any(_has_nul(k, depth + 1) or _has_nul(x, depth + 1) for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return any(_has_nul(x, depth + 1) for x in v)
    return False


def _dumps(obj: Any) -> bytes:
    """Compact JSON as UTF-8, the bytes that are signed and sent."""
    try:
        text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError as e:
        raise InvalidRequest(f"the request holds a value with no JSON form (NaN or infinity): {e}", error_code="invalid_number") from None
    except TypeError as e:
        raise InvalidRequest(f"the request holds a value with no JSON form: {e}", error_code="invalid_value") from None
    except RecursionError:
        raise InvalidRequest("the request is nested too deeply", error_code="invalid_value") from None
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRequest("the request holds a lone surrogate, which has no UTF-8 form", error_code="invalid_utf8") from None


def _same_json(a: Any, b: Any) -> bool:
    try:
        return canonical.jcs(a) == canonical.jcs(b)
    except canonical.CanonicalError:
        return False


class Client:
    """An agent's client of svc.

    ``signing_key``: the agent's base64 HMAC key, when it has one (every
    authorize body is then signed). ``timeout``: the total deadline of one
    ``authorize`` (all attempts and waits), seconds. ``retries``: further
    attempts after the first. ``receipt_public_key``: the gateway's Ed25519
    receipt key (base64), pinned out of band; when set, ``run`` verifies the
    receipt of every mutating call before running it. ``fail_open_tools``:
    tool names (or ``(tool, action)`` pairs) that may run without svc when svc
    is unavailable, for ``mutates_state=False`` calls only.
    """

    def __init__(
        self,
        base_url: str,
        agent_token: str,
        signing_key: Optional[str] = None,
        timeout: float = 3.0,
        retries: int = 2,
        receipt_public_key: Optional[str] = None,
        api_version: str = "v2",
        fail_open_tools: Iterable[Union[str, Sequence[str]]] = (),
        logger: Optional[logging.Logger] = None,
        *,
        approval_timeout: Optional[float] = None,
        user_agent: Optional[str] = None,
    ) -> None:
        if api_version not in ("v1", "v2"):
            raise ValueError("api_version must be 'v1' or 'v2'")
        if not isinstance(agent_token, str) or not agent_token:
            raise ValueError("agent_token is required")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.base_url = base_url
        self.timeout = float(timeout)
        self.retries = max(0, int(retries))
        self.api_version = api_version
        self.approval_timeout = approval_timeout
        self.log = logger or logging.getLogger("svc_sdk")
        self._token = agent_token
        self._signing_key = signing.decode_key(signing_key) if signing_key else None
        self._signing_key_b64 = signing_key
        self._receipt_key = receipts.decode_public_key(receipt_public_key) if receipt_public_key else None
        self._transport = Transport(base_url)
        self._ua = user_agent or f"svc-sdk-python/{__version__}"
        self._lock = threading.Lock()
        self._warned_deprecated = False
        self.fail_open_count = 0
        self._fail_open: set[tuple[str, Optional[str]]] = set()
        for t in fail_open_tools:
            if isinstance(t, str):
                self._fail_open.add((canonical.normalize_identifier(t), None))
            else:
                tool, action = t
                self._fail_open.add((canonical.normalize_identifier(tool), canonical.normalize_identifier(action)))
        if api_version == "v1":
            self._deprecated("api_version='v1' uses svc's deprecated /v1 paths (sunset Wed, 31 Dec 2026 23:59:59 GMT)")

    # -- plumbing ---------------------------------------------------------

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _path(self, p: str) -> str:
        return f"/{self.api_version}{p}"

    def _deprecated(self, why: str, stacklevel: int = 3) -> None:
        with self._lock:
            if self._warned_deprecated:
                return
            self._warned_deprecated = True
        self.log.warning("svc: %s", why)
        warnings.warn(f"svc: {why}", DeprecationWarning, stacklevel=stacklevel)

    def _observe(self, resp: Response) -> None:
        dep, sunset = resp.header("deprecation"), resp.header("sunset")
        if dep is not None or sunset is not None:
            # _observe <- _call <- authorize (or another method) <- the caller
            self._deprecated(f"the gateway marks this API as deprecated (deprecation: {dep}, sunset: {sunset})", stacklevel=5)

    def _headers(self, body: Optional[bytes] = None, signed: bool = False) -> dict[str, str]:
        h = {"Authorization": f"Bearer {self._token}", "Accept": "application/json", "User-Agent": self._ua}
        if body is not None:
            h["Content-Type"] = "application/json"
        if signed and self._signing_key is not None and body is not None:
            h[signing.HEADER] = "sha256=" + hmac.new(self._signing_key, body, hashlib.sha256).hexdigest()
        return h

    def _call(
        self,
        method: str,
        path: str,
        deadline: float,
        body_factory: Optional[Callable[[], bytes]] = None,
        signed: bool = False,
        retries: Optional[int] = None,
        cancel: Optional[Cancel] = None,
    ) -> Response:
        """Send with bounded retries inside ``deadline`` (time.monotonic()).
        Returns the first answer that is not retried; raises SvcUnavailable or
        the final answer's error when attempts or time run out."""
        retries = self.retries if retries is None else retries
        attempt = 0
        last_resp: Optional[Response] = None
        last_err: Optional[str] = None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            body = body_factory() if body_factory is not None else None
            try:
                resp = self._transport.request(method, self._path(path), body, self._headers(body, signed), timeout=remaining, cancel=cancel)
            except NetworkError as e:
                last_resp, last_err = None, str(e)
                self.log.debug("svc: %s %s: %s (attempt %d)", method, path, e, attempt + 1)
            else:
                self._observe(resp)
                if not retry.should_retry(resp.status, resp.json(), resp.headers):
                    return resp
                last_resp, last_err = resp, None
                self.log.debug("svc: %s %s: HTTP %d (attempt %d)", method, path, resp.status, attempt + 1)
            if attempt >= retries:
                break
            ra = retry.retry_after_seconds(last_resp.header("retry-after")) if last_resp is not None else None
            delay = ra if ra is not None else retry.backoff(attempt)
            if delay >= deadline - time.monotonic():
                break  # the wait the server asks for does not fit in the deadline: fail now
            if cancel is not None:
                if cancel.wait(delay):
                    raise Cancelled()
            else:
                time.sleep(delay)
            attempt += 1
        if last_resp is not None:
            raise retry.error_class(last_resp.status).from_response(last_resp.status, last_resp.json(), last_resp.headers, prefix="svc: ")
        raise SvcUnavailable(f"svc: unreachable within the deadline ({last_err or 'no time left'})", error_code="svc_unavailable")

    # -- authorize --------------------------------------------------------

    @staticmethod
    def _tool_call(tool: Any, action: Any, resource: Any, parameters: Any) -> dict[str, Any]:
        if not isinstance(tool, str) or not tool.strip():
            raise InvalidRequest("tool must be a non-empty string", error_code="invalid_tool_call")
        if not isinstance(action, str) or not action.strip():
            raise InvalidRequest("action must be a non-empty string", error_code="invalid_tool_call")
        if resource is not None and not isinstance(resource, str):
            raise InvalidRequest("resource must be a string or None", error_code="invalid_tool_call")
        if parameters is None:
            parameters = {}
        if not isinstance(parameters, Mapping):
            raise InvalidRequest("parameters must be a dict", error_code="invalid_tool_call")
        return {"tool": tool, "action": action, "resource": resource, "parameters": dict(parameters)}

    def _may_fail_open(self, tool: str, action: str, mutates_state: bool) -> bool:
        if mutates_state or not self._fail_open:
            return False
        t, a = canonical.normalize_identifier(tool), canonical.normalize_identifier(action)
        return (t, None) in self._fail_open or (t, a) in self._fail_open

    def authorize(
        self,
        tool: str,
        action: str,
        resource: Optional[str] = None,
        parameters: Optional[Mapping[str, Any]] = None,
        mutates_state: bool = False,
        source_trust: Optional[str] = None,
        trace: Optional[Mapping[str, Any]] = None,
        environment: Optional[str] = None,
        request_id: Optional[str] = None,
        approval_id: Optional[str] = None,
        dry_run: bool = False,
        webhook: Optional[Mapping[str, str]] = None,
    ) -> Decision:
        """Ask svc about one call (``POST /v2/authorize``) and return its Decision.

        One ``request_id`` (a UUIDv7 unless given) is reused on every retry; each
        attempt carries a fresh nonce and, with a signing key, the HMAC of exactly
        the bytes sent. Deny, quarantine and require_approval are returned, not
        raised (``run`` raises). A 403 before policy (environment not allowed,
        tool not bound) is returned as a deny Decision without decision_id.
        Raises SvcAuthError (401), SvcUnavailable (unreachable, or 429/502/503/504
        after retries: unless the tool may fail open), SvcError (anything else
        not understood), InvalidRequest (local pre-check; nothing sent)."""
        tc = self._tool_call(tool, action, resource, parameters)
        for name, v in (("tool_call", tc), ("trace", trace), ("environment", environment), ("source_trust", source_trust),
                        ("request_id", request_id), ("approval_id", approval_id), ("webhook", webhook)):
            if _has_nul(v):
                raise InvalidRequest(f"{name} holds U+0000, which svc refuses", error_code="nul_character")
        try:
            local_hash: Optional[str] = canonical.action_hash(tc)
        except canonical.CanonicalError as e:
            raise InvalidRequest(f"the tool call has no canonical form: {e}", error_code="invalid_tool_call") from None
        certain = canonical.tool_call_is_certain(tc)
        rid = request_id or uuid7()
        base: dict[str, Any] = {"tool_call": tc, "mutates_state": bool(mutates_state), "request_id": rid}
        if source_trust is not None:
            base["source_trust"] = source_trust
        if trace is not None:
            base["trace"] = dict(trace)
        if environment is not None:
            base["environment"] = environment
        if approval_id is not None:
            base["approval_id"] = approval_id
        if dry_run:
            base["dry_run"] = True
        if webhook is not None:
            base["webhook"] = dict(webhook)

        def body() -> bytes:
            b = _dumps({**base, "nonce": new_nonce()})
            if len(b) > MAX_BODY_BYTES:
                raise InvalidRequest(f"the request body is {len(b)} bytes, over svc's 1 MiB limit", error_code="body_too_large")
            return b

        body()  # the pre-check, before anything is sent
        extra = dict(local_action_hash=local_hash, hash_certain=certain, tool_call=tc, mutates_state=bool(mutates_state))
        try:
            resp = self._call("POST", "/authorize", time.monotonic() + self.timeout, body, signed=True)
        except SvcUnavailable as e:
            if approval_id is None and self._may_fail_open(tool, action, mutates_state):
                with self._lock:
                    self.fail_open_count += 1
                    n = self.fail_open_count
                self.log.warning("svc: FAIL-OPEN for read-only tool %r action %r (request_id %s, use %d): %s", tool, action, rid, n, e)
                return Decision(decision="allow", reason="fail_open_svc_unavailable", request_id=rid, fail_open=True, status=None, **extra)
            raise
        return self._decision(resp, rid, extra)

    def _decision(self, resp: Response, rid: str, extra: dict[str, Any]) -> Decision:
        body = resp.json()
        if resp.status == 200:
            if not isinstance(body, Mapping):
                raise SvcError("svc: the authorize answer is not a JSON object", status=200, body=resp.body[:1000],
                               error_code="unreadable_answer")
            d = Decision.from_body(body, 200, **extra)
            if d.decision != body.get("decision"):
                self.log.warning("svc: unknown decision %r read as deny (request_id %s)", body.get("decision"), rid)
            if d.request_id is None:
                d.request_id = rid
            if d.action_hash and d.local_action_hash and d.action_hash != d.local_action_hash:
                d.hash_mismatch = True
                self.log.warning(
                    "svc: action_hash mismatch: server %s, local %s (%s; decision %s)", d.action_hash, d.local_action_hash,
                    "local hash uncertain: identifiers beyond this Python's Unicode %s, server's trusted" % canonical.UNICODE_VERSION
                    if not d.hash_certain else "local hash certain", d.decision_id)
            return d
        if resp.status == 403:
            err = SvcError.from_response(403, body, resp.headers)
            return Decision(decision="deny", reason=err.error_code or err.reason or "forbidden", request_id=rid, raw=body,
                            status=403, message=err.message, **extra)
        raise retry.error_class(resp.status).from_response(resp.status, body, resp.headers, prefix="svc: ")

    # -- approvals --------------------------------------------------------

    def wait_for_approval(self, decision_or_approval_id: Union[Decision, str, Approval], timeout: Optional[float] = None) -> Approval:
        """Wait until the approval is decided (long-polls ``GET
        /v2/approvals/:id?wait=N``). Returns the Approval when APPROVED (with
        ``call`` and ``edited`` set); raises ApprovalRejected, ApprovalExpired
        (EXPIRED, or the deadline passed: the earlier of the approval's
        expiry and ``timeout``), ActionHashMismatch (an edit whose hash does
        not match), SvcAuthError, SvcError; transient failures are retried
        until the deadline, then SvcUnavailable."""
        return self._wait_for_approval(decision_or_approval_id, timeout, None)

    def _wait_for_approval(self, ref: Union[Decision, str, Approval], timeout: Optional[float], cancel: Optional[Cancel]) -> Approval:
        decision: Optional[Decision] = None
        asked: Optional[dict[str, Any]] = None
        expires: Optional[_dt.datetime] = None
        if isinstance(ref, Decision):
            decision, aid, asked, expires = ref, ref.approval_id, ref.tool_call, ref.expires_at
        elif isinstance(ref, Approval):
            aid, expires = ref.approval_id, parse_time(ref.expires_at)
        else:
            aid = ref
        if not isinstance(aid, str) or not aid:
            raise SvcError("svc: no approval_id to wait for", error_code="no_approval_id")
        if timeout is None:
            timeout = self.approval_timeout
        start = time.monotonic()
        user_deadline = start + timeout if timeout is not None else math.inf

        def deadline() -> float:
            if expires is None:
                return user_deadline
            # The expiry on the local monotonic clock, with a second of slack so
            # that the server's own EXPIRED answer is usually what ends the wait.
            exp = time.monotonic() + (expires.timestamp() - time.time()) + 1.0
            return min(user_deadline, exp)

        last: Optional[Approval] = None
        transient: Optional[str] = None
        failures = 0
        polls = 0
        path = f"/approvals/{aid}"
        while True:
            if cancel is not None and cancel.is_set():
                raise Cancelled()
            remaining = deadline() - time.monotonic()
            if remaining <= 0:
                if transient is not None and (last is None or last.status == "PENDING"):
                    raise SvcUnavailable(f"svc: approval {aid}: no answer before the deadline ({transient})",
                                         error_code="svc_unavailable")
                raise ApprovalExpired(f"svc: approval {aid} was not decided before the deadline", approval=last,
                                      decision=decision, error_code="approval_wait_deadline")
            wait = int(min(MAX_WAIT, remaining)) if remaining != math.inf else MAX_WAIT
            t0 = time.monotonic()
            try:
                resp = self._transport.request("GET", self._path(f"{path}?wait={wait}"), None, self._headers(),
                                               timeout=wait + min(10.0, self.timeout + 5.0), cancel=cancel)
            except NetworkError as e:
                transient, failures = str(e), failures + 1
                self._sleep(min(retry.backoff(failures, base=0.5, cap=5.0) + 0.1, max(0.0, deadline() - time.monotonic())), cancel)
                continue
            self._observe(resp)
            polls += 1
            if retry.should_retry(resp.status):
                transient, failures = f"HTTP {resp.status}", failures + 1
                ra = retry.retry_after_seconds(resp.header("retry-after"))
                delay = ra if ra is not None else retry.backoff(failures, base=0.5, cap=5.0) + 0.1
                self._sleep(min(delay, max(0.0, deadline() - time.monotonic())), cancel)
                continue
            if resp.status == 304 and last is not None:
                a = last
            elif resp.status == 200 and isinstance(resp.json(), Mapping):
                a = Approval.from_body(resp.json())
            elif resp.status == 200:
                raise SvcError(f"svc: approval {aid}: the answer is not a JSON object", status=200, error_code="unreadable_answer")
            else:
                raise retry.error_class(resp.status).from_response(resp.status, resp.json(), resp.headers, prefix=f"svc: approval {aid}: ")
            transient, failures, last = None, 0, a
            if a.expires_at and parse_time(a.expires_at) is not None:
                expires = parse_time(a.expires_at)
            if a.status == "APPROVED":
                return self._approved(a, asked, decision)
            if a.status == "REJECTED":
                raise ApprovalRejected(f"svc: approval {aid} was rejected" + (f": {a.reason}" if a.reason else ""),
                                       approval=a, decision=decision, error_code="approval_rejected")
            if a.status == "EXPIRED":
                raise ApprovalExpired(f"svc: approval {aid} expired", approval=a, decision=decision, error_code="approval_expired")
            if a.status != "PENDING":
                raise SvcError(f"svc: approval {aid}: unknown status {a.status!r}", status=resp.status, body=a.raw,
                               error_code="unknown_approval_status")
            elapsed = time.monotonic() - t0
            if elapsed < max(0.0, wait - 0.5) or wait == 0:
                # Answered early while PENDING: a busy node (Retry-After), or a
                # server without ?wait. Poll gently: 1 to 5 s with jitter.
                ra = retry.retry_after_seconds(resp.header("retry-after"))
                delay = ra if ra is not None else min(5.0, 1.0 + retry.backoff(min(polls, 3), base=0.5, cap=4.0))
                if wait == 0:
                    delay = min(delay, 0.25)
                self._sleep(min(delay, max(0.0, deadline() - time.monotonic())), cancel)

    @staticmethod
    def _sleep(seconds: float, cancel: Optional[Cancel]) -> None:
        if seconds <= 0:
            return
        if cancel is not None:
            if cancel.wait(seconds):
                raise Cancelled()
        else:
            time.sleep(seconds)

    def _approved(self, a: Approval, asked: Optional[dict[str, Any]], decision: Optional[Decision]) -> Approval:
        """Check an APPROVED approval against the call asked; set ``call`` and
        ``edited``. An edit must hash (svc-jcs-1) to the approval's action_hash."""
        tc = a.tool_call
        if not isinstance(tc, Mapping):
            raise SvcError(f"svc: approval {a.approval_id} has no tool_call", error_code="unreadable_answer", body=a.raw)
        params = tc.get("parameters")
        if params is None:
            params = {}
        if not isinstance(params, Mapping):
            raise SvcError(f"svc: approval {a.approval_id}: tool_call.parameters is not an object", error_code="unreadable_answer")
        if asked is None:
            call = {"tool": tc.get("tool"), "action": tc.get("action"), "resource": tc.get("resource"), "parameters": dict(params)}
            try:
                local = canonical.action_hash(call, normalized=True)
            except canonical.CanonicalError as e:
                raise SvcError(f"svc: approval {a.approval_id}: tool_call has no canonical form: {e}", error_code="unreadable_answer")
            certain = canonical.tool_call_is_certain(call)
            a.edited = False
        else:
            same_target = (
                canonical.normalize_identifier(asked["tool"]) == tc.get("tool")
                and canonical.normalize_identifier(asked["action"]) == tc.get("action")
                and asked.get("resource") == tc.get("resource")
            )
            certain = canonical.tool_call_is_certain(asked)
            if not same_target and certain:
                raise ActionHashMismatch(f"svc: approval {a.approval_id} is for another call ({tc.get('tool')}/{tc.get('action')})",
                                         remote=a.action_hash)
            call = {"tool": asked["tool"], "action": asked["action"], "resource": asked.get("resource"), "parameters": dict(params)}
            a.edited = not _same_json(asked.get("parameters") or {}, call["parameters"])
            try:
                local = canonical.action_hash(call)
            except canonical.CanonicalError as e:
                raise SvcError(f"svc: approval {a.approval_id}: tool_call has no canonical form: {e}", error_code="unreadable_answer")
        a.call = call
        if a.action_hash != local:
            if certain:
                raise ActionHashMismatch(
                    f"svc: approval {a.approval_id}: action_hash {a.action_hash} does not match the approved call's {local}",
                    local=local, remote=a.action_hash)
            self.log.warning("svc: approval %s: action_hash %s differs from the local %s; identifiers beyond this Python's "
                             "Unicode %s, so the server's is trusted", a.approval_id, a.action_hash, local, canonical.UNICODE_VERSION)
            if decision is not None:
                decision.hash_mismatch = True
        return a

    # -- receipts ---------------------------------------------------------

    def get_receipt(self, receipt_id: str) -> dict[str, Any]:
        """``GET /v2/receipts/:receipt_id`` (an agent reads its own receipts)."""
        resp = self._call("GET", f"/receipts/{receipt_id}", time.monotonic() + self.timeout)
        body = resp.json()
        if resp.status != 200 or not isinstance(body, Mapping):
            raise retry.error_class(resp.status).from_response(resp.status, body, resp.headers, prefix=f"svc: receipt {receipt_id}: ")
        return dict(body)

    def get_receipt_public_key(self) -> dict[str, Any]:
        """``GET /v2/receipts/public-key``: ``key_id`` and ``public_key``. Pin
        the key you got out of band rather than trusting this answer alone."""
        resp = self._call("GET", "/receipts/public-key", time.monotonic() + self.timeout)
        body = resp.json()
        if resp.status != 200 or not isinstance(body, Mapping):
            raise retry.error_class(resp.status).from_response(resp.status, body, resp.headers, prefix="svc: receipt key: ")
        return dict(body)

    def verify_receipt(self, d: Decision, call: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
        """Fetch the receipt of ``d`` and check it (hash, signature with the
        pinned key, ids, and action_hash against the local svc-jcs-1 of
        ``call``). Returns the receipt; raises ReceiptInvalid."""
        if self._receipt_key is None:
            raise ValueError("receipt_public_key is not set")
        if not d.receipt_id:
            raise ReceiptInvalid(f"svc: decision {d.decision_id} carries no receipt", error_code="receipt_missing")
        try:
            r = self.get_receipt(d.receipt_id)
        except SvcError as e:
            if e.status == 404:
                raise ReceiptInvalid(f"svc: receipt {d.receipt_id} not found", error_code="receipt_not_found", status=404) from e
            raise
        res = receipts.verify(r, self._receipt_key)
        problems = []
        if not res.hash_valid:
            problems.append(f"hash invalid ({res.error})")
        if not res.signature_valid:
            problems.append(f"signature invalid ({res.error})")
        for name, want in (("receipt_id", d.receipt_id), ("receipt_hash", d.receipt_hash), ("decision_id", d.decision_id),
                           ("decision", d.decision)):
            if want is not None and r.get(name) != want:
                problems.append(f"{name} {r.get(name)!r} is not the decision's {want!r}")
        call = call if call is not None else d.tool_call
        local = None
        if call is not None:
            try:
                local = canonical.action_hash(call)
            except canonical.CanonicalError:
                local = None
        certain = call is None or canonical.tool_call_is_certain(call)
        want_hash = local if (local is not None and certain) else d.action_hash
        if r.get("action_hash") != want_hash:
            problems.append(f"action_hash {r.get('action_hash')!r} is not the call's {want_hash!r}")
        elif local is not None and r.get("action_hash") != local:
            self.log.warning("svc: receipt %s: action_hash differs from the local %s (uncertain Unicode; server's trusted)", d.receipt_id, local)
        if problems:
            raise ReceiptInvalid(f"svc: receipt {d.receipt_id}: " + "; ".join(problems), result=res, receipt=r,
                                 error_code="receipt_invalid")
        d.receipt = r
        return r

    def get_checkpoint(self) -> str:
        """``GET /v2/receipts/checkpoint``: the latest signed checkpoint of the
        tenant's receipt log (CONTRACT §17), as text."""
        resp = self._call("GET", "/receipts/checkpoint", time.monotonic() + self.timeout)
        if resp.status != 200:
            raise retry.error_class(resp.status).from_response(resp.status, resp.json(), resp.headers, prefix="svc: checkpoint: ")
        return resp.body.decode("utf-8")

    def get_inclusion_proof(self, receipt_id: str, tree_size: Optional[int] = None) -> dict[str, Any]:
        """``GET /v2/receipts/:receipt_id/inclusion``: ``leaf_index``,
        ``tree_size`` and base64 ``hashes`` (the latest checkpoint's tree
        without ``tree_size``)."""
        path = f"/receipts/{receipt_id}/inclusion" + (f"?tree_size={int(tree_size)}" if tree_size is not None else "")
        resp = self._call("GET", path, time.monotonic() + self.timeout)
        body = resp.json()
        if resp.status != 200 or not isinstance(body, Mapping):
            raise retry.error_class(resp.status).from_response(resp.status, body, resp.headers, prefix=f"svc: inclusion of {receipt_id}: ")
        return dict(body)

    def verify_inclusion(self, receipt: Union[str, Mapping[str, Any]]) -> "receiptlog.InclusionResult":
        """Prove a receipt (or the receipt of an id) is in the gateway's
        receipt log: fetch the latest checkpoint and the receipt's inclusion
        proof in its tree, and check both with the pinned receipt key
        (:func:`receiptlog.verify_inclusion`). Returns the result; raises
        ReceiptInvalid (``error_code`` ``inclusion_invalid``) when either
        check fails, or ``receipt_not_logged`` when the receipt is newer than
        the latest checkpoint (one is signed every SVC_CHECKPOINT_INTERVAL_SECS:
        try again then)."""
        if self._receipt_key is None:
            raise ValueError("receipt_public_key is not set")
        r = self.get_receipt(receipt) if isinstance(receipt, str) else dict(receipt)
        rid = r.get("receipt_id")
        try:
            checkpoint = self.get_checkpoint()
        except SvcError as e:
            if e.status == 404:
                raise ReceiptInvalid("svc: no receipt log checkpoint yet", receipt=r, error_code="receipt_not_logged", status=404) from e
            raise
        try:
            size = receiptlog.parse_checkpoint(checkpoint).size
        except ValueError as e:
            raise ReceiptInvalid(f"svc: the checkpoint served is not one: {e}", receipt=r, error_code="inclusion_invalid") from e
        seq = r.get("seq")
        if isinstance(seq, int) and not isinstance(seq, bool) and seq > size:
            raise ReceiptInvalid(f"svc: receipt {rid} (seq {seq}) is newer than the latest checkpoint ({size} receipts)",
                                 receipt=r, error_code="receipt_not_logged")
        proof = self.get_inclusion_proof(str(rid), size)
        res = receiptlog.verify_inclusion(r, proof, checkpoint, self._receipt_key)
        if not res.valid:
            raise ReceiptInvalid(f"svc: receipt {rid} is not proven in the receipt log: {res.error}", result=res, receipt=r,
                                 error_code="inclusion_invalid")
        return res

    # -- run and guard ----------------------------------------------------

    def _authorize_call(self, call: Mapping[str, Any], opts: Mapping[str, Any], **more: Any) -> Decision:
        if not isinstance(call, Mapping):
            raise InvalidRequest("tool_call must be a dict with tool, action, resource and parameters", error_code="invalid_tool_call")
        return self.authorize(call.get("tool"), call.get("action"), call.get("resource"), call.get("parameters"),  # type: ignore[arg-type]
                              **{**opts, **more})

    @staticmethod
    def _pre_wait(d: Decision, wait: bool) -> None:
        if not d.approval_id:
            raise Denied("svc: require_approval without an approval_id (treated as deny)", d)
        if d.hash_mismatch and d.hash_certain:
            raise ActionHashMismatch(f"svc: the approval would bind action_hash {d.action_hash}, not this call's "
                                     f"{d.local_action_hash}", local=d.local_action_hash, remote=d.action_hash)
        if not wait:
            raise ApprovalRequired(f"svc: approval required (approval_id {d.approval_id})", d)

    def _finish(self, call: dict[str, Any], d: Decision, mask: Any) -> dict[str, Any]:
        """Raise unless ``d`` lets ``call`` run; return the parameters the tool
        receives (redacted on redact)."""
        if not d.allowed:
            raise Denied(f"svc: {d.decision} ({d.reason})", d)
        params = dict(call.get("parameters") or {})
        if d.decision == "redact":
            params = redact(params, d.redacted_fields, mask)
        if self._receipt_key is not None and d.mutates_state and not d.fail_open:
            self.verify_receipt(d, call)
        return params

    def run(
        self,
        tool_call: Mapping[str, Any],
        fn: Callable[..., Any],
        *,
        wait: bool = True,
        approval_timeout: Optional[float] = None,
        mask: Any = _NO_MASK,
        **authorize_opts: Any,
    ) -> Any:
        """Authorize ``tool_call`` and run ``fn(**parameters)`` only on the allow
        (or redact, with the redaction applied) that svc returns.

        require_approval: wait for the approval (``wait=True``), or raise
        ApprovalRequired. Once approved, the call (as edited by the approver, if
        edited) is presented again with ``approval_id``, and runs only on the
        allow that this returns. deny and quarantine raise Denied. With
        ``receipt_public_key`` set, the receipt of a mutating call is fetched and
        verified before ``fn`` runs. ``authorize_opts`` are authorize's keyword
        arguments (mutates_state, source_trust, trace, environment, request_id,
        webhook, dry_run is refused)."""
        if authorize_opts.get("dry_run"):
            raise InvalidRequest("run() never runs a tool on a dry run", error_code="dry_run")
        call, d = self._start(tool_call, authorize_opts)
        if d.decision == "require_approval":
            self._pre_wait(d, wait)
            a = self.wait_for_approval(d, timeout=approval_timeout)
            call, d = self._present(a, d, authorize_opts)
        return fn(**self._finish(call, d, mask))

    def _start(self, tool_call: Mapping[str, Any], opts: Mapping[str, Any]) -> tuple[dict[str, Any], Decision]:
        d = self._authorize_call(tool_call, opts)
        assert d.tool_call is not None
        return d.tool_call, d

    def _present(self, a: Approval, first: Decision, opts: Mapping[str, Any]) -> tuple[dict[str, Any], Decision]:
        call = a.call if a.call is not None else first.tool_call
        assert call is not None
        if a.edited:
            self.log.info("svc: approval %s edited the parameters; presenting the edited call", a.approval_id)
        more = {k: v for k, v in opts.items() if k not in ("request_id", "approval_id", "webhook")}
        d = self._authorize_call(call, more, approval_id=a.approval_id)
        if d.fail_open:  # never run an approval path on a local allow
            raise SvcUnavailable("svc: unavailable while presenting an approval", error_code="svc_unavailable")
        if not d.allowed:
            raise Denied(f"svc: presenting approval {a.approval_id}: {d.decision} ({d.reason})", d)
        return d.tool_call or dict(call), d

    def guard(
        self,
        tool: str,
        action: str,
        resource: Union[None, str, Callable[[dict[str, Any]], Optional[str]]] = None,
        mutates_state: bool = False,
        *,
        wait: bool = True,
        approval_timeout: Optional[float] = None,
        mask: Any = _NO_MASK,
        **authorize_opts: Any,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: every call of the function goes through :meth:`run`. The
        function's arguments (bound by name) are the parameters; ``resource``
        may be a callable that gets those arguments as a dict."""

        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            sig = inspect.signature(fn)

            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                params = _bind(sig, args, kwargs)
                res = resource(dict(params)) if callable(resource) else resource
                call = {"tool": tool, "action": action, "resource": res, "parameters": params}
                return self.run(call, fn, wait=wait, approval_timeout=approval_timeout, mask=mask, mutates_state=mutates_state,
                                **authorize_opts)

            wrapper.svc_guard = {"tool": tool, "action": action, "mutates_state": mutates_state}  # type: ignore[attr-defined]
            return wrapper

        return deco


def _bind(sig: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments by name (defaults applied; **kwargs flattened)."""
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    params: dict[str, Any] = {}
    for name, value in bound.arguments.items():
        kind = sig.parameters[name].kind
        if kind is inspect.Parameter.VAR_KEYWORD:
            params.update(value)
        elif kind is inspect.Parameter.VAR_POSITIONAL:
            if value:
                raise InvalidRequest("guard: *args cannot be passed as named parameters", error_code="invalid_tool_call")
        elif kind is inspect.Parameter.POSITIONAL_ONLY:
            raise InvalidRequest("guard: positional-only parameters cannot be passed by name", error_code="invalid_tool_call")
        else:
            params[name] = value
    return params
