"""Shared helpers of the Python SDK tests."""
import os
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
SDK = HERE.parent
REPO = SDK.parent.parent  # sdk/python/tests -> repository root
if str(SDK) not in sys.path:
    sys.path.insert(0, str(SDK))

from svc_sdk import canonical  # noqa: E402


def load_vectors(rel: str):
    """Parse a vector file of the repository (strict JSON). A file that does
    not exist yet is skipped loudly, unless SVC_SDK_REQUIRE_VECTORS=1."""
    path = REPO / rel
    if not path.exists():
        msg = f"VECTOR FILE MISSING: {rel} does not exist (yet); its tests are SKIPPED"
        if os.environ.get("SVC_SDK_REQUIRE_VECTORS") == "1":
            raise AssertionError(msg)
        print(f"\n*** {msg} ***", file=sys.stderr, flush=True)
        raise unittest.SkipTest(msg)
    data = canonical.parse(path.read_bytes())
    if not isinstance(data, list) or not data:
        raise AssertionError(f"{rel}: expected a non-empty JSON array")
    return data
