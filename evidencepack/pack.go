package evidencepack

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"svc/receipt"
)

// Names of the pack's own files.
const (
	ManifestName  = "manifest.json"
	SignatureName = "manifest.sig"
)

// Manifest is manifest.json.
type Manifest struct {
	Format    string    `json:"format"`
	Kind      string    `json:"kind"`
	TenantID  string    `json:"tenant_id"`
	CreatedAt time.Time `json:"created_at"`
	// KeyID and PublicKey name the receipt key that signed manifest.sig;
	// empty and null when the gateway does not sign receipts.
	KeyID     string  `json:"key_id"`
	PublicKey *string `json:"public_key"`
	Files     []File  `json:"files"`
}

// File is one listed file.
type File struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
}

// Signature is manifest.sig.
type Signature struct {
	KeyID     string `json:"key_id"`
	Signature string `json:"signature"`
}

// Writer writes a pack into w as it goes.
type Writer struct {
	zw       *zip.Writer
	manifest Manifest
	signer   *receipt.Signer
	cur      *fileWriter
	names    map[string]bool
	err      error
}

// NewWriter starts a pack of kind (KindIncident or KindCompliance) for
// tenantID; signer (nil: unsigned) is the gateway's receipt signer. A
// kind that RequiredFiles does not know fails the first Create or Close,
// as does a Close before every file the kind requires was written: the
// gateway never writes a pack that Verify refuses.
func NewWriter(w io.Writer, kind, tenantID string, signer *receipt.Signer, now time.Time) *Writer {
	m := Manifest{Format: receipt.ManifestFormat, Kind: kind, TenantID: tenantID, CreatedAt: now.UTC(), Files: []File{}}
	if signer != nil {
		k := base64.StdEncoding.EncodeToString(signer.PublicKey())
		m.KeyID, m.PublicKey = signer.KeyID(), &k
	}
	p := &Writer{zw: zip.NewWriter(w), manifest: m, signer: signer, names: map[string]bool{}}
	if _, ok := RequiredFiles(kind); !ok {
		p.err = fmt.Errorf("evidencepack: unknown kind %q", kind)
	}
	return p
}

// Create starts the next file; what is written to the returned writer is
// hashed and compressed straight into the archive. The previous file ends.
func (p *Writer) Create(name string) (io.Writer, error) {
	if p.err != nil {
		return nil, p.err
	}
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if name == ManifestName || name == SignatureName || p.names[name] {
		return nil, fmt.Errorf("evidencepack: file name %q taken", name)
	}
	p.endFile()
	zf, err := p.zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: p.manifest.CreatedAt})
	if err != nil {
		p.err = fmt.Errorf("evidencepack: %w", err)
		return nil, p.err
	}
	p.names[name] = true
	p.cur = &fileWriter{name: name, w: zf, h: sha256.New()}
	return p.cur, nil
}

// WriteJSON adds a file holding v as indented JSON.
func (p *Writer) WriteJSON(name string, v any) error {
	w, err := p.Create(name)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("evidencepack: %s: %w", name, err)
	}
	return nil
}

func (p *Writer) endFile() {
	if p.cur != nil {
		p.manifest.Files = append(p.manifest.Files, File{Name: p.cur.name, SHA256: hex.EncodeToString(p.cur.h.Sum(nil)), Bytes: p.cur.n})
		p.cur = nil
	}
}

// Close ends the last file, writes the manifest and its signature, and
// finishes the archive. It fails, writing no manifest, when a file the
// pack's kind requires was not written.
func (p *Writer) Close() error {
	if p.err != nil {
		return p.err
	}
	required, _ := RequiredFiles(p.manifest.Kind)
	for _, name := range required {
		if !p.names[name] {
			p.err = fmt.Errorf("evidencepack: a pack of kind %s holds %s, which was not written", p.manifest.Kind, name)
			return p.err
		}
	}
	p.endFile()
	raw, err := json.MarshalIndent(p.manifest, "", "  ")
	if err != nil {
		return fmt.Errorf("evidencepack: manifest: %w", err)
	}
	raw = append(raw, '\n')
	if err := p.raw(ManifestName, raw); err != nil {
		return err
	}
	if p.signer != nil {
		sig, err := json.MarshalIndent(Signature{KeyID: p.signer.KeyID(), Signature: p.signer.SignManifest(sha256.Sum256(raw))}, "", "  ")
		if err != nil {
			return fmt.Errorf("evidencepack: signature: %w", err)
		}
		if err := p.raw(SignatureName, append(sig, '\n')); err != nil {
			return err
		}
	}
	if err := p.zw.Close(); err != nil {
		return fmt.Errorf("evidencepack: %w", err)
	}
	return nil
}

func (p *Writer) raw(name string, b []byte) error {
	w, err := p.zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: p.manifest.CreatedAt})
	if err == nil {
		_, err = w.Write(b)
	}
	if err != nil {
		return fmt.Errorf("evidencepack: %s: %w", name, err)
	}
	return nil
}

// fileWriter hashes and counts what goes into one file.
type fileWriter struct {
	name string
	w    io.Writer
	h    hash.Hash
	n    int64
}

func (f *fileWriter) Write(b []byte) (int, error) {
	n, err := f.w.Write(b)
	f.h.Write(b[:n])
	f.n += int64(n)
	return n, err
}

// ErrNotAPack is returned by Verify for a file that is not a ZIP archive.
var ErrNotAPack = errors.New("evidencepack: not a ZIP archive")
