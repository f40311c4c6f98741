#!/usr/bin/env bash
# Build step of the Go SDK (scripts/sdk.sh build): vet nothing, just compile
# the package and the conformance driver into bin/conformance-driver-bin,
# which the committed ./conformance-driver script runs.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p bin
go build ./...
(cd mcpguard && go build ./...)
go build -o bin/conformance-driver-bin ./cmd/conformance-driver
chmod +x conformance-driver build.sh test.sh
echo "svc/sdk/go built (bin/conformance-driver-bin)"
