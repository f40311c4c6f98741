"""Receipt verification, schemes svc-receipt-1 and svc-receipt-2
(``receipt/doc.go``).

Under svc-receipt-1 (:data:`SCHEME`), ``receipt_hash`` is the lower-case hex
SHA-256 of the RFC 8785 bytes of the object with exactly the members
``receipt_id, tenant_id, decision_id, seq, action_hash, decision,
prev_receipt_hash, key_id, created_at`` (seq a JSON integer with
|seq| <= 2**53, every other member a string hashed as stored). A receipt made
under run context carries ``context_hash`` (64 lower-case hex: the SHA-256 of
the run context the policy saw) and is hashed as svc-receipt-2
(:data:`SCHEME_CONTEXT`): the same object plus the member ``context_hash``.
A ``context_hash`` that is absent, null or "" means svc-receipt-1, so one
chain mixes both; one that is present, non-empty and not 64 lower-case hex
makes the hash invalid.
A signed receipt carries ``signature``: standard base64 of the Ed25519
signature of the 32 raw bytes of ``receipt_hash``, made with the key whose
``key_id`` (the first 16 hex characters of SHA-256 of the 32-byte public key)
the receipt names.

:func:`verify` reports the two checks apart, as the gateway's verifier does:
``hash_valid`` (the fields match ``receipt_hash``) and ``signature_valid``
(signed, by the key given, and the signature verifies). Here, unlike the
gateway's ``GET /receipts/:id/verify``, ``signature_valid`` is ``False`` (not
null) for an unsigned receipt: an SDK that pins a key wants a signature.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from . import ed25519
from .canonical import jcs_bytes

__all__ = [
    "SCHEME",
    "SCHEME_CONTEXT",
    "HASHED_FIELDS",
    "VerifyResult",
    "verify",
    "receipt_hash",
    "key_id",
    "decode_public_key",
]

SCHEME = "svc-receipt-1"
#: The scheme of a receipt with a non-empty ``context_hash``: svc-receipt-1's
#: object (:data:`HASHED_FIELDS`) plus ``context_hash``.
SCHEME_CONTEXT = "svc-receipt-2"
#: The members svc-receipt-1 hashes (svc-receipt-2 adds ``context_hash``).
HASHED_FIELDS = (
    "receipt_id",
    "tenant_id",
    "decision_id",
    "seq",
    "action_hash",
    "decision",
    "prev_receipt_hash",
    "key_id",
    "created_at",
)
_MAX_SEQ = 1 << 53
_HEX64_RE = re.compile(r"[0-9a-f]{64}")  # with fullmatch: no trailing newline


@dataclass(frozen=True)
class VerifyResult:
    """The outcome of :func:`verify`. ``valid`` is hash_valid and signature_valid."""

    hash_valid: bool
    signature_valid: bool
    key_id_matches: bool
    signed: bool
    key_id: str
    computed_hash: Optional[str]
    error: str

    @property
    def valid(self) -> bool:
        return self.hash_valid and self.signature_valid


def key_id(public_key: bytes) -> str:
    """First 16 hex characters of SHA-256 of the 32-byte public key."""
    if len(public_key) != 32:
        return ""
    return hashlib.sha256(public_key).hexdigest()[:16]


def decode_public_key(public_key_b64: str | bytes) -> bytes:
    """Standard base64 of a 32-byte Ed25519 public key (ValueError otherwise)."""
    if isinstance(public_key_b64, (bytes, bytearray)) and len(public_key_b64) == 32:
        return bytes(public_key_b64)
    if isinstance(public_key_b64, str):
        public_key_b64 = public_key_b64.strip().encode("ascii", "strict")
    try:
        raw = base64.b64decode(public_key_b64, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"public key is not standard base64: {e}") from None
    if len(raw) != 32:
        raise ValueError(f"an Ed25519 public key is 32 bytes, got {len(raw)}")
    return raw


def receipt_hash(receipt: Mapping[str, Any]) -> str:
    """The hash of ``receipt`` (its receipt_hash and signature are ignored):
    svc-receipt-2 when it carries a non-empty ``context_hash``, else
    svc-receipt-1. ValueError when a field has the wrong type, seq is out of
    range or ``context_hash`` is not 64 lower-case hex; a missing field counts
    as "" (seq as 0), and a missing or null ``context_hash`` as "", as the
    gateway reads it."""
    obj: dict[str, Any] = {}
    for name in HASHED_FIELDS:
        v = receipt.get(name)
        if name == "seq":
            if v is None:
                v = 0
            if isinstance(v, bool) or not isinstance(v, int):
                raise ValueError("seq must be an integer")
            if v > _MAX_SEQ or v < -_MAX_SEQ:
                raise ValueError(f"seq {v} is out of range")
        else:
            if v is None:
                v = ""
            if not isinstance(v, str):
                raise ValueError(f"{name} must be a string")
        obj[name] = v
    ctx = receipt.get("context_hash")
    if ctx is not None:
        if not isinstance(ctx, str):
            raise ValueError("context_hash must be a string")
        if ctx != "":
            if not _HEX64_RE.fullmatch(ctx):
                raise ValueError("context_hash is not 64 lower-case hex characters")
            obj["context_hash"] = ctx
    return hashlib.sha256(jcs_bytes(obj)).hexdigest()


def _strict_b64(s: str) -> Optional[bytes]:
    try:
        raw = base64.b64decode(s.encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        return None
    # Strict: the text must be the canonical encoding (no stray padding bits).
    if base64.b64encode(raw).decode("ascii") != s:
        return None
    return raw


def verify(receipt: Mapping[str, Any], public_key: str | bytes, backend: Optional[str] = None) -> VerifyResult:
    """Verify one receipt (CONTRACT 13's shape) against the gateway's public
    key (standard base64, or the 32 raw bytes). ``hash_valid`` follows
    :func:`receipt_hash` (svc-receipt-1, or svc-receipt-2 for a receipt with
    ``context_hash``; false for a malformed ``context_hash``)."""
    if not isinstance(receipt, Mapping):
        return VerifyResult(False, False, False, False, "", None, "receipt is not an object")
    try:
        pub: Optional[bytes] = decode_public_key(public_key)
    except ValueError:
        pub = None
    kid = key_id(pub) if pub else ""
    error = ""
    computed: Optional[str] = None
    try:
        computed = receipt_hash(receipt)
    except ValueError as e:
        error = str(e)
    stored = receipt.get("receipt_hash")
    hash_valid = computed is not None and isinstance(stored, str) and computed == stored
    if computed is not None and not hash_valid:
        error = "receipt_hash mismatch"

    sig = receipt.get("signature")
    rkid = receipt.get("key_id")
    signed = sig is not None or (isinstance(rkid, str) and rkid != "")
    key_id_matches = bool(kid) and isinstance(rkid, str) and rkid == kid
    signature_valid = False
    why = ""
    if not signed:
        why = "unsigned receipt"
    elif sig is None:
        why = "missing signature"
    elif not key_id_matches:
        why = "unknown key_id"
    elif not isinstance(sig, str):
        why = "invalid signature"
    else:
        raw_sig = _strict_b64(sig)
        msg = bytes.fromhex(stored) if isinstance(stored, str) and _HEX64_RE.fullmatch(stored) else None
        if raw_sig is None or len(raw_sig) != 64 or msg is None or pub is None:
            why = "invalid signature"
        elif ed25519.verify(pub, msg, raw_sig, backend=backend):
            signature_valid = True
        else:
            why = "invalid signature"
    if not error and why:
        error = why
    return VerifyResult(hash_valid, signature_valid, key_id_matches, signed, kid, computed, error)
