#!/usr/bin/env bash
# The framework adapter tests (svc-sdk/adapters/*) against the real frameworks
# (pinned in package.json / package-lock.json) and a real svc gateway (SVC_BIN).
# Installs the pinned frameworks with `npm ci` when node_modules is missing or
# older than the lockfile, builds the SDK when dist/ is missing, runs every
# *.test.mjs with node:test, and prints, last,
#   typescript adapters: N passed, N failed, N skipped
# (the type check of types/check.ts counts as one test). Exit status non-zero
# on any failure. Without SVC_BIN the tests are skipped,
# loudly; under CI=true that is a failure. Does not take /tmp/svc-heavy.lock
# itself (its caller may hold it): wrap it, e.g. flock /tmp/svc-heavy.lock ./run.sh
set -uo pipefail
cd "$(dirname "$0")"

summary() { echo "typescript adapters: $1 passed, $2 failed, $3 skipped"; }

if [ -z "${SVC_BIN:-}" ]; then
  if [ "${CI:-}" = "true" ]; then
    echo "*** SVC_BIN is not set under CI=true: the framework adapter tests cannot run ***" >&2
    summary 0 1 0
    exit 1
  fi
  echo "*** SVC_BIN is not set: the framework adapter tests are SKIPPED (set it to a built svc binary) ***" >&2
elif [ ! -x "$SVC_BIN" ]; then
  echo "SVC_BIN=$SVC_BIN is not an executable" >&2
  summary 0 1 0
  exit 1
fi

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules ]; then
  if ! npm ci --no-audit --no-fund --loglevel=error; then
    echo "npm ci of the pinned frameworks failed" >&2
    summary 0 1 0
    exit 1
  fi
  touch node_modules
fi

if [ ! -f ../../dist/adapters/ai.js ] || [ ! -f ../../dist/index.js ]; then
  if ! (cd ../.. && ./build.sh); then
    echo "building svc-sdk failed" >&2
    summary 0 1 0
    exit 1
  fi
fi

# The adapters' structural types against the frameworks' own (compile only).
typefail=0
if ../../node_modules/.bin/tsc -p types; then
  echo "ok - adapter types fit the frameworks' types (types/check.ts)"
else
  echo "not ok - adapter types do not fit the frameworks' types (types/check.ts)"
  typefail=1
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
node --test --test-reporter=tap ./*.test.mjs 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

count() { awk -v k="# $1" '$1" "$2 == k { n = $3 } END { print n + 0 }' "$log"; }
pass=$(count pass)
fail=$(count fail)
skip=$(count skipped)
cancelled=$(count cancelled)
fail=$((fail + cancelled + typefail))
pass=$((pass + 1 - typefail))
if [ "$rc" -ne 0 ] && [ "$fail" -eq 0 ]; then fail=1; fi
summary "$pass" "$fail" "$skip"
[ "$rc" -eq 0 ] && [ "$fail" -eq 0 ]
