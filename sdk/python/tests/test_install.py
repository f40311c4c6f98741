"""The package installs with a plain `pip install ./sdk/python`, offline: its
build backend (_build/svc_build.py) is the standard library alone."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from tests import util


class Install(unittest.TestCase):
    def _pip(self, *args):
        return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=300)

    def setUp(self):
        if self._pip("--version").returncode != 0:
            self.skipTest(f"{sys.executable} has no pip: install check SKIPPED")
        self.tmp = tempfile.mkdtemp(prefix="py-install-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.src = os.path.join(self.tmp, "src")
        shutil.copytree(util.SDK, self.src, ignore=shutil.ignore_patterns("tests", "build", "*.egg-info", "__pycache__"))

    def test_pip_install_offline(self):
        # --no-index: nothing may come from a package index, build isolation
        # included (the backend requires nothing).
        target = os.path.join(self.tmp, "target")
        r = self._pip("install", "--no-index", "--no-deps", "--quiet", "--target", target, self.src)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        r = subprocess.run([sys.executable, "-c", "import svc_sdk, importlib.metadata as m; print(svc_sdk.__file__); "
                            "print(m.version('svc-sdk')); print(svc_sdk.action_hash({'tool':'t','action':'a'}))"],
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": target}, cwd=self.tmp, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        path, version, digest = r.stdout.splitlines()
        self.assertTrue(path.startswith(target), r.stdout)
        self.assertEqual(version, "0.1.0")
        self.assertEqual(len(digest), 64)

    def test_wheel_and_sdist(self):
        out = os.path.join(self.tmp, "dist")
        r = self._pip("wheel", "--no-index", "--no-deps", "--quiet", "--wheel-dir", out, self.src)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(os.listdir(out), ["svc_sdk-0.1.0-py3-none-any.whl"])
        sys.path.insert(0, os.path.join(self.src, "_build"))
        try:
            import svc_build
            name = svc_build.build_sdist(out)
        finally:
            sys.path.pop(0)
        self.assertEqual(name, "svc_sdk-0.1.0.tar.gz")
        self.assertTrue(os.path.getsize(os.path.join(out, name)) > 1000)


if __name__ == "__main__":
    unittest.main()
