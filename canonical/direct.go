package canonical

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// maxDepth is gowebpki/jcs's nesting limit, kept so that the direct
// encoder fails exactly where the generic path does.
const maxDepth = 10000

// appendJCS appends the RFC 8785 form of v, for the values encoding/json
// decodes JSON into (map[string]any, []any, string, float64, bool, nil) and
// json.Number, int and int64, without encoding v and re-parsing the text:
// the action hash is computed for every authorize call, and the generic
// path (Marshal) spent 21 µs and 269 allocations on a typical call. Any
// other type is encoded by the generic path and appended. The bytes are
// those Marshal returns, which a property test holds:
//   - strings are coerced to UTF-8 as encoding/json does (each invalid byte
//     becomes U+FFFD) and written by [AppendString];
//   - numbers are read as IEEE-754 doubles and written in ECMAScript form
//     (jcs.NumberToJSON), so integers beyond 2^53 round as they would;
//   - object members are sorted by their names' UTF-16 code units, and two
//     names that coerce to the same text are a duplicate, an error.
func appendJCS(b []byte, v any, depth int) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case string:
		return AppendString(b, coerceUTF8(x)), nil
	case float64:
		return appendNumber(b, x)
	case int:
		return appendNumber(b, float64(x))
	case int64:
		return appendNumber(b, float64(x))
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return b, fmt.Errorf("canonical: number %q: %w", string(x), err)
		}
		return appendNumber(b, f)
	case []any:
		if depth++; depth > maxDepth {
			return b, errTooDeep
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendJCS(b, e, depth); err != nil {
				return b, err
			}
		}
		return append(b, ']'), nil
	case map[string]any:
		if depth++; depth > maxDepth {
			return b, errTooDeep
		}
		return appendObject(b, x, depth)
	default:
		raw, err := json.Marshal(v)
		if err != nil {
			return b, fmt.Errorf("canonical: encode: %w", err)
		}
		out, err := JCS(raw)
		if err != nil {
			return b, err
		}
		return append(b, out...), nil
	}
}

var errTooDeep = fmt.Errorf("canonical: nesting deeper than %d", maxDepth)

func appendNumber(b []byte, f float64) ([]byte, error) {
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		return b, fmt.Errorf("canonical: %w", err)
	}
	return append(b, s...), nil
}

type member struct {
	name  string // coerced to UTF-8
	value any
}

func appendObject(b []byte, m map[string]any, depth int) ([]byte, error) {
	members := make([]member, 0, len(m))
	for k, v := range m {
		members = append(members, member{coerceUTF8(k), v})
	}
	slices.SortFunc(members, func(x, y member) int { return compareUTF16(x.name, y.name) })
	b = append(b, '{')
	for i, mb := range members {
		if i > 0 {
			if members[i-1].name == mb.name {
				return b, errors.New("canonical: duplicate member name " + strconv.Quote(mb.name))
			}
			b = append(b, ',')
		}
		b = AppendString(b, mb.name)
		b = append(b, ':')
		var err error
		if b, err = appendJCS(b, mb.value, depth); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// compareUTF16 orders strings by their UTF-16 code units (RFC 8785 section
// 3.2.3). UTF-8 byte order agrees except between U+E000–U+FFFF and the
// supplementary planes, so only text with such characters is converted.
func compareUTF16(a, b string) int {
	if !hasHigh(a) || !hasHigh(b) {
		return strings.Compare(a, b)
	}
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

// hasHigh reports a character at U+E000 or beyond (lead byte 0xEE or more).
func hasHigh(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0xee {
			return true
		}
	}
	return false
}

// coerceUTF8 replaces each byte of s that is not part of valid UTF-8 with
// U+FFFD, as encoding/json does when it encodes a string.
func coerceUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var sb strings.Builder
	sb.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			sb.WriteRune(utf8.RuneError)
		} else {
			sb.WriteString(s[i : i+n])
		}
		i += n
	}
	return sb.String()
}
