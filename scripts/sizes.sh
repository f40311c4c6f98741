#!/usr/bin/env bash
# sizes.sh: the size rules of the gateway's Go code (issue 39): no file over
# 500 lines and no function over 100 lines, outside tests and test support
# (testkit/, persistence/storetest, */packtest, */mcptest), the load tools (cmd/loadgen,
# cmd/waitload, cmd/slowflood) and the client SDKs (sdk/, modules of their
# own). A function is measured from its `func` line to its closing brace at
# column 0. Prints each breach; exit 1 when there is one.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.go' |
	grep -v '_test\.go$' |
	grep -Ev '^(sdk/|testkit/|persistence/storetest/|evidencepack/packtest/|mcpclient/mcptest/|cmd/loadgen/|cmd/waitload/|cmd/slowflood/)')
status=0
for f in "${files[@]}"; do
	[ -f "$f" ] || continue
	n=$(wc -l <"$f")
	if [ "$n" -gt 500 ]; then
		echo "sizes: $f has $n lines (at most 500)"
		status=1
	fi
done
long=$(awk '/^func /{if ($0 ~ /\}[ \t]*$/) {s=0; next} s=FNR; name=$0}
	/^}/{if (s) {l=FNR-s+1; if (l>100) printf "sizes: %s:%d: a function of %d lines (at most 100): %s\n", FILENAME, s, l, name; s=0}}' "${files[@]}")
if [ -n "$long" ]; then
	echo "$long"
	status=1
fi
if [ "$status" -eq 0 ]; then
	echo "sizes: ok (${#files[@]} files)"
fi
exit "$status"
