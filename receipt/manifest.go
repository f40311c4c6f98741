package receipt

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"

	"github.com/hdevalence/ed25519consensus"
)

// ManifestFormat names the evidence pack manifest that SignManifest signs.
const ManifestFormat = "svc-evidence-pack-1"

// manifestMessage is what a pack manifest's signature signs: a text naming
// the format, NUL, then the SHA-256 of the manifest's bytes in hex. It is
// never 32 bytes long, so it cannot be mistaken for a receipt hash (which
// receipt signatures sign), nor for an export header (another prefix).
func manifestMessage(digest [32]byte) []byte {
	return fmt.Appendf(nil, "%s manifest\x00%x", ManifestFormat, digest[:])
}

// SignManifest signs the SHA-256 of an evidence pack's manifest with the
// receipts' key and returns the signature in standard base64.
func (s *Signer) SignManifest(digest [32]byte) string {
	return base64.StdEncoding.EncodeToString(ed25519.Sign(s.priv, manifestMessage(digest)))
}

// VerifyManifest checks a manifest signature (standard base64) made by
// SignManifest.
func VerifyManifest(pub ed25519.PublicKey, digest [32]byte, signature string) bool {
	sig, err := base64.StdEncoding.Strict().DecodeString(signature)
	return err == nil && len(pub) == ed25519.PublicKeySize && len(sig) == ed25519.SignatureSize &&
		ed25519consensus.Verify(pub, manifestMessage(digest), sig)
}
