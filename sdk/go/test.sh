#!/usr/bin/env bash
# Test step of the Go SDK (scripts/sdk.sh test): every unit test of the
# module (the shared vectors of testdata/jcs and testdata/sdk read in place,
# the client against a scripted fake svc, the driver), then a line
# "go: N passed, N failed, N skipped", then the shared live suite through the
# driver ("go live: ..."). Exit status non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
go test -count=1 -json ./... "$@" >"$out"
status=$?
# mcpguard is a module of its own (it pulls the MCP SDK): its tests, live
# against SVC_BIN, are counted with the others.
(cd mcpguard && go test -count=1 -json ./... "$@") >>"$out" || status=1
# Human-readable output: the failures' logs and the package summaries.
python3 - "$out" <<'PY' || true
import json, sys
passed = failed = skipped = 0
logs = {}
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    try:
        e = json.loads(line)
    except ValueError:
        print(line, end="")
        continue
    t, a = e.get("Test"), e.get("Action")
    key = (e.get("Package"), t)
    if a == "output":
        if t:
            logs.setdefault(key, []).append(e.get("Output", ""))
        else:
            print(e.get("Output", ""), end="")
    elif t and a in ("pass", "fail", "skip"):
        if a == "fail":
            failed += 1
            print("".join(logs.get(key, [])), end="")
        elif a == "pass":
            passed += 1
        else:
            skipped += 1
with open(sys.argv[1] + ".counts", "w") as f:
    f.write(f"{passed} {failed} {skipped}\n")
PY
read -r passed failed skipped <"$out.counts" 2>/dev/null || { passed=0; failed=1; skipped=0; }
rm -f "$out.counts"
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
echo "go: $passed passed, $failed failed, $skipped skipped"
unit=0
[ "$status" -eq 0 ] && [ "$failed" -eq 0 ] || unit=1
# The shared live suite against a real svc (SVC_BIN), through this SDK's
# conformance driver (sdk/README.md; scripts/sdk-live.sh).
live=0
../../scripts/sdk-live.sh go || live=1
[ "$unit" -eq 0 ] && [ "$live" -eq 0 ]
