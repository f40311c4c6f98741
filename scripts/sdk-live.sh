#!/usr/bin/env bash
# sdk-live.sh: the shared live suite (sdk/python/tests/live: test_live and
# test_cluster), written once against the Python client's API, run against
# another SDK through its conformance driver's live operations (sdk/README.md).
#
# Usage: scripts/sdk-live.sh LANGUAGE     (from anywhere; sdk/LANGUAGE/conformance-driver)
# Env:   SVC_BIN   the gateway binary the suite starts (required under CI=true;
#                  without it the suite is skipped loudly)
#        SVC_TEST_POSTGRES_URL, SVC_TEST_VALKEY_URL, SVC_TEST_PG_BIN  for the
#                  two-node cases (scripts/testenv.sh sets them)
# Prints "LANGUAGE live: N passed, N failed, N skipped" last; exit 1 on failure.
set -uo pipefail
lang=${1:?usage: scripts/sdk-live.sh LANGUAGE}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
driver=$root/sdk/$lang/conformance-driver
if [ ! -x "$driver" ]; then
	echo "sdk-live.sh: $driver is not executable (run make sdk)" >&2
	exit 1
fi
if [ -z "${SVC_BIN:-}" ]; then
	if [ "${CI:-}" = "true" ]; then
		echo "sdk-live.sh: SVC_BIN is not set under CI=true: the $lang live suite cannot run" >&2
		exit 1
	fi
	echo "sdk-live.sh: SVC_BIN is not set: the $lang live suite will be SKIPPED" >&2
fi
cd "$root/sdk/python"
SVC_SDK_LIVE_DRIVER=$driver SVC_SDK_LIVE_LABEL="$lang live" exec python3 tests/run.py tests.live.test_live tests.live.test_cluster
