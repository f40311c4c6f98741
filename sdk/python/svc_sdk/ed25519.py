"""Ed25519 signature verification for receipts.

Uses the ``cryptography`` package when it imports (Debian ships it as
``python3-cryptography``); otherwise a pure-Python implementation of RFC 8032
section 5.1 (slow, a few milliseconds a signature, but receipts are checked
one call at a time). Set ``SVC_SDK_PURE_ED25519=1`` in the environment, or pass
``backend="pure"``, to force the pure-Python path.

The pure path decodes points strictly (RFC 8032 5.1.3: y below p), refuses
S >= L, and checks the cofactored equation [8][S]B = [8]R + [8][k]A. The
gateway checks with ZIP-215's rules; the two agree on every signature the
gateway makes.
"""

from __future__ import annotations

import hashlib
import os
from typing import Optional

__all__ = ["verify", "public_key_from_seed", "sign", "backend_name", "HAVE_CRYPTOGRAPHY"]

try:  # pragma: no cover - depends on the machine
    from cryptography.exceptions import InvalidSignature as _InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey as _PK

    HAVE_CRYPTOGRAPHY = True
except Exception:  # pragma: no cover
    HAVE_CRYPTOGRAPHY = False

_p = 2**255 - 19
_L = 2**252 + 27742317777372353535851937790883648493
_d = (-121665 * pow(121666, _p - 2, _p)) % _p
_SQRT_M1 = pow(2, (_p - 1) // 4, _p)

# Points in extended coordinates (X, Y, Z, T), x = X/Z, y = Y/Z, xy = T/Z.
_Point = tuple


def _add(P: _Point, Q: _Point) -> _Point:
    A = (P[1] - P[0]) * (Q[1] - Q[0]) % _p
    B = (P[1] + P[0]) * (Q[1] + Q[0]) % _p
    C = 2 * P[3] * Q[3] * _d % _p
    D = 2 * P[2] * Q[2] % _p
    E, F, G, H = B - A, D - C, D + C, B + A
    return (E * F % _p, G * H % _p, F * G % _p, E * H % _p)


def _double(P: _Point) -> _Point:
    return _add(P, P)


def _mul(s: int, P: _Point) -> _Point:
    Q: _Point = (0, 1, 1, 0)
    while s > 0:
        if s & 1:
            Q = _add(Q, P)
        P = _double(P)
        s >>= 1
    return Q


def _equal(P: _Point, Q: _Point) -> bool:
    return (P[0] * Q[2] - Q[0] * P[2]) % _p == 0 and (P[1] * Q[2] - Q[1] * P[2]) % _p == 0


def _recover_x(y: int, sign: int) -> Optional[int]:
    if y >= _p:
        return None
    x2 = (y * y - 1) * pow((_d * y * y + 1) % _p, _p - 2, _p) % _p
    if x2 == 0:
        return None if sign else 0
    x = pow(x2, (_p + 3) // 8, _p)
    if (x * x - x2) % _p != 0:
        x = x * _SQRT_M1 % _p
    if (x * x - x2) % _p != 0:
        return None
    if (x & 1) != sign:
        x = _p - x
    return x


_gy = 4 * pow(5, _p - 2, _p) % _p
_gx = _recover_x(_gy, 0)
assert _gx is not None
_G: _Point = (_gx, _gy, 1, _gx * _gy % _p)


def _decompress(b: bytes) -> Optional[_Point]:
    if len(b) != 32:
        return None
    y = int.from_bytes(b, "little")
    sign = y >> 255
    y &= (1 << 255) - 1
    x = _recover_x(y, sign)
    if x is None:
        return None
    return (x, y, 1, x * y % _p)


def _compress(P: _Point) -> bytes:
    zinv = pow(P[2], _p - 2, _p)
    x, y = P[0] * zinv % _p, P[1] * zinv % _p
    return (y | ((x & 1) << 255)).to_bytes(32, "little")


def _sha512_int(data: bytes) -> int:
    return int.from_bytes(hashlib.sha512(data).digest(), "little")


def _expand(seed: bytes) -> tuple[int, bytes]:
    if len(seed) != 32:
        raise ValueError("an Ed25519 seed is 32 bytes")
    h = hashlib.sha512(seed).digest()
    a = int.from_bytes(h[:32], "little")
    a &= (1 << 254) - 8
    a |= 1 << 254
    return a, h[32:]


def public_key_from_seed(seed: bytes) -> bytes:
    """The 32-byte public key of a 32-byte seed (pure Python)."""
    a, _ = _expand(seed)
    return _compress(_mul(a, _G))


def sign(seed: bytes, msg: bytes) -> bytes:
    """Pure-Python RFC 8032 signing (used by the tests to make receipts)."""
    a, prefix = _expand(seed)
    A = _compress(_mul(a, _G))
    r = _sha512_int(prefix + msg) % _L
    R = _compress(_mul(r, _G))
    k = _sha512_int(R + A + msg) % _L
    s = (r + k * a) % _L
    return R + s.to_bytes(32, "little")


def _verify_pure(public_key: bytes, msg: bytes, signature: bytes) -> bool:
    if len(public_key) != 32 or len(signature) != 64:
        return False
    A = _decompress(public_key)
    R = _decompress(signature[:32])
    if A is None or R is None:
        return False
    s = int.from_bytes(signature[32:], "little")
    if s >= _L:
        return False
    k = _sha512_int(signature[:32] + public_key + msg) % _L
    left = _mul(8 * s, _G)
    right = _mul(8, _add(R, _mul(k, A)))
    return _equal(left, right)


def backend_name(backend: Optional[str] = None) -> str:
    """"cryptography" or "pure": which implementation :func:`verify` uses."""
    if backend in ("pure", "cryptography"):
        return backend if (backend == "pure" or HAVE_CRYPTOGRAPHY) else "pure"
    if os.environ.get("SVC_SDK_PURE_ED25519", "") not in ("", "0", "false") or not HAVE_CRYPTOGRAPHY:
        return "pure"
    return "cryptography"


def verify(public_key: bytes, msg: bytes, signature: bytes, backend: Optional[str] = None) -> bool:
    """Whether ``signature`` is a valid Ed25519 signature of ``msg``."""
    if backend_name(backend) == "pure":
        return _verify_pure(bytes(public_key), bytes(msg), bytes(signature))
    if len(public_key) != 32 or len(signature) != 64:
        return False
    try:
        _PK.from_public_bytes(bytes(public_key)).verify(bytes(signature), bytes(msg))
        return True
    except _InvalidSignature:
        return False
    except ValueError:
        return False
