package conformance_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"

	"svc/canonical"
)

var (
	update  = flag.Bool("update", false, "write the generated vectors into testdata/sdk/ (TestGenerate)")
	rewrite = flag.Bool("rewrite", false, "with -update: allow changing or dropping entries already committed (only before the files are published)")
)

// vectorDir is testdata/sdk at the module root.
var vectorDir = filepath.Join("..", "..", "testdata", "sdk")

// generated is one file of testdata/sdk/: its path there and its bytes.
type generated struct {
	path string
	data []byte
	// entries: a JSON array of named entries, which are only ever added.
	entries bool
}

// generateAll builds every generated file of testdata/sdk/ in memory, from
// the reference functions and the canonical and receipt packages; t fails
// when the reference disagrees with a case's hand-written expectation.
func generateAll(t *testing.T) []generated {
	t.Helper()
	files := []generated{
		{path: "signing.json", data: encodeFile(t, signingVectors(t)), entries: true},
		{path: "redaction.json", data: encodeFile(t, redactionVectors(t)), entries: true},
		{path: "retry.json", data: encodeFile(t, retryVectors(t)), entries: true},
		{path: "outcomes.json", data: encodeFile(t, outcomeVectors(t)), entries: true},
		{path: "action_hash_unicode.json", data: encodeFile(t, unicodeVectors(t)), entries: true},
		{path: "inclusion.json", data: encodeFile(t, inclusionVectors(t)), entries: true},
	}
	rvs, exports := receiptVectors(t)
	files = append(files, generated{path: "receipts.json", data: encodeFile(t, rvs), entries: true})
	files = append(files, exports...)
	return files
}

// TestGenerate regenerates testdata/sdk/ and compares it with the committed
// files; with -update it writes them instead. An entry already committed
// is never changed or dropped (the files are a contract), unless -rewrite.
func TestGenerate(t *testing.T) {
	files := generateAll(t)
	var stale []string
	for _, f := range files {
		path := filepath.Join(vectorDir, filepath.FromSlash(f.path))
		old, err := os.ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			old = nil
		case err != nil:
			t.Fatalf("read %s: %v", path, err)
		}
		if old != nil && !*rewrite {
			if err := appendOnly(f, old); err != nil {
				t.Errorf("%s: %v (entries are only ever added; -rewrite overrides this before the files are published)", f.path, err)
				continue
			}
		}
		if bytes.Equal(old, f.data) {
			continue
		}
		if !*update {
			stale = append(stale, f.path)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, f.data, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
	}
	// A committed export that no vector names any more.
	want := map[string]bool{}
	for _, f := range files {
		want[f.path] = true
	}
	exports, _ := filepath.Glob(filepath.Join(vectorDir, "receipts", "*"))
	for _, p := range exports {
		rel := "receipts/" + filepath.Base(p)
		if !want[rel] {
			t.Errorf("%s is in testdata/sdk but no receipt vector names it", rel)
		}
	}
	if len(stale) > 0 {
		t.Errorf("testdata/sdk differs from what the Go reference generates: %s\n"+
			"regenerate with: go test ./sdk/conformance -run TestGenerate -update", strings.Join(stale, ", "))
	}
}

// appendOnly checks that every entry of the committed file old is in the
// generated file unchanged (JCS-equal), and, for a file that is not a
// list of entries, that it is unchanged.
func appendOnly(f generated, old []byte) error {
	if !f.entries {
		if !bytes.Equal(old, f.data) {
			return errors.New("a committed file would change")
		}
		return nil
	}
	index := func(data []byte) (map[string][]byte, []string, error) {
		var entries []json.RawMessage
		if err := json.Unmarshal(data, &entries); err != nil {
			return nil, nil, err
		}
		m := map[string][]byte{}
		var names []string
		for _, e := range entries {
			var named struct {
				Name string `json:"name"`
			}
			if err := json.Unmarshal(e, &named); err != nil {
				return nil, nil, err
			}
			c, err := canonical.JCS(e)
			if err != nil {
				return nil, nil, err
			}
			m[named.Name] = c
			names = append(names, named.Name)
		}
		return m, names, nil
	}
	before, names, err := index(old)
	if err != nil {
		return fmt.Errorf("committed file: %w", err)
	}
	after, _, err := index(f.data)
	if err != nil {
		return fmt.Errorf("generated file: %w", err)
	}
	var changed []string
	for _, n := range names {
		if a, ok := after[n]; !ok || !bytes.Equal(a, before[n]) {
			changed = append(changed, fmt.Sprintf("%q", n))
		}
	}
	if len(changed) > 0 {
		return fmt.Errorf("committed entries would change or go: %s", strings.Join(changed, ", "))
	}
	return nil
}

// encodeFile writes vs as the files are written: a JSON array, two-space
// indentation, every character outside ASCII escaped (\uXXXX, surrogate
// pairs above U+FFFF) so that no editor can normalize or re-encode a
// vector, and a final newline. Names must be unique.
func encodeFile[T any](t *testing.T, vs []T) []byte {
	t.Helper()
	seen := map[string]bool{}
	for _, v := range vs {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var named struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(raw, &named); err != nil || named.Name == "" {
			t.Fatalf("entry without a name: %s", raw)
		}
		if seen[named.Name] {
			t.Fatalf("two entries named %q", named.Name)
		}
		seen[named.Name] = true
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(vs); err != nil {
		t.Fatal(err)
	}
	return asciiJSON(buf.Bytes())
}

// asciiJSON escapes every non-ASCII character of a JSON text (they can only
// occur inside strings) as \uXXXX.
func asciiJSON(b []byte) []byte {
	var out bytes.Buffer
	for _, r := range string(b) {
		switch {
		case r < 0x80:
			out.WriteRune(r)
		case r > 0xFFFF:
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(&out, `\u%04x\u%04x`, hi, lo)
		default:
			fmt.Fprintf(&out, `\u%04x`, r)
		}
	}
	return out.Bytes()
}

// rawJSON compacts a JSON text written in a case (it must be valid).
func rawJSON(t *testing.T, s string) json.RawMessage {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(s)); err != nil {
		t.Fatalf("invalid JSON in a case: %v: %s", err, s)
	}
	return json.RawMessage(slices.Clone(buf.Bytes()))
}

// mustJSON encodes v (HTML characters unescaped).
func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return json.RawMessage(bytes.TrimRight(buf.Bytes(), "\n"))
}

// jcsEqual reports whether two JSON texts are the same value.
func jcsEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	ca, err := canonical.JCS(a)
	if err != nil {
		t.Fatalf("JCS(%s): %v", a, err)
	}
	cb, err := canonical.JCS(b)
	if err != nil {
		t.Fatalf("JCS(%s): %v", b, err)
	}
	return bytes.Equal(ca, cb)
}
