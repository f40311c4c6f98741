#!/usr/bin/env bash
# lint.sh: gofmt, go vet, then golangci-lint (pinned, installed into bin/).
#
# Usage: scripts/lint.sh
# Env:   GOLANGCI_LINT_ARGS  extra arguments for `golangci-lint run`
set -euo pipefail

# Newest v2 release on the module proxy that builds with our Go (1.26).
# Bump deliberately; the install below rebuilds when the version changes.
GOLANGCI_LINT_VERSION=v2.15.0

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
BIN=$ROOT/bin
LINTER=$BIN/golangci-lint

status=0

echo "==> gofmt -l"
# Every tracked or new .go file outside bin/ and vendor/ (none are generated yet).
unformatted=$(find . -path ./bin -prune -o -path ./vendor -prune -o -path ./.git -prune -o \
	-name '*.go' -type f -print0 | xargs -0 -r gofmt -l) || {
	echo "gofmt: could not parse some files (errors above)" >&2
	status=1
}
if [[ -n $unformatted ]]; then
	echo "gofmt: these files are not formatted (run 'make fmt'):" >&2
	sed 's/^/  /' <<<"$unformatted" >&2
	status=1
fi

echo "==> sizes (no file over 500 lines, no function over 100: scripts/sizes.sh)"
bash scripts/sizes.sh || status=1

echo "==> go vet ./..."
go vet ./... || status=1
# The Go SDK's modules (their own go.mod: ./... above does not reach them).
SDK_MODULES=(sdk/go sdk/go/mcpguard)
for m in "${SDK_MODULES[@]}"; do
	echo "==> go vet ./... in $m"
	(cd "$m" && go vet ./...) || status=1
done

installed_version() {
	[[ -x $LINTER ]] || return 0
	# "golangci-lint has version 2.15.0 built with go1.26.8 ..."
	"$LINTER" version 2>/dev/null | sed -n 's/.* version \([^ ]*\) .*/v\1/p' | head -n 1
}

if [[ $(installed_version) != "$GOLANGCI_LINT_VERSION" ]]; then
	echo "==> installing golangci-lint $GOLANGCI_LINT_VERSION into bin/ (a few minutes on 2 cores, once)"
	mkdir -p "$BIN"
	# go install will not overwrite a file it does not recognise as a Go binary.
	rm -f "$LINTER"
	start=$(date +%s)
	# GOFLAGS is cleared: a -mod=vendor or similar meant for this module
	# would make `go install pkg@version` refuse to run.
	GOBIN=$BIN GOFLAGS= go install \
		"github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$GOLANGCI_LINT_VERSION"
	echo "    installed in $(($(date +%s) - start))s: $("$LINTER" version)"
fi

echo "==> golangci-lint run ./... ($GOLANGCI_LINT_VERSION)"
# shellcheck disable=SC2086 # GOLANGCI_LINT_ARGS is a list of words by design
"$LINTER" run ${GOLANGCI_LINT_ARGS:-} ./... || status=1
for m in "${SDK_MODULES[@]}"; do
	echo "==> golangci-lint run ./... in $m (the repository's .golangci config)"
	# shellcheck disable=SC2086
	(cd "$m" && "$LINTER" run --config "$ROOT/.golangci.yml" ${GOLANGCI_LINT_ARGS:-} ./...) || status=1
done

if [[ $status -ne 0 ]]; then
	echo "lint: FAILED" >&2
else
	echo "lint: ok"
fi
exit "$status"
