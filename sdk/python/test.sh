#!/usr/bin/env bash
# Test step of the Python SDK (scripts/sdk.sh test): every unit test, the
# shared vectors and, with SVC_BIN set, the live suite against a real gateway.
# Under CI=true a missing SVC_BIN is a failure, not a skip.
set -uo pipefail
cd "$(dirname "$0")"
if [ -z "${SVC_BIN:-}" ]; then
  if [ "${CI:-}" = "true" ]; then
    echo "sdk/python: SVC_BIN is not set under CI=true: the live suite cannot run" >&2
    exit 1
  fi
  echo "sdk/python: SVC_BIN is not set: the live suite will be SKIPPED" >&2
fi
exec python3 tests/run.py "$@"
