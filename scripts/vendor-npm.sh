#!/usr/bin/env bash
# vendor-npm.sh PACKAGE VERSION: replaces a vendored npm package with
# VERSION's release from the npm registry, unedited, after checking the
# tarball against the registry's sha512 integrity; writes VERSION.txt with
# that integrity and the files' sha256. Needs npm. Two packages:
#
#   vis-network  the console's graph library (http/dashboard/vendor/vis-network/,
#                embedded in the binary): the self-contained ES module build
#                (no bare imports, no injected <style>, which the console's
#                Content-Security-Policy would refuse), its stylesheet and
#                both licenses.
#   axe-core     the accessibility checker the console's tests run in
#                Chromium (e2e/testdata/axe-core/, test only, never
#                served): axe.min.js and its license.
set -euo pipefail
pkg=${1:?usage: scripts/vendor-npm.sh vis-network|axe-core VERSION}
version=${2:?usage: scripts/vendor-npm.sh vis-network|axe-core VERSION}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
case $pkg in
vis-network)
	dest=http/dashboard/vendor/vis-network
	files=(dist/vis-network.esm.min.js styles/vis-network.min.css LICENSE-MIT LICENSE-APACHE-2.0)
	;;
axe-core)
	dest=e2e/testdata/axe-core
	files=(axe.min.js LICENSE)
	;;
*)
	echo "vendor-npm: unknown package $pkg (vis-network or axe-core)" >&2
	exit 2
	;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$pkg@$version" >/dev/null)
tgz=$work/$pkg-$version.tgz
want=$(npm view "$pkg@$version" dist.integrity)
got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
if [[ $got != "$want" ]]; then
	echo "vendor-npm: $pkg integrity mismatch: registry $want, tarball $got" >&2
	exit 1
fi
tar -xzf "$tgz" -C "$work"
rm -rf "$dest"
mkdir -p "$dest"
names=()
for f in "${files[@]}"; do
	cp "$work/package/$f" "$dest/"
	names+=("$(basename "$f")")
done
{
	echo "$pkg $version from the npm registry, unedited"
	echo "tarball integrity: $want"
	(cd "$dest" && sha256sum "${names[@]}")
} >"$dest/VERSION.txt"
echo "vendored $pkg $version into $dest"
