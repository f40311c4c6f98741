"""Ed25519 (RFC 8032 7.1 vectors, both backends), receipts (svc-receipt-1) and request signing."""
import base64
import hashlib
import hmac
import os
import unittest
from unittest import mock

from tests import util  # noqa: F401
from svc_sdk import ed25519, receiptlog, receipts, signing
from svc_sdk.canonical import jcs

# RFC 8032 section 7.1: TEST 1, TEST 2, TEST 3 and TEST SHA(abc).
RFC8032 = [
    ("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
     "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
     "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"),
    ("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
     "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
     "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"),
    ("c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
     "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
     "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"),
    ("833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42",
     "ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf", hashlib.sha512(b"abc").hexdigest(),
     "dc2a4459e7369633a52b1bf277839a00201009a3efbf3ecb69bea2186c26b58909351fc9ac90b3ecfdfbc7c66431e0303dca179c138ac17ad9bef1177331a704"),
]

BACKENDS = ["pure"] + (["cryptography"] if ed25519.HAVE_CRYPTOGRAPHY else [])


class Ed25519RFC8032(unittest.TestCase):
    def test_public_key_and_signature(self):
        for sk, pk, msg, sig in RFC8032:
            with self.subTest(pk=pk[:8]):
                self.assertEqual(ed25519.public_key_from_seed(bytes.fromhex(sk)).hex(), pk)
                self.assertEqual(ed25519.sign(bytes.fromhex(sk), bytes.fromhex(msg)).hex(), sig)

    def test_verify_both_backends(self):
        for backend in BACKENDS:
            for sk, pk, msg, sig in RFC8032:
                with self.subTest(backend=backend, pk=pk[:8]):
                    pub, m, s = bytes.fromhex(pk), bytes.fromhex(msg), bytes.fromhex(sig)
                    self.assertTrue(ed25519.verify(pub, m, s, backend=backend))
                    self.assertFalse(ed25519.verify(pub, m + b"x", s, backend=backend))
                    bad = bytearray(s)
                    bad[5] ^= 1
                    self.assertFalse(ed25519.verify(pub, m, bytes(bad), backend=backend))
                    bad = bytearray(s)
                    bad[40] ^= 1
                    self.assertFalse(ed25519.verify(pub, m, bytes(bad), backend=backend))
                    self.assertFalse(ed25519.verify(pub[:31], m, s, backend=backend))
                    self.assertFalse(ed25519.verify(pub, m, s[:63], backend=backend))

    def test_pure_refuses_s_not_below_L(self):
        sk, pk, msg, sig = RFC8032[0]
        s = int.from_bytes(bytes.fromhex(sig)[32:], "little") + ed25519._L  # same point, non-canonical S
        forged = bytes.fromhex(sig)[:32] + s.to_bytes(32, "little")
        self.assertFalse(ed25519.verify(bytes.fromhex(pk), b"", forged, backend="pure"))

    def test_pure_refuses_non_canonical_point(self):
        y = ed25519._p + 1  # y >= p
        self.assertIsNone(ed25519._decompress(y.to_bytes(32, "little")))

    def test_forced_by_environment(self):
        with mock.patch.dict(os.environ, {"SVC_SDK_PURE_ED25519": "1"}):
            self.assertEqual(ed25519.backend_name(), "pure")
        with mock.patch.dict(os.environ, {"SVC_SDK_PURE_ED25519": ""}):
            self.assertEqual(ed25519.backend_name(), "cryptography" if ed25519.HAVE_CRYPTOGRAPHY else "pure")


SEED = bytes(range(32))
PUB = ed25519.public_key_from_seed(SEED)
PUB_B64 = base64.b64encode(PUB).decode()
OTHER_PUB_B64 = base64.b64encode(ed25519.public_key_from_seed(bytes(32))).decode()


def make_receipt(seq=1, prev="", signed=True, **over):
    r = {
        "receipt_id": "0190c3a2-7f00-7000-8000-000000000001",
        "tenant_id": "0b6f7d1e-4c1a-4f5e-9a59-2f3c8d1e7a10",
        "decision_id": "0190c3a2-7f00-7000-8000-000000000002",
        "seq": seq,
        "action_hash": "b50ccc693e34b9806f94c976f47257df3f17249ea67717084967c26aa71ac42b",
        "decision": "allow",
        "prev_receipt_hash": prev,
        "key_id": receipts.key_id(PUB) if signed else "",
        "created_at": "2026-01-02T03:04:05.123456Z",
    }
    r.update(over)
    r["receipt_hash"] = hashlib.sha256(jcs({k: r[k] for k in receipts.HASHED_FIELDS}).encode()).hexdigest()
    r["signature"] = base64.b64encode(ed25519.sign(SEED, bytes.fromhex(r["receipt_hash"]))).decode() if signed else None
    return r


class Receipts(unittest.TestCase):
    def check(self, r, key=PUB_B64):
        """verify() under every backend, which must agree."""
        results = {b: receipts.verify(r, key, backend=b) for b in BACKENDS}
        first = results[BACKENDS[0]]
        for b, res in results.items():
            self.assertEqual((res.hash_valid, res.signature_valid), (first.hash_valid, first.signature_valid), b)
        with mock.patch.dict(os.environ, {"SVC_SDK_PURE_ED25519": "1"}):
            forced = receipts.verify(r, key)
        self.assertEqual((forced.hash_valid, forced.signature_valid), (first.hash_valid, first.signature_valid))
        return first

    def test_key_id(self):
        self.assertEqual(receipts.key_id(PUB), hashlib.sha256(PUB).hexdigest()[:16])
        self.assertEqual(len(receipts.key_id(PUB)), 16)

    def test_hashed_object_matches_go_layout(self):
        r = make_receipt()
        text = jcs({k: r[k] for k in receipts.HASHED_FIELDS})
        self.assertTrue(text.startswith('{"action_hash":"b50c'))
        self.assertIn(',"seq":1,"tenant_id":', text)
        self.assertEqual(receipts.receipt_hash(r), r["receipt_hash"])

    def test_valid_signed(self):
        res = self.check(make_receipt(seq=7, prev="ab" * 32))
        self.assertTrue(res.hash_valid and res.signature_valid and res.key_id_matches and res.signed and res.valid)

    def test_field_tampered(self):
        r = make_receipt()
        r["decision"] = "deny"
        res = self.check(r)
        self.assertFalse(res.hash_valid)
        self.assertTrue(res.signature_valid)  # the signature covers the stored hash, which is intact
        self.assertEqual(res.error, "receipt_hash mismatch")

    def test_stored_hash_with_a_trailing_newline(self):
        # "$" in a Python pattern matches before a final newline and
        # bytes.fromhex skips whitespace: the signature must not verify over
        # a receipt_hash that is not exactly 64 lower-case hex (the Go and
        # TypeScript SDKs refuse it too).
        r = make_receipt()
        r["receipt_hash"] += "\n"
        res = self.check(r)
        self.assertFalse(res.hash_valid)
        self.assertFalse(res.signature_valid)
        self.assertFalse(res.valid)

    def test_hash_rewritten(self):
        r = make_receipt()
        r["decision"] = "deny"
        r["receipt_hash"] = receipts.receipt_hash(r)
        res = self.check(r)
        self.assertTrue(res.hash_valid)
        self.assertFalse(res.signature_valid)

    def test_wrong_key(self):
        res = self.check(make_receipt(), OTHER_PUB_B64)
        self.assertTrue(res.hash_valid)
        self.assertFalse(res.signature_valid)
        self.assertFalse(res.key_id_matches)
        self.assertEqual(res.error, "unknown key_id")

    def test_unsigned(self):
        res = self.check(make_receipt(signed=False))
        self.assertTrue(res.hash_valid)
        self.assertFalse(res.signature_valid)
        self.assertFalse(res.signed)

    def test_signature_stripped(self):
        r = make_receipt()
        r["signature"] = None
        res = self.check(r)
        self.assertTrue(res.hash_valid)
        self.assertFalse(res.signature_valid)
        self.assertEqual(res.error, "missing signature")

    def test_key_id_stripped(self):
        r = make_receipt()
        r["key_id"] = ""
        res = self.check(r)
        self.assertFalse(res.hash_valid)
        self.assertFalse(res.signature_valid)

    def test_bad_signature_text(self):
        for sig in ("not base64!", base64.b64encode(b"x" * 63).decode(), "", 5):
            r = make_receipt()
            r["signature"] = sig
            with self.subTest(sig=sig):
                self.assertFalse(self.check(r).signature_valid)

    def test_seq_range_and_types(self):
        self.assertFalse(self.check(make_receipt(seq=2**53 + 1)).hash_valid)
        self.assertTrue(self.check(make_receipt(seq=2**53)).hash_valid)
        r = make_receipt()
        r["seq"] = "1"
        self.assertFalse(self.check(r).hash_valid)
        r = make_receipt()
        r["seq"] = 1.0
        self.assertFalse(self.check(r).hash_valid)

    def test_bad_public_key(self):
        res = receipts.verify(make_receipt(), "AAAA")
        self.assertTrue(res.hash_valid)
        self.assertFalse(res.signature_valid)

    def test_context_hash_svc_receipt_2(self):
        ctx = "c" * 64
        r = make_receipt()
        h1 = receipts.receipt_hash(r)
        r2 = dict(r, context_hash=ctx)
        fields = {k: r[k] for k in receipts.HASHED_FIELDS}
        self.assertEqual(receipts.receipt_hash(r2), hashlib.sha256(jcs(dict(fields, context_hash=ctx)).encode()).hexdigest())
        self.assertNotEqual(receipts.receipt_hash(r2), h1)
        self.assertEqual((receipts.SCHEME, receipts.SCHEME_CONTEXT), ("svc-receipt-1", "svc-receipt-2"))
        # Added to a svc-receipt-1 receipt, it breaks the hash, not the signature.
        res = self.check(r2)
        self.assertFalse(res.hash_valid)
        self.assertTrue(res.signature_valid)
        # Absent, null and "" are svc-receipt-1.
        for v in (None, ""):
            with self.subTest(context_hash=v):
                res = self.check(dict(r, context_hash=v))
                self.assertTrue(res.hash_valid and res.signature_valid)
        # Another type or form: the hash is invalid, with the reason.
        for v in (1, True, [ctx], {}, ctx.upper(), ctx[:63], ctx + "c", ctx + "\n", " " + ctx):
            with self.subTest(context_hash=v):
                with self.assertRaises(ValueError):
                    receipts.receipt_hash(dict(r, context_hash=v))
                res = self.check(dict(r, context_hash=v))
                self.assertFalse(res.hash_valid)
                self.assertIn("context_hash", res.error)

    def test_receipts_json_vectors(self):
        vs = util.load_vectors("testdata/sdk/receipts.json")
        for v in vs:
            with self.subTest(v.get("name")):
                res = self.check(v["receipt"], v["public_key"])
                self.assertEqual(res.hash_valid, v["hash_valid"])
                self.assertEqual(res.signature_valid, bool(v["signature_valid"]))


class Inclusion(unittest.TestCase):
    def test_inclusion_json_vectors_both_backends(self):
        vs = util.load_vectors("testdata/sdk/inclusion.json")
        self.assertGreater(len(vs), 20)
        for backend in BACKENDS:
            for v in vs:
                with self.subTest(backend=backend, name=v.get("name")):
                    res = receiptlog.verify_inclusion(v["receipt"], v["proof"], v["checkpoint"], v["public_key"], backend=backend)
                    self.assertEqual(res.checkpoint_valid, v["checkpoint_valid"], res.error)
                    self.assertEqual(res.proof_valid, v["proof_valid"], res.error)
                    self.assertEqual(res.valid, v["checkpoint_valid"] and v["proof_valid"])

    def test_a_checkpoint_is_read_as_a_signed_note(self):
        v = util.load_vectors("testdata/sdk/inclusion.json")[0]
        cp = receiptlog.parse_checkpoint(v["checkpoint"])
        self.assertEqual(cp.origin, "svc/" + v["receipt"]["tenant_id"])
        self.assertEqual(cp.size, 7)
        self.assertEqual(len(cp.root), 32)
        self.assertEqual(cp.signatures[0][0], cp.origin)
        for bad in ("", "svc\n7\n", v["checkpoint"].replace("\u2014", "-"), v["checkpoint"][:-1]):
            with self.subTest(bad=bad[:20]):
                with self.assertRaises(ValueError):
                    receiptlog.parse_checkpoint(bad)


class Signing(unittest.TestCase):
    def test_sign(self):
        key = base64.b64encode(b"k" * 32).decode()
        body = b'{"tool_call":{"tool":"t","action":"a"}}'
        self.assertEqual(signing.sign(body, key), "sha256=" + hmac.new(b"k" * 32, body, hashlib.sha256).hexdigest())

    def test_key_is_decoded_bytes(self):
        key = base64.b64encode(bytes(range(40))).decode()
        self.assertEqual(signing.sign(b"x", key), "sha256=" + hmac.new(bytes(range(40)), b"x", hashlib.sha256).hexdigest())

    def test_bad_key(self):
        for k in ("not base64!", "", "YQ"):
            with self.assertRaises(ValueError):
                signing.sign(b"x", k)

    def test_signing_json_vectors(self):
        for v in util.load_vectors("testdata/sdk/signing.json"):
            with self.subTest(v["name"]):
                self.assertEqual(signing.sign(v["body"].encode("utf-8"), v["signing_key"]), v["header"])


if __name__ == "__main__":
    unittest.main()
