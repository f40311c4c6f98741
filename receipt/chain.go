package receipt

import (
	"cmp"
	"crypto/ed25519"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/hdevalence/ed25519consensus"
)

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
