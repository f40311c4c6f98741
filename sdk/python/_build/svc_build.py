"""A PEP 517 build backend for svc-sdk in the standard library alone.

The SDK has no dependencies, and neither has its build: `pip install
./sdk/python` builds the wheel with this module (pyproject.toml's
backend-path), so it works offline, without setuptools or wheel from a
package index. It builds a pure-Python wheel (svc_sdk and its metadata from
pyproject.toml), an sdist, and an editable wheel (PEP 660: a .pth file that
points at this folder).
"""
import base64
import hashlib
import io
import os
import tarfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "svc_sdk"


def _project():
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


def _dist_name(p):
    return p["name"].replace("-", "_")


def _metadata(p):
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {p['name']}",
        f"Version: {p['version']}",
        f"Summary: {p.get('description', '')}",
        f"Requires-Python: {p.get('requires-python', '>=3')}",
    ]
    lic = p.get("license", {})
    if isinstance(lic, dict) and lic.get("text"):
        lines.append(f"License: {lic['text']}")
    for c in p.get("classifiers", []):
        lines.append(f"Classifier: {c}")
    for dep in p.get("dependencies", []):
        lines.append(f"Requires-Dist: {dep}")
    for extra, deps in p.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        for dep in deps:
            lines.append(f'Requires-Dist: {dep}; extra == "{extra}"')
    body = ""
    readme = p.get("readme")
    if readme:
        lines.append("Description-Content-Type: text/markdown")
        body = "\n" + (ROOT / readme).read_text(encoding="utf-8")
    return "\n".join(lines) + "\n" + body


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _wheel(wheel_directory, files):
    """Write a py3-none-any wheel holding files (archive name to bytes) and
    the dist-info, and return its file name."""
    p = _project()
    name, version = _dist_name(p), p["version"]
    info = f"{name}-{version}.dist-info"
    files = dict(files)
    files[f"{info}/METADATA"] = _metadata(p).encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: svc_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = [_record_line(n, d) for n, d in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    filename = f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in files.items():
            z.writestr(zipfile.ZipInfo(n, date_time=(2026, 1, 1, 0, 0, 0)), d)
    return filename


def _package_files():
    out = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        out[path.relative_to(ROOT).as_posix()] = path.read_bytes()
    return out


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, _package_files())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, {f"__editable__.{PACKAGE}.pth": (str(ROOT) + "\n").encode()})


def build_sdist(sdist_directory, config_settings=None):
    p = _project()
    base = f"{_dist_name(p)}-{p['version']}"
    filename = f"{base}.tar.gz"
    members = ["pyproject.toml", "README.md", "_build/svc_build.py"] + sorted(_package_files())
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for rel in members:
            data = (ROOT / rel).read_bytes()
            ti = tarfile.TarInfo(f"{base}/{rel}")
            ti.size, ti.mtime, ti.mode = len(data), 1767225600, 0o644
            tar.addfile(ti, io.BytesIO(data))
        pkg_info = _metadata(p).encode()
        ti = tarfile.TarInfo(f"{base}/PKG-INFO")
        ti.size, ti.mtime, ti.mode = len(pkg_info), 1767225600, 0o644
        tar.addfile(ti, io.BytesIO(pkg_info))
    return filename
