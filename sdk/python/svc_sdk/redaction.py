"""Applying a ``redact`` decision's ``redacted_fields`` to the parameters.

Path semantics (shared by every SDK; ``testdata/sdk/redaction.json``):

* ``parameters`` alone empties the parameters to ``{}``.
* ``parameters.`` followed by ``.``-separated segments walks objects by exact
  key; on an array, a canonical decimal index (digits, no sign, no leading
  zero) selects an element.
* The last segment deletes the key, or sets the array element to null (with
  ``mask``: sets the value to ``mask`` instead).
* A path that does not resolve changes nothing. Paths apply in order.
* A path that does not start with ``parameters``/``parameters.``, an empty
  path or one with an empty segment raises :class:`InvalidRedactionPath`
  (fail closed: the tool does not run).

The caller's dict is never mutated: the result is a deep copy.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Iterable, Mapping, Optional

from .errors import InvalidRedactionPath

__all__ = ["redact", "parse_path"]

_INDEX_RE = re.compile(r"0|[1-9][0-9]*")  # with fullmatch: no trailing newline
_NO_MASK = object()


def parse_path(path: Any) -> list[str]:
    """The segments after ``parameters`` ([] for ``parameters`` itself)."""
    if not isinstance(path, str) or path == "":
        raise InvalidRedactionPath(f"redaction path {path!r} is not a non-empty string")
    if path == "parameters":
        return []
    if not path.startswith("parameters."):
        raise InvalidRedactionPath(f"redaction path {path!r} does not start with 'parameters.'")
    segments = path[len("parameters.") :].split(".")
    if any(s == "" for s in segments):
        raise InvalidRedactionPath(f"redaction path {path!r} has an empty segment")
    return segments


def _index(seg: str, arr: list[Any]) -> Optional[int]:
    if not _INDEX_RE.fullmatch(seg):
        return None
    i = int(seg)
    return i if i < len(arr) else None


def redact(parameters: Optional[Mapping[str, Any]], redacted_fields: Optional[Iterable[str]], mask: Any = _NO_MASK) -> dict[str, Any]:
    """Return a deep copy of ``parameters`` with every path of
    ``redacted_fields`` removed (or masked with ``mask``)."""
    if redacted_fields is None:
        redacted_fields = []
    if isinstance(redacted_fields, (str, bytes)) or not isinstance(redacted_fields, Iterable):
        raise InvalidRedactionPath("redacted_fields must be a list of paths")
    paths = [parse_path(p) for p in redacted_fields]  # every path checked before any applies
    if parameters is None:
        out: Any = {}
    elif isinstance(parameters, Mapping):
        out = copy.deepcopy(dict(parameters))
    else:
        raise InvalidRedactionPath("parameters must be an object")
    use_mask = mask is not _NO_MASK
    for segments in paths:
        if not segments:
            out = {}
            continue
        cur: Any = out
        for seg in segments[:-1]:
            if isinstance(cur, dict):
                if seg not in cur:
                    cur = None
                    break
                cur = cur[seg]
            elif isinstance(cur, list):
                i = _index(seg, cur)
                if i is None:
                    cur = None
                    break
                cur = cur[i]
            else:
                cur = None
                break
        last = segments[-1]
        if isinstance(cur, dict):
            if last in cur:
                if use_mask:
                    cur[last] = copy.deepcopy(mask)
                else:
                    del cur[last]
        elif isinstance(cur, list):
            i = _index(last, cur)
            if i is not None:
                cur[i] = copy.deepcopy(mask) if use_mask else None
    return out
