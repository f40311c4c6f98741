// Package packtest writes evidence packs by hand for tests, as anyone can:
// what evidencepack.Verify must judge on its content, not on who wrote it.
package packtest

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"svc/evidencepack"
	"svc/receipt"
)

// Member is one file of a crafted pack; a Name ending in "/" with no
// Content is written as a directory entry.
type Member struct{ Name, Content string }

// Craft writes a pack of kind whose manifest lists members with their true
// hashes and sizes, signed by s when not nil, of tenant t1.
func Craft(t testing.TB, kind string, s *receipt.Signer, members ...Member) []byte {
	t.Helper()
	return CraftFor(t, "t1", kind, s, members...)
}

// CraftFor is Craft for the tenant tenantID.
func CraftFor(t testing.TB, tenantID, kind string, s *receipt.Signer, members ...Member) []byte {
	t.Helper()
	m := evidencepack.Manifest{Format: receipt.ManifestFormat, Kind: kind, TenantID: tenantID, CreatedAt: time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)}
	if s != nil {
		k := base64.StdEncoding.EncodeToString(s.PublicKey())
		m.KeyID, m.PublicKey = s.KeyID(), &k
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name string, b []byte) {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate})
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			return // a directory ("a/") takes no content
		}
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range members {
		sum := sha256.Sum256([]byte(f.Content))
		m.Files = append(m.Files, evidencepack.File{Name: f.Name, SHA256: hex.EncodeToString(sum[:]), Bytes: int64(len(f.Content))})
		add(f.Name, []byte(f.Content))
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	add(evidencepack.ManifestName, raw)
	if s != nil {
		sig, err := json.Marshal(evidencepack.Signature{KeyID: s.KeyID(), Signature: s.SignManifest(sha256.Sum256(raw))})
		if err != nil {
			t.Fatal(err)
		}
		add(evidencepack.SignatureName, sig)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
