package evidencepack_test

import (
	"archive/zip"
	"bytes"
	"crypto/ed25519"
	"io"
	"strings"
	"testing"
	"time"

	"svc/evidencepack"
	"svc/receipt"
)

func signer(t testing.TB, fill byte) *receipt.Signer {
	t.Helper()
	s, err := receipt.NewSigner(bytes.Repeat([]byte{fill}, ed25519.SeedSize))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// build writes an incident pack: its seven files, narrative.md the
// largest.
func build(t testing.TB, s *receipt.Signer) []byte {
	t.Helper()
	var buf bytes.Buffer
	p := evidencepack.NewWriter(&buf, evidencepack.KindIncident, "t1", s, time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC))
	required, _ := evidencepack.RequiredFiles(evidencepack.KindIncident)
	for _, name := range required {
		if name == "narrative.md" {
			continue
		}
		if err := p.WriteJSON(name, map[string]any{"x": name}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := p.Create("narrative.md")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(w, strings.Repeat("evidence ", 1000))
	if _, err := p.Create("incident.json"); err == nil {
		t.Error("a second incident.json was accepted")
	}
	if _, err := p.Create(evidencepack.ManifestName); err == nil {
		t.Error("a file named like the manifest was accepted")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// rezip copies a pack's files, letting edit change, drop (nil) or add them.
func rezip(t *testing.T, raw []byte, edit func(name string, b []byte) []byte, extra map[string]string) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range zr.File {
		rc, _ := f.Open()
		b, _ := io.ReadAll(rc)
		_ = rc.Close()
		if b = edit(f.Name, b); b == nil {
			continue
		}
		w, _ := zw.Create(f.Name)
		_, _ = w.Write(b)
	}
	for name, content := range extra {
		w, _ := zw.Create(name)
		_, _ = io.WriteString(w, content)
	}
	_ = zw.Close()
	return buf.Bytes()
}

func verify(t *testing.T, raw []byte, pinned ed25519.PublicKey) evidencepack.Report {
	t.Helper()
	rep, err := evidencepack.Verify(bytes.NewReader(raw), int64(len(raw)), pinned)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestVerify(t *testing.T) {
	s := signer(t, 1)
	good := build(t, s)
	keep := func(_ string, b []byte) []byte { return b }
	for _, tc := range []struct {
		name   string
		raw    []byte
		pinned ed25519.PublicKey
		want   string // "" = valid
	}{
		{"signed", good, nil, ""},
		{"signed, pinned to its key", good, s.PublicKey(), ""},
		{"pinned to another key", good, signer(t, 2).PublicKey(), "not with the public key given"},
		{"unsigned", build(t, nil), nil, ""},
		{"unsigned but a key pinned", build(t, nil), s.PublicKey(), "unsigned"},
		{"a file changed", rezip(t, good, func(n string, b []byte) []byte {
			if n == "narrative.md" {
				return append(b, '!')
			}
			return b
		}, nil), nil, "narrative.md: SHA-256"},
		{"a file removed", rezip(t, good, func(n string, b []byte) []byte {
			if n == "alerts.json" {
				return nil
			}
			return b
		}, nil), nil, "alerts.json: missing"},
		{"an unlisted file added", rezip(t, good, keep, map[string]string{"c.txt": "x"}), nil, "c.txt: not listed"},
		{"the signature stripped", rezip(t, good, func(n string, b []byte) []byte {
			if n == evidencepack.SignatureName {
				return nil
			}
			return b
		}, nil), nil, "manifest.sig: missing"},
		{"the manifest edited", rezip(t, good, func(n string, b []byte) []byte {
			if n == evidencepack.ManifestName {
				return bytes.Replace(b, []byte(`"incident"`), []byte(`"compliance"`), 1)
			}
			return b
		}, nil), nil, "the signature does not match"},
		{"a signature in an unsigned pack", rezip(t, build(t, nil), keep, map[string]string{evidencepack.SignatureName: `{"key_id":"x","signature":"eA=="}`}),
			nil, "names no key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := verify(t, tc.raw, tc.pinned)
			if tc.want == "" {
				if !rep.Valid() || rep.Kind != "incident" || rep.TenantID != "t1" || rep.Files != 7 {
					t.Errorf("report %+v, want valid", rep)
				}
				return
			}
			if rep.Valid() || !strings.Contains(strings.Join(rep.Problems, "\n"), tc.want) {
				t.Errorf("problems %q, want one containing %q", rep.Problems, tc.want)
			}
		})
	}
	if _, err := evidencepack.Verify(strings.NewReader("not a zip"), 9, nil); err == nil {
		t.Error("a file that is no ZIP verified")
	}
}

// A file far larger than the manifest says is read only one byte past it.
func TestVerifyReadsNoMoreThanDeclared(t *testing.T) {
	good := build(t, nil)
	big := rezip(t, good, func(n string, b []byte) []byte {
		if n == "incident.json" {
			return bytes.Repeat([]byte{'0'}, 50<<20) // compresses to about 50 KiB
		}
		return b
	}, nil)
	rep := verify(t, big, nil)
	if rep.Valid() || !strings.Contains(strings.Join(rep.Problems, "\n"), "incident.json: SHA-256") {
		t.Errorf("problems %q", rep.Problems)
	}
}
