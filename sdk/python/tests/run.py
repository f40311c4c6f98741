#!/usr/bin/env python3
"""Runs the Python SDK's tests (unit, vectors, live) with unittest.

Prints unittest's own closing lines (``Ran N tests in Xs`` and ``OK`` or
``FAILED (...)``), then one plain line ``python: N passed, N failed, N skipped`` (``python`` is
``SVC_SDK_LIVE_LABEL`` when set: another SDK's run of the live suite).
Exits 1 when anything failed or errored, or when no test ran.
"""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)  # sdk/python


def main(argv: list[str]) -> int:
    sys.path.insert(0, ROOT)
    os.chdir(ROOT)
    loader = unittest.TestLoader()
    if argv:
        suite = loader.loadTestsFromNames(argv)
    else:
        suite = loader.discover(start_dir="tests", pattern="test_*.py", top_level_dir=".")
    runner = unittest.TextTestRunner(verbosity=2, stream=sys.stdout)
    result = runner.run(suite)
    # A class or module whose setUpClass skipped or failed is reported as one
    # entry that is not a test (an _ErrorHolder) and is not in testsRun.
    def real(entries):
        return sum(1 for t, _ in entries if isinstance(t, unittest.TestCase))

    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    passed = result.testsRun - real(result.failures) - real(result.errors) - len(result.unexpectedSuccesses) - real(result.skipped)
    label = os.environ.get("SVC_SDK_LIVE_LABEL") or "python"
    print(f"{label}: {passed} passed, {failed} failed, {skipped} skipped", flush=True)
    if failed or result.testsRun == 0:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
