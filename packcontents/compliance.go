package packcontents

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"svc/evidencepack"
	"svc/persistence"
	"svc/receipt"
)

// Compliance is the compliance pack of tenantID over [from, to). The
// tenant is read now (the store's persistence.ErrNotFound when there is
// none); everything else is read as the pack is written, a file at a time:
// tenant.json (settings and risk settings), policies.json (base, the base
// policy set's Rego by file as given, and the tenant's policies with its
// policy version), skills.json, agents.json, decision_stats.json (the
// range's), receipts.jsonl (the whole chain as an export) with
// receipts_verification.json and the latest checkpoint (checkpoint.txt,
// when one was signed), and the range's audit_events.jsonl,
// approvals.json and incidents.json. signer signs the receipts' export
// header and the manifest; nil: unsigned.
func Compliance(ctx context.Context, src Reads, tenantID string, from, to time.Time, base map[string]string,
	signer *receipt.Signer) (Pack, error) {
	tenant, err := src.GetTenant(ctx, tenantID)
	if err != nil {
		return Pack{}, err
	}
	cp := &compliance{src: src, tenant: tenant, from: from, to: to, base: base, signer: signer}
	name := fmt.Sprintf("compliance-%s-%s-%s-evidence.zip", tenant.ID, from.Format("20060102T150405Z"), to.Format("20060102T150405Z"))
	return Pack{Kind: evidencepack.KindCompliance, Name: name, tenantID: tenantID, signer: signer, files: cp.write}, nil
}

// compliance writes one compliance pack, file by file, each read as it is
// written.
type compliance struct {
	src      Reads
	tenant   persistence.Tenant
	from, to time.Time
	base     map[string]string
	signer   *receipt.Signer
}

func (cp *compliance) write(ctx context.Context, p *evidencepack.Writer) error {
	for _, step := range []func(context.Context, *evidencepack.Writer) error{
		cp.settings, cp.policies, cp.skills, cp.agents, cp.stats, cp.chain, cp.audit, cp.approvals, cp.incidents,
	} {
		if err := step(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

func (cp *compliance) settings(ctx context.Context, p *evidencepack.Writer) error {
	risk, err := cp.src.GetRiskSettings(ctx, cp.tenant.ID)
	if err != nil {
		return err
	}
	return p.WriteJSON("tenant.json", map[string]any{"tenant": viewTenant(cp.tenant), "range": map[string]any{"from": cp.from, "to": cp.to},
		"risk_weights": risk.Weights, "risk_escalation": map[string]any{"denial_threshold": risk.DenialThreshold, "window_minutes": risk.WindowMinutes}})
}

// policies writes policies.json: the base set's Rego by file, and the
// tenant's policies with their version.
func (cp *compliance) policies(ctx context.Context, p *evidencepack.Writer) error {
	ps, err := cp.src.ListPolicies(ctx, cp.tenant.ID)
	if err != nil {
		return err
	}
	version, err := cp.src.PolicyVersion(ctx, cp.tenant.ID)
	if err != nil {
		return err
	}
	return p.WriteJSON("policies.json", map[string]any{"tenant_policy_version": version, "base": cp.base,
		"tenant": viewAll(ps, viewPolicy)})
}

func (cp *compliance) skills(ctx context.Context, p *evidencepack.Writer) error {
	skills, err := cp.src.ListSkills(ctx, cp.tenant.ID)
	if err != nil {
		return err
	}
	return p.WriteJSON("skills.json", viewAll(skills, viewSkill))
}

func (cp *compliance) agents(ctx context.Context, p *evidencepack.Writer) error {
	return jsonArray(p, "agents.json", func(add func(any)) error {
		return pages(func(pg persistence.Page) ([]persistence.Agent, error) {
			return cp.src.ListAgents(ctx, cp.tenant.ID, persistence.AgentFilter{}, pg)
		}, func(a persistence.Agent) int64 { return a.Seq }, func(a persistence.Agent) bool { add(viewAgent(a)); return true })
	})
}

func (cp *compliance) stats(ctx context.Context, p *evidencepack.Writer) error {
	st, err := cp.src.DecisionStats(ctx, cp.tenant.ID, cp.from, cp.to)
	if err != nil {
		return err
	}
	return p.WriteJSON("decision_stats.json", map[string]any{"from": cp.from, "to": cp.to, "total": st.Total,
		"by_decision": st.ByDecision, "by_trust_level": st.ByTrustLevel})
}

// chain writes receipts.jsonl, the tenant's whole chain as an export
// (receipt.ExportFormat) up to its stored head, read a page at a time and
// verified as it is written; then receipts_verification.json, the result
// (CONTRACT §13's verify-chain shape).
func (cp *compliance) chain(ctx context.Context, p *evidencepack.Writer) error {
	tenantID := cp.tenant.ID
	// The checkpoint first: the chain read after it holds its tree.
	checkpoint, err := latestCheckpoint(ctx, cp.src, tenantID)
	if err != nil {
		return err
	}
	head, err := cp.src.ChainHead(ctx, tenantID)
	if err != nil {
		return err
	}
	w, err := p.Create("receipts.jsonl")
	if err != nil {
		return err
	}
	ew, err := receipt.NewExportWriter(w, receipt.ExportFormat, tenantID, cp.signer, head, int(head.Seq))
	if err != nil {
		return err
	}
	var pub []byte
	if cp.signer != nil {
		pub = cp.signer.PublicKey()
	}
	check := receipt.NewChainCheck(pub, tenantID)
	for from := int64(1); from <= head.Seq; {
		rs, err := cp.src.ReceiptRange(ctx, tenantID, from, head.Seq, packPage)
		if err != nil {
			return err
		}
		for _, r := range rs {
			v := viewReceipt(r)
			check.Add(v)
			if err := ew.Write(v); err != nil {
				return err
			}
		}
		if len(rs) < packPage {
			break
		}
		from = rs[len(rs)-1].Seq + 1
	}
	if err := ew.Flush(); err != nil {
		return err
	}
	checked, errs := check.Finish(head)
	if err := p.WriteJSON("receipts_verification.json", verifyChainView{Valid: len(errs) == 0, Checked: checked,
		Errors: append(make([]receipt.ChainError, 0, len(errs)), errs...)}); err != nil {
		return err
	}
	return writeCheckpoint(p, checkpoint)
}

// audit writes audit_events.jsonl: the audit events of the range
// (administrative events and every decision's authorize_decision event),
// newest first, one per line.
func (cp *compliance) audit(ctx context.Context, p *evidencepack.Writer) error {
	w, err := p.Create("audit_events.jsonl")
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	var werr error
	err = pages(func(pg persistence.Page) ([]persistence.AuditEvent, error) {
		return cp.src.ListAudit(ctx, cp.tenant.ID, persistence.AuditFilter{}, pg)
	}, func(e persistence.AuditEvent) int64 { return e.Seq }, inRange(cp.from, cp.to, func(e persistence.AuditEvent) time.Time { return e.CreatedAt },
		func(e persistence.AuditEvent) {
			if werr == nil {
				werr = enc.Encode(viewAuditEvent(e))
			}
		}))
	if err != nil {
		return err
	}
	return werr
}

func (cp *compliance) approvals(ctx context.Context, p *evidencepack.Writer) error {
	return jsonArray(p, "approvals.json", func(add func(any)) error {
		return pages(func(pg persistence.Page) ([]persistence.Approval, error) {
			return cp.src.ListApprovals(ctx, cp.tenant.ID, "", pg)
		}, func(a persistence.Approval) int64 { return a.Seq }, inRange(cp.from, cp.to,
			func(a persistence.Approval) time.Time { return a.CreatedAt }, func(a persistence.Approval) { add(viewPackApproval(a)) }))
	})
}

func (cp *compliance) incidents(ctx context.Context, p *evidencepack.Writer) error {
	return jsonArray(p, "incidents.json", func(add func(any)) error {
		return pages(func(pg persistence.Page) ([]persistence.Incident, error) {
			return cp.src.ListIncidents(ctx, cp.tenant.ID, persistence.IncidentFilter{}, pg)
		}, func(in persistence.Incident) int64 { return in.Seq }, inRange(cp.from, cp.to,
			func(in persistence.Incident) time.Time { return in.OpenedAt }, func(in persistence.Incident) { add(in.Record()) }))
	})
}
