package persistence

import (
	"time"

	"svc/messages"
	"svc/receipt"
)

// The stored rows in the forms other layers share: an alert and an
// incident as the API lists them and the live feed carries them, a
// receipt as the receipt package seals and verifies it.

// Record is the API and feed form of an alert.
func (a Alert) Record() messages.AlertRecord {
	var decision *string
	if a.DecisionID != "" {
		d := a.DecisionID
		decision = &d
	}
	return messages.AlertRecord{AlertID: a.ID, TenantID: a.TenantID, RuleKey: a.RuleKey, AlertName: a.AlertName, Severity: a.Severity,
		Source: a.Source, AgentID: a.AgentID, DecisionID: decision, SourceEventID: a.SourceEventID, Summary: a.Summary,
		CreatedAt: a.CreatedAt.UTC()}
}

// Record is the API and feed form of an incident.
func (in Incident) Record() messages.IncidentRecord {
	ids := in.SourceEventIDs
	if ids == nil {
		ids = []string{}
	}
	var closed *time.Time
	if in.ClosedAt != nil {
		c := in.ClosedAt.UTC()
		closed = &c
	}
	return messages.IncidentRecord{IncidentID: in.ID, TenantID: in.TenantID, Kind: in.Kind, Severity: in.Severity, Status: in.Status,
		AgentID: in.AgentID, Summary: in.Summary, SourceEventIDs: ids, OpenedAt: in.OpenedAt.UTC(), ClosedAt: closed,
		CloseReason: in.CloseReason}
}

// Sealable is the receipt in the receipt package's form, at position seq
// of its tenant's chain.
func (r Receipt) Sealable(seq int64) receipt.Receipt {
	return receipt.Receipt{ReceiptID: r.ID, TenantID: r.TenantID, DecisionID: r.DecisionID, Seq: seq, ActionHash: r.ActionHash,
		Decision: r.Decision, ReceiptHash: r.Hash, PrevReceiptHash: r.PrevHash, Signature: r.Signature, KeyID: r.KeyID,
		CreatedAt: receipt.FormatTime(r.CreatedAt), ContextHash: r.ContextHash}
}

// SealAfter seals r as the link after head (svc-receipt-1 hash, or
// svc-receipt-2 with a context hash; signed
// with Ed25519 when signer is set) and returns the chain's new head.
func (r *Receipt) SealAfter(head ChainHead, signer *receipt.Signer) (ChainHead, error) {
	sealed, err := receipt.Seal(r.Sealable(head.Seq+1), head.Hash, signer)
	if err != nil {
		return head, err
	}
	r.Seq, r.PrevHash, r.Hash, r.Signature, r.KeyID = head.Seq+1, head.Hash, sealed.ReceiptHash, sealed.Signature, sealed.KeyID
	return ChainHead{Seq: r.Seq, Hash: r.Hash}, nil
}
