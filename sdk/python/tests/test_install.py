"""The package installs with pip (offline: --no-build-isolation, setuptools backend)."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from tests import util


def _python_with_build_tools():
    for py in (sys.executable, "/usr/bin/python3"):
        if py and os.access(py, os.X_OK):
            r = subprocess.run([py, "-c", "import setuptools, wheel, pip"], capture_output=True)
            if r.returncode == 0:
                return py
    return None


class Install(unittest.TestCase):
    def test_pip_install_no_build_isolation(self):
        py = _python_with_build_tools()
        if py is None:
            self.skipTest("no Python here has setuptools, wheel and pip: install check SKIPPED")
        tmp = tempfile.mkdtemp(prefix="py-install-")
        self.addCleanup(shutil.rmtree, tmp, True)
        src = os.path.join(tmp, "src")
        shutil.copytree(util.SDK, src, ignore=shutil.ignore_patterns("tests", "build", "*.egg-info", "__pycache__"))
        target = os.path.join(tmp, "target")
        r = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index", "--quiet",
                            "--target", target, src], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        r = subprocess.run([py, "-c", "import svc_sdk, sys; print(svc_sdk.__file__); print(svc_sdk.action_hash({'tool':'t','action':'a'}))"],
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": target}, cwd=tmp, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.splitlines()[0].startswith(target), r.stdout)


if __name__ == "__main__":
    unittest.main()
