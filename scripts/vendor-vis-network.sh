#!/usr/bin/env bash
# vendor-vis-network.sh VERSION: replaces the console's vendored vis-network
# (http/dashboard/vendor/vis-network/) with VERSION's release from the npm
# registry, unedited: the self-contained ES module build (no bare imports,
# no injected <style>, which the console's Content-Security-Policy would
# refuse), its stylesheet and both licenses. It checks the tarball against
# the registry's sha512 integrity and writes VERSION.txt. Needs npm.
set -euo pipefail
version=${1:?usage: scripts/vendor-vis-network.sh VERSION (e.g. 10.1.2)}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dest=http/dashboard/vendor/vis-network
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "vis-network@$version" >/dev/null)
tgz=$work/vis-network-$version.tgz
want=$(npm view "vis-network@$version" dist.integrity)
got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
if [[ $got != "$want" ]]; then
	echo "vendor-vis-network: integrity mismatch: registry $want, tarball $got" >&2
	exit 1
fi
tar -xzf "$tgz" -C "$work"
rm -rf "$dest"
mkdir -p "$dest"
cp "$work/package/dist/vis-network.esm.min.js" "$work/package/styles/vis-network.min.css" \
	"$work/package/LICENSE-MIT" "$work/package/LICENSE-APACHE-2.0" "$dest/"
{
	echo "vis-network $version from the npm registry, unedited"
	echo "tarball integrity: $want"
	(cd "$dest" && sha256sum vis-network.esm.min.js vis-network.min.css)
} >"$dest/VERSION.txt"
echo "vendored vis-network $version into $dest"
