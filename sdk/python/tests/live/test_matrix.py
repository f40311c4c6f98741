"""The cross-language matrix: every SDK against every other, on one real svc.

For every ordered pair (A, B) of SDKs, an approval asked for through A is
edited by an operator, waited for and presented through B, and the receipts
of both decisions are then fetched and verified through every SDK (and an
altered copy refused by every SDK). Python takes part as itself (the Client);
every other SDK through its conformance driver (sdk/README.md), which `make
sdk` builds. Runs in the Python SDK's test.sh; an SDK whose driver is missing
fails the test under CI=true and is skipped loudly otherwise.
"""

from __future__ import annotations

import copy
import itertools
import os
import sys
import unittest

from tests import util  # noqa: F401
from tests.live.harness import Fixtures, Gateway, TwoNodes, make_workdir, remove_workdir
from tests.live.remote import DriverClient
from tests.live.test_live import POLICY, RECEIPT_PUB_B64, SVC_BIN, quiet_logger, require_bin
from svc_sdk import Client, receipts

SDK_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def drivers() -> dict[str, str]:
    """Every SDK other than Python: its language and driver path."""
    found = {}
    for lang in sorted(os.listdir(SDK_ROOT)):
        path = os.path.join(SDK_ROOT, lang, "conformance-driver")
        if lang not in ("python", "conformance") and os.path.isfile(path):
            found[lang] = path
    return found


class Matrix(unittest.TestCase):
    TC = {"tool": "approval_tool", "action": "transfer", "resource": "acct/m", "parameters": {"amount": 50, "to": "bob"}}
    EDIT = {"amount": 5, "to": "bob", "memo": "edited"}

    @classmethod
    def setUpClass(cls) -> None:
        require_bin()
        cls.check_drivers()
        cls.wd = make_workdir("py-live-matrix-")
        cls.gw = Gateway(SVC_BIN, cls.wd, {"SVC_APPROVAL_TTL_SECS": "60"}, name="svc-matrix").start()
        cls.url = cls.gw.url
        cls.fx = Fixtures(cls.url)
        cls.fx.policy("sdk_live", POLICY)

    @classmethod
    def check_drivers(cls) -> None:
        cls.langs = ["python"] + list(drivers())
        if len(cls.langs) < 3:
            msg = f"the matrix needs the TypeScript and Go drivers; found only {cls.langs}"
            if os.environ.get("CI") == "true":
                raise AssertionError(msg + " (run `make sdk`)")
            print(f"\n*** {msg}: the MATRIX is SKIPPED ***", file=sys.stderr, flush=True)
            raise unittest.SkipTest(msg)
        cls.paths = drivers()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.gw.stop()
        remove_workdir(cls.wd)

    def client(self, lang: str, agent: dict):
        kw = dict(signing_key=agent["signing_key"], receipt_public_key=RECEIPT_PUB_B64, logger=quiet_logger(self.id()))
        if lang == "python":
            c = Client(self.url, agent["agent_token"], **kw)
        else:
            c = DriverClient(self.url, agent["agent_token"], driver=self.paths[lang], **kw)
        self.addCleanup(c.close)
        return c

    def verify(self, lang: str, c, receipt: dict) -> tuple[bool, bool]:
        if lang == "python":
            r = receipts.verify(receipt, RECEIPT_PUB_B64)
            return r.hash_valid, r.signature_valid
        ans = c.verify_receipt_object(receipt, RECEIPT_PUB_B64)
        return ans["hash_valid"], ans["signature_valid"]

    def test_approvals_and_receipts_across_sdks(self):
        # One client per SDK for verification, on an agent of its own.
        checker_agent = self.fx.agent()
        checkers = {lang: self.client(lang, checker_agent) for lang in self.langs}
        for a_lang, b_lang in itertools.permutations(self.langs, 2):
            with self.subTest(asked_through=a_lang, presented_through=b_lang):
                agent = self.fx.agent()
                a, b = self.client(a_lang, agent), self.client(b_lang, agent)
                asked = a.authorize(**self.TC, mutates_state=True)
                self.assertEqual(asked.decision, "require_approval")
                self.assertTrue(asked.approval_id and asked.receipt_id)
                ap = self.fx.approver(agent["agent_id"], "edit", params=self.EDIT, delay=0.2)
                approval = b.wait_for_approval(asked, timeout=30)
                ap.finish()
                self.assertEqual(approval.status, "APPROVED")
                self.assertTrue(approval.edited)
                self.assertEqual(approval.parameters, self.EDIT)
                presented = b.authorize(**approval.call, mutates_state=True, approval_id=approval.approval_id)
                self.assertEqual((presented.decision, presented.reason), ("allow", "approved"))
                self.assertFalse(presented.hash_mismatch)
                # A, which asked, cannot present the consumed approval again.
                again = a.authorize(**approval.call, mutates_state=True, approval_id=approval.approval_id)
                self.assertEqual((again.decision, again.reason), ("deny", "approval_consumed"))

                # Each decision's receipt, as the agent reads it, checked by
                # the SDK that did not produce it (the client's whole check:
                # fetch, hash, signature, ids, action hash of the call).
                r_asked = b.verify_receipt(asked)
                r_presented = a.verify_receipt(presented, approval.call)
                self.assertEqual(r_asked["decision"], "require_approval")
                self.assertEqual(r_presented["action_hash"], presented.action_hash)
                for lang, c in checkers.items():
                    for name, r in (("asked", r_asked), ("presented", r_presented)):
                        self.assertEqual(self.verify(lang, c, r), (True, True), f"{lang} on the {name} receipt")
                        altered = copy.deepcopy(r)
                        altered["decision"] = "allow" if r["decision"] != "allow" else "deny"
                        self.assertEqual(self.verify(lang, c, altered)[0], False, f"{lang} on an altered {name} receipt")
                        resigned = copy.deepcopy(r)
                        resigned["receipt_hash"] = "0" * 64
                        self.assertEqual(self.verify(lang, c, resigned), (False, False),
                                         f"{lang} on the {name} receipt with its hash rewritten")


class MatrixTwoNodes(Matrix):
    """The same matrix on two clustered nodes behind a round-robin balancer:
    every SDK's requests, and the operator's, alternate between the nodes."""

    @classmethod
    def setUpClass(cls) -> None:
        require_bin()
        cls.check_drivers()
        cls.two = TwoNodes(SVC_BIN, "py_matrix", {"SVC_APPROVAL_TTL_SECS": "60"})
        cls.url = cls.two.url
        try:
            cls.fx = Fixtures(cls.url)
            cls.fx.policy("sdk_live", POLICY)
        except BaseException:
            cls.two.stop()
            raise

    @classmethod
    def tearDownClass(cls) -> None:
        cls.two.stop()


if __name__ == "__main__":
    unittest.main()
