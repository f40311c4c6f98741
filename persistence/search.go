package persistence

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"unicode"
)

// ErrBadCursor: a pagination cursor that does not decode.
var ErrBadCursor = errors.New("persistence: invalid cursor")

// SanitizeQuery applies SPEC 4.1's keyword-search rules to a `q` value and
// returns its search terms: every character other than a letter, digit,
// whitespace or underscore is dropped, and the text is split into words at
// whitespace and underscores (both backends' full-text tokenizers split
// there too). The last term is matched as a prefix by the backends. An empty
// result means no filter.
func SanitizeQuery(q string) []string {
	var b strings.Builder
	for _, r := range q {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r):
			b.WriteRune(unicode.ToLower(r))
		case unicode.IsSpace(r), r == '_':
			b.WriteRune(' ')
		}
	}
	return strings.Fields(b.String())
}

// EncodeCursor turns a row sequence number into the opaque hex cursor of the
// X-Next-Cursor header.
func EncodeCursor(seq int64) string {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], uint64(max(seq, 0)))
	return hex.EncodeToString(buf[:])
}

// DecodeCursor is the inverse of EncodeCursor.
func DecodeCursor(c string) (int64, error) {
	raw, err := hex.DecodeString(c)
	if err != nil || len(raw) != 8 {
		return 0, ErrBadCursor
	}
	u := binary.BigEndian.Uint64(raw)
	if u == 0 || u > math.MaxInt64 {
		return 0, ErrBadCursor
	}
	return int64(u), nil
}
