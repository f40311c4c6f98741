package evidencepack

import (
	"archive/zip"
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"svc/receipt"
	"svc/receiptlog"
)

// The receipt log in a pack (CONTRACT §17; packcontents writes it): when
// the gateway had signed a checkpoint of the tenant's log, the pack holds
// it as checkpoint.txt, and an incident pack the inclusion proof of each
// of its receipts the checkpoint covers as inclusion_proofs.json. Verify
// checks the checkpoint's signature with the pack's key (the receipt key,
// named as the log's origin), and that the pack's receipts are in its
// tree: by their proofs (incident), or by folding the whole chain the
// pack holds (compliance).

// Names of the receipt log's files.
const (
	CheckpointName      = "checkpoint.txt"
	InclusionProofsName = "inclusion_proofs.json"
)

// InclusionProofs is inclusion_proofs.json: the RFC 6962 inclusion proof
// of each receipt of the pack in the tree of tree_size (checkpoint.txt's).
type InclusionProofs struct {
	TreeSize int64            `json:"tree_size"`
	Proofs   []InclusionProof `json:"proofs"`
}

// InclusionProof is one receipt's proof, as GET
// /v2/receipts/:receipt_id/inclusion answers it, with the receipt named.
type InclusionProof struct {
	ReceiptID string   `json:"receipt_id"`
	Seq       int64    `json:"seq"`
	LeafIndex int64    `json:"leaf_index"`
	Hashes    []string `json:"hashes"`
}

// CheckpointReport is what Verify found of a pack's checkpoint.
type CheckpointReport struct {
	Origin string
	Size   int64
	// Proven is how many of the pack's receipts were proven in its tree.
	Proven int64
	// Cosigners names the checkpoint's other signature lines (its
	// witnesses' cosignatures), which are not checked offline: the
	// witnesses' keys are not in the pack.
	Cosigners []string
}

// verifyCheckpoint checks checkpoint.txt (and inclusion_proofs.json)
// against the pack's key and receipts. key is the pinned key, else the
// manifest's.
func verifyCheckpoint(rep *Report, m Manifest, byName map[string]*zip.File, key ed25519.PublicKey, fail func(string, ...any)) {
	signed, err := readAll(byName[CheckpointName])
	if err != nil {
		fail("%s: %v", CheckpointName, err)
		return
	}
	cp, err := receiptlog.ReadCheckpoint(signed)
	if err != nil {
		fail("%s: %v", CheckpointName, err)
		return
	}
	rep.Checkpoint = &CheckpointReport{Origin: cp.Origin, Size: cp.Size}
	if !strings.HasSuffix(cp.Origin, "/"+m.TenantID) {
		fail("%s: the checkpoint of log %s, not of tenant %s's", CheckpointName, label(cp.Origin), label(m.TenantID))
	}
	if key == nil {
		fail("%s: the pack names no key to check the checkpoint's signature with", CheckpointName)
	} else if v, err := logVerifier(cp.Origin, key); err != nil {
		fail("%s: %v", CheckpointName, err)
	} else if n, err := note.Open(signed, note.VerifierList(v)); err != nil {
		fail("%s: its signature does not verify with the receipt key: %v", CheckpointName, err)
	} else {
		for _, s := range n.UnverifiedSigs {
			rep.Checkpoint.Cosigners = append(rep.Checkpoint.Cosigners, s.Name)
		}
	}
	receipts := byName["receipts.jsonl"]
	if receipts == nil {
		return // reported missing already
	}
	switch m.Kind {
	case KindCompliance:
		fold := receiptlog.NewFold(cp)
		if verifyReceipts(receipts, func(r receipt.Receipt) { fold.Add(r.Seq, r.ReceiptHash) }, fail) {
			if err := fold.Result(); err != nil {
				fail("%s: %v", CheckpointName, err)
			} else {
				rep.Checkpoint.Proven = cp.Size
			}
		}
	case KindIncident:
		verifyProofs(rep, cp, byName, receipts, fail)
	}
}

// logVerifier is the note verifier of the log named origin whose
// checkpoints the receipt key signs.
func logVerifier(origin string, key ed25519.PublicKey) (note.Verifier, error) {
	vkey, err := receiptlog.VerifierKeyFor(origin, key)
	if err != nil {
		return nil, err
	}
	return note.NewVerifier(vkey)
}

// verifyReceipts reads the pack's receipts, calling each with every one,
// and reports whether they verify: a receipt that does not is no leaf to
// prove anything with.
func verifyReceipts(f *zip.File, each func(receipt.Receipt), fail func(string, ...any)) bool {
	rc, err := f.Open()
	if err != nil {
		fail("receipts.jsonl: %v", err)
		return false
	}
	defer func() { _ = rc.Close() }()
	r, err := receipt.VerifyExportEach(rc, each)
	switch {
	case err != nil:
		fail("receipts.jsonl: %v", err)
		return false
	case !r.Valid:
		fail("receipts.jsonl: %d receipts do not verify (svc verify-receipts lists them), so the checkpoint proves nothing of them",
			r.ErrorCount)
		return false
	}
	return true
}

// verifyProofs checks that every receipt of an incident pack that the
// checkpoint covers has an inclusion proof that verifies against its
// root.
func verifyProofs(rep *Report, cp receiptlog.Checkpoint, byName map[string]*zip.File, receipts *zip.File, fail func(string, ...any)) {
	raw, err := readAll(byName[InclusionProofsName])
	if err != nil {
		fail("%s: %v (a pack with a checkpoint holds it)", InclusionProofsName, err)
		return
	}
	var ps InclusionProofs
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ps); err != nil {
		fail("%s: malformed: %v", InclusionProofsName, err)
		return
	}
	if ps.TreeSize != cp.Size {
		fail("%s: proofs in a tree of %d receipts, the checkpoint's has %d", InclusionProofsName, ps.TreeSize, cp.Size)
		return
	}
	byID := map[string]InclusionProof{}
	for _, p := range ps.Proofs {
		byID[p.ReceiptID] = p
	}
	var covered []receipt.Receipt
	if !verifyReceipts(receipts, func(r receipt.Receipt) {
		if r.Seq >= 1 && r.Seq <= cp.Size {
			covered = append(covered, r)
		}
	}, fail) {
		return
	}
	for _, r := range covered {
		p, ok := byID[r.ReceiptID]
		if !ok {
			fail("%s: no proof of receipt %s (seq %d), which the checkpoint covers", InclusionProofsName, label(r.ReceiptID), r.Seq)
			continue
		}
		if err := checkProof(p, r, cp); err != nil {
			fail("%s: receipt %s (seq %d): %v", InclusionProofsName, label(r.ReceiptID), r.Seq, err)
			continue
		}
		rep.Checkpoint.Proven++
	}
}

func checkProof(p InclusionProof, r receipt.Receipt, cp receiptlog.Checkpoint) error {
	if p.Seq != r.Seq || p.LeafIndex != r.Seq-1 {
		return fmt.Errorf("the proof is of leaf %d, the receipt is leaf %d", p.LeafIndex, r.Seq-1)
	}
	proof := make(tlog.RecordProof, len(p.Hashes))
	for i, h := range p.Hashes {
		b, err := base64.StdEncoding.Strict().DecodeString(h)
		if err != nil || len(b) != tlog.HashSize {
			return fmt.Errorf("proof hash %d is not a base64 SHA-256", i)
		}
		copy(proof[i][:], b)
	}
	leaf, err := receiptlog.LeafHash(r.ReceiptHash)
	if err != nil {
		return err
	}
	if err := tlog.CheckRecord(proof, cp.Size, cp.Root, p.LeafIndex, leaf); err != nil {
		return fmt.Errorf("the proof does not verify against the checkpoint's root: %w", err)
	}
	return nil
}
