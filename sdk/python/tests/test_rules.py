"""Redaction paths, retry classification and outcomes, with their vectors."""
import copy
import time
import unittest
from email.utils import formatdate

from tests import util
from svc_sdk import errors, outcome, redact, retry
from svc_sdk.errors import InvalidRedactionPath


class Redaction(unittest.TestCase):
    P = {"card": "4242", "user": {"name": "ann", "ssn": "1", "tags": ["a", "b", {"k": 1}]}, "list": [1, 2, 3], "x.y": 5}

    def test_paths(self):
        cases = [
            (["parameters.card"], {"user": self.P["user"], "list": [1, 2, 3], "x.y": 5}),
            (["parameters"], {}),
            (["parameters.user.ssn"], {**self.P, "user": {"name": "ann", "tags": ["a", "b", {"k": 1}]}}),
            (["parameters.list.1"], {**self.P, "list": [1, None, 3]}),
            (["parameters.user.tags.2.k"], {**self.P, "user": {**self.P["user"], "tags": ["a", "b", {}]}}),
            (["parameters.list.01"], self.P),   # not a canonical index
            (["parameters.list.-1"], self.P),
            (["parameters.list.+1"], self.P),
            (["parameters.list.3"], self.P),    # out of range
            (["parameters.missing.deep"], self.P),
            (["parameters.card.x"], self.P),    # through a string
            (["parameters.x.y"], self.P),       # segments split on dots: "x" then "y"
            (["parameters.user", "parameters.user.ssn"], {"card": "4242", "list": [1, 2, 3], "x.y": 5}),
            (["parameters", "parameters.card"], {}),
            ([], self.P),
        ]
        for fields, want in cases:
            with self.subTest(fields=fields):
                before = copy.deepcopy(self.P)
                self.assertEqual(redact(self.P, fields), want)
                self.assertEqual(self.P, before, "the caller's dict was mutated")

    def test_mask(self):
        self.assertEqual(redact({"a": 1, "l": [1, 2]}, ["parameters.a", "parameters.l.0"], mask="***"), {"a": "***", "l": ["***", 2]})

    def test_index_with_a_trailing_newline_is_no_index(self):
        # "$" matches before a final newline and int() strips it: "1\n" is a
        # key, not an array index, so it names nothing in a list.
        self.assertEqual(redact({"l": [1, 2]}, ["parameters.l.1\n"]), {"l": [1, 2]})

    def test_bad_paths(self):
        for fields in (["card"], [""], ["parameters."], ["parameters..a"], ["parameters.a."], ["Parameters.a"], [None], [5],
                       ["parametersx"], "parameters.a"):
            with self.subTest(fields=fields):
                with self.assertRaises(InvalidRedactionPath) as cm:
                    redact({"a": 1}, fields)
                self.assertEqual(cm.exception.error_code, "invalid_redaction_path")

    def test_bad_path_changes_nothing_even_after_good_ones(self):
        p = {"a": 1, "b": 2}
        with self.assertRaises(InvalidRedactionPath):
            redact(p, ["parameters.a", "bad"])
        self.assertEqual(p, {"a": 1, "b": 2})

    def test_redaction_json_vectors(self):
        for v in util.load_vectors("testdata/sdk/redaction.json"):
            with self.subTest(v["name"]):
                if "error" in v and v["error"]:
                    with self.assertRaises(InvalidRedactionPath):
                        redact(v["parameters"], v["redacted_fields"])
                    self.assertEqual(v["error"], "invalid_redaction_path")
                else:
                    self.assertEqual(redact(v["parameters"], v["redacted_fields"]), v["parameters_after"])


class Retry(unittest.TestCase):
    def test_classification(self):
        for status in (None, 429, 502, 503, 504):
            self.assertTrue(retry.should_retry(status), status)
        for status in (200, 400, 401, 403, 404, 405, 408, 409, 415, 422, 500, 501):
            self.assertFalse(retry.should_retry(status), status)
        self.assertIs(retry.error_class(401), errors.SvcAuthError)
        self.assertIs(retry.error_class(403), errors.SvcAuthError)
        for s in (None, 429, 502, 503, 504):
            self.assertIs(retry.error_class(s), errors.SvcUnavailable)
        for s in (400, 404, 409, 422, 500):
            self.assertIs(retry.error_class(s), errors.SvcError)

    def test_retry_after(self):
        self.assertEqual(retry.retry_after_seconds("3"), 3.0)
        self.assertEqual(retry.retry_after_seconds(" 0 "), 0.0)
        now = time.time()
        self.assertAlmostEqual(retry.retry_after_seconds(formatdate(now + 10, usegmt=True), now=now), 10, delta=1)
        self.assertEqual(retry.retry_after_seconds(formatdate(now - 10, usegmt=True), now=now), 0.0)
        for bad in (None, "", "soon", "-1", "1.5"):
            self.assertIsNone(retry.retry_after_seconds(bad), bad)

    def test_backoff_full_jitter(self):
        for attempt in range(6):
            for _ in range(50):
                d = retry.backoff(attempt)
                self.assertGreaterEqual(d, 0)
                self.assertLessEqual(d, min(1.0, 0.1 * 2**attempt))

    def test_envelope(self):
        e = errors.SvcError.from_response(409, {"kind": "Status", "reason": "Conflict", "message": "busy",
                                                "details": {"error": "request_in_flight"}, "code": 409})
        self.assertEqual((e.status, e.reason, e.error_code, e.message), (409, "Conflict", "request_in_flight", "HTTP 409 Conflict (request_in_flight): busy"))

    def test_retry_json_vectors(self):
        names = {"SvcError": errors.SvcError, "SvcAuthError": errors.SvcAuthError, "SvcUnavailable": errors.SvcUnavailable}
        for v in util.load_vectors("testdata/sdk/retry.json"):
            with self.subTest(v["name"]):
                self.assertEqual(retry.should_retry(v["status"], v.get("body"), v.get("headers")), v["retry"])
                want = v.get("error")
                if want:
                    self.assertIn(want, names, f"unknown error class {want}")
                    self.assertIs(retry.error_class(v["status"]), names[want])


class Outcomes(unittest.TestCase):
    def test_cases(self):
        cases = [
            ({"decision": "allow"}, "run"),
            ({"decision": "redact", "redacted_fields": ["parameters.a"]}, "run_redacted"),
            ({"decision": "redact", "redacted_fields": []}, "run_redacted"),
            ({"decision": "redact", "redacted_fields": ["a"]}, "deny"),
            ({"decision": "redact", "redacted_fields": "parameters.a"}, "deny"),
            ({"decision": "require_approval", "approval_id": "x"}, "wait_approval"),
            ({"decision": "require_approval"}, "deny"),
            ({"decision": "require_approval", "approval_id": ""}, "deny"),
            ({"decision": "deny"}, "deny"),
            ({"decision": "quarantine"}, "deny"),
            ({"decision": "ALLOW"}, "deny"),
            ({"decision": "maybe"}, "deny"),
            ({}, "deny"),
            (None, "deny"),
            ([], "deny"),
        ]
        for body, want in cases:
            with self.subTest(body=body):
                self.assertEqual(outcome(body), want)

    def test_outcomes_json_vectors(self):
        for v in util.load_vectors("testdata/sdk/outcomes.json"):
            with self.subTest(v["name"]):
                self.assertEqual(outcome(v["response"]), v["outcome"])


if __name__ == "__main__":
    unittest.main()
