"""The conformance driver as a subprocess: the line protocol of CONTRACT 14."""
import json
import os
import subprocess
import sys
import unittest

from tests import util

DRIVER = str(util.SDK / "conformance-driver")


def run_driver(lines: bytes, env=None):
    p = subprocess.run([DRIVER], input=lines, capture_output=True, timeout=60, env=env, cwd="/")
    return p.returncode, [json.loads(x) for x in p.stdout.split(b"\n") if x], p.stderr


class Driver(unittest.TestCase):
    def test_executable(self):
        self.assertTrue(os.access(DRIVER, os.X_OK))

    def test_lines(self):
        key = "a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U="
        inp = [
            b'{"op":"canonicalize","value":{"b":[1E21,-0.0,0.000001],"a":"\\u20ac"}}',
            b"not json at all",
            b'{"op":"frobnicate"}',
            b'{"op":"action_hash","tool_call":{"tool":" GitHub ","action":"Merge","resource":null,"parameters":{}}}',
            b'{"op":"sign","body":"{\\"a\\":1}","signing_key":"' + key.encode() + b'"}',
            b'{"op":"sign","body":"x","signing_key":"***"}',
            b'{"op":"redact","parameters":{"a":{"b":1},"c":2},"redacted_fields":["parameters.a.b"]}',
            b'{"op":"redact","parameters":{"a":1},"redacted_fields":["a"]}',
            b'{"op":"retry","status":429,"body":null,"headers":{"Retry-After":"1"}}',
            b'{"op":"retry","status":400,"body":{"reason":"BadRequest"},"headers":{}}',
            b'{"op":"outcome","response":{"decision":"require_approval"}}',
            b'{"op":"verify_receipt","receipt":{},"public_key":"AAAA"}',
            b'{"op":"canonicalize"}',
            b'{"op":"canonicalize","value":1,"value":2}',
            b'[1,2]',
            b'',
            b'\xff\xfe',
            b'{"op":"canonicalize","value":123456789012345678901234567890}',
            b'{"op":"canonicalize","value":1e999}',
            b'{"op":"canonicalize","value":"\\ud800"}',
        ]
        rc, out, err = run_driver(b"\n".join(inp) + b"\n")
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(out), len(inp))
        self.assertEqual(out[0], {"canonical": '{"a":"\u20ac","b":[1e+21,0,0.000001]}'})
        self.assertIn("error", out[1])
        self.assertEqual(out[2], {"error": "unknown_op"})
        from svc_sdk.canonical import action_hash
        self.assertEqual(out[3], {"action_hash": action_hash({"tool": "github", "action": "merge", "resource": None, "parameters": {}})})
        self.assertTrue(out[4]["header"].startswith("sha256="))
        self.assertIn("error", out[5])
        self.assertEqual(out[6], {"parameters": {"a": {}, "c": 2}})
        self.assertEqual(out[7], {"error": "invalid_redaction_path"})
        self.assertEqual(out[8], {"retry": True})
        self.assertEqual(out[9], {"retry": False})
        self.assertEqual(out[10], {"outcome": "deny"})
        self.assertEqual(out[11], {"hash_valid": False, "signature_valid": False})
        self.assertEqual(out[12], {"error": "missing_field"})
        for i in (13, 14, 15, 16, 18, 19):
            self.assertIn("error", out[i], i)
        self.assertEqual(out[17], {"canonical": "1.2345678901234568e+29"})

    def test_empty_input(self):
        rc, out, _ = run_driver(b"")
        self.assertEqual((rc, out), (0, []))

    def test_no_trailing_newline(self):
        rc, out, _ = run_driver(b'{"op":"canonicalize","value":[]}')
        self.assertEqual((rc, out), (0, [{"canonical": "[]"}]))

    def test_streams_line_by_line(self):
        # Each answer is flushed before the next line is read.
        p = subprocess.Popen([DRIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            for i in range(3):
                p.stdin.write(b'{"op":"canonicalize","value":%d}\n' % i)
                p.stdin.flush()
                self.assertEqual(json.loads(p.stdout.readline()), {"canonical": str(i)})
        finally:
            p.stdin.close()
            self.assertEqual(p.wait(timeout=30), 0)

    def test_all_vectors_through_driver(self):
        """Every testdata vector that exists, through the subprocess."""
        cases = []
        for v in util.load_vectors("testdata/jcs/vectors.json"):
            cases.append(({"op": "canonicalize", "value": v["input"]}, {"canonical": v["canonical"]}))
        for v in util.load_vectors("testdata/jcs/action_hash.json"):
            cases.append(({"op": "action_hash", "tool_call": v["tool_call"]}, {"action_hash": v["action_hash"]}))
        from svc_sdk import canonical
        lines = b"".join(canonical.jcs(c[0]).encode("utf-8") + b"\n" for c in cases)
        rc, out, err = run_driver(lines)
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(out), len(cases))
        for (inp, want), got in zip(cases, out):
            self.assertEqual(got, want, inp)


if __name__ == "__main__":
    unittest.main()
