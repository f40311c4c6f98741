"""Which answers are retried, how long to wait, and which error a final answer is.

* Retried: network errors and timeouts (``status`` None), 429 (after
  ``Retry-After``, seconds or an HTTP-date, when it fits in the remaining
  deadline), 502, 503, 504. Nothing else: 400, 401, 403, 404, 409, 415, 422,
  500... are final on the first answer.
* Backoff between attempts: full jitter, ``uniform(0, min(cap, base * 2**n))``,
  or the server's ``Retry-After`` when it sent one.
* Final errors: 401/403 -> SvcAuthError; 429/502/503/504 (after retries) and
  network failures -> SvcUnavailable; any other non-2xx -> SvcError.
"""

from __future__ import annotations

import email.utils
import random
import time
from typing import Any, Mapping, Optional, Type

from .errors import SvcAuthError, SvcError, SvcUnavailable

__all__ = ["RETRY_STATUSES", "should_retry", "error_class", "retry_after_seconds", "backoff", "header"]

RETRY_STATUSES = frozenset({429, 502, 503, 504})


def header(headers: Optional[Mapping[str, Any]], name: str) -> Optional[str]:
    """Case-insensitive header lookup in a mapping (or an email.message)."""
    if not headers:
        return None
    getter = getattr(headers, "get", None)
    if getter is not None and not isinstance(headers, dict):
        v = getter(name)
        if v is not None:
            return str(v)
    lname = name.lower()
    for k, v in (headers.items() if hasattr(headers, "items") else []):
        if str(k).lower() == lname:
            if isinstance(v, (list, tuple)):
                v = v[0] if v else None
            return None if v is None else str(v)
    return None


def should_retry(status: Optional[int], body: Any = None, headers: Optional[Mapping[str, Any]] = None) -> bool:
    """Whether an answer (``status`` None: no answer, a network error or
    timeout) is worth another attempt of the same request."""
    if status is None:
        return True
    return status in RETRY_STATUSES


def error_class(status: Optional[int]) -> Type[SvcError]:
    """The error a final non-2xx answer (or no answer) raises."""
    if status is None or status in RETRY_STATUSES:
        return SvcUnavailable
    if status in (401, 403):
        return SvcAuthError
    return SvcError


def retry_after_seconds(value: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """Seconds to wait from a Retry-After value (delta-seconds or HTTP-date);
    None when absent or malformed."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    if value.isdigit():
        return float(int(value))
    try:
        dt = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if dt is None:
        return None
    if dt.tzinfo is None:
        return None
    now = time.time() if now is None else now
    return max(0.0, dt.timestamp() - now)


def backoff(attempt: int, base: float = 0.1, cap: float = 1.0, rng: Optional[random.Random] = None) -> float:
    """Full jitter: a uniform delay in [0, min(cap, base * 2**attempt)]."""
    r = rng or random
    return r.uniform(0.0, min(cap, base * (2 ** max(0, attempt))))
