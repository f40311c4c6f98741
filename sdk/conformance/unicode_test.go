package conformance_test

import (
	"testing"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// TestUnicodeTables pins the Unicode version of the tables svc-jcs-1 is
// computed with (testdata/sdk/README.md, SPEC 9.5). A toolchain or x/text
// upgrade that changes them changes action hashes of identifiers holding
// newly assigned code points: such a gateway must not ship under the scheme
// name svc-jcs-1.
func TestUnicodeTables(t *testing.T) {
	if unicode.Version != pinnedUnicode {
		t.Errorf("unicode.Version = %s, svc-jcs-1 is pinned to %s: this toolchain lower-cases and trims with other tables", unicode.Version, pinnedUnicode)
	}
	if norm.Version != pinnedUnicode {
		t.Errorf("norm.Version = %s, svc-jcs-1 is pinned to %s: this x/text and toolchain compose with other tables (x/text picks tables17.0.0 for go1.27)",
			norm.Version, pinnedUnicode)
	}
}
