package canonical

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// Fuzz targets for svc-jcs-1 (issue 20). The seed corpus is the f.Add calls
// below plus testdata/fuzz/<target>/; `go test` runs both as ordinary tests,
// scripts/fuzz.sh fuzzes each target for a few seconds.
//
// Two routes produce canonical bytes: the generic one (JCS over JSON text,
// and Marshal, which is encoding/json followed by JCS) and the direct one
// (appendJCS, which writes the canonical form of a decoded Go value without
// re-parsing; it is what ActionBytes and ActionHash use). The targets hold
// them to the same bytes, or to failing together.

var jcsFuzzSeeds = []string{
	`{}`, `[]`, `null`, `true`, `0`, `-0`, `-0.0`, `1e21`, `1e-7`, `5e-324`, `1.7976931348623157e308`,
	`9007199254740993`, `123456789012345678901234567890`, `0.1`, `-2.5E+3`, `1E400`, `1e-400`,
	`{"b":1,"a":2,"c":{"z":[3,2,1],"y":null}}`,
	`{"\u20ac":1,"\r":2,"1":3,"\ud83d\ude00":4,"\u0080":5,"\u00f6":6,"\ufb33":7}`,
	`{"a":"\u0000\u001f\b\t\n\f\r\"\\/\u2028\u2029\ue000\uffff"}`,
	`["\ud800"]`, `["\udc00"]`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`,
	"[\"\xff\"]", "{\"\xff\":1,\"\xfe\":2}",
	` { "a" : [ 1 , 2 ] } `, `{"a":1} x`, `[1,2`, `01`,
	`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[{"deep":true}]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
}

// FuzzJCSDifferential: for any input text,
//   - each Go value encoding/json decodes it into (float64 numbers and
//     json.Number) canonicalizes to the same bytes by the direct encoder as
//     by Marshal, or fails on both;
//   - when JCS accepts the text, those bytes are JCS's, they are valid
//     UTF-8 JSON, JCS of them is themselves, and the same document written
//     with other key order, white space, string escapes and number spellings
//     canonicalizes to them too.
func FuzzJCSDifferential(f *testing.F) {
	for _, s := range jcsFuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		gen, gerr := JCS(raw)

		var values []any
		var asFloat any
		if err := json.Unmarshal(raw, &asFloat); err == nil {
			values = append(values, asFloat)
		} else if gerr == nil {
			t.Fatalf("JCS accepted %q, encoding/json rejects it: %v", raw, err)
		}
		asNumber, nerr := decodeUseNumber(raw)
		if nerr == nil {
			values = append(values, asNumber)
		} else if gerr == nil {
			t.Fatalf("JCS accepted %q, encoding/json (UseNumber) rejects it: %v", raw, nerr)
		}

		for _, v := range values {
			direct, derr := appendJCS(nil, v, 0)
			generic, merr := Marshal(v)
			switch {
			case (derr != nil) != (merr != nil):
				t.Fatalf("input %q as %T: direct error %v, generic error %v", raw, v, derr, merr)
			case derr == nil && !bytes.Equal(direct, generic):
				t.Fatalf("input %q as %T:\n direct  %q\n generic %q", raw, v, direct, generic)
			case gerr == nil && derr != nil:
				t.Fatalf("JCS accepted %q, the value path fails: %v", raw, derr)
			case gerr == nil && !bytes.Equal(direct, gen):
				t.Fatalf("input %q as %T:\n value path %q\n text path  %q", raw, v, direct, gen)
			}
		}
		if gerr != nil {
			return
		}

		checkCanonical(t, raw, gen)

		// The same document, spelled differently, has the same canonical
		// bytes. asNumber holds every number as written and every string
		// exactly (JCS refused invalid UTF-8 and lone surrogates).
		for variant := range 2 {
			var sb strings.Builder
			writeEquivalent(&sb, asNumber, variant, 0)
			other, err := JCS([]byte(sb.String()))
			if err != nil {
				t.Fatalf("input %q: equivalent text %q rejected: %v", raw, sb.String(), err)
			}
			if !bytes.Equal(other, gen) {
				t.Fatalf("input %q: equivalent text %q canonicalizes to\n %q, not\n %q", raw, sb.String(), other, gen)
			}
		}
	})
}

// FuzzActionBytesDifferential: the action bytes of a tool call whose
// parameters come from arbitrary JSON (and a few typed Go numbers) are the
// same by the direct encoder as by the generic path (Marshal of the
// normalized ToolCall), or both fail; when they succeed they are canonical
// JSON, and ActionHash is their SHA-256.
func FuzzActionBytesDifferential(f *testing.F) {
	f.Add("CodeHost", "merge_pull_request", "acme/api#42", true, []byte(`{"method":"squash","n":3}`), int64(42), 0.5, false)
	f.Add(" %43ode\tHost ", "MERGE%5Fpull", "", false, []byte(`{}`), int64(-1), math.Copysign(0, -1), true)
	f.Add("cafe\u0301", "%2541", "\xff", true, []byte(`{"\u20ac":[1e21,1e-7,{"\ud83d\ude00":null}],"\ue000":"x"}`), int64(math.MaxInt64), 1e300, false)
	f.Add("t", "a", "r", true, []byte(`[1,2,3]`), int64(1<<53+1), math.Inf(1), true)
	f.Add("t", "a", "r", false, []byte(`{"a":1E400}`), int64(0), math.NaN(), true)
	f.Add("\x00\x1f\"\\", "\u2028", "\u0130", true, []byte("{\"\xff\":1,\"\xfe\":2}"), int64(-1<<62), 5e-324, false)
	f.Fuzz(func(t *testing.T, tool, action, resource string, hasResource bool, params []byte, n int64, x float64, useNumber bool) {
		tc := ToolCall{Tool: tool, Action: action}
		if hasResource {
			tc.Resource = &resource
		}
		var decoded any
		var err error
		if useNumber {
			decoded, err = decodeUseNumber(params)
		} else {
			err = json.Unmarshal(params, &decoded)
		}
		switch m, isMap := decoded.(map[string]any); {
		case err != nil:
			tc.Parameters = map[string]any{"raw": string(params)}
		case isMap:
			tc.Parameters = m
		case decoded != nil:
			tc.Parameters = map[string]any{"v": decoded}
		}
		// Numbers the decoder never produces but a Go caller may pass.
		if tc.Parameters != nil && n%3 != 0 {
			tc.Parameters["int64"] = n
			tc.Parameters["int"] = int(n)
			tc.Parameters["float"] = x
		}

		direct, derr := ActionBytes(tc)
		generic, gerr := actionBytesGeneric(tc)
		switch {
		case (derr != nil) != (gerr != nil):
			t.Fatalf("direct error %v, generic error %v\ncall %#v", derr, gerr, tc)
		case derr != nil:
			if _, herr := ActionHash(tc); herr == nil {
				t.Fatalf("ActionBytes fails (%v), ActionHash does not\ncall %#v", derr, tc)
			}
			return
		case !bytes.Equal(direct, generic):
			t.Fatalf("call %#v:\n direct  %q\n generic %q", tc, direct, generic)
		}
		checkCanonical(t, params, direct)

		h, err := ActionHash(tc)
		if err != nil {
			t.Fatalf("ActionBytes succeeds, ActionHash fails: %v", err)
		}
		sum := sha256.Sum256(direct)
		if h != hex.EncodeToString(sum[:]) {
			t.Fatalf("ActionHash %s is not the SHA-256 of ActionBytes %q", h, direct)
		}
		pre := tc
		pre.Tool, pre.Action = NormalizeIdentifier(tc.Tool), NormalizeIdentifier(tc.Action)
		if h2, err := NormalizedActionHash(pre); err != nil || h2 != h {
			t.Fatalf("NormalizedActionHash of the normalized call = %s, %v; ActionHash = %s", h2, err, h)
		}
	})
}

// decodeUseNumber decodes one JSON text, numbers as json.Number; trailing
// data is an error, as it is for json.Unmarshal.
func decodeUseNumber(raw []byte) (any, error) {
	if !json.Valid(raw) {
		return nil, errNotJSON
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

var errNotJSON = errors.New("not a JSON text")

// checkCanonical holds the invariants of canonical bytes out: valid UTF-8,
// valid JSON, a fixed point of JCS.
func checkCanonical(t *testing.T, in, out []byte) {
	t.Helper()
	if !utf8.Valid(out) || !json.Valid(out) {
		t.Fatalf("input %q: canonical bytes %q are not valid UTF-8 JSON", in, out)
	}
	again, err := JCS(out)
	if err != nil {
		t.Fatalf("input %q: JCS rejects its own canonical bytes %q: %v", in, out, err)
	}
	if !bytes.Equal(again, out) {
		t.Fatalf("input %q: not idempotent:\n once  %q\n twice %q", in, out, again)
	}
}

// writeEquivalent writes v (as decoded with UseNumber) as JSON text equal
// to it under RFC 8785 but spelled otherwise: members in reverse byte order,
// white space between every token, strings with non-ASCII and some ASCII
// characters as \u escapes (surrogate pairs beyond the BMP) and "/" as
// "\/", and, in variant 1, every number as its shortest exponent form.
func writeEquivalent(sb *strings.Builder, v any, variant, depth int) {
	ws := []string{" ", "\n", "\t", "\r\n  "}[(depth+variant)%4]
	switch x := v.(type) {
	case nil:
		sb.WriteString("null")
	case bool:
		sb.WriteString(strconv.FormatBool(x))
	case json.Number:
		if variant == 1 {
			if f, err := strconv.ParseFloat(string(x), 64); err == nil {
				sb.WriteString(strconv.FormatFloat(f, 'e', -1, 64))
				return
			}
		}
		sb.WriteString(string(x))
	case string:
		writeEscaped(sb, x, variant)
	case []any:
		sb.WriteString("[" + ws)
		for i, e := range x {
			if i > 0 {
				sb.WriteString(ws + "," + ws)
			}
			writeEquivalent(sb, e, variant, depth+1)
		}
		sb.WriteString(ws + "]")
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		slices.Reverse(keys)
		sb.WriteString("{" + ws)
		for i, k := range keys {
			if i > 0 {
				sb.WriteString("," + ws)
			}
			writeEscaped(sb, k, variant)
			sb.WriteString(ws + ":" + ws)
			writeEquivalent(sb, x[k], variant, depth+1)
		}
		sb.WriteString(ws + "}")
	default:
		panic("writeEquivalent: unexpected type")
	}
}

func writeEscaped(sb *strings.Builder, s string, variant int) {
	sb.WriteByte('"')
	for i, r := range s {
		switch {
		case r == '/':
			sb.WriteString(`\/`)
		case r < 0x20 || r == '"' || r == '\\' || r >= 0x80 || (variant == 1 && i%2 == 0):
			if r > 0xffff {
				hi, lo := utf16.EncodeRune(r)
				sb.WriteString(`\u` + hex4(hi) + `\u` + hex4(lo))
			} else {
				sb.WriteString(`\u` + hex4(r))
			}
		default:
			sb.WriteRune(r)
		}
	}
	sb.WriteByte('"')
}

func hex4(r rune) string {
	s := strconv.FormatInt(int64(r), 16)
	if len(s) < 4 {
		s = strings.Repeat("0", 4-len(s)) + s
	}
	if r%2 == 0 { // both cases of hex digit are JSON
		s = strings.ToUpper(s)
	}
	return s
}
