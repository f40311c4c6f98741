package packcontents

import (
	"context"
	"encoding/base64"
	"errors"
	"io"

	"svc/evidencepack"
	"svc/persistence"
	"svc/receiptlog"
)

// The receipt log in a pack (CONTRACT §17): checkpoint.txt, the tenant's
// latest checkpoint as GET /v2/receipts/checkpoint serves it (with its
// witnesses' cosignatures), when one was signed. An incident pack adds
// inclusion_proofs.json, the proof of each of its receipts that the
// checkpoint covers; a compliance pack holds the whole chain, whose first
// receipts fold into the checkpoint's tree (which proves every one of
// them included at once, without a proof per receipt).

// latestCheckpoint returns the tenant's latest checkpoint, or nil without
// one.
func latestCheckpoint(ctx context.Context, src Reads, tenantID string) (*persistence.Checkpoint, error) {
	c, err := src.LatestCheckpoint(ctx, tenantID)
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// writeCheckpoint writes checkpoint.txt when there is a checkpoint.
func writeCheckpoint(p *evidencepack.Writer, c *persistence.Checkpoint) error {
	if c == nil {
		return nil
	}
	w, err := p.Create(evidencepack.CheckpointName)
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, c.Note)
	return err
}

// inclusionProofs are the proofs of an incident pack's receipts in the
// checkpoint's tree, the receipts it covers (seq up to tree_size).
func inclusionProofs(ctx context.Context, src Reads, c *persistence.Checkpoint, rs []persistence.Receipt) (*evidencepack.InclusionProofs, error) {
	if c == nil {
		return nil, nil
	}
	out := &evidencepack.InclusionProofs{TreeSize: c.Size, Proofs: []evidencepack.InclusionProof{}}
	for _, r := range rs {
		if r.Seq > c.Size {
			continue
		}
		hs, err := receiptlog.Inclusion(ctx, src, c.TenantID, r.Seq, c.Size)
		if err != nil {
			return nil, err
		}
		proof := evidencepack.InclusionProof{ReceiptID: r.ID, Seq: r.Seq, LeafIndex: r.Seq - 1, Hashes: make([]string, len(hs))}
		for i := range hs {
			proof.Hashes[i] = base64.StdEncoding.EncodeToString(hs[i][:])
		}
		out.Proofs = append(out.Proofs, proof)
	}
	return out, nil
}
