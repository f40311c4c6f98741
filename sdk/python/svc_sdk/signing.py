"""Request signing (SPEC 4.2 rule 14, CONTRACT 13).

An agent registered with a ``signing_key`` must send
``X-Svc-Request-Signature: sha256=<hex HMAC-SHA256 of the raw body>``. The key
is the *decoded bytes* of the standard base64 ``signing_key``. Sign exactly the
bytes you send: serialize once, sign, send those bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

__all__ = ["HEADER", "sign", "decode_key"]

HEADER = "X-Svc-Request-Signature"


def decode_key(signing_key_b64: str | bytes) -> bytes:
    """Decode a standard-base64 signing key (ValueError when malformed)."""
    if isinstance(signing_key_b64, str):
        signing_key_b64 = signing_key_b64.strip().encode("ascii", "strict")
    try:
        key = base64.b64decode(signing_key_b64, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"signing key is not standard base64: {e}") from None
    if not key:
        raise ValueError("signing key is empty")
    return key


def sign(body: bytes, signing_key_b64: str | bytes) -> str:
    """``"sha256=<hex>"``: the HMAC-SHA256 of ``body`` under the decoded key."""
    if isinstance(body, str):
        body = body.encode("utf-8")
    return "sha256=" + hmac.new(decode_key(signing_key_b64), bytes(body), hashlib.sha256).hexdigest()
