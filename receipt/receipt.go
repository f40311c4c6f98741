package receipt

import (
	"cmp"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/hdevalence/ed25519consensus"

	"svc/canonical"
)

const (
	// HashScheme names the receipt hashing scheme of the package
	// documentation.
	HashScheme = "svc-receipt-1"

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
}

// hashed is the object that svc-receipt-1 hashes: every receipt field but
// receipt_hash and signature.
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
}

// FormatTime renders t as created_at expects it ([TimeLayout], in UTC). It
// truncates to the microsecond; a caller that stores the time as a
// time.Time stores t.Truncate(time.Microsecond), so that the value read back
// (Postgres rounds finer digits rather than truncating them) formats to the
// same text and the receipt still verifies.
func FormatTime(t time.Time) string {
	return t.UTC().Format(TimeLayout)
}

// Hash returns the svc-receipt-1 receipt_hash of r. ReceiptHash and
// Signature are ignored. It fails when a field is not valid UTF-8 or seq is
// beyond 2^53 in magnitude, because the canonical bytes would not then
// record the field exactly.
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

// ChainError is one failure found by [VerifyChain] or [VerifyExport]. Index
// is the receipt's position in the chain given (0-based); -1 refers to an
// export's header or to the file as a whole.
type ChainError struct {
	Index     int    `json:"index"`
	ReceiptID string `json:"receipt_id"`
	Error     string `json:"error"`
}

// VerifyChain verifies every receipt of rs ([Verify]) and the links between
// them: each receipt's prev_receipt_hash is the previous receipt's
// receipt_hash, seq numbers are consecutive, and all receipts belong to the
// tenant of rs[0]. With expectHead, rs[0] must be the chain head (seq 1,
// empty prev_receipt_hash). It returns how many receipts it checked and the
// failures, per index; none means the chain verified.
func VerifyChain(rs []Receipt, pub ed25519.PublicKey, expectHead bool) (checked int, errs []ChainError) {
	if len(rs) == 0 {
		return 0, nil
	}
	v := chainVerifier{pub: pub, tenant: rs[0].TenantID, expectHead: expectHead}
	for i, r := range rs {
		v.add(i, r)
	}
	v.finish()
	return v.checked, v.errs
}

// chainVerifier checks receipts one at a time, so that an export is
// verified without holding it in memory. Signatures are checked in batches
// of up to batchSize (ed25519consensus's batch verification, about twice
// as fast per signature); when a batch fails, its signatures are checked
// one by one to name the bad ones. Call finish before reading errs.
type chainVerifier struct {
	pub        ed25519.PublicKey
	tenant     string
	expectHead bool
	// gaps (a selection): seq numbers rise but may skip; a link is checked
	// only between receipts of consecutive seq.
	gaps bool

	// keep, above 0, bounds the failures held to the first keep in
	// index order (those past it are counted in total, not kept), and
	// the length of the input's text they quote (clip): an export of any
	// size is verified in bounded memory. 0 keeps every failure.
	keep int

	started  bool    // a receipt has been seen
	prev     Receipt // the previous receipt, when havePrev
	havePrev bool    // false after a line that did not parse
	checked  int
	total    int          // failures found, kept or not
	found    []foundError // failures held, in no set order until finish
	// full: keep failures are held at indexes up to cutoff, so that one
	// past cutoff is only counted.
	full    bool
	cutoff  int
	errs    []ChainError // the failures kept, in order; set by finish
	pending []pendingSig
}

// foundError is a failure with its rank, which orders failures within an
// index once batches are settled: 0 for the receipt's own check (hash or
// signature), 1 for the rest.
type foundError struct {
	ChainError
	rank int
}

// pendingSig is a signature awaiting its batch.
type pendingSig struct {
	index    int
	id       string
	msg, sig []byte
}

const batchSize = 64

func (v *chainVerifier) fail(i int, id, msg string) { v.failRanked(i, id, msg, 1) }

func (v *chainVerifier) failRanked(i int, id, msg string, rank int) {
	v.failLazy(i, id, rank, func() string { return msg })
}

// failLazy is failRanked with the message made only for a failure that
// may be kept: past the first keep, an export's failures cost a count.
func (v *chainVerifier) failLazy(i int, id string, rank int, msg func() string) {
	v.total++
	if v.past(i) {
		return
	}
	v.hold(i, id, msg(), rank)
}

// past reports whether a failure at index i cannot be among the first
// keep: keep failures at lower indexes are held.
func (v *chainVerifier) past(i int) bool { return v.full && i > v.cutoff }

func (v *chainVerifier) hold(i int, id, msg string, rank int) {
	if v.keep > 0 {
		id, msg = clip(id), clip(msg)
	}
	v.found = append(v.found, foundError{ChainError: ChainError{Index: i, ReceiptID: id, Error: msg}, rank: rank})
	if v.keep > 0 && len(v.found) >= 2*v.keep {
		v.trim()
	}
}

// trim orders the failures held by index (and, at one index, the
// receipt's own check first; otherwise as found) and, with keep, drops
// all but the first keep. A failure dropped can never be among the first
// keep: keep failures held before it come before it, whatever is found
// later (a signature's failure, settled with its batch, comes up to
// batchSize receipts late).
func (v *chainVerifier) trim() {
	slices.SortStableFunc(v.found, func(a, b foundError) int {
		return cmp.Or(cmp.Compare(a.Index, b.Index), cmp.Compare(a.rank, b.rank))
	})
	if v.keep > 0 && len(v.found) >= v.keep {
		clear(v.found[v.keep:]) // let their text go
		v.found = v.found[:v.keep]
		v.full, v.cutoff = true, v.found[v.keep-1].Index
	}
}

// maxErrorText bounds the text of a failure kept with keep: a receipt id
// or a decoder's message quotes the input, and a line may be up to 1 MiB.
const maxErrorText = 256

// clip shortens s to at most maxErrorText bytes (at a rune boundary),
// marking the cut; the result does not hold on to s's memory.
func clip(s string) string {
	if len(s) <= maxErrorText {
		return s
	}
	cut := maxErrorText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func (v *chainVerifier) add(i int, r Receipt) {
	v.checked++
	v.check(i, r)
	if r.TenantID != v.tenant {
		v.fail(i, r.ReceiptID, "tenant mismatch")
	}
	switch {
	case !v.started:
		if v.expectHead {
			if r.Seq != 1 || r.PrevReceiptHash != "" {
				v.fail(i, r.ReceiptID, "chain does not start at its head")
			}
		} else if r.Seq < 1 || (r.Seq == 1) != (r.PrevReceiptHash == "") {
			v.fail(i, r.ReceiptID, "prev_receipt_hash must be empty exactly at seq 1")
		}
	case v.havePrev && v.gaps && r.Seq > v.prev.Seq+1:
		// A selection skips links: nothing to compare with.
	case v.havePrev && v.gaps && r.Seq <= v.prev.Seq:
		v.fail(i, r.ReceiptID, fmt.Sprintf("out of order: seq %d after seq %d", r.Seq, v.prev.Seq))
	case v.havePrev:
		if r.PrevReceiptHash != v.prev.ReceiptHash {
			v.fail(i, r.ReceiptID, "broken link: prev_receipt_hash does not match the previous receipt")
		}
		if r.Seq != v.prev.Seq+1 {
			v.fail(i, r.ReceiptID, fmt.Sprintf("sequence gap: expected seq %d", v.prev.Seq+1))
		}
	}
	v.started = true
	v.prev, v.havePrev = r, true
}

// check is [Verify] of one receipt, its signature left to the batch.
func (v *chainVerifier) check(i int, r Receipt) {
	h, err := Hash(r)
	switch {
	case err != nil:
		v.failRanked(i, r.ReceiptID, err.Error(), 0)
		return
	case h != r.ReceiptHash:
		v.failRanked(i, r.ReceiptID, errHashMismatch, 0)
		return
	case r.Signature == nil && r.KeyID == "":
		return // unsigned: the hash alone
	}
	msg, sig, why := signedParts(r, v.pub)
	if why != "" {
		v.failRanked(i, r.ReceiptID, why, 0)
		return
	}
	v.pending = append(v.pending, pendingSig{index: i, id: r.ReceiptID, msg: msg, sig: sig})
	if len(v.pending) == batchSize {
		v.settle()
	}
}

// settle verifies the pending signatures.
func (v *chainVerifier) settle() {
	if len(v.pending) == 0 {
		return
	}
	b := ed25519consensus.NewPreallocatedBatchVerifier(len(v.pending))
	for _, p := range v.pending {
		b.Add(v.pub, p.msg, p.sig)
	}
	if !b.Verify() {
		for _, p := range v.pending {
			if !ed25519consensus.Verify(v.pub, p.msg, p.sig) {
				v.failRanked(p.index, p.id, errInvalidSignature, 0)
			}
		}
	}
	v.pending = v.pending[:0]
}

// finish settles the last batch and orders the errors by index (and, at
// one index, the receipt's own check first), as they would be found one
// receipt at a time; with keep, only the first keep remain.
func (v *chainVerifier) finish() {
	v.settle()
	v.trim()
	v.errs = nil
	if len(v.found) == 0 {
		return
	}
	v.errs = make([]ChainError, len(v.found))
	for k, f := range v.found {
		v.errs[k] = f.ChainError
	}
}

// skip records a position that held no receipt (a line that did not parse):
// the next receipt's link cannot be checked.
func (v *chainVerifier) skip() {
	v.started = true
	v.havePrev = false
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

// ChainCheck verifies a tenant's whole chain one receipt at a time, from
// seq 1, as VerifyChain does with expectHead, without holding the chain
// (the compliance evidence pack verifies the chain it exports as it writes
// it).
type ChainCheck struct {
	v chainVerifier
	n int
}

// NewChainCheck starts checking tenantID's chain; pub is nil for unsigned
// receipts.
func NewChainCheck(pub ed25519.PublicKey, tenantID string) *ChainCheck {
	return &ChainCheck{v: chainVerifier{pub: pub, tenant: tenantID, expectHead: true}}
}

// ResumeChainCheck continues checking tenantID's chain after the link at
// seq whose receipt_hash is hash, already verified (seq 0: from the
// start, as NewChainCheck): the first receipt added must be seq+1 and name
// hash as its prev_receipt_hash. The receipt integrity job checks only
// what was appended since its last run this way.
func ResumeChainCheck(pub ed25519.PublicKey, tenantID string, seq int64, hash string) *ChainCheck {
	c := NewChainCheck(pub, tenantID)
	if seq > 0 {
		c.v.started, c.v.havePrev = true, true
		c.v.prev = Receipt{TenantID: tenantID, Seq: seq, ReceiptHash: hash}
	}
	return c
}

// Last returns the last receipt added and whether there was one.
func (c *ChainCheck) Last() (Receipt, bool) { return c.v.prev, c.n > 0 }

// Errors settles the pending signatures and returns how many receipts were
// checked and the failures by index (the order of Add, from 0), without
// comparing the end with a head: a check of a chain still growing.
func (c *ChainCheck) Errors() (checked int, errs []ChainError) {
	c.v.finish()
	return c.v.checked, c.v.errs
}

// Add checks the next receipt.
func (c *ChainCheck) Add(r Receipt) {
	c.v.add(c.n, r)
	c.n++
}

// Finish ends the check: the last receipt must be head (a receipt missing
// at the end of the chain fails here, at the index after the last one). It
// returns how many receipts were checked and the failures by index.
func (c *ChainCheck) Finish(head Head) (checked int, errs []ChainError) {
	c.v.finish()
	errs = c.v.errs
	switch {
	case head.Seq != int64(c.n):
		errs = append(errs, ChainError{Index: c.n, Error: fmt.Sprintf("the chain head is seq %d, %d receipts were found", head.Seq, c.n)})
	case c.n > 0 && c.v.prev.ReceiptHash != head.Hash:
		errs = append(errs, ChainError{Index: c.n - 1, ReceiptID: c.v.prev.ReceiptID, Error: "the last receipt is not the stored chain head"})
	}
	return c.v.checked, errs
}
