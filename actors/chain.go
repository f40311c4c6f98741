package actors

import (
	"svc/persistence"
	"svc/receipt"
)

// NewSealer returns the sealer the GroupWriter gives CommitDecisions: it
// continues a tenant's chain from the head read (and locked) inside the
// transaction, hashing each receipt with svc-receipt-1 and signing it with
// Ed25519 when signer is set. Because it runs inside the transaction, a
// retried or contended commit reseals from the real head and a chain never
// forks, on one node or many.
//
// Receipts the GroupWriter already sealed in memory (a lone node answering
// low-risk allows early) are kept when they continue the head read in the
// transaction; otherwise, which only follows a failed write, the whole run
// is resealed from the real head and onReseal counts them.
func NewSealer(signer *receipt.Signer, onReseal func(n int)) persistence.Sealer {
	return func(tenantID string, head persistence.ChainHead, rs []*persistence.Receipt) error {
		if persistence.Continues(head, rs) {
			return nil
		}
		if onReseal != nil && len(rs) > 0 && rs[0].Hash != "" {
			onReseal(len(rs))
		}
		var err error
		for _, r := range rs {
			if head, err = r.SealAfter(head, signer); err != nil {
				return err
			}
		}
		return nil
	}
}
