"""Canonical JSON (RFC 8785, JCS), SPEC 4.2 rule 7 and the svc-jcs-1 action hash.

These bytes are a wire contract shared with the gateway (``canonical/doc.go``
in the svc repository) and every other SDK; ``testdata/jcs/`` holds the
vectors they are all checked against.

* :func:`jcs` writes a JSON value as RFC 8785 canonical text: object members
  sorted by the UTF-16 code units of their names, no insignificant white
  space, numbers as ECMAScript's ``Number.prototype.toString`` writes an IEEE
  754 double (so integers beyond 2**53 round, ``-0`` is ``0``, ``1e21`` is
  ``1e+21``), strings with the minimal escaping of ``JSON.stringify``.
  NaN, infinities, lone surrogates and non-string member names are refused
  (:class:`CanonicalError`).
* :func:`parse` reads JSON text strictly (I-JSON): duplicate member names at
  any depth, ``NaN``/``Infinity`` and numbers beyond a double's range are
  refused. :func:`canonicalize_text` is ``jcs(parse(text))``.
* :func:`normalize_identifier` is rule 7 exactly as the gateway applies it.
* :func:`action_hash` is svc-jcs-1: lower-case hex SHA-256 of the JCS bytes of
  ``{"tool","action","resource","parameters"}`` after rule 7 on tool and action.

Unicode versions: Python's ``unicodedata`` (14.0 on Python 3.11) and the
gateway's Go tables (15.0) agree on NFC and on per-code-point lower-casing of
every code point assigned in 14.0. A code point that the running Python does
not know (category ``Cn``) may normalize differently on the server, so
:func:`identifier_is_certain` reports it and the client then trusts the
server's ``action_hash`` (and reports the difference) instead of refusing.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata
from typing import Any, Mapping

__all__ = [
    "SCHEME",
    "CanonicalError",
    "jcs",
    "jcs_bytes",
    "parse",
    "canonicalize_text",
    "normalize_identifier",
    "identifier_is_certain",
    "tool_call_is_certain",
    "action_bytes",
    "action_hash",
    "number_to_text",
    "UNICODE_VERSION",
]

SCHEME = "svc-jcs-1"
UNICODE_VERSION = unicodedata.unidata_version


class CanonicalError(ValueError):
    """A value or text that has no RFC 8785 canonical form."""


# --- numbers ---------------------------------------------------------------


def number_to_text(value: float | int) -> str:
    """Format a number as ECMAScript's Number.prototype.toString does for the
    IEEE 754 double nearest to ``value`` (RFC 8785 section 3.2.2.3)."""
    if isinstance(value, bool):
        raise CanonicalError("a boolean is not a number")
    if isinstance(value, int):
        try:
            f = float(value)  # correctly rounded, half to even
        except OverflowError:
            raise CanonicalError("number out of the range of a double") from None
    elif isinstance(value, float):
        f = value
    else:
        raise CanonicalError(f"not a number: {type(value).__name__}")
    if math.isnan(f) or math.isinf(f):
        raise CanonicalError("NaN and infinities have no JSON form")
    if f == 0:
        return "0"  # -0 too
    sign = "-" if f < 0 else ""
    # repr gives the shortest digits that round-trip, the nearest such when
    # several are equally short: the digits ECMAScript uses.
    r = repr(abs(f))
    mant, _, exp_s = r.partition("e")
    exp = int(exp_s) if exp_s else 0
    if "." in mant:
        point = mant.index(".")
        digits = mant[:point] + mant[point + 1 :]
    else:
        point = len(mant)
        digits = mant
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0") or "0"
    k = len(digits)
    n = point + exp  # value = 0.digits * 10**n
    if k <= n <= 21:
        out = digits + "0" * (n - k)
    elif 0 < n <= 21:
        out = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        out = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        es = ("+" if e >= 0 else "-") + str(abs(e))
        out = digits + "e" + es if k == 1 else digits[0] + "." + digits[1:] + "e" + es
    return sign + out


# --- strings ---------------------------------------------------------------

_ESCAPE_RE = re.compile(r'[\x00-\x1f"\\]')
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _escape(m: re.Match[str]) -> str:
    c = m.group(0)
    return _ESCAPES.get(c) or "\\u%04x" % ord(c)


def _string(s: str) -> str:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise CanonicalError("a string holds a lone surrogate, which has no UTF-8 form") from None
    return '"' + _ESCAPE_RE.sub(_escape, s) + '"'


def _utf16_key(s: str) -> bytes:
    return s.encode("utf-16-be", "surrogatepass")


# --- values ----------------------------------------------------------------


def _write(v: Any, out: list[str]) -> None:
    if v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, str):
        out.append(_string(v))
    elif isinstance(v, (int, float)):
        out.append(number_to_text(v))
    elif isinstance(v, Mapping):
        for k in v:
            if not isinstance(k, str):
                raise CanonicalError(f"object member names must be strings, not {type(k).__name__}")
        out.append("{")
        first = True
        for k in sorted(v, key=_utf16_key):
            if not first:
                out.append(",")
            first = False
            out.append(_string(k))
            out.append(":")
            _write(v[k], out)
        out.append("}")
    elif isinstance(v, (list, tuple)):
        out.append("[")
        for i, e in enumerate(v):
            if i:
                out.append(",")
            _write(e, out)
        out.append("]")
    else:
        raise CanonicalError(f"{type(v).__name__} has no JSON form")


def jcs(value: Any) -> str:
    """The RFC 8785 canonical text of ``value`` (dict, list, str, int, float,
    bool or None, nested)."""
    out: list[str] = []
    try:
        _write(value, out)
    except RecursionError:
        raise CanonicalError("nesting too deep") from None
    return "".join(out)


def jcs_bytes(value: Any) -> bytes:
    """:func:`jcs` as UTF-8 bytes (what is hashed)."""
    return jcs(value).encode("utf-8")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d: dict[str, Any] = {}
    for k, v in pairs:
        if k in d:
            raise CanonicalError(f"duplicate member name {k!r}")
        d[k] = v
    return d


def _finite_float(text: str) -> float:
    f = float(text)
    if math.isinf(f):
        raise CanonicalError(f"number {text} is out of the range of a double")
    return f


def _no_constant(name: str) -> Any:
    raise CanonicalError(f"{name} is not JSON")


def _checked_int(text: str) -> int:
    i = int(text)
    try:
        float(i)
    except OverflowError:
        raise CanonicalError(f"number {text[:40]} is out of the range of a double") from None
    return i


def parse(text: str | bytes) -> Any:
    """Parse JSON text strictly: duplicate member names, NaN, infinities,
    numbers beyond a double's range and invalid UTF-8 are refused. Integers
    stay ``int`` (exact) and are rounded to a double only when written."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise CanonicalError("JSON text is not valid UTF-8") from None
    try:
        return json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_float=_finite_float,
            parse_int=_checked_int,
            parse_constant=_no_constant,
        )
    except CanonicalError:
        raise
    except (ValueError, RecursionError) as e:
        raise CanonicalError(f"not JSON: {e}") from None


def canonicalize_text(text: str | bytes) -> str:
    """``jcs(parse(text))``."""
    return jcs(parse(text))


# --- rule 7 ----------------------------------------------------------------

# Unicode White_Space, the set Go's strings.TrimSpace trims. str.strip()
# would also trim U+001C..U+001F, which are not White_Space.
WHITE_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)

_HEX = frozenset(b"0123456789abcdefABCDEF")

# Code points whose Python lower() is not a single code point; Go's simple
# mapping (UnicodeData.txt) gives these.
_SIMPLE_LOWER = {"\u0130": "i"}


def _path_unescape(s: str) -> str:
    """Percent-decode once as Go's url.PathUnescape does ("+" stays "+"); the
    input is returned unchanged when an escape is malformed or the decoded
    bytes are not valid UTF-8."""
    if "%" not in s:
        return s
    b = s.encode("utf-8", "surrogatepass")
    out = bytearray()
    i, n = 0, len(b)
    while i < n:
        c = b[i]
        if c == 0x25:
            if i + 2 >= n or b[i + 1] not in _HEX or b[i + 2] not in _HEX:
                return s
            out.append(int(b[i + 1 : i + 3], 16))
            i += 3
        else:
            out.append(c)
            i += 1
    try:
        return bytes(out).decode("utf-8")
    except UnicodeDecodeError:
        return s


def _lower(s: str) -> str:
    if s.isascii():
        return s.lower()
    parts = []
    for c in s:
        low = c.lower()
        if len(low) != 1:
            low = _SIMPLE_LOWER.get(c, c)
        parts.append(low)
    return "".join(parts)


def normalize_identifier(s: str) -> str:
    """SPEC 4.2 rule 7 on a tool or action key: percent-decode once (strict),
    NFC, trim Unicode White_Space, lower-case code point by code point with
    the simple case mappings (U+0130 becomes "i"; no final-sigma rule)."""
    if not isinstance(s, str):
        raise CanonicalError(f"an identifier must be a string, not {type(s).__name__}")
    s = _path_unescape(s)
    s = unicodedata.normalize("NFC", s)
    s = s.strip(WHITE_SPACE)
    return _lower(s)


def identifier_is_certain(s: str) -> bool:
    """False when ``s`` (or its percent-decoded form) holds a code point that
    this Python's Unicode tables do not assign: its normalization may differ
    from the gateway's, so a local hash over it is not authoritative."""
    if not isinstance(s, str) or (s.isascii() and "%" not in s):
        return True
    for text in (s, _path_unescape(s)):
        for c in text:
            if ord(c) > 0x7F and unicodedata.category(c) == "Cn":
                return False
    return True


def tool_call_is_certain(tool_call: Mapping[str, Any]) -> bool:
    """Whether :func:`action_hash` of ``tool_call`` is known to equal the
    gateway's (see :func:`identifier_is_certain`)."""
    return identifier_is_certain(tool_call.get("tool", "")) and identifier_is_certain(tool_call.get("action", ""))


# --- svc-jcs-1 -------------------------------------------------------------


def _hashed_object(tool_call: Mapping[str, Any], normalize: bool = True) -> dict[str, Any]:
    if not isinstance(tool_call, Mapping):
        raise CanonicalError("tool_call must be an object")
    tool, action = tool_call.get("tool"), tool_call.get("action")
    if not isinstance(tool, str) or not isinstance(action, str):
        raise CanonicalError("tool_call.tool and tool_call.action must be strings")
    resource = tool_call.get("resource")
    if resource is not None and not isinstance(resource, str):
        raise CanonicalError("tool_call.resource must be a string or null")
    params = tool_call.get("parameters")
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise CanonicalError("tool_call.parameters must be an object")
    if normalize:
        tool, action = normalize_identifier(tool), normalize_identifier(action)
    return {"tool": tool, "action": action, "resource": resource, "parameters": params}


def action_bytes(tool_call: Mapping[str, Any], *, normalized: bool = False) -> bytes:
    """The canonical bytes that :func:`action_hash` hashes. With
    ``normalized=True`` tool and action are taken as already normalized (an
    approval's stored tool_call): rule 7 is not applied twice."""
    return jcs_bytes(_hashed_object(tool_call, normalize=not normalized))


def action_hash(tool_call: Mapping[str, Any], *, normalized: bool = False) -> str:
    """svc-jcs-1: lower-case hex SHA-256 of :func:`action_bytes`."""
    return hashlib.sha256(action_bytes(tool_call, normalized=normalized)).hexdigest()
