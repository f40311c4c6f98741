package canonical_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"svc/canonical"
)

// vectorsDir holds the shared vectors (testdata/jcs at the module root).
var vectorsDir = filepath.Join("..", "testdata", "jcs")

type jcsVector struct {
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	Canonical string          `json:"canonical"`
	SHA256    string          `json:"sha256"`
}

type actionVector struct {
	Name       string          `json:"name"`
	ToolCall   json.RawMessage `json:"tool_call"`
	Normalized string          `json:"normalized"`
	ActionHash string          `json:"action_hash"`
}

func loadVectors[T any](t testing.TB, name string) []T {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(vectorsDir, name))
	if err != nil {
		t.Fatalf("read vectors: %v", err)
	}
	var vs []T
	if err := json.Unmarshal(raw, &vs); err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
	if len(vs) == 0 {
		t.Fatalf("%s holds no vectors", name)
	}
	return vs
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func TestJCSVectors(t *testing.T) {
	vs := loadVectors[jcsVector](t, "vectors.json")
	seen := map[string]bool{}
	for _, v := range vs {
		t.Run(v.Name, func(t *testing.T) {
			if seen[v.Name] {
				t.Fatalf("duplicate vector name %q", v.Name)
			}
			seen[v.Name] = true
			if got := sha256Hex([]byte(v.Canonical)); got != v.SHA256 {
				t.Fatalf("vector file inconsistent: sha256(canonical) = %s, file says %s", got, v.SHA256)
			}

			// The exact input text.
			got, err := canonical.JCS(v.Input)
			if err != nil {
				t.Fatalf("JCS: %v", err)
			}
			if string(got) != v.Canonical {
				t.Fatalf("JCS(%s)\n got %q\nwant %q", v.Input, got, v.Canonical)
			}
			if h := sha256Hex(got); h != v.SHA256 {
				t.Fatalf("sha256 = %s, want %s", h, v.SHA256)
			}

			// The same value after a round trip through Go values, both
			// with float64 numbers and with json.Number.
			var asFloat any
			if err := json.Unmarshal(v.Input, &asFloat); err != nil {
				t.Fatalf("decode input: %v", err)
			}
			var asNumber any
			dec := json.NewDecoder(bytes.NewReader(v.Input))
			dec.UseNumber()
			if err := dec.Decode(&asNumber); err != nil {
				t.Fatalf("decode input: %v", err)
			}
			for _, val := range []any{asFloat, asNumber} {
				m, err := canonical.Marshal(val)
				if err != nil {
					t.Fatalf("Marshal: %v", err)
				}
				if string(m) != v.Canonical {
					t.Fatalf("Marshal(%T)\n got %q\nwant %q", val, m, v.Canonical)
				}
			}
		})
	}
}

func TestActionHashVectors(t *testing.T) {
	vs := loadVectors[actionVector](t, "action_hash.json")
	for _, v := range vs {
		t.Run(v.Name, func(t *testing.T) {
			if got := sha256Hex([]byte(v.Normalized)); got != v.ActionHash {
				t.Fatalf("vector file inconsistent: sha256(normalized) = %s, file says %s", got, v.ActionHash)
			}
			var tc canonical.ToolCall
			if err := json.Unmarshal(v.ToolCall, &tc); err != nil {
				t.Fatalf("decode tool_call: %v", err)
			}
			b, err := canonical.ActionBytes(tc)
			if err != nil {
				t.Fatalf("ActionBytes: %v", err)
			}
			if string(b) != v.Normalized {
				t.Fatalf("ActionBytes\n got %q\nwant %q", b, v.Normalized)
			}
			h, err := canonical.ActionHash(tc)
			if err != nil {
				t.Fatalf("ActionHash: %v", err)
			}
			if h != v.ActionHash {
				t.Fatalf("ActionHash = %s, want %s", h, v.ActionHash)
			}

			// Parameters decoded with json.Number hash the same.
			var tcNum canonical.ToolCall
			dec := json.NewDecoder(bytes.NewReader(v.ToolCall))
			dec.UseNumber()
			if err := dec.Decode(&tcNum); err != nil {
				t.Fatalf("decode tool_call: %v", err)
			}
			if h2, err := canonical.ActionHash(tcNum); err != nil || h2 != v.ActionHash {
				t.Fatalf("ActionHash with json.Number = %s, %v; want %s", h2, err, v.ActionHash)
			}
		})
	}
}

func TestNormalizeIdentifier(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "already normal", in: "codehost", want: "codehost"},
		{name: "upper case", in: "CodeHost", want: "codehost"},
		{name: "percent-encoded", in: "merge%5Fpull%5frequest", want: "merge_pull_request"},
		{name: "percent-encoded slash and colon", in: "mcp%3Agithub%2Fissues", want: "mcp:github/issues"},
		{name: "trim ASCII white space", in: " \t codehost\r\n", want: "codehost"},
		{name: "trim after decoding", in: "%20codehost%20", want: "codehost"},
		{name: "inner white space kept", in: "code host", want: "code host"},
		{name: "NFD to NFC", in: "cafe\u0301", want: "caf\u00e9"},
		{name: "NFD upper case", in: "CAFE\u0301", want: "caf\u00e9"},
		{name: "percent-encoded NFD", in: "cafe%CC%81", want: "caf\u00e9"},
		{name: "malformed escape kept", in: "100%", want: "100%"},
		{name: "malformed escape kept and lowered", in: "A%ZZ", want: "a%zz"},
		{name: "invalid UTF-8 after decoding kept", in: "x%FF", want: "x%ff"},
		{name: "decoded once", in: "%2541", want: "%41"},
		{name: "plus stays", in: "a+b", want: "a+b"},
		{name: "final sigma per code point", in: "\u039f\u03a3", want: "\u03bf\u03c3"},
		{name: "dotted capital I simple mapping", in: "\u0130", want: "i"},
		{name: "compatibility characters kept", in: "\ufb01", want: "\ufb01"},
		{name: "empty", in: "", want: ""},
		{name: "only white space", in: " %20\t", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := canonical.NormalizeIdentifier(tt.in); got != tt.want {
				t.Fatalf("NormalizeIdentifier(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestJCSErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
	}{
		{name: "nil", in: nil},
		{name: "empty", in: []byte{}},
		{name: "not JSON", in: []byte("{a:1}")},
		{name: "trailing garbage", in: []byte(`{"a":1} x`)},
		{name: "duplicate key", in: []byte(`{"a":1,"a":2}`)},
		{name: "lone high surrogate", in: []byte(`"\ud800"`)},
		{name: "lone low surrogate", in: []byte(`"\udc00"`)},
		{name: "invalid UTF-8", in: []byte("\"\xff\"")},
		{name: "number out of range", in: []byte(`1e400`)},
		{name: "leading zero", in: []byte(`01`)},
		{name: "unterminated", in: []byte(`[1,2`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := canonical.JCS(tt.in)
			if err == nil {
				t.Fatalf("JCS(%q) = %q, want an error", tt.in, out)
			}
			if !strings.HasPrefix(err.Error(), "canonical: ") {
				t.Fatalf("error %q lacks the package prefix", err)
			}
		})
	}
}

func TestMarshalAndActionHashErrors(t *testing.T) {
	if _, err := canonical.Marshal(math.NaN()); err == nil || !strings.HasPrefix(err.Error(), "canonical: ") {
		t.Fatalf("Marshal(NaN) error = %v, want a canonical: error", err)
	}
	if _, err := canonical.Marshal(map[string]any{"c": make(chan int)}); err == nil {
		t.Fatal("Marshal(chan) succeeded")
	}
	_, err := canonical.ActionHash(canonical.ToolCall{Tool: "t", Action: "a", Parameters: map[string]any{"x": math.Inf(1)}})
	if err == nil || !strings.HasPrefix(err.Error(), "canonical: ") {
		t.Fatalf("ActionHash(+Inf) error = %v, want a canonical: error", err)
	}
}

func TestActionHashProperties(t *testing.T) {
	res := "acme/api#42"
	base := canonical.ToolCall{Tool: "codehost", Action: "merge_pull_request", Resource: &res,
		Parameters: map[string]any{"method": "squash"}}
	h0, err := canonical.ActionHash(base)
	if err != nil {
		t.Fatal(err)
	}
	if len(h0) != 64 || strings.ToLower(h0) != h0 {
		t.Fatalf("hash %q is not 64 lower-case hex characters", h0)
	}
	if canonical.Scheme != "svc-jcs-1" {
		t.Fatalf("Scheme = %q", canonical.Scheme)
	}
	other := "acme/api#43"
	tests := []struct {
		name string
		tc   canonical.ToolCall
		same bool
	}{
		{name: "identical", tc: base, same: true},
		{name: "normalized spelling", tc: canonical.ToolCall{Tool: " CodeHost", Action: "MERGE%5Fpull_request", Resource: &res,
			Parameters: map[string]any{"method": "squash"}}, same: true},
		{name: "other resource", tc: canonical.ToolCall{Tool: "codehost", Action: "merge_pull_request", Resource: &other,
			Parameters: map[string]any{"method": "squash"}}},
		{name: "null resource", tc: canonical.ToolCall{Tool: "codehost", Action: "merge_pull_request",
			Parameters: map[string]any{"method": "squash"}}},
		{name: "resource case is kept", tc: canonical.ToolCall{Tool: "codehost", Action: "merge_pull_request", Resource: ptr("ACME/api#42"),
			Parameters: map[string]any{"method": "squash"}}},
		{name: "parameter value differs", tc: canonical.ToolCall{Tool: "codehost", Action: "merge_pull_request", Resource: &res,
			Parameters: map[string]any{"method": "Squash"}}},
		{name: "no parameters", tc: canonical.ToolCall{Tool: "codehost", Action: "merge_pull_request", Resource: &res}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := canonical.ActionHash(tt.tc)
			if err != nil {
				t.Fatal(err)
			}
			if (h == h0) != tt.same {
				t.Fatalf("hash equal to base = %v, want %v", h == h0, tt.same)
			}
		})
	}
}

func ptr(s string) *string { return &s }

// FuzzJCSIdempotent: canonical bytes are a fixed point of JCS, and valid JSON.
func FuzzJCSIdempotent(f *testing.F) {
	for _, v := range loadVectors[jcsVector](f, "vectors.json") {
		f.Add([]byte(v.Input))
	}
	for _, v := range loadVectors[actionVector](f, "action_hash.json") {
		f.Add([]byte(v.ToolCall))
	}
	f.Add([]byte(`{"a":[1,2,{"b":null}],"c":"\u00e9"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		if !json.Valid(in) {
			return
		}
		once, err := canonical.JCS(in)
		if err != nil {
			// Valid JSON outside I-JSON (duplicate keys, lone surrogates,
			// huge numbers) is rejected, never canonicalized.
			return
		}
		if !json.Valid(once) {
			t.Fatalf("JCS(%q) = %q is not valid JSON", in, once)
		}
		twice, err := canonical.JCS(once)
		if err != nil {
			t.Fatalf("JCS of canonical bytes %q: %v", once, err)
		}
		if !bytes.Equal(once, twice) {
			t.Fatalf("not idempotent:\n once %q\ntwice %q", once, twice)
		}
	})
}

func BenchmarkActionHash(b *testing.B) {
	res := "acme/payments-api#1287"
	tc := canonical.ToolCall{
		Tool:     "CodeHost",
		Action:   "merge_pull_request",
		Resource: &res,
		Parameters: map[string]any{
			"merge_method":   "squash",
			"delete_branch":  true,
			"commit_title":   "Fix rounding in invoice totals (#1287)",
			"commit_message": "Rounds half-even at the line level.\n\nCo-authored-by: Agent <agent@example.com>",
			"sha":            "9f2c1e4b7a6d5c3b2a1f0e9d8c7b6a5f4e3d2c1b",
			"reviewers":      []any{"alice", "bob", "carol"},
			"labels":         []any{"billing", "bug", "p1"},
			"checks":         map[string]any{"required": []any{"ci/test", "ci/lint"}, "strict": true, "timeout_s": 900},
			"retry":          map[string]any{"attempts": 3, "backoff": map[string]any{"initial_ms": 250, "factor": 2.0, "max_ms": 8000}},
			"amount_cents":   129900,
		},
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := canonical.ActionHash(tc); err != nil {
			b.Fatal(err)
		}
	}
}
