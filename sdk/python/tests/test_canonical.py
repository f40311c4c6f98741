import hashlib
import unicodedata
import unittest

from tests.util import load_vectors
from svc_sdk import canonical
from svc_sdk.canonical import CanonicalError, action_hash, jcs, normalize_identifier, number_to_text, parse


class JCSVectors(unittest.TestCase):
    def test_vectors_json(self):
        vs = load_vectors("testdata/jcs/vectors.json")
        self.assertGreaterEqual(len(vs), 52)
        for v in vs:
            with self.subTest(v["name"]):
                got = jcs(v["input"])
                self.assertEqual(got, v["canonical"])
                self.assertEqual(hashlib.sha256(got.encode("utf-8")).hexdigest(), v["sha256"])

    def test_action_hash_json(self):
        vs = load_vectors("testdata/jcs/action_hash.json")
        self.assertGreaterEqual(len(vs), 28)
        for v in vs:
            with self.subTest(v["name"]):
                self.assertEqual(canonical.action_bytes(v["tool_call"]).decode("utf-8"), v["normalized"])
                self.assertEqual(action_hash(v["tool_call"]), v["action_hash"])

    def test_action_hash_unicode_json(self):
        vs = load_vectors("testdata/sdk/action_hash_unicode.json")
        for v in vs:
            with self.subTest(v["name"]):
                got = action_hash(v["tool_call"])
                if got == v["action_hash"]:
                    continue
                # A mismatch is allowed only where this Python's Unicode tables
                # cannot know the answer, and the client must then say so.
                self.assertTrue(v.get("unicode_sensitive"), f"{v['name']}: {got} != {v['action_hash']}")
                self.assertFalse(canonical.tool_call_is_certain(v["tool_call"]),
                                 f"{v['name']}: hash differs but the SDK thinks it is certain")


class Numbers(unittest.TestCase):
    def test_es_forms(self):
        cases = {
            0.0: "0", -0.0: "0", 1.0: "1", -1.5: "-1.5", 1e21: "1e+21", 1e20: "100000000000000000000",
            999999999999999900000.0: "999999999999999900000", 1e-7: "1e-7", 1e-6: "0.000001",
            1.5e-7: "1.5e-7", 123456789012345680000.0: "123456789012345680000", 5e-324: "5e-324",
            1.7976931348623157e308: "1.7976931348623157e+308", 0.1: "0.1", 100.0: "100", 1.25e25: "1.25e+25",
            2.0**53: "9007199254740992", 333333333.3333333: "333333333.3333333",
        }
        for f, want in cases.items():
            with self.subTest(f):
                self.assertEqual(number_to_text(f), want)

    def test_ints_round_as_doubles(self):
        self.assertEqual(number_to_text(2**53 + 1), "9007199254740992")
        self.assertEqual(number_to_text(10**21), "1e+21")
        self.assertEqual(number_to_text(-(2**68)), "-295147905179352830000")
        with self.assertRaises(CanonicalError):
            number_to_text(10**400)

    def test_refuses_nan_inf(self):
        for f in (float("nan"), float("inf"), float("-inf")):
            with self.assertRaises(CanonicalError):
                jcs({"x": f})


class Strings(unittest.TestCase):
    def test_escaping(self):
        self.assertEqual(jcs("\u0000\u001f\b\t\n\f\r\"\\/\u007f\u2028<>&"), '"\\u0000\\u001f\\b\\t\\n\\f\\r\\"\\\\/\u007f\u2028<>&"')

    def test_lone_surrogate_refused(self):
        with self.assertRaises(CanonicalError):
            jcs("\ud800")
        with self.assertRaises(CanonicalError):
            jcs({"\udc00": 1})
        with self.assertRaises(CanonicalError):
            jcs(parse('"\\ud800"'))

    def test_utf16_sort(self):
        # U+10000 (UTF-16 D800 DC00) sorts before U+E000; code point order says otherwise.
        self.assertEqual(jcs({"\ue000": 1, "\U00010000": 2, "a": 3}), '{"a":3,"\U00010000":2,"\ue000":1}')

    def test_non_string_keys_refused(self):
        with self.assertRaises(CanonicalError):
            jcs({1: "a"})

    def test_other_types_refused(self):
        with self.assertRaises(CanonicalError):
            jcs({"a": object()})
        with self.assertRaises(CanonicalError):
            jcs({"a": b"bytes"})


class Parsing(unittest.TestCase):
    def test_duplicates_refused_at_any_depth(self):
        for text in ('{"a":1,"a":2}', '[{"x":{"b":1,"b":1}}]'):
            with self.assertRaises(CanonicalError):
                parse(text)

    def test_constants_and_range_refused(self):
        for text in ("NaN", "[Infinity]", "-Infinity", "1e400", "-1e999", "1" + "0" * 400):
            with self.assertRaises(CanonicalError, msg=text):
                parse(text)

    def test_invalid_utf8_refused(self):
        with self.assertRaises(CanonicalError):
            parse(b'"\xff"')

    def test_canonicalize_text(self):
        self.assertEqual(canonical.canonicalize_text('{"b": 1.50, "a": [1E2, -0]}'), '{"a":[100,0],"b":1.5}')


class Rule7(unittest.TestCase):
    def test_cases(self):
        cases = [
            ("GitHub", "github"),
            ("  Deploy\t", "deploy"),
            ("%47it%48ub", "github"),
            ("a+b", "a+b"),            # + stays +
            ("%zz", "%zz"),            # malformed escape: input kept
            ("%ZZ%41", "%zz%41"),      # one malformed escape keeps all
            ("%4", "%4"),
            ("%FF", "%ff"),            # not UTF-8 once decoded: kept
            ("%C3%A9", "\u00e9"),
            ("%2541", "%41"),          # decoded once only
            ("\u0130STANBUL", "istanbul"),   # U+0130 -> i, no combining dot
            ("\u03a3\u0391\u03a3", "\u03c3\u03b1\u03c3"),  # no final sigma
            ("e\u0301", "\u00e9"),     # NFC
            ("\u0085x\u00a0", "x"),    # NEL and NBSP are White_Space
            ("\u3000x\u2029", "x"),
            ("\u001cx\u001f", "\u001cx\u001f"),  # not White_Space: str.strip() would trim them
            ("\ufeffx", "\ufeffx"),    # BOM is not White_Space
            ("\u212a", "k"),           # KELVIN SIGN lower-cases to k
            ("\u1e9e", "\u00df"),      # capital sharp s
        ]
        for raw, want in cases:
            with self.subTest(raw=raw):
                self.assertEqual(normalize_identifier(raw), want)

    def test_every_code_point_lower_is_single(self):
        # The per-code-point mapping never produces more than one code point.
        for cp in range(0x110000):
            if 0xD800 <= cp <= 0xDFFF:
                continue
            c = chr(cp)
            low = normalize_identifier.__globals__["_lower"](c)
            self.assertEqual(len(low), 1, hex(cp))

    def test_only_identifiers_normalized(self):
        a = action_hash({"tool": "GitHub", "action": "Merge", "resource": "Acme/API", "parameters": {"K": "V "}})
        b = action_hash({"tool": "github", "action": "merge", "resource": "Acme/API", "parameters": {"K": "V "}})
        self.assertEqual(a, b)
        c = action_hash({"tool": "github", "action": "merge", "resource": "acme/api", "parameters": {"K": "V "}})
        self.assertNotEqual(a, c)

    def test_missing_resource_and_parameters(self):
        self.assertEqual(canonical.action_bytes({"tool": "t", "action": "a"}), b'{"action":"a","parameters":{},"resource":null,"tool":"t"}')

    def test_bad_tool_calls(self):
        for tc in ({"tool": 1, "action": "a"}, {"tool": "t", "action": "a", "resource": 5}, {"tool": "t", "action": "a", "parameters": []}):
            with self.assertRaises(CanonicalError):
                action_hash(tc)

    def test_certainty(self):
        self.assertTrue(canonical.identifier_is_certain("github"))
        self.assertTrue(canonical.identifier_is_certain("d\u00e9ploy"))
        unassigned = next(chr(cp) for cp in range(0x0870, 0x10FFFF) if unicodedata.category(chr(cp)) == "Cn")
        self.assertFalse(canonical.identifier_is_certain("tool" + unassigned))
        escaped = "".join("%%%02X" % b for b in unassigned.encode("utf-8"))
        self.assertFalse(canonical.identifier_is_certain("tool" + escaped))
        self.assertFalse(canonical.tool_call_is_certain({"tool": "x", "action": unassigned}))


if __name__ == "__main__":
    unittest.main()
