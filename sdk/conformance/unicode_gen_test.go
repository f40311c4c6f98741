package conformance_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"unicode"

	"golang.org/x/text/unicode/rangetable"

	"svc/canonical"
)

// pinnedUnicode is the Unicode version svc-jcs-1 is defined on.
const pinnedUnicode = "15.0.0"

// unicodeSensitive reports whether an identifier holds a code point that
// Unicode 15.0.0 leaves unassigned, as written or once percent-decoded: a
// runtime whose tables are newer may case-map or compose it where svc
// leaves it unchanged.
func unicodeSensitive(s string) bool {
	assigned := rangetable.Assigned(pinnedUnicode)
	unassigned := func(s string) bool {
		return strings.ContainsFunc(s, func(r rune) bool { return !unicode.Is(assigned, r) })
	}
	if unassigned(s) {
		return true
	}
	d, err := url.PathUnescape(s)
	return err == nil && unassigned(d)
}

func unicodeVectors(t *testing.T) []unicodeVector {
	t.Helper()
	if rangetable.Assigned(pinnedUnicode) == nil {
		t.Fatalf("x/text has no table of the code points assigned in Unicode %s", pinnedUnicode)
	}
	type ucase struct {
		name         string
		tool, action string
		// wantTool and wantAction: the identifiers after rule 7, written by
		// hand; svc/canonical must agree.
		wantTool, wantAction string
		sensitive            bool
		note                 string
		resource             *string
		params               map[string]any
	}
	cases := []ucase{
		{name: "U+0130 inside identifiers lowers to plain i", tool: "D\u0130SK", action: "L\u0130ST", wantTool: "disk", wantAction: "list",
			note: "per-code-point simple lower-casing: U+0130 -> U+0069. Python str.lower() and JavaScript toLowerCase() give i + U+0307 (SpecialCasing)."},
		{name: "percent-encoded U+0130", tool: "%C4%B0nfo", action: "get", wantTool: "info", wantAction: "get",
			note: "decoded first, then lower-cased per code point: U+0130 -> i."},
		{name: "dotless i and dotted capital I together", tool: "I\u0131\u0130i", action: "run", wantTool: "i\u0131ii", wantAction: "run",
			note: "I -> i, U+0131 stays, U+0130 -> i: no Turkish locale rules."},
		{name: "final capital sigma before an underscore lowers to U+03C3", tool: "\u039f\u0394\u039f\u03a3_\u0391\u0392", action: "run",
			wantTool: "\u03bf\u03b4\u03bf\u03c3_\u03b1\u03b2", wantAction: "run",
			note: "JavaScript toLowerCase() and Python lower() give final sigma U+03C2 at a word end; svc always U+03C3."},
		{name: "capital sigma at the end of several words", tool: "tool", action: "\u03a3\u0391\u03a3 \u03a3\u0391\u03a3", wantTool: "tool", wantAction: "\u03c3\u03b1\u03c3 \u03c3\u03b1\u03c3",
			note: "every U+03A3 becomes U+03C3, never U+03C2; interior white space stays."},
		{name: "percent-encoded final sigma", tool: "%CE%9F%CE%A3", action: "run", wantTool: "\u03bf\u03c3", wantAction: "run",
			note: "decoded, then lower-cased per code point: U+03C3."},
		{name: "U+001C..U+001F are not white space", tool: "\u001ccodehost\u001d", action: "\u001emerge\u001f", wantTool: "\u001ccodehost\u001d", wantAction: "\u001emerge\u001f",
			note: "Go's TrimSpace trims Unicode White_Space only; Python str.strip() also strips U+001C..U+001F."},
		{name: "U+0085 NEL is trimmed", tool: "\u0085codehost\u0085", action: "list", wantTool: "codehost", wantAction: "list",
			note: "NEL is White_Space; JavaScript trim() keeps it."},
		{name: "U+00A0 NBSP is trimmed, also percent-encoded", tool: "\u00a0codehost\u00a0", action: "%C2%A0list", wantTool: "codehost", wantAction: "list",
			note: "NO-BREAK SPACE is White_Space; trimmed after decoding too."},
		{name: "U+2028 and U+2029 are trimmed", tool: "\u2028codehost\u2029", action: "list", wantTool: "codehost", wantAction: "list",
			note: "line and paragraph separators are White_Space."},
		{name: "U+FEFF is not white space", tool: "\ufeffcodehost", action: "list\ufeff", wantTool: "\ufeffcodehost", wantAction: "list\ufeff",
			note: "the byte order mark is not White_Space; JavaScript trim() removes it."},
		{name: "U+200B is not white space", tool: "\u200bcodehost\u200b", action: "list", wantTool: "\u200bcodehost\u200b", wantAction: "list",
			note: "ZERO WIDTH SPACE is not White_Space; helpers that strip \"invisible\" characters must not be used."},
		{name: "U+180E is not white space", tool: "\u180ecodehost", action: "list", wantTool: "\u180ecodehost", wantAction: "list",
			note: "MONGOLIAN VOWEL SEPARATOR stopped being white space in Unicode 6.3; old runtimes trim it."},
		{name: "interior white space stays", tool: "code\u00a0host", action: "merge pull", wantTool: "code\u00a0host", wantAction: "merge pull",
			note: "only leading and trailing White_Space is trimmed."},
		{name: "percent-encoded U+FEFF stays", tool: "%EF%BB%BFcodehost", action: "list", wantTool: "\ufeffcodehost", wantAction: "list",
			note: "decoded to U+FEFF, which is not trimmed."},
		{name: "valid and malformed escapes mixed: the whole input is kept", tool: "a%41%zz", action: "Run%41", wantTool: "a%41%zz", wantAction: "runa",
			note: "Go's url.PathUnescape fails on the whole string, so nothing is decoded (then lower-cased). Python's unquote() decodes %41 and keeps %zz: wrong."},
		{name: "valid escape and invalid UTF-8 mixed: the whole input is kept", tool: "caf%C3%A9%FF", action: "get", wantTool: "caf%c3%a9%ff", wantAction: "get",
			note: "the decoded bytes are not UTF-8, so the input is kept as written, then lower-cased (%C3 -> %c3). Python's unquote() gives U+FFFD."},
		{name: "%FF alone", tool: "%FF", action: "tool%ff", wantTool: "%ff", wantAction: "tool%ff",
			note: "0xFF is never UTF-8: kept, lower-cased."},
		{name: "percent-encoded surrogate is not UTF-8", tool: "%ED%A0%80x", action: "get", wantTool: "%ed%a0%80x", wantAction: "get",
			note: "ED A0 80 would be U+D800, which UTF-8 excludes: kept."},
		{name: "overlong encoding is not UTF-8", tool: "%C0%AF", action: "get", wantTool: "%c0%af", wantAction: "get",
			note: "C0 AF is an overlong '/': kept."},
		{name: "truncated escape at the end is kept", tool: "tool%4", action: "get%", wantTool: "tool%4", wantAction: "get%",
			note: "malformed percent-encoding: kept."},
		{name: "%u escapes are not percent-encoding", tool: "%u0041", action: "get", wantTool: "%u0041", wantAction: "get",
			note: "malformed: kept as written."},
		{name: "lower-case hex escapes decode", tool: "caf%c3%a9", action: "get", wantTool: "caf\u00e9", wantAction: "get",
			note: "hex digits of an escape are case-insensitive."},
		{name: "percent-encoded capital decodes then lowers", tool: "%C3%89T%C3%89", action: "get", wantTool: "\u00e9t\u00e9", wantAction: "get",
			note: "U+00C9 -> U+00E9 after decoding."},
		{name: "plus stays plus, %2B decodes to plus", tool: "a%2Bb+c", action: "x+y", wantTool: "a+b+c", wantAction: "x+y",
			note: "path unescaping, not form decoding: + is never a space."},
		{name: "double-encoded escape decodes once", tool: "%252541", action: "%2561", wantTool: "%2541", wantAction: "%61",
			note: "one round of decoding only."},
		{name: "combining marks in one order", tool: "a\u0323\u0302", action: "get", wantTool: "\u1ead", wantAction: "get",
			note: "NFC: dot below then circumflex compose to U+1EAD."},
		{name: "combining marks in the other order", tool: "a\u0302\u0323", action: "get", wantTool: "\u1ead", wantAction: "get",
			note: "NFC reorders by combining class first: the same U+1EAD as the other order."},
		{name: "Hangul conjoining jamo compose", tool: "\u1112\u1161\u11ab\u1100\u1173\u11af", action: "get", wantTool: "\ud55c\uae00", wantAction: "get",
			note: "NFC composes jamo to the syllables U+D55C U+AE00."},
		{name: "percent-encoded Hangul jamo compose after decoding", tool: "%E1%84%92%E1%85%A1%E1%86%AB", action: "get", wantTool: "\ud55c", wantAction: "get",
			note: "decoded, then NFC."},
		{name: "composition exclusion U+0958 decomposes", tool: "\u0958", action: "get", wantTool: "\u0915\u093c", wantAction: "get",
			note: "DEVANAGARI LETTER QA is excluded from composition: NFC gives U+0915 U+093C."},
		{name: "ANGSTROM SIGN is a singleton", tool: "\u212b", action: "get", wantTool: "\u00e5", wantAction: "get",
			note: "NFC maps U+212B to U+00C5, which lowers to U+00E5."},
		{name: "KELVIN SIGN is a singleton", tool: "\u212aelvin", action: "get", wantTool: "kelvin", wantAction: "get",
			note: "NFC maps U+212A to K, which lowers to k."},
		{name: "OHM SIGN is a singleton", tool: "\u2126", action: "get", wantTool: "\u03c9", wantAction: "get",
			note: "NFC maps U+2126 to U+03A9, which lowers to U+03C9."},
		{name: "ROMAN NUMERAL TWELVE lowers, is not folded", tool: "\u216b", action: "get", wantTool: "\u217b", wantAction: "get",
			note: "simple lower-case mapping U+216B -> U+217B; no NFKC, no \"xii\"."},
		{name: "capital sharp s lowers to sharp s, not ss", tool: "STRA\u1e9eE", action: "get", wantTool: "stra\u00dfe", wantAction: "get",
			note: "lower-casing, not case folding: Python casefold() would give \"strasse\"."},
		{name: "resource and parameters are never normalized", tool: "Files", action: "Read", resource: ptr("/D\u0130R/cafe\u0301%41"),
			params: map[string]any{"\u0130": "\u039f\u03a3", "cafe\u0301": " x "}, wantTool: "files", wantAction: "read",
			note: "only tool and action go through rule 7; the resource and the parameters are hashed as given."},
		{name: "Nag Mundari letters (assigned in Unicode 15.0) stay", tool: "\U0001e4d0\U0001e4d1", action: "get", wantTool: "\U0001e4d0\U0001e4d1", wantAction: "get",
			note: "Unicode 15.0 letters with no mappings: the same on every runtime, also one on Unicode 14.0."},
		{name: "Garay capital letters (Unicode 16.0) stay", tool: "\U00010d50\U00010d51", action: "get", wantTool: "\U00010d50\U00010d51", wantAction: "get", sensitive: true,
			note: "unassigned in 15.0.0, so svc leaves them; Unicode 16.0 lower-cases them to U+10D70 U+10D71 (Node 20, ICU 78)."},
		{name: "percent-encoded Garay capital stays", tool: "%F0%90%B5%90", action: "get", wantTool: "\U00010d50", wantAction: "get", sensitive: true,
			note: "decoded to U+10D50, which 15.0.0 does not lower-case; Unicode 16.0 gives U+10D70."},
		{name: "LATIN CAPITAL LETTER RAMS HORN U+A7CB (16.0) stays", tool: "\ua7cbtool", action: "get", wantTool: "\ua7cbtool", wantAction: "get", sensitive: true,
			note: "Unicode 16.0 lower-cases it to U+0264."},
		{name: "LATIN CAPITAL LETTER LAMBDA WITH STROKE U+A7DC (16.0) stays", tool: "tool\ua7dc", action: "get", wantTool: "tool\ua7dc", wantAction: "get", sensitive: true,
			note: "Unicode 16.0 lower-cases it to U+019B."},
		{name: "Latin capitals of 16.0 (U+A7CC, U+A7DA) stay", tool: "\ua7cc\ua7da", action: "get", wantTool: "\ua7cc\ua7da", wantAction: "get", sensitive: true,
			note: "Unicode 16.0 lower-cases them to U+A7CD and U+A7DB."},
		{name: "Cyrillic capital letter U+1C89 (16.0) stays", tool: "\u1c89", action: "get", wantTool: "\u1c89", wantAction: "get", sensitive: true,
			note: "Unicode 16.0 lower-cases it to U+1C8A."},
		{name: "Latin capitals of 17.0 (U+A7CE, U+A7D2, U+A7D4) stay", tool: "\ua7ce\ua7d2\ua7d4", action: "get", wantTool: "\ua7ce\ua7d2\ua7d4", wantAction: "get", sensitive: true,
			note: "Unicode 17.0 lower-cases them to U+A7CF, U+A7D3 and U+A7D5."},
		{name: "Beria Erfe capital letters (17.0) stay", tool: "\U00016ea0\U00016eb8", action: "get", wantTool: "\U00016ea0\U00016eb8", wantAction: "get", sensitive: true,
			note: "Unicode 17.0 lower-cases them to U+16EBB and U+16ED3."},
		{name: "Tulu-Tigalari vowel signs (16.0) do not compose", tool: "\U000113c2\U000113c2", action: "get", wantTool: "\U000113c2\U000113c2", wantAction: "get", sensitive: true,
			note: "Unicode 16.0 NFC composes U+113C2 U+113C2 to U+113C5; 15.0.0 does not know them."},
		{name: "Tulu-Tigalari letter and length mark (16.0) do not compose", tool: "\U00011382\U000113c9", action: "get", wantTool: "\U00011382\U000113c9", wantAction: "get", sensitive: true,
			note: "Unicode 16.0 NFC gives U+11383."},
		{name: "Kirat Rai vowel sequences (16.0) do not compose", tool: "\U00016d63\U00016d67", action: "\U00016d67\U00016d67", wantTool: "\U00016d63\U00016d67", wantAction: "\U00016d67\U00016d67", sensitive: true,
			note: "Unicode 16.0 NFC gives U+16D69 and U+16D68."},
		{name: "Gurung Khema vowel sequence (16.0) does not compose", tool: "\U0001611e\U0001611e\U0001611f", action: "get", wantTool: "\U0001611e\U0001611e\U0001611f", wantAction: "get", sensitive: true,
			note: "Unicode 16.0 NFC gives U+16126."},
		{name: "Todhri letter and dot above (16.0) do not compose", tool: "\U000105d2\u0307", action: "get", wantTool: "\U000105d2\u0307", wantAction: "get", sensitive: true,
			note: "Unicode 16.0 NFC gives U+105C9; U+0307 is old, U+105D2 is new."},
		{name: "precomposed Todhri letter (16.0) stays", tool: "\U000105c9", action: "get", wantTool: "\U000105c9", wantAction: "get", sensitive: true,
			note: "the same under 16.0 (it is its own NFC) but unknown to 15.0.0: an SDK without tables cannot tell, so it is marked."},
		{name: "a code point unassigned in 17.0 stays", tool: "tool\u0378", action: "get", wantTool: "tool\u0378", wantAction: "get", sensitive: true,
			note: "U+0378 is unassigned; a future Unicode version may give it a mapping, so it is marked."},
	}
	out := make([]unicodeVector, 0, len(cases))
	for _, c := range cases {
		params := c.params
		if params == nil {
			params = map[string]any{}
		}
		tc := canonical.ToolCall{Tool: c.tool, Action: c.action, Resource: c.resource, Parameters: params}
		if got := canonical.NormalizeIdentifier(c.tool); got != c.wantTool {
			t.Fatalf("%s: tool normalizes to %+q, the case says %+q", c.name, got, c.wantTool)
		}
		if got := canonical.NormalizeIdentifier(c.action); got != c.wantAction {
			t.Fatalf("%s: action normalizes to %+q, the case says %+q", c.name, got, c.wantAction)
		}
		if got := unicodeSensitive(c.tool) || unicodeSensitive(c.action); got != c.sensitive {
			t.Fatalf("%s: unicode_sensitive computes to %v, the case says %v", c.name, got, c.sensitive)
		}
		b, err := canonical.ActionBytes(tc)
		if err != nil {
			t.Fatal(err)
		}
		h, err := canonical.ActionHash(tc)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if hex.EncodeToString(sum[:]) != h {
			t.Fatalf("%s: ActionHash is not the SHA-256 of ActionBytes", c.name)
		}
		out = append(out, unicodeVector{Name: c.name, ToolCall: mustJSON(t, tc), Normalized: string(b), ActionHash: h,
			UnicodeSensitive: c.sensitive, Note: c.note})
	}
	return out
}
