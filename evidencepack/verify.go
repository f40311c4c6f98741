package evidencepack

import (
	"archive/zip"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"svc/receipt"
)

// Report is the result of Verify. Problems lists every failure found, each
// naming the file or the part that failed; none means the pack is valid.
//
// A valid pack that is not Signed proves its integrity only: its files are
// those its manifest lists, with their hashes, and of its kind; anyone can
// make such a pack, so it proves nothing about its origin. A Signed pack
// was made by the holder of the key that signed it, which is the gateway's
// only when that key was pinned (Pinned) or is otherwise known to be the
// gateway's.
type Report struct {
	Kind     string
	TenantID string
	Files    int
	KeyID    string // "" when unsigned
	Signed   bool
	// Pinned: Verify was given the key the pack must be signed with.
	Pinned bool
	// Checkpoint is what the pack's receipt log checkpoint showed; nil
	// for a pack without one.
	Checkpoint *CheckpointReport
	Problems   []string
}

// Valid reports whether nothing failed.
func (r Report) Valid() bool { return len(r.Problems) == 0 }

// maxManifestBytes bounds manifest.json and manifest.sig.
const maxManifestBytes = 64 << 20

// Verify checks a pack read from r (size bytes). pinned, when not nil, is
// the key the pack must be signed with.
func Verify(r io.ReaderAt, size int64, pinned ed25519.PublicKey) (Report, error) {
	rep := Report{Pinned: pinned != nil}
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return rep, fmt.Errorf("%w: %w", ErrNotAPack, err)
	}
	fail := func(format string, args ...any) { rep.Problems = append(rep.Problems, fmt.Sprintf(format, args...)) }
	byName := map[string]*zip.File{}
	folded := map[string]string{} // lower case -> the first name
	for _, f := range zr.File {
		if why := unsafeName(f.Name); why != "" {
			fail("%s: unsafe file name (%s)", label(f.Name), why)
		}
		if byName[f.Name] != nil {
			fail("%s: the archive holds it twice", label(f.Name))
		} else if other, ok := folded[strings.ToLower(f.Name)]; ok {
			fail("%s: the archive also holds %s, which differs only in case (one overwrites the other when unpacked on macOS or Windows)",
				label(f.Name), label(other))
		} else {
			folded[strings.ToLower(f.Name)] = f.Name
		}
		byName[f.Name] = f
	}
	raw, err := readAll(byName[ManifestName])
	if err != nil {
		fail("%s: %v", ManifestName, err)
		return rep, nil
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		fail("%s: malformed: %v", ManifestName, err)
		return rep, nil
	}
	rep.Kind, rep.TenantID, rep.Files, rep.KeyID = m.Kind, m.TenantID, len(m.Files), m.KeyID
	if m.Format != receipt.ManifestFormat {
		fail("%s: unsupported format %q", ManifestName, m.Format)
	}
	required, known := RequiredFiles(m.Kind)
	if !known {
		fail("%s: unknown kind %q (a pack is of kind %s or %s)", ManifestName, m.Kind, KindIncident, KindCompliance)
	}
	listed := map[string]bool{ManifestName: true, SignatureName: true}
	for _, f := range m.Files {
		if listed[f.Name] {
			fail("%s: lists %s twice (or a name of its own)", ManifestName, label(f.Name))
			continue
		}
		listed[f.Name] = true
		zf := byName[f.Name]
		if zf == nil {
			fail("%s: missing", label(f.Name))
			continue
		}
		sum, n, err := hashFile(zf, f.Bytes)
		switch {
		case err != nil:
			fail("%s: unreadable: %v", label(f.Name), err)
		case sum != f.SHA256:
			fail("%s: SHA-256 %s, the manifest says %s", label(f.Name), sum, label(f.SHA256))
		case n != f.Bytes:
			fail("%s: %d bytes, the manifest says %d", label(f.Name), n, f.Bytes)
		}
	}
	for _, name := range required {
		if !listed[name] {
			fail("%s: missing (a pack of kind %s holds it; the manifest does not list it)", name, m.Kind)
		}
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if !listed[name] {
			fail("%s: not listed in the manifest", label(name))
		}
	}
	verifySignature(&rep, m, raw, byName[SignatureName], pinned, fail)
	switch {
	case listed[CheckpointName] && byName[CheckpointName] != nil:
		key := pinned
		if key == nil {
			key, _ = manifestKey(m) // a malformed one is reported above
		}
		verifyCheckpoint(&rep, m, byName, key, fail)
	case listed[InclusionProofsName]:
		fail("%s: present, but the pack holds no %s to check the proofs against", InclusionProofsName, CheckpointName)
	}
	return rep, nil
}

// manifestKey is the key the manifest names, nil when it names none.
func manifestKey(m Manifest) (ed25519.PublicKey, error) {
	if m.PublicKey == nil {
		return nil, nil
	}
	k, err := base64.StdEncoding.Strict().DecodeString(*m.PublicKey)
	if err != nil || len(k) != ed25519.PublicKeySize {
		return nil, errors.New("public_key is not a base64 Ed25519 public key")
	}
	return k, nil
}

// verifySignature checks manifest.sig against the pinned key or the key
// the manifest names.
func verifySignature(rep *Report, m Manifest, raw []byte, sigFile *zip.File, pinned ed25519.PublicKey, fail func(string, ...any)) {
	pub, err := manifestKey(m)
	if err != nil {
		fail("%s: %v", ManifestName, err)
		return
	}
	if pub != nil && receipt.KeyID(pub) != m.KeyID {
		fail("%s: key_id does not match public_key", ManifestName)
	}
	switch {
	case pinned != nil && pub == nil:
		fail("the pack is unsigned, but a public key was given")
		return
	case pinned != nil && !pinned.Equal(pub):
		fail("the pack is signed with key_id %s, not with the public key given (key_id %s)", label(m.KeyID), receipt.KeyID(pinned))
		return
	case pub == nil && sigFile != nil:
		fail("%s: present, but the manifest names no key", SignatureName)
		return
	case pub == nil:
		return // unsigned, and nothing asked for a signature
	case sigFile == nil:
		fail("%s: missing (the manifest names key_id %s)", SignatureName, label(m.KeyID))
		return
	}
	sraw, err := readAll(sigFile)
	if err != nil {
		fail("%s: %v", SignatureName, err)
		return
	}
	var sig Signature
	dec := json.NewDecoder(bytes.NewReader(sraw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sig); err != nil {
		fail("%s: malformed: %v", SignatureName, err)
		return
	}
	if sig.KeyID != m.KeyID {
		fail("%s: key_id %s, the manifest says %s", SignatureName, label(sig.KeyID), label(m.KeyID))
	}
	if !receipt.VerifyManifest(pub, sha256.Sum256(raw), sig.Signature) {
		fail("%s: the signature does not match the manifest", SignatureName)
		return
	}
	rep.Signed = true
}

func readAll(f *zip.File) ([]byte, error) {
	if f == nil {
		return nil, fmt.Errorf("missing")
	}
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	b, err := io.ReadAll(io.LimitReader(rc, maxManifestBytes+1))
	if err == nil && len(b) > maxManifestBytes {
		err = fmt.Errorf("larger than %d bytes", maxManifestBytes)
	}
	return b, err
}

// hashFile hashes a file's content, reading at most one byte more than
// the manifest declares (a longer file fails on its size, and a
// decompression bomb is not read to its end).
func hashFile(f *zip.File, declared int64) (string, int64, error) {
	rc, err := f.Open()
	if err != nil {
		return "", 0, err
	}
	defer func() { _ = rc.Close() }()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(rc, max(declared, 0)+1))
	return hex.EncodeToString(h.Sum(nil)), n, err
}
