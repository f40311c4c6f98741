"""The live suite: the SDK against a real svc gateway (SVC_BIN).

Skipped, loudly, when SVC_BIN is unset (test.sh refuses that under CI=true).
One gateway on SQLite serves most cases; a second one with a tiny rate-limit
bucket serves the 429 cases; the two-node cluster cases live in
test_cluster.py.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import os
import sys
import threading
import time
import unittest
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests import util  # noqa: F401  (puts the SDK on sys.path)
from tests.live.harness import (ADMIN_TOKEN, RECEIPT_SEED, Fixtures, Gateway, api, free_port, make_workdir,
                                remove_workdir, wait_until)
from tests.live.remote import DRIVER, Cancelled as DriverCancelled, DriverClient
from svc_sdk import (ApprovalExpired, ApprovalRejected, ApprovalRequired, AsyncClient, Client, Denied, ReceiptInvalid,
                     SvcAuthError, SvcUnavailable, action_hash, ed25519)
from svc_sdk._http import Cancel, Cancelled

SVC_BIN = os.environ.get("SVC_BIN", "")
RECEIPT_PUB_B64 = base64.b64encode(ed25519.public_key_from_seed(RECEIPT_SEED)).decode()
OTHER_PUB_B64 = base64.b64encode(ed25519.public_key_from_seed(bytes(32))).decode()

POLICY = """package svc.policies.sdk_live

results contains {"decision": "allow", "reason": "live_allow"} if { input.tool_call.tool == "allow_tool" }
results contains {"decision": "deny", "reason": "live_deny"} if { input.tool_call.tool == "deny_tool" }
results contains {"decision": "quarantine", "reason": "live_quarantine"} if { input.tool_call.tool == "quarantine_tool" }
results contains {"decision": "require_approval", "reason": "live_approval"} if { input.tool_call.tool == "approval_tool" }
results contains {"decision": "redact", "reason": "live_redact", "redact_fields": ["parameters.card", "parameters.meta.ssn"]} if {
\tinput.tool_call.tool == "redact_tool"
}
"""


def make_client(*args, **kw):
    """The client under test: the Python Client, or with SVC_SDK_LIVE_DRIVER
    set, another SDK driven through its conformance driver (same API)."""
    if DRIVER:
        return DriverClient(*args, **kw)
    return Client(*args, **kw)


def wait_cancelled_after(c, ref, seconds: float) -> None:
    """Wait for an approval and cancel the wait after ``seconds`` through the
    SDK's own cancellation; returns once the cancellation was reported."""
    if DRIVER:
        try:
            c.wait_for_approval_cancelled_after(ref, seconds)
        except DriverCancelled:
            return
        raise AssertionError("the cancelled wait returned an approval")
    cancel = Cancel()
    t = threading.Timer(seconds, cancel.cancel)
    t.start()
    try:
        c._wait_for_approval(ref, None, cancel)
    except Cancelled:
        return
    finally:
        t.cancel()
    raise AssertionError("the cancelled wait returned an approval")


def require_bin() -> None:
    if not SVC_BIN:
        msg = "SVC_BIN is not set: the LIVE SUITE IS SKIPPED (set it to a built svc binary)"
        print(f"\n*** {msg} ***", file=sys.stderr, flush=True)
        raise unittest.SkipTest(msg)
    if not os.access(SVC_BIN, os.X_OK):
        raise AssertionError(f"SVC_BIN={SVC_BIN} is not an executable")


def quiet_logger(name: str) -> logging.Logger:
    log = logging.getLogger(f"svc_sdk.live.{name}")
    log.propagate = False
    if not log.handlers:
        log.addHandler(logging.NullHandler())
    return log


class LiveBase(unittest.TestCase):
    gw: Gateway
    fx: Fixtures
    workdir: str

    @classmethod
    def setUpClass(cls) -> None:
        require_bin()
        cls.workdir = make_workdir("py-live-")
        cls.gw = Gateway(SVC_BIN, cls.workdir, name="svc-live").start()
        cls.fx = Fixtures(cls.gw.url)
        cls.fx.policy("sdk_live", POLICY)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.gw.stop()
        remove_workdir(cls.workdir)

    def setUp(self) -> None:
        self.log = quiet_logger(self.id())

    def agent_client(self, signing: bool = True, agent_fields: dict | None = None, **kw) -> tuple[Client, dict]:
        a = self.fx.agent(signing=signing, **(agent_fields or {}))
        kw.setdefault("logger", self.log)
        kw.setdefault("receipt_public_key", RECEIPT_PUB_B64)
        c = make_client(kw.pop("url", self.gw.url), a["agent_token"], signing_key=a.get("signing_key"), **kw)
        self.addCleanup(c.close)
        return c, a


class Outcomes(LiveBase):
    def test_allow_with_verified_receipt(self):
        c, a = self.agent_client()
        tc = {"tool": "allow_tool", "action": "write", "resource": "r/1", "parameters": {"n": 1, "s": "x"}}
        got = c.run(tc, lambda n, s: (n, s), mutates_state=True)
        self.assertEqual(got, (1, "x"))
        d = c.authorize(**tc, mutates_state=True)
        self.assertEqual((d.decision, d.reason), ("allow", "live_allow"))
        self.assertTrue(d.decision_id and d.receipt_id and d.receipt_hash)
        self.assertEqual(d.action_hash, action_hash(tc))
        self.assertFalse(d.hash_mismatch)
        r = c.verify_receipt(d)
        self.assertEqual(r["decision_id"], d.decision_id)
        # the key the agent may read equals the pinned one
        self.assertEqual(c.get_receipt_public_key()["public_key"], RECEIPT_PUB_B64)

    def test_receipt_proven_in_the_receipt_log(self):
        """CONTRACT §17: the receipt is in the log the latest checkpoint signs,
        checked with the pinned receipt key; another key proves nothing."""
        c, a = self.agent_client()
        d = c.authorize("allow_tool", "write", "r/log", {"n": 2}, mutates_state=True)
        self.assertTrue(d.receipt_id)
        deadline = time.monotonic() + 30
        while True:
            try:
                res = c.verify_inclusion(d.receipt_id)
                break
            except ReceiptInvalid as e:
                # A checkpoint is signed every second here; until then the
                # receipt is newer than the latest one.
                if e.error_code != "receipt_not_logged" or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        self.assertTrue(res.valid and res.checkpoint_valid and res.proof_valid)
        self.assertGreaterEqual(res.tree_size, 1)
        self.assertTrue(res.origin.startswith("svc/"))
        c2 = make_client(self.gw.url, a["agent_token"], signing_key=a.get("signing_key"), receipt_public_key=OTHER_PUB_B64,
                         logger=self.log)
        self.addCleanup(c2.close)
        with self.assertRaises(ReceiptInvalid) as cm:
            c2.verify_inclusion(d.receipt_id)
        self.assertEqual(cm.exception.error_code, "inclusion_invalid")

    def test_read_allowed_by_base_policy(self):
        c, _ = self.agent_client()
        self.assertEqual(c.run({"tool": "search", "action": "query", "parameters": {"q": "x"}}, lambda q: q), "x")

    def test_deny(self):
        c, _ = self.agent_client()
        ran = []
        with self.assertRaises(Denied) as cm:
            c.run({"tool": "deny_tool", "action": "x", "parameters": {"a": 1}}, lambda a: ran.append(a))
        self.assertEqual(ran, [])
        d = cm.exception.decision
        self.assertEqual((d.decision, d.reason), ("deny", "live_deny"))
        self.assertTrue(d.decision_id)

    def test_redact(self):
        c, _ = self.agent_client()
        params = {"card": "4242424242424242", "amount": 5, "meta": {"ssn": "123", "order": "o1"}}
        got = c.run({"tool": "redact_tool", "action": "charge", "parameters": params}, lambda **kw: kw)
        self.assertEqual(got, {"amount": 5, "meta": {"order": "o1"}})
        self.assertEqual(params["card"], "4242424242424242")

    def test_quarantine_then_401(self):
        c, _ = self.agent_client()
        with self.assertRaises(Denied) as cm:
            c.run({"tool": "quarantine_tool", "action": "x"}, lambda: None, mutates_state=True)
        self.assertEqual(cm.exception.decision.decision, "quarantine")
        ran = []

        def next_call():
            try:
                c.run({"tool": "search", "action": "q"}, lambda: ran.append(1))
            except SvcAuthError as e:
                return e
            return None

        e = wait_until(next_call, 10, 0.1, "the quarantined agent's token to be refused")
        self.assertEqual(e.status, 401)

    def test_environment_403_is_deny_without_decision_id(self):
        c, _ = self.agent_client(agent_fields={"allowed_environments": ["prod"]})
        d = c.authorize("search", "q")
        self.assertEqual((d.decision, d.status, d.decision_id), ("deny", 403, None))
        self.assertEqual(c.authorize("search", "q", environment="prod").decision, "allow")

    def test_bad_signature(self):
        a = self.fx.agent()
        wrong = base64.b64encode(b"w" * 32).decode()
        ran = []
        for key in (wrong, None):
            c = make_client(self.gw.url, a["agent_token"], signing_key=key, logger=self.log)
            self.addCleanup(c.close)
            with self.assertRaises(SvcAuthError) as cm:
                c.run({"tool": "search", "action": "q"}, lambda: ran.append(1))
            self.assertEqual((cm.exception.status, cm.exception.error_code), (401, "invalid_signature"))
        self.assertEqual(ran, [])

    def test_unknown_token(self):
        c = make_client(self.gw.url, "svc_agent_" + "A" * 43, logger=self.log)
        self.addCleanup(c.close)
        with self.assertRaises(SvcAuthError):
            c.authorize("search", "q")

    def test_request_id_returns_same_decision(self):
        c, _ = self.agent_client()
        d1 = c.authorize("deny_tool", "x", request_id="req-fixed-1")
        d2 = c.authorize("deny_tool", "x", request_id="req-fixed-1")
        self.assertTrue(d1.decision_id)
        self.assertEqual(d1.decision_id, d2.decision_id)
        d3 = c.authorize("deny_tool", "x")
        self.assertNotEqual(d3.decision_id, d1.decision_id)

    def test_unicode_identifiers_hash_like_the_server(self):
        c, _ = self.agent_client()
        for tool, action in (("%47itHub", "Merge"), ("\u0130STANBUL", "\u03a3\u03a3"), ("e\u0301t\u00e9", "\u00a0Read\u0085"),
                             ("a+b", "%zz"), ("%FF", "%2541"), ("\u001ctool\u001f", "x")):
            with self.subTest(tool=tool, action=action):
                d = c.authorize(tool, action, parameters={"k": [1.5, 1e21, 2**53 + 1, "\u2028"]})
                self.assertTrue(d.hash_certain)
                self.assertFalse(d.hash_mismatch, (d.action_hash, d.local_action_hash))

    def test_guard(self):
        c, _ = self.agent_client()

        @c.guard("redact_tool", "charge", resource=lambda a: f"order/{a['order']}")
        def charge(order, card="none", amount=0):
            return (order, card, amount)

        self.assertEqual(charge("o7", card="4242", amount=3), ("o7", "none", 3))

        @c.guard("deny_tool", "x")
        def never():
            raise AssertionError("ran")

        with self.assertRaises(Denied):
            never()

    def test_wrong_pinned_key(self):
        c, _ = self.agent_client(receipt_public_key=OTHER_PUB_B64)
        ran = []
        with self.assertRaises(ReceiptInvalid):
            c.run({"tool": "allow_tool", "action": "w"}, lambda: ran.append(1), mutates_state=True)
        self.assertEqual(ran, [])

    def test_v1_deprecation_warning_once(self):
        a = self.fx.agent()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            c = make_client(self.gw.url, a["agent_token"], signing_key=a["signing_key"], api_version="v1", logger=self.log)
            self.addCleanup(c.close)
            c.authorize("search", "q")
            c.authorize("search", "q")
        dep = [x for x in w if issubclass(x.category, DeprecationWarning)]
        self.assertEqual(len(dep), 1, [str(x.message) for x in dep])
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            c2, _ = self.agent_client()
            c2.authorize("search", "q")
        self.assertEqual([x for x in w if issubclass(x.category, DeprecationWarning)], [])


class Approvals(LiveBase):
    TC = {"tool": "approval_tool", "action": "transfer", "resource": "acct/1", "parameters": {"amount": 100, "to": "bob"}}

    def test_approved(self):
        c, a = self.agent_client()
        ap = self.fx.approver(a["agent_id"], "approve")
        got = c.run(self.TC, lambda amount, to: (amount, to), mutates_state=True)
        self.assertEqual(got, (100, "bob"))
        self.assertEqual(ap.finish()["status"], "APPROVED")

    def test_rejected(self):
        c, a = self.agent_client()
        ap = self.fx.approver(a["agent_id"], "reject")
        ran = []
        with self.assertRaises(ApprovalRejected):
            c.run(self.TC, lambda **kw: ran.append(kw), mutates_state=True)
        ap.finish()
        self.assertEqual(ran, [])

    def test_expired(self):
        c, _ = self.agent_client()
        t0 = time.monotonic()
        ran = []
        with self.assertRaises(ApprovalExpired):
            c.run(self.TC, lambda **kw: ran.append(kw), mutates_state=True)
        # SVC_APPROVAL_TTL_SECS=5: ends about then, not at the caller's (absent) timeout
        self.assertLess(time.monotonic() - t0, 12)
        self.assertEqual(ran, [])

    def test_caller_timeout_before_expiry(self):
        c, _ = self.agent_client()
        t0 = time.monotonic()
        with self.assertRaises(ApprovalExpired):
            c.run(self.TC, lambda **kw: None, mutates_state=True, approval_timeout=1.5)
        self.assertLess(time.monotonic() - t0, 4.5)  # the caller's 1.5 s, well before the 5 s expiry

    def test_edited(self):
        c, a = self.agent_client()
        ap = self.fx.approver(a["agent_id"], "edit", params={"amount": 10, "to": "bob"})
        got = c.run(self.TC, lambda amount, to: (amount, to), mutates_state=True)
        self.assertEqual(got, (10, "bob"))
        self.assertEqual(ap.finish()["tool_call"]["parameters"], {"amount": 10, "to": "bob"})

    def test_wait_returns_edit_and_consumed_replay_is_denied(self):
        c, a = self.agent_client()
        d = c.authorize(**self.TC, mutates_state=True)
        self.assertEqual(d.decision, "require_approval")
        self.assertTrue(d.approval_id and d.approval_expires_at)
        ap = self.fx.approver(a["agent_id"], "edit", params={"amount": 1, "to": "eve"})
        appr = c.wait_for_approval(d, timeout=15)
        ap.finish()
        self.assertTrue(appr.edited)
        self.assertEqual(appr.parameters, {"amount": 1, "to": "eve"})
        first = c.authorize(**appr.call, mutates_state=True, approval_id=appr.approval_id)
        self.assertEqual((first.decision, first.reason), ("allow", "approved"))
        again = c.authorize(**appr.call, mutates_state=True, approval_id=appr.approval_id)
        self.assertEqual((again.decision, again.reason), ("deny", "approval_consumed"))
        original = c.authorize(**self.TC, mutates_state=True, approval_id=appr.approval_id)
        self.assertEqual(original.decision, "deny")

    def test_no_wait_raises_approval_required(self):
        c, _ = self.agent_client()
        with self.assertRaises(ApprovalRequired) as cm:
            c.run(self.TC, lambda **kw: None, mutates_state=True, wait=False)
        self.assertTrue(cm.exception.decision.approval_id)

    def test_webhook_delivery(self):
        got: list = []
        secret = "whsec-" + "k" * 20

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                got.append((dict(self.headers), body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.shutdown)
        c, a = self.agent_client()
        d = c.authorize(**self.TC, mutates_state=True,
                        webhook={"url": f"http://127.0.0.1:{srv.server_address[1]}/cb", "secret": secret})
        self.fx.decide(d.approval_id, "approve")
        wait_until(lambda: got, 15, 0.1, "the approval webhook")
        headers, body = got[0]
        headers = {k.lower(): v for k, v in headers.items()}
        self.assertEqual(headers["x-svc-signature"], "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest())
        self.assertTrue(headers["x-svc-timestamp"].isdigit())
        payload = json.loads(body)
        self.assertEqual((payload["approval_id"], payload["status"], payload["action_hash"]), (d.approval_id, "APPROVED", d.action_hash))

    def test_wait_cancelled_promptly(self):
        """A wait that nobody answers ends at once when cancelled through the
        language's own cancellation (Cancel, AbortSignal, context.Context)."""
        c, _ = self.agent_client()
        d = c.authorize(**self.TC, mutates_state=True)
        self.assertEqual(d.decision, "require_approval")
        t0 = time.monotonic()
        wait_cancelled_after(c, d, 0.5)
        self.assertLess(time.monotonic() - t0, 3.0)  # not the 5 s expiry or the 25 s long-poll

    def test_async(self):
        if DRIVER:
            self.skipTest("Python's AsyncClient only; test_wait_cancelled_promptly covers the driver's cancellation")
        a = self.fx.agent()

        async def main():
            async with AsyncClient(self.gw.url, a["agent_token"], signing_key=a["signing_key"], logger=self.log,
                                   receipt_public_key=RECEIPT_PUB_B64) as c:
                ap = self.fx.approver(a["agent_id"], "approve")

                async def tool(amount, to):
                    await asyncio.sleep(0)
                    return amount

                r = await c.run(self.TC, tool, mutates_state=True)
                await asyncio.to_thread(ap.finish)
                # a wait that nobody answers is cancelled promptly
                d = await c.authorize(**self.TC, mutates_state=True)
                task = asyncio.create_task(c.wait_for_approval(d))
                await asyncio.sleep(0.5)
                t0 = time.monotonic()
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
                return r, time.monotonic() - t0

        r, cancel_secs = asyncio.run(main())
        self.assertEqual(r, 100)
        self.assertLess(cancel_secs, 2.0)  # not the 25 s wait


class Unavailable(LiveBase):
    def test_paused_gateway_fails_closed_within_deadline(self):
        c, _ = self.agent_client(timeout=1.5)
        c.authorize("search", "q")  # a warm keep-alive connection
        ran = []
        self.gw.pause()
        try:
            t0 = time.monotonic()
            with self.assertRaises(SvcUnavailable):
                c.run({"tool": "search", "action": "q"}, lambda: ran.append(1))
            elapsed = time.monotonic() - t0
        finally:
            self.gw.resume()
        self.assertEqual(ran, [])
        self.assertLess(elapsed, 5)  # the 1.5 s deadline, with room for a busy machine; a paused gateway never answers
        self.assertGreaterEqual(elapsed, 1.3)
        wait_until(lambda: c.authorize("search", "q").allowed, 15, 0.2, "the resumed gateway to answer")

    def test_fail_open_only_for_listed_read_only_tools(self):
        c, _ = self.agent_client(timeout=1.0, fail_open_tools=["search"])
        self.gw.pause()
        try:
            with self.assertLogs(self.log, "WARNING"):
                self.assertEqual(c.run({"tool": "search", "action": "q", "parameters": {"q": 1}}, lambda q: q), 1)
            with self.assertRaises(SvcUnavailable):
                c.run({"tool": "search", "action": "q"}, lambda: None, mutates_state=True)
            with self.assertRaises(SvcUnavailable):
                c.run({"tool": "other", "action": "q"}, lambda: None)
        finally:
            self.gw.resume()
        self.assertEqual(c.fail_open_count, 1)


class Stopped(unittest.TestCase):
    """A gateway killed and restarted on the same database and port."""

    def test_killed_then_restarted(self):
        require_bin()
        wd = make_workdir("py-live-kill-")
        self.addCleanup(remove_workdir, wd)
        gw = Gateway(SVC_BIN, wd, name="svc-kill").start()
        self.addCleanup(gw.stop)
        fx = Fixtures(gw.url)
        a = fx.agent()
        c = make_client(gw.url, a["agent_token"], signing_key=a["signing_key"], timeout=1.5, logger=quiet_logger(self.id()))
        self.addCleanup(c.close)
        self.assertTrue(c.authorize("search", "q").allowed)
        gw.proc.kill()
        gw.proc.wait(10)
        ran = []
        t0 = time.monotonic()
        with self.assertRaises(SvcUnavailable):
            c.run({"tool": "search", "action": "q"}, lambda: ran.append(1))
        self.assertLess(time.monotonic() - t0, 5)
        self.assertEqual(ran, [])
        gw.start()
        wait_until(lambda: c.authorize("search", "q").allowed, 20, 0.2, "the restarted gateway")


class RateLimited(unittest.TestCase):
    """A gateway whose agents get a bucket of 1 call refilled at 0.25/s
    (Retry-After: 4): the SDK waits when the deadline allows it and fails
    closed at once when it does not."""

    @classmethod
    def setUpClass(cls) -> None:
        require_bin()
        cls.wd = make_workdir("py-live-rl-")
        cls.gw = Gateway(SVC_BIN, cls.wd, {"SVC_RATE_LIMIT_CAPACITY": "1", "SVC_RATE_LIMIT_REFILL_RATE": "0.25"}, name="svc-rl").start()
        cls.fx = Fixtures(cls.gw.url)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.gw.stop()
        remove_workdir(cls.wd)

    def client(self, timeout: float) -> Client:
        a = self.fx.agent()
        c = make_client(self.gw.url, a["agent_token"], signing_key=a["signing_key"], timeout=timeout, retries=2,
                   logger=quiet_logger(self.id()))
        self.addCleanup(c.close)
        return c

    def test_waits_when_the_deadline_allows(self):
        c = self.client(timeout=8)
        self.assertTrue(c.authorize("search", "q").allowed)
        t0 = time.monotonic()
        d = c.authorize("search", "q")  # 429 Retry-After: 4, then allowed
        elapsed = time.monotonic() - t0
        self.assertTrue(d.allowed)
        self.assertGreaterEqual(elapsed, 2.5)
        self.assertLess(elapsed, 8)

    def test_fails_closed_when_it_does_not(self):
        c = self.client(timeout=2)
        self.assertTrue(c.authorize("search", "q").allowed)
        t0 = time.monotonic()
        ran = []
        with self.assertRaises(SvcUnavailable) as cm:
            c.run({"tool": "search", "action": "q"}, lambda: ran.append(1))
        self.assertLess(time.monotonic() - t0, 1.9)  # no wait for Retry-After: 4 past the 2 s deadline
        self.assertEqual(cm.exception.status, 429)
        self.assertTrue(cm.exception.headers.get("retry-after"))
        self.assertEqual(ran, [])


if __name__ == "__main__":
    unittest.main()
