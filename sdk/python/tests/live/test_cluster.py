"""Approval waits on TWO clustered nodes behind a round-robin balancer.

Runs when SVC_BIN, SVC_TEST_POSTGRES_URL, SVC_TEST_VALKEY_URL (and
SVC_TEST_PG_BIN for createdb/dropdb) are set, as under `make test`; skipped
loudly otherwise. A fresh database is created for the run and dropped after.
"""

from __future__ import annotations

import time
import unittest

from tests import util  # noqa: F401
from tests.live.harness import Fixtures, TwoNodes
from tests.live.test_live import POLICY, RECEIPT_PUB_B64, SVC_BIN, make_client, quiet_logger, require_bin
from svc_sdk import ApprovalExpired, ApprovalRejected, Client


class Cluster(unittest.TestCase):
    TC = {"tool": "approval_tool", "action": "transfer", "resource": "acct/9", "parameters": {"amount": 7, "to": "bob"}}

    @classmethod
    def setUpClass(cls) -> None:
        require_bin()
        cls.two = TwoNodes(SVC_BIN, "py_sdk")
        cls.lb, cls.nodes = cls.two.lb, cls.two.nodes
        try:
            cls.fx = Fixtures(cls.lb.url)
            cls.fx.policy("sdk_live", POLICY)
        except BaseException:
            cls.two.stop()
            raise

    @classmethod
    def tearDownClass(cls) -> None:
        cls.two.stop()

    def client(self, **kw) -> tuple[Client, dict]:
        # Wait until the new agent's token works on both nodes (caches converge).
        a = self.fx.agent()
        c = make_client(self.lb.url, a["agent_token"], signing_key=a["signing_key"], receipt_public_key=RECEIPT_PUB_B64,
                   logger=quiet_logger(self.id()), **kw)
        self.addCleanup(c.close)
        return c, a

    def test_approved_across_nodes(self):
        # Several rounds: the waiter holds one node, the approver's calls alternate.
        for i in range(4):
            with self.subTest(round=i):
                c, a = self.client()
                ap = self.fx.approver(a["agent_id"], "approve", delay=0.5 + 0.2 * i)
                t0 = time.monotonic()
                self.assertEqual(c.run(self.TC, lambda amount, to: amount, mutates_state=True), 7)
                self.assertEqual(ap.finish()["status"], "APPROVED")
                # Woken by the decision, not by the end of the 25 s wait; the
                # bound is loose for a busy machine.
                self.assertLess(time.monotonic() - t0, 15)
        self.assertTrue(all(n > 0 for n in self.lb.counts), self.lb.counts)

    def test_rejected_across_nodes(self):
        c, a = self.client()
        ap = self.fx.approver(a["agent_id"], "reject")
        with self.assertRaises(ApprovalRejected):
            c.run(self.TC, lambda **kw: None, mutates_state=True)
        ap.finish()

    def test_edited_across_nodes(self):
        c, a = self.client()
        ap = self.fx.approver(a["agent_id"], "edit", params={"amount": 3, "to": "bob"})
        self.assertEqual(c.run(self.TC, lambda amount, to: (amount, to), mutates_state=True), (3, "bob"))
        ap.finish()

    def test_wake_up_is_prompt_on_either_node(self):
        """The answer comes soon after the decision (within a second on an idle
        machine; the bound is loose for a busy one), not at the end of the
        25 s long-poll, whichever node decided."""
        for i in range(3):
            with self.subTest(round=i):
                c, a = self.client()
                d = c.authorize(**self.TC, mutates_state=True)
                ap = self.fx.approver(a["agent_id"], "approve", delay=0.3)
                appr = c.wait_for_approval(d, timeout=20)
                returned = time.monotonic()
                ap.finish()
                self.assertEqual(appr.status, "APPROVED")
                self.assertLess(returned - ap.t_decide, 10)

    def test_expired(self):
        c, _ = self.client()
        with self.assertRaises(ApprovalExpired):
            c.run(self.TC, lambda **kw: None, mutates_state=True)


if __name__ == "__main__":
    unittest.main()
