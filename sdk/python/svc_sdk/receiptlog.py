"""Inclusion of a receipt in the gateway's receipt log (CONTRACT §17).

Each tenant's receipts, in ``seq`` order, are the leaves of an RFC 6962
Merkle tree: leaf ``seq - 1`` is SHA-256 of a 0x00 byte and the 32 bytes of
the receipt's ``receipt_hash``. The gateway signs checkpoints of the tree
(C2SP ``tlog-checkpoint`` signed notes: origin, tree size, base64 root,
then signature lines) with the receipt key, and serves each receipt's
inclusion proof (``GET /v2/receipts/:receipt_id/inclusion``:
``leaf_index``, ``tree_size``, base64 ``hashes``).

:func:`verify_inclusion` checks both with the receipt key the SDK pins, so
no other key needs trusting: the note verifier key of the log is the
receipt key named as the checkpoint's origin (C2SP ``signed-note``: key
hash = the first 4 bytes of SHA-256 of ``<origin>\\n``, 0x01 and the 32-byte
key). Other signature lines, such as witnesses' cosignatures, are ignored.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from . import ed25519
from .receipts import _strict_b64, decode_public_key, receipt_hash

__all__ = ["InclusionResult", "verify_inclusion", "Checkpoint", "parse_checkpoint", "note_key_hash"]

_EM_DASH = "\u2014 "
_SIZE_RE = re.compile(r"0|[1-9][0-9]{0,18}")
_HEX64_RE = re.compile(r"[0-9a-f]{64}")
_MAX_PROOF = 63


@dataclass(frozen=True)
class Checkpoint:
    """A parsed checkpoint: its head and its signature lines (name, key
    hash, signature bytes), and the signed text."""

    origin: str
    size: int
    root: bytes
    text: bytes
    signatures: tuple[tuple[str, int, bytes], ...]


@dataclass(frozen=True)
class InclusionResult:
    """The outcome of :func:`verify_inclusion`; ``valid`` is both checks."""

    checkpoint_valid: bool
    proof_valid: bool
    origin: str
    tree_size: int
    error: str

    @property
    def valid(self) -> bool:
        return self.checkpoint_valid and self.proof_valid


def parse_checkpoint(signed: str | bytes) -> Checkpoint:
    """Parse a signed checkpoint note without checking its signatures
    (ValueError when it is no well-formed note or checkpoint)."""
    msg = signed.encode("utf-8") if isinstance(signed, str) else bytes(signed)
    try:
        msg.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("the note is not UTF-8") from None
    if not msg.endswith(b"\n"):
        raise ValueError("the note does not end in a newline")
    split = msg.rfind(b"\n\n")
    if split < 0:
        raise ValueError("the note has no signature")
    text, sig_block = msg[: split + 1], msg[split + 2 :]
    sigs = []
    for line in sig_block.decode("utf-8").split("\n")[:-1]:
        if not line.startswith(_EM_DASH):
            raise ValueError("malformed signature line")
        name, sep, b64 = line[len(_EM_DASH) :].partition(" ")
        raw = _strict_b64(b64) if sep else None
        if not name or " " in b64 or raw is None or len(raw) < 5:
            raise ValueError("malformed signature line")
        sigs.append((name, int.from_bytes(raw[:4], "big"), raw[4:]))
    if not sigs:
        raise ValueError("the note has no signature")
    lines = text.decode("utf-8").split("\n")
    if len(lines) < 4 or not lines[0] or not _SIZE_RE.fullmatch(lines[1]):
        raise ValueError("not a checkpoint: origin, size and root lines expected")
    root = _strict_b64(lines[2])
    if root is None or len(root) != 32:
        raise ValueError("the checkpoint's root is not a base64 SHA-256 hash")
    return Checkpoint(lines[0], int(lines[1]), root, text, tuple(sigs))


def note_key_hash(name: str, public_key: bytes) -> int:
    """The key hash of an Ed25519 note key (C2SP signed-note)."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8") + b"\n\x01" + public_key).digest()[:4], "big")


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _root_from_inclusion(index: int, size: int, leaf: bytes, proof: list[bytes]) -> Optional[bytes]:
    """RFC 9162 section 2.1.3.2: the root the proof leads to, or None."""
    if index < 0 or index >= size:
        return None
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            r = _node(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = _node(r, p)
        fn >>= 1
        sn >>= 1
    return r if sn == 0 else None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def verify_inclusion(
    receipt: Mapping[str, Any],
    proof: Mapping[str, Any],
    checkpoint: str | bytes,
    public_key: str | bytes,
    backend: Optional[str] = None,
) -> InclusionResult:
    """Check that ``receipt`` is in the log ``checkpoint`` signs, by ``proof``.

    ``checkpoint_valid``: the checkpoint is of the receipt's tenant's log (its
    origin ends in "/" and the receipt's ``tenant_id``) and carries a
    signature by ``public_key`` (the receipt key, standard base64 or 32
    bytes), named as its origin, that verifies. ``proof_valid``: the receipt
    hashes to its ``receipt_hash``, the proof is of leaf ``seq - 1`` in a
    tree of the checkpoint's size, and its hashes lead from the receipt's
    leaf to the checkpoint's root, whether or not the signature verifies.
    """
    try:
        cp = parse_checkpoint(checkpoint)
    except ValueError as e:
        return InclusionResult(False, False, "", 0, str(e))
    errors: list[str] = []
    checkpoint_valid = False
    try:
        pub: Optional[bytes] = decode_public_key(public_key)
    except ValueError:
        pub = None
    tenant = receipt.get("tenant_id") if isinstance(receipt, Mapping) else None
    if pub is None:
        errors.append("no valid receipt key")
    elif not isinstance(tenant, str) or not cp.origin.endswith("/" + tenant):
        errors.append("the checkpoint is not of the receipt's tenant's log")
    else:
        want = note_key_hash(cp.origin, pub)
        for name, key_hash, sig in cp.signatures:
            if name == cp.origin and key_hash == want and len(sig) == 64 and ed25519.verify(pub, cp.text, sig, backend=backend):
                checkpoint_valid = True
                break
        if not checkpoint_valid:
            errors.append("the checkpoint carries no valid signature by the receipt key")
    proof_valid = _proof_valid(receipt, proof, cp, errors)
    return InclusionResult(checkpoint_valid, proof_valid, cp.origin, cp.size, "; ".join(errors))


def _proof_valid(receipt: Any, proof: Any, cp: Checkpoint, errors: list[str]) -> bool:
    if not isinstance(receipt, Mapping) or not isinstance(proof, Mapping):
        errors.append("the receipt and the proof are objects")
        return False
    try:
        computed = receipt_hash(receipt)
    except ValueError as e:
        errors.append(str(e))
        return False
    stored, seq = receipt.get("receipt_hash"), receipt.get("seq")
    if computed != stored or not _is_int(seq):
        errors.append("receipt_hash mismatch")
        return False
    index, size, hashes = proof.get("leaf_index"), proof.get("tree_size"), proof.get("hashes")
    if not _is_int(index) or not _is_int(size) or not isinstance(hashes, list) or len(hashes) > _MAX_PROOF:
        errors.append("malformed proof")
        return False
    if size != cp.size or index != seq - 1:
        errors.append(f"the proof is of leaf {index} in a tree of {size}; the receipt is leaf {seq - 1}, the checkpoint's tree {cp.size}")
        return False
    path = []
    for h in hashes:
        raw = _strict_b64(h) if isinstance(h, str) else None
        if raw is None or len(raw) != 32:
            errors.append("a proof hash is not a base64 SHA-256 hash")
            return False
        path.append(raw)
    leaf = hashlib.sha256(b"\x00" + bytes.fromhex(stored)).digest()
    if _root_from_inclusion(index, size, leaf, path) != cp.root:
        errors.append("the proof does not lead to the checkpoint's root")
        return False
    return True
