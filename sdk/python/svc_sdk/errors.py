"""Typed errors. Every one of them means: the tool did not run.

``SvcError`` is the base class and carries what the gateway said, when it said
anything: the HTTP ``status``, the envelope's ``reason`` (``Forbidden``,
``TooManyRequests``...), ``error_code`` (the envelope's ``details.error``, or a
local code such as ``invalid_redaction_path``), ``message`` and the parsed
``body``.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

__all__ = [
    "SvcError",
    "SvcAuthError",
    "SvcUnavailable",
    "InvalidRequest",
    "InvalidRedactionPath",
    "Denied",
    "ApprovalRequired",
    "ApprovalRejected",
    "ApprovalExpired",
    "ReceiptInvalid",
    "ActionHashMismatch",
]


class SvcError(Exception):
    """The gateway answered something that is not a usable decision (or a local
    check failed). The tool did not run."""

    def __init__(
        self,
        message: str,
        *,
        status: Optional[int] = None,
        reason: Optional[str] = None,
        error_code: Optional[str] = None,
        body: Any = None,
        headers: Optional[Mapping[str, str]] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason
        self.error_code = error_code
        self.body = body
        self.headers = dict(headers or {})

    @classmethod
    def from_response(cls, status: int, body: Any, headers: Optional[Mapping[str, str]] = None, prefix: str = "") -> "SvcError":
        """Build the error from an answer and its status envelope (CONTRACT 10)."""
        reason = error_code = None
        message = ""
        if isinstance(body, Mapping):
            reason = body.get("reason") if isinstance(body.get("reason"), str) else None
            message = body.get("message") if isinstance(body.get("message"), str) else ""
            details = body.get("details")
            if isinstance(details, Mapping) and isinstance(details.get("error"), str):
                error_code = details["error"]
        text = f"{prefix}HTTP {status}"
        if reason:
            text += f" {reason}"
        if error_code:
            text += f" ({error_code})"
        if message:
            text += f": {message}"
        return cls(text, status=status, reason=reason, error_code=error_code, body=body, headers=headers)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, status={self.status!r}, error_code={self.error_code!r})"


class SvcAuthError(SvcError):
    """401 or 403: the agent token, its status (quarantined, revoked) or the
    request signature was refused. Retrying will not help."""


class SvcUnavailable(SvcError):
    """svc could not be reached, or kept answering 429/502/503/504, within the
    deadline. Fail closed: the tool did not run (unless fail-open applies)."""


class InvalidRequest(SvcError):
    """A local pre-check refused the call before anything was sent (U+0000, a
    body over 1 MiB, NaN or infinity, a lone surrogate, a value with no JSON
    form, a bad signing key)."""


class InvalidRedactionPath(SvcError):
    """A ``redacted_fields`` path is malformed (error_code
    ``invalid_redaction_path``): fail closed, the tool does not run."""

    def __init__(self, message: str, **kw: Any) -> None:
        kw.setdefault("error_code", "invalid_redaction_path")
        super().__init__(message, **kw)


class _DecisionError(SvcError):
    def __init__(self, message: str, decision: Any = None, **kw: Any) -> None:
        if decision is not None:
            kw.setdefault("status", getattr(decision, "status", None))
            kw.setdefault("body", getattr(decision, "raw", None))
            kw.setdefault("error_code", getattr(decision, "reason", None))
        super().__init__(message, **kw)
        self.decision = decision


class Denied(_DecisionError):
    """The decision was deny or quarantine (or a 403 before policy, or an
    answer the SDK treats as deny). ``.decision`` is the Decision."""


class ApprovalRequired(_DecisionError):
    """require_approval while not waiting (``run(..., wait=False)``):
    ``.decision.approval_id`` names the approval to wait for later."""


class _ApprovalError(SvcError):
    def __init__(self, message: str, approval: Any = None, decision: Any = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.approval = approval
        self.decision = decision


class ApprovalRejected(_ApprovalError):
    """An approver rejected the call."""


class ApprovalExpired(_ApprovalError):
    """The approval expired, or the wait's deadline (the earlier of
    ``approval_expires_at`` and the caller's timeout) passed while PENDING."""


class ReceiptInvalid(SvcError):
    """The receipt of the decision did not verify (hash, signature, key id, or
    an action hash other than the call's). ``.result`` is the VerifyResult."""

    def __init__(self, message: str, result: Any = None, receipt: Any = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.result = result
        self.receipt = receipt


class ActionHashMismatch(SvcError):
    """The locally computed svc-jcs-1 hash differs from the one the gateway (or
    an approval) states where the hash binds what runs: fail closed."""

    def __init__(self, message: str, local: Optional[str] = None, remote: Optional[str] = None, **kw: Any) -> None:
        kw.setdefault("error_code", "action_hash_mismatch")
        super().__init__(message, **kw)
        self.local = local
        self.remote = remote
