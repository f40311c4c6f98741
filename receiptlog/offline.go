package receiptlog

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// Offline checks of a checkpoint against an export (`svc verify-receipts
// -checkpoint`). The export is read as a stream, so the tree is folded as
// a compact range (transparency-dev/merkle/compact: the O(log n) hashes of
// its right edge), never held whole.

// ReadCheckpoint reads a signed checkpoint's head without checking its
// signature (OpenCheckpoint checks it).
func ReadCheckpoint(signed []byte) (Checkpoint, error) {
	_, err := note.Open(signed, note.VerifierList())
	var un *note.UnverifiedNoteError
	if !errors.As(err, &un) {
		return Checkpoint{}, fmt.Errorf("receiptlog: not a signed note: %w", err)
	}
	return ParseCheckpoint(un.Note.Text, "")
}

// VerifierKeyFor is the verifier key of a log named origin whose notes are
// signed with pub (the receipt key).
func VerifierKeyFor(origin string, pub ed25519.PublicKey) (string, error) {
	return note.NewEd25519VerifierKey(origin, pub)
}

// Fold folds a chain's receipts, in seq order from 1, into the tree of the
// checkpoint's size and compares its root with the checkpoint's.
type Fold struct {
	cp   Checkpoint
	rng  *compact.Range
	next int64
	root []byte
	err  error
}

// NewFold starts the fold of the tree cp signs.
func NewFold(cp Checkpoint) *Fold {
	f := &Fold{cp: cp, next: 1}
	f.rng = (&compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}).NewEmptyRange(0)
	if cp.Size == 0 {
		f.root = rfc6962.DefaultHasher.EmptyRoot()
	}
	return f
}

// Add folds the receipt with seq and receiptHash; receipts past the
// checkpoint's size are not in its tree and are ignored.
func (f *Fold) Add(seq int64, receiptHash string) {
	if f.err != nil || f.root != nil {
		return
	}
	if seq != f.next {
		f.err = fmt.Errorf("receipt seq %d where %d comes next: the checkpoint is checked against a whole export, from seq 1 in order", seq, f.next)
		return
	}
	h, err := hex.DecodeString(receiptHash)
	if err != nil || len(h) != 32 {
		f.err = fmt.Errorf("receipt %d: receipt_hash is not 64 hex digits", seq)
		return
	}
	if err := f.rng.Append(rfc6962.DefaultHasher.HashLeaf(h), nil); err != nil {
		f.err = err
		return
	}
	f.next++
	if f.next-1 == f.cp.Size {
		if f.root, err = f.rng.GetRootHash(nil); err != nil {
			f.err = err
		}
	}
}

// Result reports whether the export's first receipts are the tree the
// checkpoint signs: nil when they are.
func (f *Fold) Result() error {
	switch {
	case f.err != nil:
		return f.err
	case f.root == nil:
		return fmt.Errorf("the checkpoint covers %d receipts, the export holds %d: receipts %d to %d are missing",
			f.cp.Size, f.next-1, f.next, f.cp.Size)
	case !bytes.Equal(f.root, f.cp.Root[:]):
		return fmt.Errorf("the export's first %d receipts are not the tree the checkpoint signs: receipts were rewritten or removed", f.cp.Size)
	}
	return nil
}
