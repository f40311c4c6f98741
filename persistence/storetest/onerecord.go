package storetest

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"svc/persistence"
	"svc/persistence/sqlstore"
	"svc/receipt"
)

// OneRecordBefore is a database populated as the code before the
// one-record migration wrote it: decisions, receipts and authorize_decision
// audit events in three tables, administrative audit events between them,
// approvals, two tenants. It holds what the migrated store must still show.
type OneRecordBefore struct {
	Tenants   []string
	Decisions map[string][]persistence.Decision // per tenant, oldest first
	Receipts  map[string][]receipt.Receipt      // per tenant, in chain order
	Audit     map[string][]persistence.AuditEvent
	Public    ed25519.PublicKey
}

// PopulateBeforeOneRecord writes a OneRecordBefore within db, whose schema
// is at the version before the one-record migration.
func PopulateBeforeOneRecord(t *testing.T, db sqlstore.DB) OneRecordBefore {
	t.Helper()
	signer, err := receipt.NewSigner(make([]byte, ed25519.SeedSize))
	if err != nil {
		t.Fatal(err)
	}
	out := OneRecordBefore{Decisions: map[string][]persistence.Decision{}, Receipts: map[string][]receipt.Receipt{},
		Audit: map[string][]persistence.AuditEvent{}, Public: signer.PublicKey()}
	base := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	at := 0
	next := func() time.Time { at++; return base.Add(time.Duration(at) * time.Millisecond) }
	ctx := context.Background()
	err = db.Tx(ctx, func(q sqlstore.Querier) error {
		for ti, name := range []string{"before-a", "before-b"} {
			tenant, agent := id(), id()
			out.Tenants = append(out.Tenants, tenant)
			if _, err := q.Exec(ctx, `INSERT INTO tenants (id, name) VALUES ($1, $2)`, tenant, name); err != nil {
				return err
			}
			if _, err := q.Exec(ctx, `INSERT INTO agents (id, tenant_id, name, token_hash) VALUES ($1, $2, 'bot', $3)`,
				agent, tenant, id()); err != nil {
				return err
			}
			// Administrative events are written after the decisions they
			// sit between in time, as buffered audit events were: their
			// numbers do not follow their times.
			var audit, buffered []persistence.AuditEvent
			admin := func(typ, action string) error {
				e := persistence.AuditEvent{ID: id(), TenantID: tenant, EventType: typ, Action: action, Actor: "operator:x",
					AgentID: agent, Details: map[string]any{"note": action}, CreatedAt: next()}
				audit = append(audit, e)
				buffered = append(buffered, e)
				return nil
			}
			if err := admin("agent_created", "bot"); err != nil {
				return err
			}
			head := receipt.Head{}
			n := 12 - 8*ti
			for i := range n {
				now := next()
				decision := "allow"
				if i%4 == 3 {
					decision = "require_approval"
				}
				d := persistence.Decision{ID: id(), TenantID: tenant, AgentID: agent, Tool: "send-email", Action: "send",
					ActionHash: fmt.Sprintf("%064x", at), Decision: decision, Reason: fmt.Sprintf("reason%d", i),
					MatchedPolicyIDs: []string{"default_allow_read"}, RedactedFields: []string{}, TrustLevel: "unknown",
					RootTrustLevel: "unknown", ToolCall: json.RawMessage(`{"tool":"send-email"}`), CreatedAt: now, AuditID: id()}
				r, err := receipt.Seal(receipt.Receipt{ReceiptID: id(), TenantID: tenant, DecisionID: d.ID, Seq: head.Seq + 1,
					ActionHash: d.ActionHash, Decision: decision, CreatedAt: receipt.FormatTime(now)}, head.Hash, signer)
				if err != nil {
					return err
				}
				head = receipt.Head{Seq: r.Seq, Hash: r.ReceiptHash}
				d.ReceiptID, d.ReceiptHash = r.ReceiptID, r.ReceiptHash
				if _, err := q.Exec(ctx, `INSERT INTO decisions (id, tenant_id, agent_id, tool, action, action_hash, decision, reason,
					risk_score, composite_risk_score, matched_policy_ids, redacted_fields, mutates_state, trust_level, root_trust_level,
					tool_call, created_at, receipt_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, 0, $9, '[]', $10, 'unknown', 'unknown', $11, $12, $13)`,
					d.ID, tenant, agent, d.Tool, d.Action, d.ActionHash, decision, d.Reason, `["default_allow_read"]`, false,
					string(d.ToolCall), now, r.ReceiptID); err != nil {
					return err
				}
				if _, err := q.Exec(ctx, `INSERT INTO receipts (id, tenant_id, seq, decision_id, action_hash, decision, receipt_hash,
					prev_receipt_hash, signature, key_id, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
					r.ReceiptID, tenant, r.Seq, d.ID, d.ActionHash, decision, r.ReceiptHash, r.PrevReceiptHash, r.Signature, r.KeyID, now); err != nil {
					return err
				}
				details := map[string]any{"action": decision, "tool": d.Tool, "tool_action": d.Action, "reason": d.Reason,
					"matched_policies": []any{"default_allow_read"}, "action_hash": d.ActionHash, "receipt_id": r.ReceiptID}
				if decision == "require_approval" {
					d.ApprovalID = id()
					details["approval_id"] = d.ApprovalID
					if _, err := q.Exec(ctx, `INSERT INTO approvals (id, tenant_id, decision_id, agent_id, tool_call, action_hash, created_at, expires_at)
						VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, d.ApprovalID, tenant, d.ID, agent, string(d.ToolCall), d.ActionHash,
						now, now.Add(time.Hour)); err != nil {
						return err
					}
				}
				raw, _ := json.Marshal(details)
				if _, err := q.Exec(ctx, `INSERT INTO audit_events (id, tenant_id, event_type, action, actor, agent_id, decision_id, details, created_at)
					VALUES ($1, $2, 'authorize_decision', $3, $4, $5, $6, $7, $8)`,
					d.AuditID, tenant, decision, "agent:"+agent, agent, d.ID, string(raw), now); err != nil {
					return err
				}
				ev := d.AuditEvent()
				ev.Details = details
				audit = append(audit, ev)
				out.Decisions[tenant] = append(out.Decisions[tenant], d)
				out.Receipts[tenant] = append(out.Receipts[tenant], r)
				if i%3 == 1 {
					if err := admin("config_change", fmt.Sprintf("change%d", i)); err != nil {
						return err
					}
				}
			}
			if _, err := q.Exec(ctx, `INSERT INTO receipt_heads (tenant_id, seq, hash) VALUES ($1, $2, $3)`, tenant, head.Seq, head.Hash); err != nil {
				return err
			}
			for _, e := range buffered {
				raw, _ := json.Marshal(e.Details)
				if _, err := q.Exec(ctx, `INSERT INTO audit_events (id, tenant_id, event_type, action, actor, agent_id, decision_id, details, created_at)
					VALUES ($1, $2, $3, $4, $5, $6, '', $7, $8)`, e.ID, tenant, e.EventType, e.Action, e.Actor, agent, string(raw), e.CreatedAt); err != nil {
					return err
				}
			}
			out.Audit[tenant] = audit
		}
		return nil
	})
	if err != nil {
		t.Fatalf("populating the database before the migration: %v", err)
	}
	return out
}

// CheckOneRecord checks a store migrated from before: every decision,
// receipt and audit event reads as it did, receipts verify as a chain, the
// audit list merges both kinds in time order and pages by cursor without
// loss, search finds the migrated rows, and rows written afterwards come
// after them in both lists. It returns before with the rows it wrote.
func CheckOneRecord(t *testing.T, s persistence.Store, before OneRecordBefore) OneRecordBefore {
	t.Helper()
	c := context.Background()
	for _, tenant := range before.Tenants {
		wantDecisions := before.Decisions[tenant]
		got, err := s.ListDecisions(c, tenant, "", persistence.Page{Limit: 100})
		if err != nil || len(got) != len(wantDecisions) {
			t.Fatalf("decisions after the migration: %d (%v), want %d", len(got), err, len(wantDecisions))
		}
		slices.Reverse(got)
		for i, d := range got {
			w := wantDecisions[i]
			if d.ID != w.ID || d.ReceiptID != w.ReceiptID || d.ReceiptHash != w.ReceiptHash || d.AuditID != w.AuditID ||
				d.ApprovalID != w.ApprovalID || !d.CreatedAt.Equal(w.CreatedAt) || d.Reason != w.Reason {
				t.Errorf("decision %d after the migration = %+v, want %+v", i, d, w)
			}
		}
		// Receipts: the same links, verifying as one chain.
		sealable := storedChain(t, s, tenant)
		if !reflect.DeepEqual(sealable, before.Receipts[tenant]) {
			t.Errorf("receipts after the migration:\n%+v\nwant\n%+v", sealable, before.Receipts[tenant])
		}
		if checked, errs := receipt.VerifyChain(sealable, before.Public, true); checked != len(sealable) || len(errs) != 0 {
			t.Errorf("the migrated chain verifies %d of %d links: %v", checked, len(sealable), errs)
		}
		one, err := s.GetReceipt(c, tenant, before.Receipts[tenant][0].ReceiptID)
		if err != nil || one.DecisionID != before.Receipts[tenant][0].DecisionID {
			t.Errorf("GetReceipt after the migration = %+v, %v", one, err)
		}
		// The audit list: both kinds, newest first in the order they were
		// written, with their ids and details, paged by cursor.
		want := slices.Clone(before.Audit[tenant])
		slices.Reverse(want)
		var paged []persistence.AuditEvent
		var after int64
		for {
			page, err := s.ListAudit(c, tenant, persistence.AuditFilter{}, persistence.Page{Limit: 5, After: after})
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > 5 {
				page = page[:5]
				after = page[4].Seq
				paged = append(paged, page...)
				continue
			}
			paged = append(paged, page...)
			break
		}
		if len(paged) != len(want) {
			t.Fatalf("audit list after the migration: %d events, want %d", len(paged), len(want))
		}
		for i := range want {
			g, w := paged[i], want[i]
			if !g.CreatedAt.Equal(w.CreatedAt) {
				t.Errorf("audit event %d after the migration: created %v, want %v", i, g.CreatedAt, w.CreatedAt)
			}
			g.Seq, w.Seq, g.CreatedAt, w.CreatedAt = 0, 0, time.Time{}, time.Time{}
			gd, _ := json.Marshal(g.Details)
			wd, _ := json.Marshal(w.Details)
			g.Details, w.Details = nil, nil
			if !reflect.DeepEqual(g, w) || string(gd) != string(wd) {
				t.Errorf("audit event %d after the migration = %+v %s, want %+v %s", i, g, gd, w, wd)
			}
		}
		typed, err := s.ListAudit(c, tenant, persistence.AuditFilter{EventType: persistence.EventAuthorizeDecision}, persistence.Page{Limit: 100})
		if err != nil || len(typed) != len(wantDecisions) {
			t.Errorf("authorize_decision events after the migration: %d (%v), want %d", len(typed), err, len(wantDecisions))
		}
		found, err := s.ListAudit(c, tenant, persistence.AuditFilter{Query: wantDecisions[0].ReceiptID}, persistence.Page{Limit: 100})
		if err != nil || len(found) != 1 || found[0].ID != wantDecisions[0].AuditID {
			t.Errorf("q=<receipt id> on the audit list after the migration: %+v (%v)", found, err)
		}
		ds, err := s.ListDecisions(c, tenant, wantDecisions[0].Reason, persistence.Page{Limit: 100})
		if err != nil || len(ds) != 1 || ds[0].ID != wantDecisions[0].ID {
			t.Errorf("q=%s on decisions after the migration: %d (%v), want 1", wantDecisions[0].Reason, len(ds), err)
		}
	}
	// Written after the migration: newest in both lists, the chain goes on.
	tenant := before.Tenants[0]
	agent := before.Decisions[tenant][0].AgentID
	w := decisionWrite(tenant, agent, "deny", nil)
	signer, _ := receipt.NewSigner(make([]byte, ed25519.SeedSize))
	seal := func(_ string, head persistence.ChainHead, rs []*persistence.Receipt) error {
		var err error
		for _, r := range rs {
			if head, err = r.SealAfter(head, signer); err != nil {
				return err
			}
		}
		return nil
	}
	if err := s.CommitDecisions(c, []persistence.DecisionWrite{w}, seal); err != nil {
		t.Fatal(err)
	}
	later := audit(tenant, "config_change", "afterwards")
	later.CreatedAt = later.CreatedAt.Truncate(time.Microsecond)
	if err := s.AppendAudit(c, []persistence.AuditEvent{later}); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListAudit(c, tenant, persistence.AuditFilter{}, persistence.Page{Limit: 3})
	if err != nil || len(list) < 3 || list[0].Action != "afterwards" || list[1].DecisionID != w.Decision.ID ||
		list[1].EventType != persistence.EventAuthorizeDecision {
		t.Fatalf("audit list after new writes = %+v (%v)", list, err)
	}
	if checked, errs := receipt.VerifyChain(storedChain(t, s, tenant), before.Public, true); checked != len(before.Receipts[tenant])+1 || len(errs) != 0 {
		t.Errorf("the chain continued after the migration verifies %d links: %v", checked, errs)
	}
	d := w.Decision
	d.ReceiptID, d.ReceiptHash = w.Receipt.ID, w.Receipt.Hash
	before.Decisions[tenant] = append(before.Decisions[tenant], d)
	before.Receipts[tenant] = append(before.Receipts[tenant], w.Receipt.Sealable(w.Receipt.Seq))
	before.Audit[tenant] = append(before.Audit[tenant], d.AuditEvent(), later)
	return before
}

// storedChain is the tenant's stored receipt chain in the receipt
// package's form, in chain order.
func storedChain(t *testing.T, s persistence.Store, tenantID string) []receipt.Receipt {
	t.Helper()
	rs, err := s.ReceiptRange(context.Background(), tenantID, 1, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]receipt.Receipt, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Sealable(r.Seq))
	}
	return out
}
