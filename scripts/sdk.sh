#!/usr/bin/env bash
# sdk.sh: build or test every client SDK under sdk/<language>/.
#
# Usage: scripts/sdk.sh build   each SDK's sdk/<language>/build.sh, when it
#                               has one, then checks that every SDK has an
#                               executable conformance-driver (CONTRACT §14)
#        scripts/sdk.sh test    each SDK's sdk/<language>/test.sh (its vectors
#                               and its live suite against SVC_BIN), in turn;
#                               fails when any fails
# Env:   SVC_BIN  the gateway binary the live suites start (default bin/svc)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

shopt -s nullglob
mode=${1:-build}
export SVC_BIN=${SVC_BIN:-$PWD/bin/svc}
status=0
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
		if ! (cd "$dir" && ./test.sh); then
			echo "sdk.sh: $lang FAILED" >&2
			status=1
		fi
		;;
	*)
		echo "usage: scripts/sdk.sh build|test" >&2
		exit 2
		;;
	esac
done
exit $status
