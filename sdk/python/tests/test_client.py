"""Client behaviour against a scripted fake svc: retries, deadlines, signing,
pre-checks, decisions, fail-open, approvals, receipts, async."""
import asyncio
import base64
import datetime as dt
import hashlib
import hmac
import logging
import re
import socket
import threading
import time
import unittest
import warnings

from tests import util  # noqa: F401
from tests.fake import Fake, envelope, reply
from tests.test_crypto import PUB_B64, make_receipt
from svc_sdk import (ActionHashMismatch, ApprovalExpired, ApprovalRejected, ApprovalRequired, AsyncClient, Client, Denied,
                     InvalidRequest, ReceiptInvalid, SvcAuthError, SvcError, SvcUnavailable, action_hash)

KEY = base64.b64encode(b"s" * 32).decode()
TOKEN = "svc_agent_" + "x" * 43
UUID7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def rfc3339(seconds_from_now: float) -> str:
    return (dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=seconds_from_now)).isoformat().replace("+00:00", "Z")


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Base(unittest.TestCase):
    def setUp(self):
        self.fake = Fake()
        self.addCleanup(self.fake.close)
        self.log = logging.getLogger(f"svc_sdk.test.{self.id()}")
        self.log.propagate = False
        self.log.addHandler(logging.NullHandler())

    def client(self, **kw):
        kw.setdefault("signing_key", KEY)
        kw.setdefault("logger", self.log)
        c = Client(self.fake.url, TOKEN, **kw)
        self.addCleanup(c.close)
        return c

    def authorize_requests(self):
        return [r for r in self.fake.requests if r.path.endswith("/authorize")]


class Authorize(Base):
    def test_allow_and_request_shape(self):
        tc = {"tool": "GitHub", "action": "read", "resource": "acme/api", "parameters": {"n": 1}}
        self.fake.script(lambda r: reply(200, {"decision": "allow", "reason": "read_only", "decision_id": "d1",
                                              "action_hash": action_hash(tc), "receipt_id": "r1", "matched_policies": ["p"],
                                              "composite_risk_score": 3, "redacted_fields": []}))
        d = self.client().authorize("GitHub", "read", "acme/api", {"n": 1}, trace={"run_id": "run"}, environment="prod")
        self.assertTrue(d.allowed)
        self.assertEqual((d.decision, d.reason, d.decision_id, d.receipt_id, d.matched_policies, d.composite_risk_score),
                         ("allow", "read_only", "d1", "r1", ["p"], 3))
        self.assertFalse(d.hash_mismatch)
        [r] = self.authorize_requests()
        self.assertEqual((r.method, r.path), ("POST", "/v2/authorize"))
        self.assertEqual(r.headers["authorization"], "Bearer " + TOKEN)
        self.assertEqual(r.headers["content-type"], "application/json")
        body = r.json()
        self.assertEqual(body["tool_call"], tc)
        self.assertEqual(body["mutates_state"], False)
        self.assertEqual(body["trace"], {"run_id": "run"})
        self.assertEqual(body["environment"], "prod")
        self.assertRegex(body["request_id"], UUID7)
        self.assertTrue(8 <= len(body["nonce"]) <= 128)
        self.assertNotIn("dry_run", body)
        self.assertEqual(d.request_id, body["request_id"])
        self.assertEqual(r.headers["x-svc-request-signature"], "sha256=" + hmac.new(b"s" * 32, r.body, hashlib.sha256).hexdigest())
        self.assertNotIn(b" ", r.body.replace(b'"GitHub"', b""))  # compact JSON

    def test_unsigned_without_key(self):
        self.client(signing_key=None).authorize("t", "a")
        self.assertNotIn("x-svc-request-signature", self.authorize_requests()[0].headers)

    def test_retries_reuse_request_id_fresh_nonce(self):
        self.fake.script(reply(503, envelope(503, "ServiceUnavailable", "shared_state_unavailable")),
                         reply(502, b"bad gateway"),
                         reply(200, {"decision": "allow"}))
        d = self.client(retries=2).authorize("t", "a")
        self.assertEqual(d.decision, "allow")
        rs = self.authorize_requests()
        self.assertEqual(len(rs), 3)
        self.assertEqual(len({r.json()["request_id"] for r in rs}), 1)
        self.assertEqual(len({r.json()["nonce"] for r in rs}), 3)
        for r in rs:  # each attempt signed over its own exact bytes
            self.assertEqual(r.headers["x-svc-request-signature"], "sha256=" + hmac.new(b"s" * 32, r.body, hashlib.sha256).hexdigest())

    def test_given_request_id_kept(self):
        self.client().authorize("t", "a", request_id="my-id")
        self.assertEqual(self.authorize_requests()[0].json()["request_id"], "my-id")

    def test_retries_exhausted(self):
        self.fake.script(reply(503, {"decision": "deny", "reason": "audit_writer_unavailable"}))
        with self.assertRaises(SvcUnavailable) as cm:
            self.client(retries=2).authorize("t", "a")
        self.assertEqual(cm.exception.status, 503)
        self.assertEqual(len(self.authorize_requests()), 3)

    def test_never_retried(self):
        for status, reason, code, cls in ((400, "BadRequest", "invalid_json", SvcError), (404, "NotFound", "not_found", SvcError),
                                          (409, "Conflict", "request_in_flight", SvcError), (500, "InternalError", "database_unavailable", SvcError),
                                          (422, "Invalid", "", SvcError), (401, "Unauthorized", "invalid_signature", SvcAuthError)):
            with self.subTest(status=status):
                self.fake.requests.clear()
                self.fake.script(reply(status, envelope(status, reason, code, "why")))
                with self.assertRaises(cls) as cm:
                    self.client().authorize("t", "a")
                self.assertNotIsInstance(cm.exception, SvcUnavailable)
                e = cm.exception
                self.assertEqual((e.status, e.reason, e.error_code or ""), (status, reason, code))
                self.assertIn("why", e.message)
                self.assertEqual(len(self.authorize_requests()), 1)

    def test_403_is_a_deny_without_decision_id(self):
        self.fake.script(reply(403, envelope(403, "Forbidden", "FORBIDDEN", "environment not allowed for this agent")))
        c = self.client()
        d = c.authorize("t", "a", environment="prod")
        self.assertEqual((d.decision, d.decision_id, d.status, d.reason), ("deny", None, 403, "FORBIDDEN"))
        self.assertIn("environment not allowed", d.message)
        self.assertFalse(d.allowed)
        ran = []
        with self.assertRaises(Denied) as cm:
            c.run({"tool": "t", "action": "a"}, lambda: ran.append(1))
        self.assertEqual(cm.exception.decision.status, 403)
        self.assertEqual(ran, [])

    def test_retry_after_honoured(self):
        self.fake.script(reply(429, envelope(429, "TooManyRequests", "rate_limited"), {"Retry-After": "1"}), reply(200, {"decision": "allow"}))
        t0 = time.monotonic()
        d = self.client(timeout=3).authorize("t", "a")
        self.assertGreaterEqual(time.monotonic() - t0, 0.95)
        self.assertEqual(d.decision, "allow")

    def test_retry_after_http_date(self):
        when = time.time() + 2
        from email.utils import formatdate
        self.fake.script(reply(429, envelope(429, "TooManyRequests", "rate_limited"), {"Retry-After": formatdate(when, usegmt=True)}),
                         reply(200, {"decision": "allow"}))
        t0 = time.monotonic()
        self.assertEqual(self.client(timeout=4).authorize("t", "a").decision, "allow")
        self.assertGreaterEqual(time.monotonic() - t0, 0.9)

    def test_retry_after_beyond_deadline_fails_now(self):
        self.fake.script(reply(429, envelope(429, "TooManyRequests", "rate_limited"), {"Retry-After": "30"}))
        t0 = time.monotonic()
        with self.assertRaises(SvcUnavailable) as cm:
            self.client(timeout=3).authorize("t", "a")
        self.assertLess(time.monotonic() - t0, 1.0)
        self.assertEqual((cm.exception.status, cm.exception.error_code), (429, "rate_limited"))
        self.assertEqual(len(self.authorize_requests()), 1)

    def test_deadline_on_a_hung_server(self):
        self.fake.script(lambda r: (time.sleep(3), reply(200, {"decision": "allow"}))[1])
        t0 = time.monotonic()
        with self.assertRaises(SvcUnavailable):
            self.client(timeout=1.0).authorize("t", "a")
        self.assertLess(time.monotonic() - t0, 1.6)

    def test_connection_refused(self):
        c = Client(f"http://127.0.0.1:{free_port()}", TOKEN, timeout=1.5, logger=self.log)
        t0 = time.monotonic()
        with self.assertRaises(SvcUnavailable) as cm:
            c.authorize("t", "a")
        self.assertLess(time.monotonic() - t0, 1.6)
        self.assertEqual(cm.exception.error_code, "svc_unavailable")

    def test_unknown_or_missing_decision_is_deny(self):
        for body in ({"decision": "permit"}, {"reason": "x"}, {"decision": None}):
            with self.subTest(body=body):
                self.fake.script(reply(200, body))
                d = self.client().authorize("t", "a")
                self.assertEqual(d.decision, "deny")
                self.assertFalse(d.allowed)

    def test_unreadable_200_is_an_error(self):
        for raw in (b"<html>", b"[1]", b""):
            with self.subTest(raw=raw):
                self.fake.script(reply(200, raw))
                with self.assertRaises(SvcError) as cm:
                    self.client().authorize("t", "a")
                self.assertEqual(cm.exception.error_code, "unreadable_answer")

    def test_prechecks_send_nothing(self):
        c = self.client()
        cases = [
            dict(parameters={"a": "x\x00y"}), dict(parameters={"a\x00": 1}), dict(parameters={"a": float("nan")}),
            dict(parameters={"a": float("inf")}), dict(parameters={"a": "x" * (1 << 20)}), dict(parameters={"a": "\ud800"}),
            dict(parameters={"a": object()}), dict(parameters=[1]), dict(resource=5), dict(environment="p\x00"),
            dict(trace={"run_id": "\x00"}), dict(parameters={"a": 10**400}),
        ]
        for kw in cases:
            with self.subTest(kw=str(kw)[:60]):
                with self.assertRaises(InvalidRequest):
                    c.authorize("t", "a", **kw)
        for tool, action in (("", "a"), ("t", " "), ("t\x00", "a")):
            with self.assertRaises(InvalidRequest):
                c.authorize(tool, action)
        self.assertEqual(self.fake.requests, [])

    def test_keep_alive_reuse(self):
        c = self.client()
        for _ in range(5):
            c.authorize("t", "a")
        self.assertEqual(self.fake.connections, 1)

    def test_thread_safe(self):
        c = self.client()
        errs = []

        def work():
            try:
                for _ in range(10):
                    self.assertEqual(c.authorize("t", "a").decision, "allow")
            except Exception as e:  # pragma: no cover
                errs.append(e)

        ts = [threading.Thread(target=work) for _ in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(errs, [])
        self.assertEqual(len(self.authorize_requests()), 80)

    def test_deprecation_once(self):
        self.fake.script(reply(200, {"decision": "allow"}, {"Deprecation": "true", "Sunset": "Wed, 31 Dec 2026 23:59:59 GMT"}))
        c = self.client()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            c.authorize("t", "a")
            c.authorize("t", "a")
        self.assertEqual(len([x for x in w if issubclass(x.category, DeprecationWarning)]), 1)

    def test_v1_paths_and_warning(self):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            c = self.client(api_version="v1")
            c.authorize("t", "a")
        self.assertEqual(len([x for x in w if issubclass(x.category, DeprecationWarning)]), 1)
        self.assertEqual(self.authorize_requests()[0].path, "/v1/authorize")

    def test_hash_mismatch_recorded(self):
        self.fake.script(reply(200, {"decision": "allow", "action_hash": "0" * 64}))
        with self.assertLogs(self.log, "WARNING"):
            d = self.client().authorize("t", "a")
        self.assertTrue(d.hash_mismatch)
        self.assertTrue(d.hash_certain)


class FailOpen(Base):
    def down(self, **kw):
        c = Client(f"http://127.0.0.1:{free_port()}", TOKEN, timeout=0.5, logger=self.log, **kw)
        self.addCleanup(c.close)
        return c

    def test_listed_read_only_tool_runs(self):
        c = self.down(fail_open_tools=["Search", ("kb", "lookup")])
        with self.assertLogs(self.log, "WARNING") as logs:
            self.assertEqual(c.run({"tool": "search", "action": "q", "parameters": {"x": 1}}, lambda x: x + 1), 2)
            d = c.authorize("kb", "lookup")
        self.assertTrue(d.fail_open and d.allowed and d.decision_id is None)
        self.assertEqual(c.fail_open_count, 2)
        self.assertTrue(any("FAIL-OPEN" in m for m in logs.output))

    def test_mutating_or_unlisted_never_fail_open(self):
        c = self.down(fail_open_tools=["search", ("kb", "lookup")])
        ran = []
        for tc, mut in (({"tool": "search", "action": "q"}, True), ({"tool": "other", "action": "q"}, False),
                        ({"tool": "kb", "action": "delete"}, False)):
            with self.subTest(tc=tc, mut=mut):
                with self.assertRaises(SvcUnavailable):
                    c.run(tc, lambda: ran.append(1), mutates_state=mut)
        # nor does a presented approval, even for a listed read-only tool
        with self.assertRaises(SvcUnavailable):
            c.authorize("search", "q", approval_id="0190d5c2-0000-7000-8000-000000000000")
        self.assertEqual((ran, c.fail_open_count), ([], 0))

    def test_errors_other_than_unavailable_never_fail_open(self):
        self.fake.script(reply(500, envelope(500, "InternalError", "database_unavailable")))
        c = self.client(fail_open_tools=["search"])
        with self.assertRaises(SvcError):
            c.authorize("search", "q")
        self.assertEqual(c.fail_open_count, 0)


class Run(Base):
    def test_redact_and_mask(self):
        self.fake.script(reply(200, {"decision": "redact", "redacted_fields": ["parameters.card", "parameters.meta.ssn"]}))
        c = self.client()
        params = {"card": "4242", "amount": 5, "meta": {"ssn": "1", "k": 2}}
        got = c.run({"tool": "pay", "action": "charge", "parameters": params}, lambda **kw: kw)
        self.assertEqual(got, {"amount": 5, "meta": {"k": 2}})
        self.assertEqual(params["card"], "4242")
        got = c.run({"tool": "pay", "action": "charge", "parameters": params}, lambda **kw: kw, mask="[redacted]")
        self.assertEqual(got["card"], "[redacted]")

    def test_bad_redaction_path_fails_closed(self):
        self.fake.script(reply(200, {"decision": "redact", "redacted_fields": ["card"]}))
        ran = []
        with self.assertRaises(SvcError) as cm:
            self.client().run({"tool": "t", "action": "a", "parameters": {"card": 1}}, lambda **kw: ran.append(kw))
        self.assertEqual((cm.exception.error_code, ran), ("invalid_redaction_path", []))

    def test_deny_and_quarantine(self):
        for dec in ("deny", "quarantine", "bogus"):
            with self.subTest(dec):
                self.fake.script(reply(200, {"decision": dec, "reason": "nope", "decision_id": "d"}))
                ran = []
                with self.assertRaises(Denied) as cm:
                    self.client().run({"tool": "t", "action": "a"}, lambda: ran.append(1))
                self.assertEqual(ran, [])
                self.assertEqual(cm.exception.decision.decision, "deny" if dec == "bogus" else dec)

    def test_require_approval_without_wait(self):
        tc = {"tool": "t", "action": "a", "resource": None, "parameters": {}}
        self.fake.script(reply(200, {"decision": "require_approval", "approval_id": "ap1", "action_hash": action_hash(tc),
                                     "approval_expires_at": rfc3339(60)}))
        with self.assertRaises(ApprovalRequired) as cm:
            self.client().run(tc, lambda: 1, wait=False)
        self.assertEqual(cm.exception.decision.approval_id, "ap1")

    def test_require_approval_without_id_is_deny(self):
        self.fake.script(reply(200, {"decision": "require_approval"}))
        with self.assertRaises(Denied):
            self.client().run({"tool": "t", "action": "a"}, lambda: 1)

    def test_require_approval_with_foreign_hash_refused(self):
        self.fake.script(reply(200, {"decision": "require_approval", "approval_id": "ap1", "action_hash": "1" * 64}))
        with self.assertRaises(ActionHashMismatch):
            self.client().run({"tool": "t", "action": "a"}, lambda: 1)
        self.assertFalse(any("/approvals/" in r.path for r in self.fake.requests))

    def test_guard(self):
        self.fake.script(reply(200, {"decision": "allow"}))
        c = self.client()

        @c.guard("codehost", "merge", resource=lambda a: f"{a['repo']}#{a['pr']}", mutates_state=True)
        def merge(repo, pr, method="squash", **extra):
            return (repo, pr, method, extra)

        self.assertEqual(merge("acme/api", 42, flag=True), ("acme/api", 42, "squash", {"flag": True}))
        body = self.authorize_requests()[0].json()
        self.assertEqual(body["tool_call"], {"tool": "codehost", "action": "merge", "resource": "acme/api#42",
                                             "parameters": {"repo": "acme/api", "pr": 42, "method": "squash", "flag": True}})
        self.assertTrue(body["mutates_state"])


class Approvals(Base):
    TC = {"tool": "Pay", "action": "charge", "resource": "cus_1", "parameters": {"amount": 100}}

    def approval(self, status="PENDING", params=None, ahash=None, **over):
        tc = {"tool": "pay", "action": "charge", "resource": "cus_1", "parameters": params if params is not None else {"amount": 100}}
        a = {"approval_id": "ap1", "decision_id": "d1", "agent_id": "ag", "tool_call": tc,
             "action_hash": ahash or action_hash({**self.TC, "parameters": tc["parameters"]}), "status": status,
             "expires_at": rfc3339(60)}
        a.update(over)
        return a

    def serve(self, approvals, decisions):
        """GET approvals answer from the list in turn; authorize from decisions in turn."""
        approvals, decisions = list(approvals), list(decisions)

        def h(req):
            if "/approvals/" in req.path:
                a = approvals.pop(0) if len(approvals) > 1 else approvals[0]
                return a(req) if callable(a) else (a if isinstance(a, tuple) else reply(200, a))
            d = decisions.pop(0) if len(decisions) > 1 else decisions[0]
            return reply(200, d)

        self.fake.handler = h

    def first(self):
        return {"decision": "require_approval", "approval_id": "ap1", "decision_id": "d1",
                "action_hash": action_hash(self.TC), "approval_expires_at": rfc3339(60)}

    def test_approved_then_presented(self):
        self.serve([self.approval(), self.approval("APPROVED")],
                   [self.first(), {"decision": "allow", "reason": "approved", "decision_id": "d2"}])
        got = self.client().run(self.TC, lambda amount: amount * 2)
        self.assertEqual(got, 200)
        gets = [r for r in self.fake.requests if "/approvals/" in r.path]
        self.assertTrue(all(re.search(r"/v2/approvals/ap1\?wait=\d+$", r.path) for r in gets), [r.path for r in gets])
        self.assertFalse(any("consume" in r.path for r in self.fake.requests))
        first, second = self.authorize_requests()
        self.assertNotIn("approval_id", first.json())
        self.assertEqual(second.json()["approval_id"], "ap1")
        self.assertNotEqual(first.json()["request_id"], second.json()["request_id"])
        self.assertEqual(second.json()["tool_call"], self.TC)

    def test_edited(self):
        self.serve([self.approval("APPROVED", params={"amount": 50})],
                   [self.first(), {"decision": "allow", "reason": "approved"}])
        c = self.client()
        d = c.authorize(**{k: self.TC[k] for k in ("tool", "action", "resource", "parameters")})
        a = c.wait_for_approval(d)
        self.assertTrue(a.edited)
        self.assertEqual(a.parameters, {"amount": 50})
        self.assertEqual(a.call["tool"], "Pay")  # the identifiers as asked
        self.serve([self.approval("APPROVED", params={"amount": 50})],
                   [self.first(), {"decision": "allow", "reason": "approved"}])
        got = c.run(self.TC, lambda amount: amount)
        self.assertEqual(got, 50)
        self.assertEqual(self.authorize_requests()[-1].json()["tool_call"]["parameters"], {"amount": 50})

    def test_edit_with_wrong_hash_refused(self):
        self.serve([self.approval("APPROVED", params={"amount": 50}, ahash=action_hash(self.TC))],
                   [self.first(), {"decision": "allow"}])
        ran = []
        with self.assertRaises(ActionHashMismatch):
            self.client().run(self.TC, lambda amount: ran.append(amount))
        self.assertEqual(ran, [])
        self.assertEqual(len(self.authorize_requests()), 1)

    def test_approval_for_another_tool_refused(self):
        other = self.approval("APPROVED")
        other["tool_call"]["tool"] = "bank"
        self.serve([other], [self.first()])
        with self.assertRaises(ActionHashMismatch):
            self.client().run(self.TC, lambda amount: amount)

    def test_rejected(self):
        self.serve([self.approval("REJECTED", reason="no")], [self.first()])
        with self.assertRaises(ApprovalRejected) as cm:
            self.client().run(self.TC, lambda amount: amount)
        self.assertEqual(cm.exception.approval.status, "REJECTED")

    def test_expired_status(self):
        self.serve([self.approval("EXPIRED")], [self.first()])
        with self.assertRaises(ApprovalExpired):
            self.client().run(self.TC, lambda amount: amount)

    def test_caller_timeout(self):
        def slow(req):
            time.sleep(0.3)
            return reply(200, self.approval())
        self.serve([slow], [self.first()])
        t0 = time.monotonic()
        with self.assertRaises(ApprovalExpired):
            self.client().run(self.TC, lambda amount: amount, approval_timeout=1.5)
        self.assertLess(time.monotonic() - t0, 3.5)

    def test_expiry_bounds_the_wait(self):
        first = self.first()
        first["approval_expires_at"] = rfc3339(0.5)
        self.serve([lambda r: (time.sleep(0.2), reply(200, self.approval(expires_at=first["approval_expires_at"])))[1]], [first])
        t0 = time.monotonic()
        with self.assertRaises(ApprovalExpired):
            self.client().run(self.TC, lambda amount: amount)
        self.assertLess(time.monotonic() - t0, 4)

    def test_transient_failures_retried(self):
        self.serve([reply(503, envelope(503, "ServiceUnavailable")), reply(502, b""), self.approval("APPROVED")],
                   [self.first(), {"decision": "allow"}])
        self.assertEqual(self.client().run(self.TC, lambda amount: amount), 100)

    def test_presentation_denied(self):
        self.serve([self.approval("APPROVED")], [self.first(), {"decision": "deny", "reason": "approval_consumed"}])
        with self.assertRaises(Denied) as cm:
            self.client().run(self.TC, lambda amount: amount)
        self.assertEqual(cm.exception.decision.reason, "approval_consumed")

    def test_unknown_status_fails_closed(self):
        self.serve([self.approval("MAYBE")], [self.first()])
        with self.assertRaises(SvcError):
            self.client().run(self.TC, lambda amount: amount)

    def test_uncertain_unicode_trusts_server_hash(self):
        import unicodedata
        unassigned = next(chr(cp) for cp in range(0x0870, 0x10FFFF) if unicodedata.category(chr(cp)) == "Cn")
        tc = {"tool": "pay" + unassigned, "action": "charge", "resource": "cus_1", "parameters": {"amount": 100}}
        server_hash = "2" * 64  # what a gateway with newer tables might compute
        first = {"decision": "require_approval", "approval_id": "ap1", "action_hash": server_hash,
                 "approval_expires_at": rfc3339(60)}
        appr = {"approval_id": "ap1", "status": "APPROVED", "action_hash": server_hash, "expires_at": rfc3339(60),
                "tool_call": {"tool": "pay" + unassigned, "action": "charge", "resource": "cus_1", "parameters": {"amount": 100}}}
        self.serve([appr], [first, {"decision": "allow", "reason": "approved", "action_hash": server_hash}])
        with self.assertLogs(self.log, "WARNING"):
            self.assertEqual(self.client().run(tc, lambda amount: amount), 100)

    def test_by_id_and_404(self):
        self.fake.script(reply(404, envelope(404, "NotFound", "not_found")))
        with self.assertRaises(SvcError) as cm:
            self.client().wait_for_approval("nope", timeout=2)
        self.assertEqual(cm.exception.status, 404)


class Receipts(Base):
    TC = {"tool": "pay", "action": "charge", "resource": None, "parameters": {"amount": 1}}

    def serve(self, receipt):
        d = {"decision": "allow", "decision_id": receipt["decision_id"], "receipt_id": receipt["receipt_id"],
             "receipt_hash": receipt["receipt_hash"], "action_hash": action_hash(self.TC)}

        def h(req):
            if req.path.startswith("/v2/receipts/"):
                return reply(200, receipt)
            return reply(200, d)

        self.fake.handler = h

    def test_valid_receipt_runs(self):
        self.serve(make_receipt(action_hash=action_hash(self.TC)))
        c = self.client(receipt_public_key=PUB_B64)
        self.assertEqual(c.run(self.TC, lambda amount: amount, mutates_state=True), 1)
        self.assertTrue(any(r.path.startswith("/v2/receipts/") for r in self.fake.requests))

    def test_read_only_not_fetched(self):
        self.serve(make_receipt(action_hash="0" * 64))
        c = self.client(receipt_public_key=PUB_B64)
        self.assertEqual(c.run(self.TC, lambda amount: amount), 1)
        self.assertFalse(any(r.path.startswith("/v2/receipts/") for r in self.fake.requests))

    def test_bad_receipts_refused(self):
        good = make_receipt(action_hash=action_hash(self.TC))
        tampered = dict(good, decision="deny")
        other_call = make_receipt(action_hash="0" * 64)
        unsigned = make_receipt(action_hash=action_hash(self.TC), signed=False)
        for name, r in (("tampered", tampered), ("other call", other_call), ("unsigned", unsigned)):
            with self.subTest(name):
                self.serve(r)
                if name == "tampered":  # the decision must still name the stored receipt
                    self.fake.handler = (lambda rr: (lambda req: reply(200, rr) if req.path.startswith("/v2/receipts/") else
                                                     reply(200, {"decision": "allow", "receipt_id": rr["receipt_id"],
                                                                 "decision_id": rr["decision_id"]})))(r)
                ran = []
                with self.assertRaises(ReceiptInvalid):
                    self.client(receipt_public_key=PUB_B64).run(self.TC, lambda amount: ran.append(amount), mutates_state=True)
                self.assertEqual(ran, [])


class Async(Base):
    def test_authorize_run_guard(self):
        async def main():
            async with AsyncClient(self.fake.url, TOKEN, logger=self.log) as c:
                d = await c.authorize("t", "a")
                r = await c.run({"tool": "t", "action": "a", "parameters": {"x": 2}}, lambda x: x * 3)

                @c.guard("t", "a")
                async def tool(x):
                    await asyncio.sleep(0)
                    return x + 1

                return d.decision, r, await tool(4)

        self.assertEqual(asyncio.run(main()), ("allow", 6, 5))

    def test_wait_for_approval_cancellable(self):
        held = threading.Event()

        def hold(req):
            held.set()
            time.sleep(5)
            return reply(200, {"approval_id": "ap1", "status": "PENDING", "tool_call": {}, "expires_at": rfc3339(60)})

        self.fake.script(hold)

        async def main():
            c = AsyncClient(self.fake.url, TOKEN, logger=self.log)
            task = asyncio.create_task(c.wait_for_approval("ap1"))
            await asyncio.to_thread(held.wait, 5)
            t0 = time.monotonic()
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task
            return time.monotonic() - t0

        self.assertLess(asyncio.run(main()), 0.5)


if __name__ == "__main__":
    unittest.main()
