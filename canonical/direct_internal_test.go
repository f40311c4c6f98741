package canonical

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// actionBytesGeneric is ActionBytes by the generic path (encode, then
// RFC 8785 over the text): the reference the direct encoder is tested
// against.
func actionBytesGeneric(tc ToolCall) ([]byte, error) {
	params := tc.Parameters
	if params == nil {
		params = map[string]any{}
	}
	return Marshal(ToolCall{
		Tool:       NormalizeIdentifier(tc.Tool),
		Action:     NormalizeIdentifier(tc.Action),
		Resource:   tc.Resource,
		Parameters: params,
	})
}

// gen builds random parameter trees of everything a request can carry and
// then some: strings with escapes, invalid UTF-8, characters on both sides
// of the UTF-16 ordering quirk; numbers of every magnitude; names that
// coerce to the same text; types the direct encoder hands to the generic
// path.
type gen struct{ rng *rand.Rand }

var pieces = []string{"a", "b", "Z", "0", "_", " ", "\"", "\\", "/", "<", ">", "&", "\b", "\t", "\n", "\f", "\r",
	"\x00", "\x01", "\x1f", "\x7f", "é", "ß", "€", "\u2028", "\ufeff", "\ue000", "\uffff", "😀", "\U0010ffff",
	"\xff", "\xc3", "\xed\xa0\x80", "\xef\xbf\xbd"}

func (g gen) str() string {
	var sb strings.Builder
	for range g.rng.IntN(6) {
		sb.WriteString(pieces[g.rng.IntN(len(pieces))])
	}
	return sb.String()
}

func (g gen) number() any {
	switch g.rng.IntN(9) {
	case 0:
		return math.Float64frombits(g.rng.Uint64() &^ (0x7ff << 52)) // finite: exponent not all ones
	case 1:
		return g.rng.NormFloat64() * math.Pow(10, float64(g.rng.IntN(60)-30))
	case 2:
		return float64(g.rng.IntN(2000) - 1000)
	case 3:
		return int(g.rng.Int64N(1<<62) - 1<<61)
	case 4:
		return g.rng.Int64()
	case 5:
		return json.Number([]string{"0", "-0", "1e21", "1e-7", "123456789012345678901234567890", "0.1", "-2.5E+3", "1E400"}[g.rng.IntN(8)])
	case 6:
		return math.Copysign(0, -1)
	case 7:
		return []float64{1e21, 1e-7, 9007199254740993, 5e-324, math.MaxFloat64, 0.1, 100}[g.rng.IntN(7)]
	default:
		return float32(0.1) // the generic path's (float32 precision)
	}
}

func (g gen) value(depth int) any {
	n := 8
	if depth > 4 {
		n = 5
	}
	switch g.rng.IntN(n) {
	case 0:
		return nil
	case 1:
		return g.rng.IntN(2) == 0
	case 2:
		return g.str()
	case 3, 4:
		return g.number()
	case 5:
		m := map[string]any{}
		for range g.rng.IntN(5) {
			m[g.str()] = g.value(depth + 1)
		}
		return m
	case 6:
		a := make([]any, g.rng.IntN(4))
		for i := range a {
			a[i] = g.value(depth + 1)
		}
		return a
	default:
		return []any{[]string{g.str()}, map[string]int{g.str(): 1}, struct{ A string }{g.str()}}[g.rng.IntN(3)]
	}
}

// The direct encoder gives the generic path's bytes, or fails where it
// fails, over 20,000 random calls.
func TestActionBytesMatchesGeneric(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(7, 11))}
	var equal, failed int
	for i := range 20000 {
		params := map[string]any{}
		for range g.rng.IntN(6) {
			params[g.str()] = g.value(0)
		}
		tc := ToolCall{Tool: g.str(), Action: g.str(), Parameters: params}
		if i%3 == 0 {
			r := g.str()
			tc.Resource = &r
		}
		if i%50 == 0 {
			tc.Parameters = nil
		}
		got, gerr := ActionBytes(tc)
		want, werr := actionBytesGeneric(tc)
		switch {
		case (gerr != nil) != (werr != nil):
			t.Fatalf("call %d: direct error %v, generic error %v\nparams %#v", i, gerr, werr, params)
		case gerr != nil:
			failed++
		case !bytes.Equal(got, want):
			t.Fatalf("call %d:\n direct  %s\n generic %s\nparams %#v", i, got, want, params)
		default:
			equal++
		}
	}
	if equal < 15000 || failed == 0 {
		t.Fatalf("%d equal, %d failing on both paths: the generator no longer covers both", equal, failed)
	}
}

// Nesting beyond the limit fails on both paths.
func TestActionBytesDepthLimit(t *testing.T) {
	for _, depth := range []int{maxDepth - 2, maxDepth + 5} {
		var v any = "leaf"
		for range depth {
			v = []any{v}
		}
		tc := ToolCall{Tool: "t", Action: "a", Parameters: map[string]any{"deep": v}}
		got, gerr := ActionBytes(tc)
		want, werr := actionBytesGeneric(tc)
		if (gerr != nil) != (werr != nil) || (gerr == nil && !bytes.Equal(got, want)) {
			t.Fatalf("depth %d: direct err %v, generic err %v", depth, gerr, werr)
		}
	}
}
