package maintenance

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"

	"svc/persistence"
	"svc/receiptlog"
)

// The receipt log's checks (CONTRACT §17), part of the integrity pass: the
// stored tree's leaves are the chain's receipts, it holds no receipt the
// chain lost, its root at the latest checkpoint's size is the signed one,
// and that checkpoint is consistent with the one before it.

// checkLeaves compares the stored tree's leaves for rs (those the tree
// holds) with the receipts' hashes, and returns the first that differs and
// why ("" when none does). A receipt rewritten after the log took it, even
// re-signed and relinked so that the chain verifies, differs here.
func (m *Maintenance) checkLeaves(ctx context.Context, tenantID string, rs []persistence.Receipt) (int64, string, error) {
	leaves, _, err := m.store.LogSize(ctx, tenantID)
	if err != nil || leaves == 0 {
		return 0, "", err
	}
	var idx, seqs []int64
	var want []tlog.Hash
	for _, r := range rs {
		if r.Seq < 1 || r.Seq > leaves {
			continue
		}
		h, err := receiptlog.LeafHash(r.Hash)
		if err != nil {
			return r.Seq, err.Error(), nil
		}
		idx, seqs, want = append(idx, tlog.StoredHashIndex(0, r.Seq-1)), append(seqs, r.Seq), append(want, h)
	}
	if len(idx) == 0 {
		return 0, "", nil
	}
	got, err := m.store.LogHashes(ctx, tenantID, idx)
	if err != nil {
		return 0, "", err
	}
	for i := range got {
		if seq := seqs[i]; got[i] != want[i] {
			return seq, fmt.Sprintf("receipt %d is not the receipt log's leaf %d: the receipt or the log was changed after the log took it", seq, seq-1), nil
		}
	}
	return 0, "", nil
}

// checkCheckpoints checks the tenant's log against its chain head and its
// checkpoints; it returns the seq (or tree size) of a failure and why.
func (m *Maintenance) checkCheckpoints(ctx context.Context, tenantID string, headSeq int64) (int64, string, error) {
	leaves, _, err := m.store.LogSize(ctx, tenantID)
	if err != nil {
		return 0, "", err
	}
	if leaves > headSeq {
		return headSeq + 1, fmt.Sprintf("the receipt log holds %d receipts but the chain ends at %d: receipts were removed", leaves, headSeq), nil
	}
	if len(m.opt.PublicKey) == 0 || m.opt.LogOrigin == "" {
		return 0, "", nil
	}
	latest, err := m.store.LatestCheckpoint(ctx, tenantID)
	if errors.Is(err, persistence.ErrNotFound) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", err
	}
	origin, err := receiptlog.Origin(m.opt.LogOrigin, tenantID)
	if err != nil {
		return 0, "", err
	}
	vkey, err := receiptlog.VerifierKeyFor(origin, m.opt.PublicKey)
	if err != nil {
		return 0, "", err
	}
	cp, why := openKept(latest, vkey, origin)
	if why != "" {
		return latest.Size, why, nil
	}
	if cp.Size > leaves {
		return cp.Size, fmt.Sprintf("the checkpoint of %d receipts is larger than the stored log (%d)", cp.Size, leaves), nil
	}
	root, err := receiptlog.Root(ctx, m.store, tenantID, cp.Size)
	if err != nil {
		return 0, "", err
	}
	if root != cp.Root {
		return cp.Size, fmt.Sprintf("the stored log's root at %d receipts is not the signed checkpoint's: the log was rewritten", cp.Size), nil
	}
	prev, err := m.store.CheckpointsBefore(ctx, tenantID, cp.Size, 1)
	if err != nil || len(prev) == 0 {
		return 0, "", err
	}
	old, why := openKept(prev[0], vkey, origin)
	if why != "" {
		return prev[0].Size, why, nil
	}
	p, err := receiptlog.Consistency(ctx, m.store, tenantID, old.Size, cp.Size)
	if err != nil {
		return 0, "", err
	}
	if err := tlog.CheckTree(p, cp.Size, cp.Root, old.Size, old.Root); err != nil {
		return cp.Size, fmt.Sprintf("the checkpoint of %d receipts is not consistent with the one of %d: the log was rewritten", cp.Size, old.Size), nil
	}
	return 0, "", nil
}

// openKept opens a kept checkpoint's note and checks it against the row.
func openKept(c persistence.Checkpoint, vkey, origin string) (receiptlog.Checkpoint, string) {
	cp, err := receiptlog.OpenCheckpoint([]byte(c.Note), vkey, origin)
	if err != nil {
		return cp, fmt.Sprintf("the checkpoint of %d receipts does not verify: %v", c.Size, err)
	}
	if cp.Size != c.Size || cp.Root != c.Root {
		return cp, fmt.Sprintf("the checkpoint kept as %d receipts signs %d", c.Size, cp.Size)
	}
	return cp, ""
}
