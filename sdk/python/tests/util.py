"""Shared helpers of the Python SDK tests."""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SDK = HERE.parent
REPO = SDK.parent.parent  # sdk/python/tests -> repository root
if str(SDK) not in sys.path:
    sys.path.insert(0, str(SDK))

from svc_sdk import canonical  # noqa: E402


def load_vectors(rel: str):
    """Parse a vector file of the repository (strict JSON). The files are
    part of the repository: a missing one fails its tests."""
    path = REPO / rel
    if not path.exists():
        raise AssertionError(f"VECTOR FILE MISSING: {rel} does not exist")
    data = canonical.parse(path.read_bytes())
    if not isinstance(data, list) or not data:
        raise AssertionError(f"{rel}: expected a non-empty JSON array")
    return data
