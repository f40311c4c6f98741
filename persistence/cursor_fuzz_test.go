package persistence_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"svc/persistence"
)

// FuzzCursor (issue 20): DecodeCursor never panics and fails only with
// ErrBadCursor; a cursor it accepts is a row seq of at least 1 whose
// EncodeCursor is the cursor itself up to the case of its hex digits; and
// EncodeCursor then DecodeCursor is the identity for every seq a row can
// have (1 and up). EncodeCursor of a seq below 1 writes the zero cursor,
// which DecodeCursor refuses. The seed corpus is the f.Add calls below plus
// testdata/fuzz/FuzzCursor/; scripts/fuzz.sh fuzzes it for a few seconds.
func FuzzCursor(f *testing.F) {
	f.Add("0000000000000001", int64(1))
	f.Add("000000000000002A", int64(42))
	f.Add("7fffffffffffffff", int64(math.MaxInt64))
	f.Add("8000000000000000", int64(math.MinInt64))
	f.Add("ffffffffffffffff", int64(-1))
	f.Add("0000000000000000", int64(0))
	f.Add("", int64(1<<53+1))
	f.Add("00000000000001", int64(2))
	f.Add("000000000000000001", int64(3))
	f.Add("0x00000000000001", int64(4))
	f.Add(" 0000000000000001", int64(5))
	f.Add("000000000000000g", int64(6))
	f.Add("\xff\xfe", int64(7))
	f.Fuzz(func(t *testing.T, cursor string, seq int64) {
		got, err := persistence.DecodeCursor(cursor)
		if err != nil {
			if !errors.Is(err, persistence.ErrBadCursor) || got != 0 {
				t.Fatalf("DecodeCursor(%q) = %d, %v; want 0, ErrBadCursor", cursor, got, err)
			}
		} else {
			if got < 1 {
				t.Fatalf("DecodeCursor(%q) = %d, below the first row seq", cursor, got)
			}
			if enc := persistence.EncodeCursor(got); enc != strings.ToLower(cursor) {
				t.Fatalf("DecodeCursor(%q) = %d, whose cursor is %q", cursor, got, enc)
			}
		}

		enc := persistence.EncodeCursor(seq)
		if len(enc) != 16 || strings.ToLower(enc) != enc {
			t.Fatalf("EncodeCursor(%d) = %q, want 16 lower-case hex digits", seq, enc)
		}
		back, err := persistence.DecodeCursor(enc)
		switch {
		case seq >= 1 && (err != nil || back != seq):
			t.Fatalf("DecodeCursor(EncodeCursor(%d)) = %d, %v", seq, back, err)
		case seq < 1 && (enc != "0000000000000000" || err == nil):
			t.Fatalf("seq %d: cursor %q decodes to %d, %v; want the zero cursor, refused", seq, enc, back, err)
		}
	})
}
