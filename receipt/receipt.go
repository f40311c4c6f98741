package receipt

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/hdevalence/ed25519consensus"

	"svc/canonical"
)

const (
	// HashScheme names the receipt hashing scheme of the package
	// documentation for a receipt without run context.
	HashScheme = "svc-receipt-1"
	// HashSchemeContext names the scheme of a receipt made under run
	// context (CONTRACT §16): svc-receipt-1's object plus context_hash.
	HashSchemeContext = "svc-receipt-2"

	// TimeLayout is the form of created_at: RFC 3339 in UTC with exactly
	// six fractional digits.
	TimeLayout = "2006-01-02T15:04:05.000000Z07:00"

	// maxSeq is the largest seq a JSON number carries exactly (2^53).
	maxSeq = 1 << 53
)

// Receipt is one link of a tenant's receipt chain (CONTRACT §13).
type Receipt struct {
	ReceiptID       string  `json:"receipt_id"`
	TenantID        string  `json:"tenant_id"`
	DecisionID      string  `json:"decision_id"`
	Seq             int64   `json:"seq"`
	ActionHash      string  `json:"action_hash"`
	Decision        string  `json:"decision"`
	ReceiptHash     string  `json:"receipt_hash"`
	PrevReceiptHash string  `json:"prev_receipt_hash"`
	Signature       *string `json:"signature"`
	KeyID           string  `json:"key_id"`
	CreatedAt       string  `json:"created_at"`
	// ContextHash is the SHA-256 (64 lower-case hex) of the canonical run
	// context the decision's policy saw; present only on a receipt made
	// under run context, which is then hashed as svc-receipt-2.
	ContextHash string `json:"context_hash,omitempty"`
}

// Scheme names the hashing scheme of r: svc-receipt-2 when it carries a
// context hash, else svc-receipt-1.
func Scheme(r Receipt) string {
	if r.ContextHash != "" {
		return HashSchemeContext
	}
	return HashScheme
}

// hashed is the object that svc-receipt-1 hashes: every receipt field but
// receipt_hash and signature (and svc-receipt-2 the same with
// context_hash).
type hashed struct {
	ReceiptID       string `json:"receipt_id"`
	TenantID        string `json:"tenant_id"`
	DecisionID      string `json:"decision_id"`
	Seq             int64  `json:"seq"`
	ActionHash      string `json:"action_hash"`
	Decision        string `json:"decision"`
	PrevReceiptHash string `json:"prev_receipt_hash"`
	KeyID           string `json:"key_id"`
	CreatedAt       string `json:"created_at"`
	ContextHash     string `json:"context_hash,omitempty"`
}

// FormatTime renders t as created_at expects it ([TimeLayout], in UTC). It
// truncates to the microsecond; a caller that stores the time as a
// time.Time stores t.Truncate(time.Microsecond), so that the value read back
// (Postgres rounds finer digits rather than truncating them) formats to the
// same text and the receipt still verifies.
func FormatTime(t time.Time) string {
	return t.UTC().Format(TimeLayout)
}

// Hash returns the receipt_hash of r: svc-receipt-1, or svc-receipt-2 when
// r carries a context hash ([Scheme]). ReceiptHash and Signature are
// ignored. It fails when a field is not valid UTF-8, seq is beyond 2^53 in
// magnitude (the canonical bytes would not then record the field exactly)
// or a context hash is not 64 lower-case hex characters.
func Hash(r Receipt) (string, error) {
	h := hashed{
		ReceiptID:       r.ReceiptID,
		TenantID:        r.TenantID,
		DecisionID:      r.DecisionID,
		Seq:             r.Seq,
		ActionHash:      r.ActionHash,
		Decision:        r.Decision,
		PrevReceiptHash: r.PrevReceiptHash,
		KeyID:           r.KeyID,
		CreatedAt:       r.CreatedAt,
		ContextHash:     r.ContextHash,
	}
	if h.ContextHash != "" && !isHash(h.ContextHash) {
		return "", errors.New("receipt: context_hash is not 64 lower-case hex characters")
	}
	for _, f := range []struct{ name, value string }{
		{"receipt_id", h.ReceiptID}, {"tenant_id", h.TenantID}, {"decision_id", h.DecisionID},
		{"action_hash", h.ActionHash}, {"decision", h.Decision}, {"prev_receipt_hash", h.PrevReceiptHash},
		{"key_id", h.KeyID}, {"created_at", h.CreatedAt},
	} {
		if !utf8.ValidString(f.value) {
			return "", fmt.Errorf("receipt: %s is not valid UTF-8", f.name)
		}
	}
	if h.Seq > maxSeq || h.Seq < -maxSeq {
		return "", fmt.Errorf("receipt: seq %d is out of range", h.Seq)
	}
	sum := sha256.Sum256(h.canonical(make([]byte, 0, 512)))
	return hex.EncodeToString(sum[:]), nil
}

// canonical appends the RFC 8785 form of h, written directly: its members
// in code-unit order (all names are ASCII), strings per
// canonical.AppendString, seq as a decimal integer (|seq| <= 2^53, which
// ECMAScript prints without exponent or fraction). It is what
// canonical.Marshal(h) returns, a test holds them equal, at a fifth of the
// cost: receipts are hashed on the decision path.
func (h hashed) canonical(b []byte) []byte {
	b = append(b, `{"action_hash":`...)
	b = canonical.AppendString(b, h.ActionHash)
	if h.ContextHash != "" {
		b = append(b, `,"context_hash":`...)
		b = canonical.AppendString(b, h.ContextHash)
	}
	b = append(b, `,"created_at":`...)
	b = canonical.AppendString(b, h.CreatedAt)
	b = append(b, `,"decision":`...)
	b = canonical.AppendString(b, h.Decision)
	b = append(b, `,"decision_id":`...)
	b = canonical.AppendString(b, h.DecisionID)
	b = append(b, `,"key_id":`...)
	b = canonical.AppendString(b, h.KeyID)
	b = append(b, `,"prev_receipt_hash":`...)
	b = canonical.AppendString(b, h.PrevReceiptHash)
	b = append(b, `,"receipt_id":`...)
	b = canonical.AppendString(b, h.ReceiptID)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, h.Seq, 10)
	b = append(b, `,"tenant_id":`...)
	b = canonical.AppendString(b, h.TenantID)
	return append(b, '}')
}

// KeyID returns the key_id of an Ed25519 public key: the first 16 hex
// characters of the SHA-256 of its 32 bytes. It returns "" for a key of the
// wrong length.
func KeyID(pub ed25519.PublicKey) string {
	if len(pub) != ed25519.PublicKeySize {
		return ""
	}
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// Signer signs receipt hashes with the gateway's Ed25519 key. It is safe for
// concurrent use; it never changes after [NewSigner].
type Signer struct {
	priv  ed25519.PrivateKey
	pub   ed25519.PublicKey
	keyID string
}

// NewSigner derives the signing key from a 32-byte Ed25519 seed (the
// decoded SVC_RECEIPT_SIGNING_KEY). The seed is copied.
func NewSigner(seed []byte) (*Signer, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("receipt: signing seed must be %d bytes, got %d", ed25519.SeedSize, len(seed))
	}
	priv := ed25519.NewKeyFromSeed(seed)
	pub, ok := priv.Public().(ed25519.PublicKey)
	if !ok {
		return nil, errors.New("receipt: unexpected public key type")
	}
	return &Signer{priv: priv, pub: pub, keyID: KeyID(pub)}, nil
}

// KeyID returns the key_id of the signer's public key.
func (s *Signer) KeyID() string { return s.keyID }

// PublicKey returns a copy of the signer's Ed25519 public key.
func (s *Signer) PublicKey() ed25519.PublicKey {
	return append(ed25519.PublicKey(nil), s.pub...)
}

// SignNote signs the text of a signed note (a checkpoint of the receipt
// log, CONTRACT §17) with the receipt key: Ed25519 over the text, as C2SP
// signed-note specifies. The key's other messages are 32 bytes (a receipt
// hash, a manifest digest); a checkpoint's text is longer (its origin
// alone holds the tenant's id), so no signature serves as another's.
func (s *Signer) SignNote(text []byte) []byte { return ed25519.Sign(s.priv, text) }

// Sign signs the 32 raw bytes of a receipt hash given as 64 lower-case hex
// characters and returns the signature in standard base64.
func (s *Signer) Sign(hashHex string) (string, error) {
	raw, ok := decodeHash(hashHex)
	if !ok {
		return "", errors.New("receipt: sign: hash must be 64 lower-case hex characters")
	}
	return base64.StdEncoding.EncodeToString(ed25519.Sign(s.priv, raw)), nil
}

// Seal completes r as the next receipt of its chain: it sets
// PrevReceiptHash to prevHash, KeyID to the signer's key_id ("" when s is
// nil), ReceiptHash, and Signature (nil when s is nil). The chain actor calls
// it while it holds the tenant's chain head. Seal checks what the chain
// needs: a tenant and a receipt id, seq at least 1, prevHash empty exactly
// when seq is 1 and otherwise 64 lower-case hex, and created_at in
// [TimeLayout].
func Seal(r Receipt, prevHash string, s *Signer) (Receipt, error) {
	switch {
	case r.TenantID == "":
		return Receipt{}, errors.New("receipt: seal: tenant_id is empty")
	case r.ReceiptID == "":
		return Receipt{}, errors.New("receipt: seal: receipt_id is empty")
	case r.Seq < 1:
		return Receipt{}, fmt.Errorf("receipt: seal: seq %d is below 1", r.Seq)
	case r.Seq == 1 && prevHash != "":
		return Receipt{}, errors.New("receipt: seal: seq 1 is the chain head and takes no previous hash")
	case r.Seq > 1 && !isHash(prevHash):
		return Receipt{}, fmt.Errorf("receipt: seal: seq %d needs the previous receipt_hash (64 lower-case hex)", r.Seq)
	}
	if !validTime(r.CreatedAt) {
		return Receipt{}, fmt.Errorf("receipt: seal: created_at %q is not RFC 3339 UTC with microseconds", r.CreatedAt)
	}
	r.PrevReceiptHash = prevHash
	r.KeyID = ""
	r.Signature = nil
	if s != nil {
		r.KeyID = s.keyID
	}
	h, err := Hash(r)
	if err != nil {
		return Receipt{}, err
	}
	r.ReceiptHash = h
	if s != nil {
		sig, err := s.Sign(h)
		if err != nil {
			return Receipt{}, err
		}
		r.Signature = &sig
	}
	return r, nil
}

// Check is the result of verifying one receipt (GET /v1/receipts/:id/verify).
type Check struct {
	ReceiptID string `json:"receipt_id"`
	// Valid is HashValid and, for a signed receipt, SignatureValid.
	Valid     bool `json:"valid"`
	HashValid bool `json:"hash_valid"`
	// SignatureValid is nil for an unsigned receipt.
	SignatureValid *bool `json:"signature_valid"`
	// Error names the first failure; empty when Valid.
	Error string `json:"error"`
}

// Verification failures, as they appear in Check.Error and ChainError.Error.
const (
	errHashMismatch     = "receipt_hash mismatch"
	errUnknownKey       = "unknown key_id"
	errInvalidSignature = "invalid signature"
	errMissingSignature = "missing signature"
)

// Verify recomputes r's hash and, when r is signed, checks its signature
// with pub, which must be the key r.KeyID names. An unsigned receipt (null
// signature, empty key_id) verifies on its hash alone, whatever pub is.
func Verify(r Receipt, pub ed25519.PublicKey) Check {
	c := Check{ReceiptID: r.ReceiptID}
	h, err := Hash(r)
	switch {
	case err != nil:
		c.Error = err.Error()
	case h != r.ReceiptHash:
		c.Error = errHashMismatch
	default:
		c.HashValid = true
	}

	if r.Signature != nil || r.KeyID != "" {
		ok, why := verifySignature(r, pub)
		c.SignatureValid = &ok
		if !ok && c.Error == "" {
			c.Error = why
		}
	}
	c.Valid = c.HashValid && (c.SignatureValid == nil || *c.SignatureValid)
	return c
}

// verifySignature checks r's signature over its stored receipt_hash.
func verifySignature(r Receipt, pub ed25519.PublicKey) (bool, string) {
	raw, sig, why := signedParts(r, pub)
	if why != "" {
		return false, why
	}
	if !ed25519consensus.Verify(pub, raw, sig) {
		return false, errInvalidSignature
	}
	return true, ""
}

// signedParts are what r's signature is checked on: the hash it signs and
// the signature, or why they cannot be checked.
func signedParts(r Receipt, pub ed25519.PublicKey) (msg, sig []byte, why string) {
	if r.Signature == nil {
		// A key_id without a signature: the signature was stripped.
		return nil, nil, errMissingSignature
	}
	if len(pub) != ed25519.PublicKeySize || KeyID(pub) != r.KeyID {
		return nil, nil, errUnknownKey
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(*r.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return nil, nil, errInvalidSignature
	}
	msg, ok := decodeHash(r.ReceiptHash)
	if !ok {
		return nil, nil, errInvalidSignature
	}
	return msg, sig, ""
}

// isHash reports whether s is 64 lower-case hex characters.
func isHash(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func decodeHash(s string) ([]byte, bool) {
	if !isHash(s) {
		return nil, false
	}
	raw, err := hex.DecodeString(s)
	return raw, err == nil
}

// validTime reports whether s is a time in [TimeLayout], in UTC, exactly as
// [FormatTime] writes it.
func validTime(s string) bool {
	t, err := time.Parse(TimeLayout, s)
	return err == nil && FormatTime(t) == s
}
