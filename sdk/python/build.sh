#!/usr/bin/env bash
# Build step of the Python SDK (scripts/sdk.sh build): byte-compile the package
# (a syntax error fails here) and make the conformance driver executable.
set -euo pipefail
cd "$(dirname "$0")"
python3 -m compileall -q svc_sdk
chmod +x conformance-driver build.sh test.sh
python3 -c 'import sys; sys.path.insert(0, "."); import svc_sdk; print("svc_sdk", svc_sdk.__version__, "built")'
