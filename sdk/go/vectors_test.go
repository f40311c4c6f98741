package svcsdk

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// The shared vectors, read in place.
const testdata = "../../testdata"

func loadVectors(t *testing.T, name string) []map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdata, name))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]json.RawMessage
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no vectors", name)
	}
	return out
}

func field[T any](t *testing.T, v map[string]json.RawMessage, name string) T {
	t.Helper()
	var x T
	if raw, ok := v[name]; ok {
		if err := json.Unmarshal(raw, &x); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	return x
}

// parsed reads a vector member with the strict parser (numbers exact).
func parsed(t *testing.T, v map[string]json.RawMessage, name string) any {
	t.Helper()
	x, err := ParseJSON(v[name])
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return x
}

func TestJCSVectors(t *testing.T) {
	for _, v := range loadVectors(t, "jcs/vectors.json") {
		name := field[string](t, v, "name")
		got, err := CanonicalizeText(v["input"])
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if want := field[string](t, v, "canonical"); string(got) != want {
			t.Errorf("%s: got %s want %s", name, got, want)
		}
		sum := sha256.Sum256(got)
		if want := field[string](t, v, "sha256"); hex.EncodeToString(sum[:]) != want {
			t.Errorf("%s: sha256 differs", name)
		}
	}
}

func TestActionHashVectors(t *testing.T) {
	for _, file := range []string{"jcs/action_hash.json", "sdk/action_hash_unicode.json"} {
		for _, v := range loadVectors(t, file) {
			name := field[string](t, v, "name")
			m := as[map[string]any](t, parsed(t, v, "tool_call"))
			tc := ToolCall{Tool: as[string](t, m["tool"]), Action: as[string](t, m["action"])}
			if r, ok := m["resource"].(string); ok {
				tc.Resource = &r
			}
			if p, ok := m["parameters"].(map[string]any); ok {
				tc.Parameters = p
			}
			b, err := ActionBytes(tc)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if want := field[string](t, v, "normalized"); string(b) != want {
				t.Errorf("%s %s: normalized %q want %q", file, name, b, want)
			}
			h, _ := ActionHash(tc)
			if want := field[string](t, v, "action_hash"); h != want {
				t.Errorf("%s %s: hash %s want %s", file, name, h, want)
			}
		}
	}
}

func TestSigningVectors(t *testing.T) {
	for _, v := range loadVectors(t, "sdk/signing.json") {
		got, err := Sign([]byte(field[string](t, v, "body")), field[string](t, v, "signing_key"))
		if err != nil || got != field[string](t, v, "header") {
			t.Errorf("%s: %s %v", field[string](t, v, "name"), got, err)
		}
	}
}

func TestRedactionVectors(t *testing.T) {
	for _, v := range loadVectors(t, "sdk/redaction.json") {
		name := field[string](t, v, "name")
		params, _ := parsed(t, v, "parameters").(map[string]any)
		before, _ := Canonicalize(params)
		got, err := Redact(params, field[[]string](t, v, "redacted_fields"))
		if code := field[string](t, v, "error"); code != "" {
			var e *InvalidRedactionPath
			if !asErr(err, &e) || e.ErrorCode != code {
				t.Errorf("%s: want %s, got %v", name, code, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !sameJSON(got, parsed(t, v, "parameters_after")) {
			g, _ := Canonicalize(got)
			t.Errorf("%s: got %s", name, g)
		}
		if after, _ := Canonicalize(params); !bytes.Equal(before, after) {
			t.Errorf("%s: the caller's parameters changed", name)
		}
	}
}

func TestRetryVectors(t *testing.T) {
	for _, v := range loadVectors(t, "sdk/retry.json") {
		name := field[string](t, v, "name")
		status := field[int](t, v, "status")
		if got := ShouldRetry(status); got != field[bool](t, v, "retry") {
			t.Errorf("%s: retry %v", name, got)
		}
		want := field[*string](t, v, "error")
		if got := ErrorClass(status); (want == nil && got != "") || (want != nil && *want != got) {
			t.Errorf("%s: error class %q", name, got)
		}
		if want == nil {
			continue
		}
		// The typed error of that final answer, and what it carries.
		body := parsed(t, v, "body")
		err := fromResponse(status, body, nil, "svc: ")
		if TypeName(err) != *want {
			t.Errorf("%s: %s", name, TypeName(err))
		}
		if m, ok := body.(map[string]any); ok {
			var se *SvcError
			asErr(err, &se)
			if d, ok := m["details"].(map[string]any); ok && d["error"] != nil && se.ErrorCode != d["error"] {
				t.Errorf("%s: error code %q", name, se.ErrorCode)
			}
			if r, ok := m["reason"].(string); ok && r != "" && se.Reason != r && m["kind"] != nil {
				t.Errorf("%s: reason %q", name, se.Reason)
			}
		}
	}
}

func TestOutcomeVectors(t *testing.T) {
	for _, v := range loadVectors(t, "sdk/outcomes.json") {
		if got, want := Outcome(parsed(t, v, "response")), field[string](t, v, "outcome"); got != want {
			t.Errorf("%s: %s want %s", field[string](t, v, "name"), got, want)
		}
		if got, want := Outcome([]byte(v["response"])), field[string](t, v, "outcome"); got != want {
			t.Errorf("%s (bytes): %s want %s", field[string](t, v, "name"), got, want)
		}
	}
}

func TestReceiptVectors(t *testing.T) {
	for _, v := range loadVectors(t, "sdk/receipts.json") {
		name := field[string](t, v, "name")
		r := VerifyReceipt(parsed(t, v, "receipt"), field[string](t, v, "public_key"))
		if r.HashValid != field[bool](t, v, "hash_valid") || r.SignatureValid != field[bool](t, v, "signature_valid") {
			t.Errorf("%s: %+v", name, r)
		}
	}
}

func TestInclusionVectors(t *testing.T) {
	vs := loadVectors(t, "sdk/inclusion.json")
	if len(vs) < 20 {
		t.Fatalf("%d inclusion vectors", len(vs))
	}
	for _, v := range vs {
		name := field[string](t, v, "name")
		r := VerifyInclusion(parsed(t, v, "receipt"), parsed(t, v, "proof"), field[string](t, v, "checkpoint"), field[string](t, v, "public_key"))
		if r.CheckpointValid != field[bool](t, v, "checkpoint_valid") || r.ProofValid != field[bool](t, v, "proof_valid") {
			t.Errorf("%s: %+v", name, r)
		}
	}
}

func TestFormatNumber(t *testing.T) {
	for f, want := range map[float64]string{1e21: "1e+21", 1e20: "100000000000000000000", 0.000001: "0.000001",
		1e-7: "1e-7", math.Copysign(0, -1): "0", 1.5: "1.5", 123e-20: "1.23e-18", 9007199254740993: "9007199254740992", -5e-324: "-5e-324"} {
		if got, _ := FormatNumber(f); got != want {
			t.Errorf("%v: %s want %s", f, got, want)
		}
	}
}

func TestParseJSONStrict(t *testing.T) {
	for _, bad := range []string{`{"a":1,"a":2}`, `{"x":{"a":1,"a":1}}`, `[1e999]`, `NaN`, `{"a":1}x`, "\"\x01\"", `01`, `[1,]`, "\xff"} {
		if _, err := ParseJSON([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if _, err := Canonicalize(mustParse(t, `"\ud800"`)); err == nil {
		t.Error("a lone surrogate has a canonical form")
	}
	if got, _ := Canonicalize(mustParse(t, `"\ud83d\ude00"`)); string(got) != "\"\U0001F600\"" {
		t.Errorf("surrogate pair: %q", got)
	}
}

func mustParse(t *testing.T, s string) any {
	t.Helper()
	v, err := ParseJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestRedactMaskAndCopy(t *testing.T) {
	p := map[string]any{"card": "4242", "tags": []any{"a", "b"}, "meta": map[string]any{"ssn": "1"}}
	got, err := RedactMask(p, []string{"parameters.card", "parameters.tags.1", "parameters.meta.ssn"}, "[redacted]")
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(got, map[string]any{"card": "[redacted]", "tags": []any{"a", "[redacted]"}, "meta": map[string]any{"ssn": "[redacted]"}}) {
		t.Errorf("%v", got)
	}
	if p["card"] != "4242" || as[[]any](t, p["tags"])[1] != "b" {
		t.Error("the caller's map changed")
	}
}
