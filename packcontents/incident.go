package packcontents

import (
	"cmp"
	"context"
	"errors"
	"io"
	"slices"

	"svc/evidencepack"
	"svc/persistence"
	"svc/receipt"
	"svc/rules/evidence"
)

// Incident is the pack of recs.Incident, an incident of tenantID: recs are
// the incident, the decisions behind its source events and their agents
// and approvals, read as the evidence graph reads them; Incident reads the
// rest (the alerts its source events raised, the decisions' receipts)
// before it returns, so a failure is still an answer before any byte. The pack holds
// incident.json, alerts.json, decisions.json, receipts.jsonl (a selection
// export), with the latest checkpoint (checkpoint.txt) and the receipts'
// inclusion proofs in it (inclusion_proofs.json) when one was signed,
// audit_events.json, approvals.json and narrative.md. signer
// signs the receipts' export header and the manifest; nil: unsigned.
func Incident(ctx context.Context, src Reads, tenantID string, recs evidence.Records, signer *receipt.Signer) (Pack, error) {
	if recs.Incident == nil {
		return Pack{}, errors.New("packcontents: an incident pack without its incident")
	}
	in, ds := *recs.Incident, recs.Decisions
	alerts, err := src.AlertsBySourceEvents(ctx, tenantID, in.SourceEventIDs)
	if err != nil {
		return Pack{}, err
	}
	var rids []string
	for _, d := range ds {
		if d.ReceiptID != "" {
			rids = append(rids, d.ReceiptID)
		}
	}
	rs, err := src.ReceiptsByID(ctx, tenantID, rids)
	if err != nil {
		return Pack{}, err
	}
	slices.SortFunc(rs, func(a, b persistence.Receipt) int { return cmp.Compare(a.Seq, b.Seq) })
	cp, err := latestCheckpoint(ctx, src, tenantID)
	if err != nil {
		return Pack{}, err
	}
	proofs, err := inclusionProofs(ctx, src, cp, rs)
	if err != nil {
		return Pack{}, err
	}
	files := func(_ context.Context, p *evidencepack.Writer) error {
		if err := p.WriteJSON("incident.json", in.Record()); err != nil {
			return err
		}
		if err := p.WriteJSON("alerts.json", viewAll(alerts, persistence.Alert.Record)); err != nil {
			return err
		}
		if err := p.WriteJSON("decisions.json", viewAll(ds, viewDecision)); err != nil {
			return err
		}
		if err := writeSelection(p, tenantID, rs, signer); err != nil {
			return err
		}
		if err := writeCheckpoint(p, cp); err != nil {
			return err
		}
		if proofs != nil {
			if err := p.WriteJSON(evidencepack.InclusionProofsName, proofs); err != nil {
				return err
			}
		}
		events := make([]auditView, len(ds))
		for i, d := range ds {
			events[i] = viewAuditEvent(d.AuditEvent())
		}
		if err := p.WriteJSON("audit_events.json", events); err != nil {
			return err
		}
		approvals := make([]packApproval, 0, len(recs.Approvals))
		for _, d := range ds {
			if a, ok := recs.Approvals[d.ApprovalID]; ok {
				approvals = append(approvals, viewPackApproval(a))
			}
		}
		if err := p.WriteJSON("approvals.json", approvals); err != nil {
			return err
		}
		w, err := p.Create("narrative.md")
		if err != nil {
			return err
		}
		_, err = io.WriteString(w, evidence.Narrative(evidence.NarrativeInput{Incident: in, Agents: recs.Agents,
			Decisions: ds, Approvals: recs.Approvals, Alerts: alerts, Receipts: rs, Now: recs.Now}))
		return err
	}
	return Pack{Kind: evidencepack.KindIncident, Name: "incident-" + in.ID + "-evidence.zip", tenantID: tenantID, signer: signer,
		files: files}, nil
}

// writeSelection writes receipts.jsonl: the receipts, in seq order, as a
// selection export (receipt.SelectionFormat) whose head is the last.
func writeSelection(p *evidencepack.Writer, tenantID string, rs []persistence.Receipt, signer *receipt.Signer) error {
	w, err := p.Create("receipts.jsonl")
	if err != nil {
		return err
	}
	var head receipt.Head
	if n := len(rs); n > 0 {
		head = receipt.Head{Seq: rs[n-1].Seq, Hash: rs[n-1].Hash}
	}
	ew, err := receipt.NewExportWriter(w, receipt.SelectionFormat, tenantID, signer, head, len(rs))
	if err != nil {
		return err
	}
	for _, r := range rs {
		if err := ew.Write(viewReceipt(r)); err != nil {
			return err
		}
	}
	return ew.Flush()
}
