#!/usr/bin/env bash
# Build step of the TypeScript SDK (scripts/sdk.sh build): install the pinned
# dev dependencies when node_modules is missing or older than
# package-lock.json (offline otherwise), compile src/ into dist/ with tsc, and
# make the conformance driver executable.
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules ] || [ ! -x node_modules/.bin/tsc ]; then
  npm ci --no-audit --no-fund --loglevel=error
  touch node_modules
fi
rm -rf dist
node_modules/.bin/tsc -p .
chmod +x conformance-driver build.sh test.sh
echo "svc-sdk (typescript) $(node -p 'require("./package.json").version') built"
