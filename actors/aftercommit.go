package actors

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"svc/messages"
	"svc/persistence"
	"svc/persistence/sharedstate"
	"svc/rules/authz"
	"svc/rules/risk"
)

// After the commit (SPEC 4.2 rules 9, 12 and part 3): quarantine,
// escalation and the SOC events of a recorded decision.

// afterCommit runs the side effects of a recorded decision (rules 9 and 12,
// SPEC part 3): the quarantine transition, the tier escalation, and the SOC
// events. None of it changes the answer.
func (a *Authorizer) afterCommit(m *messages.Authorize, d *draft) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dec := &d.write.Decision
	for _, ev := range d.events {
		// Built before the receipt was sealed: its hash joins the evidence now.
		if ev.Evidence != nil && ev.Evidence.ReceiptID != nil && dec.ReceiptHash != "" {
			h := dec.ReceiptHash
			ev.Evidence.ReceiptHash = &h
		}
		a.events.Publish(ev)
	}
	if d.verdict.Quarantine {
		_, err := a.store.TransitionAgent(ctx, m.TenantID, m.AgentID, []string{persistence.AgentActive}, persistence.AgentQuarantined,
			persistence.AuditEvent{ID: persistence.NewRecordID(), TenantID: m.TenantID, EventType: "agent_quarantined", Action: "agent_quarantined",
				Actor: "policy", AgentID: m.AgentID, DecisionID: dec.ID,
				Details: map[string]any{"action": "agent_quarantined", "decision_id": dec.ID}, CreatedAt: time.Now().UTC()})
		if err == nil {
			a.events.Publish(decisionEvent(m, dec, messages.KindAgentQuarantined, "agent quarantined by policy"))
		} else if !errors.Is(err, persistence.ErrStateConflict) {
			a.log.Error("quarantine failed", "agent_id", m.AgentID, "error", err)
		}
	}
	if e := d.verdict.Escalation; e != nil {
		a.escalate(ctx, m, dec, *e)
	}
}

// escalate applies the tier escalation (SPEC part 3): more than the
// threshold's denies within the window move the tier one step.
func (a *Authorizer) escalate(ctx context.Context, m *messages.Authorize, dec *persistence.Decision, e authz.Escalation) {
	key := "denials:" + m.TenantID + ":" + m.AgentID
	n, err := a.shared.WindowAdd(ctx, key, dec.ID, dec.CreatedAt, e.Window)
	if err != nil {
		a.log.Warn("denial window not updated", "agent_id", m.AgentID, "error", err)
		return
	}
	_ = a.shared.Set(ctx, denyCountKey(m.TenantID, m.AgentID), strconv.FormatInt(n, 10), e.Window)
	if n <= int64(e.Threshold) {
		return
	}
	next, ok := risk.NextTier(m.RiskTier)
	if !ok {
		return
	}
	moved, err := a.store.EscalateTier(ctx, m.TenantID, m.AgentID, m.RiskTier, next,
		persistence.AuditEvent{ID: persistence.NewRecordID(), TenantID: m.TenantID, EventType: "agent_risk_escalated", Action: "agent_risk_escalated",
			Actor: "risk", AgentID: m.AgentID, DecisionID: dec.ID, CreatedAt: time.Now().UTC(),
			Details: map[string]any{"action": "agent_risk_escalated", "from": m.RiskTier, "to": next, "denials": n,
				"window_minutes": int(e.Window / time.Minute), "denial_threshold": e.Threshold}})
	if err != nil {
		a.log.Error("tier escalation failed", "agent_id", m.AgentID, "error", err)
		return
	}
	if moved {
		_ = a.shared.Del(ctx, key)
		a.events.Publish(decisionEvent(m, dec, messages.KindAgentRiskEscalated, fmt.Sprintf("risk tier %s -> %s after %d denials", m.RiskTier, next, n)))
	}
}

// denyCountKey is the shared-state key of an agent's count of denies in
// its escalation window.
func denyCountKey(tenantID, agentID string) string { return "denycount:" + tenantID + ":" + agentID }

// verdictEvent is one of a verdict's SOC events for its recorded decision.
func verdictEvent(m *messages.Authorize, dec *persistence.Decision, e authz.Event) messages.AseEvent {
	ev := decisionEvent(m, dec, e.Kind, e.Reason)
	if e.RiskScore != 0 {
		ev.RiskScore = e.RiskScore
	}
	if e.Subject != "" {
		ev.Tool, ev.Action = e.Subject, e.Subject
	}
	return ev
}

// decisionEvent is a SOC event about a recorded decision, with its
// evidence.
func decisionEvent(m *messages.Authorize, dec *persistence.Decision, kind, reason string) messages.AseEvent {
	id, hash, rid := dec.ID, dec.ActionHash, dec.ReceiptID
	trust, mutates := dec.RootTrustLevel, dec.MutatesState
	ev := messages.AseEvent{EventID: uuid.NewString(), OccurredAt: time.Now().UTC(), TenantID: m.TenantID, Kind: kind,
		AgentID: m.AgentID, Decision: dec.Decision, Tool: dec.Tool, Action: dec.Action, Resource: dec.Resource,
		RiskScore: dec.RiskScore, Reason: reason, RunID: dec.RunID, TraceID: dec.TraceID,
		MatchedPolicies: nonNil(dec.MatchedPolicyIDs), RedactedFields: nonNil(dec.RedactedFields), SchemaVersion: messages.SchemaVersion,
		Evidence: &messages.Evidence{DecisionID: &id, ActionHash: &hash, SourceTrust: &trust}}
	if kind == messages.KindAuthorizeDecision {
		ev.MutatesState = &mutates // only the decision's own event is about the call
		if dec.EventID != "" {
			ev.EventID = dec.EventID // stored with the decision: incidents find it by this id
		}
	}
	if rid != "" {
		ev.Evidence.ReceiptID = &rid
		if dec.ReceiptHash != "" {
			h := dec.ReceiptHash
			ev.Evidence.ReceiptHash = &h
		}
	}
	return ev
}

// nonceKey is the shared-state key of an agent's replay nonce.
func nonceKey(tenantID, agentID, nonce string) string {
	return "nonce:" + tenantID + ":" + agentID + ":" + nonce
}

// RestoreNonces puts the replay nonces recorded within the last window back
// into the shared state, each for what remains of its window from its first
// use (SET NX: a nonce already there keeps its own expiry), so that a
// restart (a lone node keeps them in process) or a wiped Valkey does not
// reopen the window (SPEC 4.2 rule 13). It returns how many it restored.
func RestoreNonces(ctx context.Context, store persistence.DecisionStore, shared sharedstate.State, window time.Duration) (int, error) {
	now := time.Now()
	uses, err := store.RecentNonces(ctx, now.Add(-window))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, u := range uses { // oldest first: the first use sets the expiry
		left := u.At.Add(window).Sub(now)
		if left <= 0 {
			continue
		}
		fresh, err := shared.SetNX(ctx, nonceKey(u.TenantID, u.AgentID, u.Nonce), "1", left)
		if err != nil {
			return n, err
		}
		if fresh {
			n++
		}
	}
	return n, nil
}
