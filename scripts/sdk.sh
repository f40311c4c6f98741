#!/usr/bin/env bash
# sdk.sh: build or test every client SDK under sdk/<language>/.
#
# Usage: scripts/sdk.sh build   each SDK's sdk/<language>/build.sh, when it
#                               has one, then checks that every SDK has an
#                               executable conformance-driver (CONTRACT §14)
#        scripts/sdk.sh test    each SDK's sdk/<language>/test.sh (its vectors
#                               and its live suite against SVC_BIN), all at
#                               once (their suites mostly wait on gateways
#                               and approvals, each on its own loopback
#                               ports); each one's output is printed whole,
#                               in turn, once it ends; fails when any fails
# Env:   SVC_BIN  the gateway binary the live suites start (default bin/svc)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

shopt -s nullglob
mode=${1:-build}
export SVC_BIN=${SVC_BIN:-$PWD/bin/svc}
status=0
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
pids=()
langs=()
for dir in sdk/*/; do
	lang=$(basename "$dir")
	[ "$lang" = conformance ] && continue
	case $mode in
	build)
		if [ -x "$dir/build.sh" ]; then
			echo "sdk.sh: building $lang"
			(cd "$dir" && ./build.sh)
		fi
		if [ ! -x "$dir/conformance-driver" ]; then
			echo "sdk.sh: $dir has no executable conformance-driver" >&2
			exit 1
		fi
		;;
	test)
		if [ ! -x "$dir/test.sh" ]; then
			echo "sdk.sh: $dir has no executable test.sh" >&2
			exit 1
		fi
		echo "sdk.sh: testing $lang"
		(cd "$dir" && ./test.sh) >"$logs/$lang" 2>&1 &
		pids+=($!)
		langs+=("$lang")
		;;
	*)
		echo "usage: scripts/sdk.sh build|test" >&2
		exit 2
		;;
	esac
done
for i in "${!pids[@]}"; do
	lang=${langs[$i]}
	rc=0
	wait "${pids[$i]}" || rc=$?
	echo "sdk.sh: ---- $lang (exit $rc) ----"
	cat "$logs/$lang"
	if [ "$rc" -ne 0 ]; then
		echo "sdk.sh: $lang FAILED" >&2
		status=1
	fi
done
if [ "$mode" = test ]; then
	echo "sdk.sh: summary"
	for lang in "${langs[@]}"; do
		grep -E '^[a-z]+( [a-z]+)?: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$logs/$lang" | sed 's/^/  /'
	done
fi
exit $status
