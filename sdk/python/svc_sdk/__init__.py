"""svc_sdk: the Python client of svc, an authorization gateway for AI agents.

Standard library only (Ed25519 through ``cryptography`` when it imports, else
pure Python). See README.md next to this package.
"""

from . import canonical, errors, receiptlog, receipts, redaction, retry, signing
from .aio import AsyncClient
from .canonical import action_hash, jcs, normalize_identifier
from .client import Approval, Client, Decision, __version__, outcome, uuid7
from .errors import (
    ActionHashMismatch,
    ApprovalExpired,
    ApprovalRejected,
    ApprovalRequired,
    Denied,
    InvalidRedactionPath,
    InvalidRequest,
    ReceiptInvalid,
    SvcAuthError,
    SvcError,
    SvcUnavailable,
)
from .redaction import redact
from .signing import sign

__all__ = [
    "__version__",
    "Client",
    "AsyncClient",
    "Decision",
    "Approval",
    "outcome",
    "uuid7",
    "canonical",
    "errors",
    "receiptlog",
    "receipts",
    "redaction",
    "retry",
    "signing",
    "jcs",
    "action_hash",
    "normalize_identifier",
    "redact",
    "sign",
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
