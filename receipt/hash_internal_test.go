package receipt

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unicode/utf8"

	"svc/canonical"
)

// The hand-written canonical form equals the generic one (encoding/json,
// then RFC 8785) for random receipts whose strings carry every kind of
// character the escaping distinguishes.
func TestCanonicalMatchesGenericJCS(t *testing.T) {
	alphabet := []rune{'a', 'Z', '0', ' ', '"', '\\', '/', '<', '>', '&', '\b', '\t', '\n', '\f', '\r', 0, 1, 0x1f, 0x7f,
		'é', 'ß', '€', 0x2028, 0x2029, 0xfeff, '😀', 0x10ffff}
	rng := rand.New(rand.NewPCG(1, 2))
	str := func() string {
		n := rng.IntN(12)
		r := make([]rune, n)
		for i := range r {
			r[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(r)
	}
	seqs := []int64{0, 1, -1, 9, 10, 1 << 31, 1<<53 - 1, 1 << 53, -(1 << 53)}
	for i := range 5000 {
		h := hashed{ReceiptID: str(), TenantID: str(), DecisionID: str(), ActionHash: str(), Decision: str(),
			PrevReceiptHash: str(), KeyID: str(), CreatedAt: str(), Seq: seqs[i%len(seqs)]}
		if i%len(seqs) == 0 {
			h.Seq = rng.Int64N(1<<53) - 1<<52
		}
		if i%2 == 0 { // svc-receipt-2
			h.ContextHash = str()
		}
		want, err := canonical.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		if got := h.canonical(nil); !bytes.Equal(got, want) {
			t.Fatalf("canonical(%+v)\n got %s\nwant %s", h, got, want)
		}
	}
	// And every single code point below U+0100 (all escapes live there).
	for c := rune(0); c < 0x100; c++ {
		h := hashed{Decision: string(c)}
		if !utf8.ValidString(h.Decision) {
			continue
		}
		want, err := canonical.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		if got := h.canonical(nil); !bytes.Equal(got, want) {
			t.Fatalf("U+%04X: got %s want %s", c, got, want)
		}
	}
}
