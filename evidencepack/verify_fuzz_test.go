package evidencepack_test

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"testing"

	"svc/evidencepack"
)

// FuzzVerifyPack: Verify never panics on any bytes, and a pack it calls
// valid holds exactly the files its manifest lists, with their hashes.
func FuzzVerifyPack(f *testing.F) {
	s := signer(f, 1)
	f.Add(build(f, s))
	f.Add(build(f, nil))
	f.Add([]byte("PK\x03\x04"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		rep, err := evidencepack.Verify(bytes.NewReader(raw), int64(len(raw)), nil)
		if err != nil || !rep.Valid() {
			return
		}
		zr, err := zip.NewReader(bytes.NewReader(raw), int64(len(raw)))
		if err != nil {
			t.Fatalf("valid, but not a ZIP: %v", err)
		}
		files := map[string][]byte{}
		for _, zf := range zr.File {
			rc, err := zf.Open()
			if err != nil {
				t.Fatalf("valid, but %s does not open: %v", zf.Name, err)
			}
			b, err := io.ReadAll(rc)
			_ = rc.Close()
			if err != nil {
				t.Fatalf("valid, but %s does not read: %v", zf.Name, err)
			}
			files[zf.Name] = b
		}
		var m evidencepack.Manifest
		if err := json.Unmarshal(files[evidencepack.ManifestName], &m); err != nil {
			t.Fatalf("valid, but the manifest does not decode: %v", err)
		}
		if len(files) != len(m.Files)+1+boolInt(files[evidencepack.SignatureName] != nil) {
			t.Fatalf("valid with %d files for %d listed", len(files), len(m.Files))
		}
		for _, lf := range m.Files {
			sum := sha256.Sum256(files[lf.Name])
			if hex.EncodeToString(sum[:]) != lf.SHA256 {
				t.Fatalf("valid, but %s does not hash to the manifest's value", lf.Name)
			}
		}
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
