"""The SDK conformance protocol of CONTRACT 14: one JSON object a line in, one
JSON object a line out, in order. ``sdk/python/conformance-driver`` runs
:func:`main`.

Answers are written as ASCII JSON (non-ASCII characters escaped), so no reader
splits a line on U+2028 or U+0085.

Operations: canonicalize, action_hash, sign, redact, verify_receipt, verify_inclusion, retry,
outcome, and the live operations of sdk/README.md (``client``, ``authorize``,
``run``, ``guard``, ``wait_for_approval``, ``get_receipt``,
``get_receipt_public_key``, ``verify_decision_receipt``, ``stats``; module
``_live``). Any line that cannot be handled answers ``{"error": "<code>"}``:
``invalid_json`` (not JSON, not UTF-8, or a blank line), ``duplicate_key``,
``invalid_input`` (not an object, a field of the wrong type), ``unknown_op``,
``missing_field``, ``invalid_value`` (no canonical form), ``invalid_key``,
``invalid_redaction_path``, ``internal_error``.
"""

from __future__ import annotations

import json
import sys
from typing import IO, Any, Mapping

from . import _live, canonical, receiptlog, receipts, retry, signing
from .client import outcome
from .errors import InvalidRedactionPath
from .redaction import redact

__all__ = ["handle", "handle_line", "main"]


class _Fail(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


def _need(req: Mapping[str, Any], name: str) -> Any:
    if name not in req:
        raise _Fail("missing_field")
    return req[name]


def _canonicalize(req: Mapping[str, Any]) -> dict[str, Any]:
    value = _need(req, "value")
    try:
        return {"canonical": canonical.jcs(value)}
    except canonical.CanonicalError:
        raise _Fail("invalid_value") from None


def _action_hash(req: Mapping[str, Any]) -> dict[str, Any]:
    tc = _need(req, "tool_call")
    if not isinstance(tc, Mapping):
        raise _Fail("invalid_input")
    try:
        return {"action_hash": canonical.action_hash(tc)}
    except canonical.CanonicalError:
        raise _Fail("invalid_value") from None


def _sign(req: Mapping[str, Any]) -> dict[str, Any]:
    body, key = _need(req, "body"), _need(req, "signing_key")
    if not isinstance(body, str) or not isinstance(key, str):
        raise _Fail("invalid_input")
    try:
        raw = body.encode("utf-8")
    except UnicodeEncodeError:
        raise _Fail("invalid_value") from None
    try:
        return {"header": signing.sign(raw, key)}
    except (ValueError, UnicodeEncodeError):
        raise _Fail("invalid_key") from None


def _redact(req: Mapping[str, Any]) -> dict[str, Any]:
    params, fields = _need(req, "parameters"), _need(req, "redacted_fields")
    if params is not None and not isinstance(params, Mapping):
        raise _Fail("invalid_input")
    try:
        return {"parameters": redact(params, fields)}
    except InvalidRedactionPath:
        raise _Fail("invalid_redaction_path") from None


def _verify_receipt(req: Mapping[str, Any]) -> dict[str, Any]:
    receipt, key = _need(req, "receipt"), _need(req, "public_key")
    if not isinstance(receipt, Mapping) or not isinstance(key, str):
        raise _Fail("invalid_input")
    r = receipts.verify(receipt, key)
    return {"hash_valid": r.hash_valid, "signature_valid": r.signature_valid}


def _verify_inclusion(req: Mapping[str, Any]) -> dict[str, Any]:
    receipt, proof = _need(req, "receipt"), _need(req, "proof")
    checkpoint, key = _need(req, "checkpoint"), _need(req, "public_key")
    if not isinstance(receipt, Mapping) or not isinstance(proof, Mapping) or not isinstance(checkpoint, str) or not isinstance(key, str):
        raise _Fail("invalid_input")
    r = receiptlog.verify_inclusion(receipt, proof, checkpoint, key)
    return {"checkpoint_valid": r.checkpoint_valid, "proof_valid": r.proof_valid}


def _retry(req: Mapping[str, Any]) -> dict[str, Any]:
    status = _need(req, "status")
    if status is not None and (isinstance(status, bool) or not isinstance(status, int)):
        raise _Fail("invalid_input")
    headers = req.get("headers")
    if headers is not None and not isinstance(headers, Mapping):
        raise _Fail("invalid_input")
    return {"retry": retry.should_retry(status, req.get("body"), headers)}


def _outcome(req: Mapping[str, Any]) -> dict[str, Any]:
    return {"outcome": outcome(_need(req, "response"))}


_OPS = {
    "canonicalize": _canonicalize,
    "action_hash": _action_hash,
    "sign": _sign,
    "redact": _redact,
    "verify_receipt": _verify_receipt,
    "verify_inclusion": _verify_inclusion,
    "retry": _retry,
    "outcome": _outcome,
}


def handle(req: Any, session: Any = None) -> dict[str, Any]:
    """Answer one parsed request object. ``session`` (a ``_live.Session``)
    answers the live operations of sdk/README.md; without it they are
    ``unknown_op``."""
    if not isinstance(req, Mapping):
        return {"error": "invalid_input"}
    op = req.get("op")
    if session is not None and isinstance(op, str) and op in _live.LIVE_OPS:
        try:
            return session.handle(op, req)
        except Exception:  # never stop early
            return {"error": "internal_error"}
    fn = _OPS.get(op) if isinstance(op, str) else None
    if fn is None:
        return {"error": "unknown_op"}
    try:
        return fn(req)
    except _Fail as f:
        return {"error": f.code}
    except Exception:  # never stop early
        return {"error": "internal_error"}


def handle_line(line: bytes | str, session: Any = None) -> dict[str, Any]:
    """Answer one input line (JSON text, parsed strictly: duplicate member
    names refused, numbers kept as ECMAScript doubles are)."""
    if isinstance(line, (bytes, bytearray)):
        try:
            line = bytes(line).decode("utf-8")
        except UnicodeDecodeError:
            return {"error": "invalid_json"}
    text = line.strip("\r\n")
    if not text.strip():
        return {"error": "invalid_json"}
    try:
        req = canonical.parse(text)
    except canonical.CanonicalError as e:
        return {"error": "duplicate_key" if "duplicate" in str(e) else "invalid_json"}
    except Exception:
        return {"error": "invalid_json"}
    return handle(req, session)


def _encode(answer: dict[str, Any]) -> bytes:
    try:
        return json.dumps(answer, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"
    except (ValueError, TypeError, UnicodeEncodeError):
        return b'{"error":"internal_error"}\n'


def main(stdin: IO[bytes] | None = None, stdout: IO[bytes] | None = None) -> int:
    """Read lines until EOF, answer each, flush each; exit status 0."""
    inp = stdin if stdin is not None else sys.stdin.buffer
    out = stdout if stdout is not None else sys.stdout.buffer
    session = _live.Session()
    while True:
        line = inp.readline()
        if not line:
            break
        out.write(_encode(handle_line(line, session)))
        out.flush()
    return 0
