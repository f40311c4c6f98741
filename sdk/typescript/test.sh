#!/usr/bin/env bash
# Test step of the TypeScript SDK (scripts/sdk.sh test): builds when dist/ is
# missing, then runs every node:test file under test/ (the shared vectors of
# testdata/ read in place, the client against a scripted fake server, the
# driver as a subprocess). The last line is
#   typescript: N passed, N failed, N skipped
# then the framework adapters' tests (test/frameworks/run.sh, "typescript
# adapters: ..."), then the shared live suite against a real svc (SVC_BIN) through this SDK's
# conformance driver (scripts/sdk-live.sh; last line "typescript live: ...").
# The exit status is non-zero when a test failed.
set -uo pipefail
cd "$(dirname "$0")"
if [ ! -f dist/index.js ] || [ ! -f dist/conformance.js ]; then
  ./build.sh >&2 || { echo "typescript: 0 passed, 1 failed, 0 skipped"; exit 1; }
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# test files only (*.test.mjs / *.test.js); helpers beside them are imported,
# not run. test/frameworks/ (the adapters against the real frameworks, with its
# own pinned packages) runs through its run.sh below.
mapfile -t files < <(find test \( -name node_modules -o -path test/frameworks \) -prune -o -type f \( -name '*.test.mjs' -o -name '*.test.js' -o -name '*.test.cjs' \) -print | sort)
node --test --test-reporter=tap --test-concurrency="${SVC_TS_TEST_CONCURRENCY:-2}" "$@" "${files[@]}" | tee "$out"
status=${PIPESTATUS[0]}
num() { sed -n "s/^# $1 \([0-9][0-9]*\)$/\1/p" "$out" | tail -1; }
pass=$(num pass); fail=$(num fail); skipped=$(num skipped); todo=$(num todo); cancelled=$(num cancelled)
pass=${pass:-0}; fail=${fail:-0}; skipped=$(( ${skipped:-0} + ${todo:-0} )); fail=$(( fail + ${cancelled:-0} ))
if [ "$status" -ne 0 ] && [ "$fail" -eq 0 ]; then fail=1; fi
echo "typescript: $pass passed, $fail failed, $skipped skipped"
unit=0
[ "$status" -eq 0 ] && [ "$fail" -eq 0 ] || unit=1
adapters=0
test/frameworks/run.sh || adapters=1
live=0
if [ "${SVC_TS_SKIP_LIVE:-}" != 1 ]; then
  ../../scripts/sdk-live.sh typescript || live=1
fi
[ "$unit" -eq 0 ] && [ "$adapters" -eq 0 ] && [ "$live" -eq 0 ]
