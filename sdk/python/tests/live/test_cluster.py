"""Approval waits on TWO clustered nodes behind a round-robin balancer.

Runs when SVC_BIN, SVC_TEST_POSTGRES_URL, SVC_TEST_VALKEY_URL (and
SVC_TEST_PG_BIN for createdb/dropdb) are set, as under `make test`; skipped
loudly otherwise. A fresh database is created for the run and dropped after.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import unittest
import urllib.parse
import uuid

from tests import util  # noqa: F401
from tests.live.harness import Balancer, Fixtures, Gateway, make_workdir, remove_workdir, wait_until
from tests.live.test_live import POLICY, RECEIPT_PUB_B64, SVC_BIN, make_client, quiet_logger, require_bin
from svc_sdk import ApprovalExpired, ApprovalRejected, Client

PG_URL = os.environ.get("SVC_TEST_POSTGRES_URL", "")
VALKEY_URL = os.environ.get("SVC_TEST_VALKEY_URL", "")
PG_BIN = os.environ.get("SVC_TEST_PG_BIN", "")


def _pg_tool(name: str) -> str:
    if PG_BIN and os.access(os.path.join(PG_BIN, name), os.X_OK):
        return os.path.join(PG_BIN, name)
    return name


class Cluster(unittest.TestCase):
    TC = {"tool": "approval_tool", "action": "transfer", "resource": "acct/9", "parameters": {"amount": 7, "to": "bob"}}

    @classmethod
    def setUpClass(cls) -> None:
        require_bin()
        if not (PG_URL and VALKEY_URL):
            msg = "SVC_TEST_POSTGRES_URL / SVC_TEST_VALKEY_URL not set: the TWO-NODE approval cases are SKIPPED"
            if os.environ.get("CI") == "true":
                raise AssertionError(msg.replace("are SKIPPED", "cannot run under CI=true"))
            print(f"\n*** {msg} ***", file=sys.stderr, flush=True)
            raise unittest.SkipTest(msg)
        u = urllib.parse.urlsplit(PG_URL)
        cls.pg = dict(host=u.hostname or "127.0.0.1", port=str(u.port or 5432), user=u.username or "svc")
        cls.dbname = f"py_sdk_{uuid.uuid4().hex[:12]}"
        cls._pg("createdb", cls.dbname)
        q = f"?{u.query}" if u.query else ""
        auth = u.username + (f":{u.password}" if u.password else "") + "@" if u.username else ""
        db_url = f"{u.scheme}://{auth}{u.hostname}:{u.port or 5432}/{cls.dbname}{q}"
        cls.wd = make_workdir("py-live-cluster-")
        env = {"DATABASE_URL": db_url, "SVC_VALKEY_URL": VALKEY_URL, "SVC_CLUSTER": "true"}
        cls.nodes = []
        try:
            for i in range(2):
                cls.nodes.append(Gateway(SVC_BIN, cls.wd, env, name=f"svc-node{i}").start(ready_timeout=90))
        except BaseException:
            cls._teardown()
            raise
        cls.lb = Balancer([("127.0.0.1", n.port) for n in cls.nodes])
        cls.fx = Fixtures(cls.lb.url)
        cls.fx.policy("sdk_live", POLICY)

    @classmethod
    def _pg(cls, tool: str, db: str) -> None:
        subprocess.run([_pg_tool(tool), "-h", cls.pg["host"], "-p", cls.pg["port"], "-U", cls.pg["user"], db],
                       check=True, capture_output=True, timeout=60)

    @classmethod
    def _teardown(cls) -> None:
        for n in getattr(cls, "nodes", []):
            n.stop()
        if getattr(cls, "lb", None):
            cls.lb.close()
        try:
            cls._pg("dropdb", cls.dbname)
        except Exception as e:  # pragma: no cover
            print(f"dropdb {cls.dbname} failed: {e}", file=sys.stderr)
        remove_workdir(cls.wd) if getattr(cls, "wd", None) else None

    @classmethod
    def tearDownClass(cls) -> None:
        cls._teardown()

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
