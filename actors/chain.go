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
func NewSealer(signer *receipt.Signer) persistence.Sealer {
	return func(tenantID string, head persistence.ChainHead, rs []*persistence.Receipt) error {
		for _, r := range rs {
			sealed, err := receipt.Seal(ToReceipt(*r, head.Seq+1), head.Hash, signer)
			if err != nil {
				return err
			}
			head.Seq++
			r.Seq, r.PrevHash, r.Hash, r.Signature, r.KeyID = head.Seq, head.Hash, sealed.ReceiptHash, sealed.Signature, sealed.KeyID
			head.Hash = r.Hash
		}
		return nil
	}
}

// ToReceipt converts a stored receipt to the receipt package's form (seq
// given, since a receipt being sealed has none yet).
func ToReceipt(r persistence.Receipt, seq int64) receipt.Receipt {
	return receipt.Receipt{ReceiptID: r.ID, TenantID: r.TenantID, DecisionID: r.DecisionID, Seq: seq, ActionHash: r.ActionHash,
		Decision: r.Decision, ReceiptHash: r.Hash, PrevReceiptHash: r.PrevHash, Signature: r.Signature, KeyID: r.KeyID,
		CreatedAt: receipt.FormatTime(r.CreatedAt)}
}
