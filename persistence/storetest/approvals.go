package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"svc/persistence"
)

// RunApprovals runs the approval contract: creation with a
// require_approval decision, decisions, consumption (directly and inside a
// decision's transaction), the single-use guarantee under concurrency,
// cleanup and tenant isolation.
func RunApprovals(t *testing.T, open func(t *testing.T) persistence.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s persistence.Store)
	}{
		{"created with its decision, read, listed and counted", testApprovalCreateRead},
		{"decide is a conditional transition", testApprovalDecide},
		{"consume is a conditional transition", testApprovalConsume},
		{"concurrent approvers: exactly one decides", testApprovalDecideRace},
		{"concurrent consumers: exactly one wins", testApprovalConsumeRace},
		{"concurrent presenting decisions: exactly one commits", testApprovalUseRace},
		{"use inside CommitDecisions", testApprovalUse},
		{"stale approvals are deleted", testApprovalDeleteStale},
		{"approvals are tenant scoped", testApprovalTenants},
		{"callbacks are due once decided or expired, claimed once per attempt", testApprovalCallbacks},
		{"the usable approval of an agent and action hash is the newest approved, unconsumed, unexpired", testUsableApproval},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

const approvalToolCall = `{"action":"create_issue","params":{"title":"x"},"tool":"github"}`

// usNow is the current time as the stores keep it: UTC, microseconds.
func usNow() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// approvalWrite is a require_approval decision carrying its new approval,
// created at `at` and expiring at at+ttl.
func approvalWrite(tenantID, agentID string, at time.Time, ttl time.Duration) persistence.DecisionWrite {
	w := decisionWrite(tenantID, agentID, "require_approval", nil)
	w.Approval = &persistence.Approval{ID: id(), TenantID: tenantID, DecisionID: w.Decision.ID, AgentID: agentID,
		ToolCall: json.RawMessage(approvalToolCall), ActionHash: w.Decision.ActionHash, Status: persistence.ApprovalPending,
		CreatedAt: at, ExpiresAt: at.Add(ttl)}
	return w
}

// mustApproval commits a require_approval decision with a PENDING approval
// expiring ttl from now and returns the approval as written.
func mustApproval(t *testing.T, s persistence.Store, tenantID, agentID string, ttl time.Duration) persistence.Approval {
	t.Helper()
	w := approvalWrite(tenantID, agentID, usNow(), ttl)
	if err := s.CommitDecisions(ctx(t), []persistence.DecisionWrite{w}, testSeal); err != nil {
		t.Fatalf("CommitDecisions with an approval: %v", err)
	}
	return *w.Approval
}

func mustDecide(t *testing.T, s persistence.Store, tenantID, approvalID, status string, at time.Time) persistence.Approval {
	t.Helper()
	a, err := s.DecideApproval(ctx(t), persistence.ApprovalDecision{TenantID: tenantID, ID: approvalID, Status: status,
		ApproverUserID: "user-1", At: at})
	if err != nil {
		t.Fatalf("DecideApproval %s: %v", status, err)
	}
	return a
}

// mustApproved is an APPROVED approval valid for an hour.
func mustApproved(t *testing.T, s persistence.Store, tenantID, agentID string) persistence.Approval {
	t.Helper()
	a := mustApproval(t, s, tenantID, agentID, time.Hour)
	return mustDecide(t, s, tenantID, a.ID, persistence.ApprovalApproved, usNow())
}

func mustGetApproval(t *testing.T, s persistence.Store, tenantID, id string) persistence.Approval {
	t.Helper()
	a, err := s.GetApproval(ctx(t), tenantID, id)
	if err != nil {
		t.Fatalf("GetApproval %s: %v", id, err)
	}
	return a
}

// useWrite is an allow decision presenting approval ap (its agent and
// action hash) at `at`.
func useWrite(ap persistence.Approval, at time.Time) persistence.DecisionWrite {
	w := decisionWrite(ap.TenantID, ap.AgentID, "allow", nil)
	w.Decision.ActionHash, w.Receipt.ActionHash = ap.ActionHash, ap.ActionHash
	w.Use = &persistence.ApprovalUse{ApprovalID: ap.ID, AgentID: ap.AgentID, ActionHash: ap.ActionHash, At: at}
	return w
}

func timeEq(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

func strEq(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func fmtTime(p *time.Time) string {
	if p == nil {
		return "<nil>"
	}
	return p.String()
}

func fmtStr(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%q", *p)
}

// sameApproval compares every field but Seq (which only has to be set).
func sameApproval(t *testing.T, what string, got, want persistence.Approval) {
	t.Helper()
	var diffs []string
	check := func(field string, ok bool, g, w any) {
		if !ok {
			diffs = append(diffs, fmt.Sprintf("%s = %v, want %v", field, g, w))
		}
	}
	check("Seq", got.Seq > 0, got.Seq, "> 0")
	check("ID", got.ID == want.ID, got.ID, want.ID)
	check("TenantID", got.TenantID == want.TenantID, got.TenantID, want.TenantID)
	check("DecisionID", got.DecisionID == want.DecisionID, got.DecisionID, want.DecisionID)
	check("AgentID", got.AgentID == want.AgentID, got.AgentID, want.AgentID)
	check("ToolCall", string(got.ToolCall) == string(want.ToolCall), string(got.ToolCall), string(want.ToolCall))
	check("ActionHash", got.ActionHash == want.ActionHash, got.ActionHash, want.ActionHash)
	check("Status", got.Status == want.Status, got.Status, want.Status)
	check("Reason", strEq(got.Reason, want.Reason), fmtStr(got.Reason), fmtStr(want.Reason))
	check("ApproverUserID", strEq(got.ApproverUserID, want.ApproverUserID), fmtStr(got.ApproverUserID), fmtStr(want.ApproverUserID))
	check("CreatedAt", got.CreatedAt.Equal(want.CreatedAt), got.CreatedAt, want.CreatedAt)
	check("DecidedAt", timeEq(got.DecidedAt, want.DecidedAt), fmtTime(got.DecidedAt), fmtTime(want.DecidedAt))
	check("ExpiresAt", got.ExpiresAt.Equal(want.ExpiresAt), got.ExpiresAt, want.ExpiresAt)
	check("ConsumedAt", timeEq(got.ConsumedAt, want.ConsumedAt), fmtTime(got.ConsumedAt), fmtTime(want.ConsumedAt))
	check("ConsumedDecisionID", strEq(got.ConsumedDecisionID, want.ConsumedDecisionID),
		fmtStr(got.ConsumedDecisionID), fmtStr(want.ConsumedDecisionID))
	for _, d := range diffs {
		t.Errorf("%s: %s", what, d)
	}
	if len(diffs) > 0 {
		t.FailNow()
	}
}

func approvalIDs(as []persistence.Approval) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.ID
	}
	return out
}

func wantIDs(t *testing.T, what string, got []persistence.Approval, err error, want ...string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	ids := approvalIDs(got)
	if len(ids) != len(want) {
		t.Fatalf("%s = %v, want %v", what, ids, want)
	}
	for i := range ids {
		if ids[i] != want[i] {
			t.Fatalf("%s = %v, want %v", what, ids, want)
		}
	}
}

func wantCount(t *testing.T, s persistence.Store, tenantID string, at time.Time, want int64) {
	t.Helper()
	n, err := s.CountPendingApprovals(ctx(t), tenantID, at)
	if err != nil || n != want {
		t.Fatalf("CountPendingApprovals(at %v) = %d, %v; want %d", at, n, err, want)
	}
}

// auditActions counts the tenant's audit events of type typ by action.
func auditActions(t *testing.T, s persistence.Store, tenantID, typ string) map[string]int {
	t.Helper()
	ev, err := s.ListAudit(ctx(t), tenantID, persistence.AuditFilter{EventType: typ}, persistence.Page{Limit: 500})
	if err != nil {
		t.Fatalf("ListAudit: %v", err)
	}
	out := map[string]int{}
	for _, e := range ev {
		out[e.Action]++
	}
	return out
}

// verifyChain checks the tenant's receipts form one unbroken chain ending
// at the head, and returns the head.
func verifyChain(t *testing.T, s persistence.Store, tenantID string) persistence.ChainHead {
	t.Helper()
	rs, err := s.ReceiptRange(ctx(t), tenantID, 1, 0, 100000)
	if err != nil {
		t.Fatalf("ReceiptRange: %v", err)
	}
	prev := ""
	for i, r := range rs {
		if r.Seq != int64(i+1) || r.PrevHash != prev {
			t.Fatalf("chain forked or has a gap at index %d: %+v", i, r)
		}
		prev = r.Hash
	}
	head, err := s.ChainHead(ctx(t), tenantID)
	if err != nil || head.Seq != int64(len(rs)) || head.Hash != prev {
		t.Fatalf("ChainHead = %+v, %v; want seq %d hash %q", head, err, len(rs), prev)
	}
	return head
}

func testApprovalCreateRead(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	ag := mustAgent(t, s, a.ID, "bot")
	ag2 := mustAgent(t, s, a.ID, "bot2")

	now := usNow()
	w := approvalWrite(a.ID, ag.ID, now, 15*time.Minute)
	if err := s.CommitDecisions(ctx(t), []persistence.DecisionWrite{w}, testSeal); err != nil {
		t.Fatal(err)
	}
	want := *w.Approval
	got := mustGetApproval(t, s, a.ID, want.ID)
	sameApproval(t, "GetApproval after CommitDecisions", got, want)
	if got.CreatedAt.Location() != time.UTC || got.ExpiresAt.Location() != time.UTC {
		t.Errorf("times not in UTC: created %v, expires %v", got.CreatedAt, got.ExpiresAt)
	}
	if d, err := s.GetDecision(ctx(t), a.ID, w.Decision.ID); err != nil || d.Decision != "require_approval" {
		t.Fatalf("the approval's decision = %+v, %v", d, err)
	}
	// From the decision back to its approval, within its tenant only.
	byDecision, err := s.ApprovalForDecision(ctx(t), a.ID, w.Decision.ID)
	if err != nil {
		t.Fatalf("ApprovalForDecision: %v", err)
	}
	sameApproval(t, "ApprovalForDecision", byDecision, want)
	if _, err := s.ApprovalForDecision(ctx(t), b.ID, w.Decision.ID); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("ApprovalForDecision from another tenant: %v, want ErrNotFound", err)
	}
	if _, err := s.ApprovalForDecision(ctx(t), a.ID, "00000000-0000-4000-8000-000000000000"); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("ApprovalForDecision of an unknown decision: %v, want ErrNotFound", err)
	}
	if st := got.EffectiveStatus(now); st != persistence.ApprovalPending {
		t.Fatalf("EffectiveStatus before expiry = %s", st)
	}
	if st := got.EffectiveStatus(got.ExpiresAt); st != persistence.ApprovalExpired {
		t.Fatalf("EffectiveStatus at expiry = %s", st)
	}

	// Counting: pending and unexpired only, strictly before expires_at.
	wantCount(t, s, a.ID, now, 1)
	wantCount(t, s, a.ID, want.ExpiresAt.Add(-time.Microsecond), 1)
	wantCount(t, s, a.ID, want.ExpiresAt, 0)
	wantCount(t, s, a.ID, want.ExpiresAt.Add(time.Hour), 0)
	wantCount(t, s, b.ID, now, 0)
	mustDecide(t, s, a.ID, want.ID, persistence.ApprovalRejected, now)
	wantCount(t, s, a.ID, now, 0)
	second := mustApproval(t, s, a.ID, ag.ID, time.Hour)
	wantCount(t, s, a.ID, now, 1)
	mustDecide(t, s, a.ID, second.ID, persistence.ApprovalApproved, now)
	wantCount(t, s, a.ID, now, 0)

	// Listing: seven more approvals, interleaved over two agents, plus one
	// in another tenant.
	ids := []string{want.ID, second.ID}
	var agentIDs, agent2IDs []string
	agentIDs = append(agentIDs, want.ID, second.ID)
	for i := 0; i < 7; i++ {
		owner := ag.ID
		if i%3 == 1 {
			owner = ag2.ID
		}
		ap := mustApproval(t, s, a.ID, owner, time.Hour)
		ids = append(ids, ap.ID)
		if owner == ag.ID {
			agentIDs = append(agentIDs, ap.ID)
		} else {
			agent2IDs = append(agent2IDs, ap.ID)
		}
	}
	bAgent := mustAgent(t, s, b.ID, "bot")
	mustApproval(t, s, b.ID, bAgent.ID, time.Hour)
	rev := func(in []string) []string {
		out := make([]string, len(in))
		for i, v := range in {
			out[len(in)-1-i] = v
		}
		return out
	}
	all := rev(ids) // newest first
	list, err := s.ListApprovals(ctx(t), a.ID, "", persistence.Page{Limit: 100})
	wantIDs(t, "ListApprovals all", list, err, all...)
	for i := 1; i < len(list); i++ {
		if list[i].Seq >= list[i-1].Seq {
			t.Fatalf("ListApprovals not newest first by seq: %d then %d", list[i-1].Seq, list[i].Seq)
		}
	}
	listed := want
	user := "user-1"
	listed.Status, listed.ApproverUserID, listed.DecidedAt = persistence.ApprovalRejected, &user, &now
	sameApproval(t, "ListApprovals row", list[len(list)-1], listed)

	// Limit 3 reads 4 rows; the cursor is the seq.
	p1, err := s.ListApprovals(ctx(t), a.ID, "", persistence.Page{Limit: 3})
	wantIDs(t, "first page", p1, err, all[0:4]...)
	p2, err := s.ListApprovals(ctx(t), a.ID, "", persistence.Page{Limit: 3, After: p1[2].Seq})
	wantIDs(t, "second page", p2, err, all[3:7]...)
	p3, err := s.ListApprovals(ctx(t), a.ID, "", persistence.Page{Limit: 3, After: p2[2].Seq})
	wantIDs(t, "last page", p3, err, all[6:]...)
	off, err := s.ListApprovals(ctx(t), a.ID, "", persistence.Page{Limit: 2, Offset: 4})
	wantIDs(t, "offset page", off, err, all[4:7]...)

	// Agent filter, alone and with the cursor.
	mine := rev(agentIDs)
	list, err = s.ListApprovals(ctx(t), a.ID, ag.ID, persistence.Page{Limit: 100})
	wantIDs(t, "ListApprovals of agent", list, err, mine...)
	list, err = s.ListApprovals(ctx(t), a.ID, ag2.ID, persistence.Page{Limit: 100})
	wantIDs(t, "ListApprovals of agent 2", list, err, rev(agent2IDs)...)
	f1, err := s.ListApprovals(ctx(t), a.ID, ag.ID, persistence.Page{Limit: 2})
	wantIDs(t, "agent first page", f1, err, mine[0:3]...)
	f2, err := s.ListApprovals(ctx(t), a.ID, ag.ID, persistence.Page{Limit: 2, After: f1[1].Seq})
	wantIDs(t, "agent second page", f2, err, mine[2:5]...)
	list, err = s.ListApprovals(ctx(t), a.ID, id(), persistence.Page{Limit: 100})
	wantIDs(t, "ListApprovals of an unknown agent", list, err)
	wantCount(t, s, a.ID, usNow(), 7)
}

func testApprovalDecide(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	ag := mustAgent(t, s, a.ID, "bot")

	// Approve: every decided field is recorded, with the audit event.
	ap := mustApproval(t, s, a.ID, ag.ID, time.Hour)
	at := usNow().Add(time.Second)
	reason := "looks fine"
	ev := audit(a.ID, "approval_decided", "approval_approved")
	got, err := s.DecideApproval(ctx(t), persistence.ApprovalDecision{TenantID: a.ID, ID: ap.ID,
		Status: persistence.ApprovalApproved, ApproverUserID: "alice", Reason: &reason, At: at}, ev)
	if err != nil {
		t.Fatalf("DecideApproval: %v", err)
	}
	want := ap
	approver := "alice"
	want.Status, want.ApproverUserID, want.Reason, want.DecidedAt = persistence.ApprovalApproved, &approver, &reason, &at
	sameApproval(t, "DecideApproval result", got, want)
	sameApproval(t, "GetApproval after approve", mustGetApproval(t, s, a.ID, ap.ID), want)
	evs, err := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{EventType: "approval_decided"}, persistence.Page{Limit: 10})
	if err != nil || len(evs) != 1 || evs[0].ID != ev.ID || evs[0].Action != "approval_approved" {
		t.Fatalf("the decision's audit event: %+v, %v", evs, err)
	}

	// A decided approval cannot be decided again, and a failed decision
	// writes neither its fields nor its audit event.
	other := "bob"
	_, err = s.DecideApproval(ctx(t), persistence.ApprovalDecision{TenantID: a.ID, ID: ap.ID,
		Status: persistence.ApprovalApproved, ApproverUserID: other, At: at.Add(time.Second)},
		audit(a.ID, "approval_decided", "approval_approved_again"))
	wantErr(t, err, persistence.ErrStateConflict)
	_, err = s.DecideApproval(ctx(t), persistence.ApprovalDecision{TenantID: a.ID, ID: ap.ID,
		Status: persistence.ApprovalRejected, ApproverUserID: other, At: at.Add(time.Second)},
		audit(a.ID, "approval_decided", "approval_rejected_late"))
	wantErr(t, err, persistence.ErrStateConflict)
	sameApproval(t, "GetApproval after failed decisions", mustGetApproval(t, s, a.ID, ap.ID), want)
	if acts := auditActions(t, s, a.ID, "approval_decided"); len(acts) != 1 || acts["approval_approved"] != 1 {
		t.Fatalf("failed decisions wrote audit events: %v", acts)
	}

	// Reject, then neither approve nor reject again.
	rj := mustApproval(t, s, a.ID, ag.ID, time.Hour)
	why := "no"
	got, err = s.DecideApproval(ctx(t), persistence.ApprovalDecision{TenantID: a.ID, ID: rj.ID,
		Status: persistence.ApprovalRejected, ApproverUserID: "carol", Reason: &why, At: at})
	if err != nil || got.Status != persistence.ApprovalRejected || got.Reason == nil || *got.Reason != why ||
		got.ApproverUserID == nil || *got.ApproverUserID != "carol" || !timeEq(got.DecidedAt, &at) || got.ConsumedAt != nil {
		t.Fatalf("reject = %+v, %v", got, err)
	}
	_, err = s.DecideApproval(ctx(t), persistence.ApprovalDecision{TenantID: a.ID, ID: rj.ID,
		Status: persistence.ApprovalApproved, ApproverUserID: "carol", At: at})
	wantErr(t, err, persistence.ErrStateConflict)
	_, err = s.DecideApproval(ctx(t), persistence.ApprovalDecision{TenantID: a.ID, ID: rj.ID,
		Status: persistence.ApprovalRejected, ApproverUserID: "carol", At: at})
	wantErr(t, err, persistence.ErrStateConflict)
	if g := mustGetApproval(t, s, a.ID, rj.ID); g.Status != persistence.ApprovalRejected {
		t.Fatalf("rejected approval now %s", g.Status)
	}

	// Unknown ids and other tenants' ids are not found.
	_, err = s.DecideApproval(ctx(t), persistence.ApprovalDecision{TenantID: a.ID, ID: id(),
		Status: persistence.ApprovalApproved, ApproverUserID: "alice", At: at})
	wantErr(t, err, persistence.ErrNotFound)
	pending := mustApproval(t, s, a.ID, ag.ID, time.Hour)
	_, err = s.DecideApproval(ctx(t), persistence.ApprovalDecision{TenantID: b.ID, ID: pending.ID,
		Status: persistence.ApprovalApproved, ApproverUserID: "mallory", At: at})
	wantErr(t, err, persistence.ErrNotFound)
	sameApproval(t, "another tenant's decide changed nothing", mustGetApproval(t, s, a.ID, pending.ID), pending)

	// Expired PENDING: created with expires_at in the past.
	expired := mustApproval(t, s, a.ID, ag.ID, -time.Minute)
	_, err = s.DecideApproval(ctx(t), persistence.ApprovalDecision{TenantID: a.ID, ID: expired.ID,
		Status: persistence.ApprovalApproved, ApproverUserID: "alice", At: usNow()})
	wantErr(t, err, persistence.ErrStateConflict)
	// At exactly expires_at it is expired too (EffectiveStatus agrees).
	edge := mustApproval(t, s, a.ID, ag.ID, time.Hour)
	_, err = s.DecideApproval(ctx(t), persistence.ApprovalDecision{TenantID: a.ID, ID: edge.ID,
		Status: persistence.ApprovalApproved, ApproverUserID: "alice", At: edge.ExpiresAt})
	wantErr(t, err, persistence.ErrStateConflict)
	sameApproval(t, "expired approval unchanged", mustGetApproval(t, s, a.ID, expired.ID), expired)

	// Edit: approve with a replacement tool call and hash.
	ed := mustApproval(t, s, a.ID, ag.ID, time.Hour)
	newCall := json.RawMessage(`{"action":"create_issue","params":{"title":"edited"},"tool":"github"}`)
	got, err = s.DecideApproval(ctx(t), persistence.ApprovalDecision{TenantID: a.ID, ID: ed.ID,
		Status: persistence.ApprovalApproved, ApproverUserID: "alice", At: at, ToolCall: newCall, ActionHash: "cd"})
	if err != nil {
		t.Fatalf("edit: %v", err)
	}
	wantEd := ed
	wantEd.Status, wantEd.ApproverUserID, wantEd.DecidedAt = persistence.ApprovalApproved, &approver, &at
	wantEd.ToolCall, wantEd.ActionHash = newCall, "cd"
	sameApproval(t, "edit result", got, wantEd)
	sameApproval(t, "GetApproval after edit", mustGetApproval(t, s, a.ID, ed.ID), wantEd)
	// The edited hash is the one a presenting decision must match.
	wantErr(t, s.CommitDecisions(ctx(t), []persistence.DecisionWrite{useWrite(ed, usNow())}, testSeal),
		persistence.ErrStateConflict)
	if err := s.CommitDecisions(ctx(t), []persistence.DecisionWrite{useWrite(wantEd, usNow())}, testSeal); err != nil {
		t.Fatalf("use with the edited hash: %v", err)
	}
	// Without ToolCall and ActionHash the stored ones stay.
	plain := mustApproval(t, s, a.ID, ag.ID, time.Hour)
	got = mustDecide(t, s, a.ID, plain.ID, persistence.ApprovalApproved, at)
	if string(got.ToolCall) != approvalToolCall || got.ActionHash != plain.ActionHash {
		t.Fatalf("a plain approve changed the call: %s %s", got.ToolCall, got.ActionHash)
	}
}

func testApprovalConsume(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	ag := mustAgent(t, s, a.ID, "bot")
	other := mustAgent(t, s, a.ID, "other")

	ap := mustApproved(t, s, a.ID, ag.ID)
	at := usNow().Add(time.Second)
	ev := audit(a.ID, "approval_consumed", "approval_consumed")
	got, err := s.ConsumeApproval(ctx(t), a.ID, ap.ID, ag.ID, at, ev)
	if err != nil {
		t.Fatalf("ConsumeApproval: %v", err)
	}
	want := ap
	want.ConsumedAt = &at
	sameApproval(t, "ConsumeApproval result", got, want)
	sameApproval(t, "GetApproval after consume", mustGetApproval(t, s, a.ID, ap.ID), want)
	if st := got.EffectiveStatus(got.ExpiresAt.Add(time.Hour)); st != persistence.ApprovalApproved {
		t.Fatalf("a consumed approval reads %s after expiry, want APPROVED", st)
	}
	// Single use, and a failed consume writes no audit event.
	_, err = s.ConsumeApproval(ctx(t), a.ID, ap.ID, ag.ID, at.Add(time.Second), audit(a.ID, "approval_consumed", "again"))
	wantErr(t, err, persistence.ErrStateConflict)
	_, err = s.ConsumeApproval(ctx(t), a.ID, ap.ID, "", at.Add(time.Second), audit(a.ID, "approval_consumed", "again"))
	wantErr(t, err, persistence.ErrStateConflict)
	sameApproval(t, "GetApproval after failed consumes", mustGetApproval(t, s, a.ID, ap.ID), want)
	if acts := auditActions(t, s, a.ID, "approval_consumed"); len(acts) != 1 || acts["approval_consumed"] != 1 {
		t.Fatalf("consume audit events = %v, want exactly the successful one", acts)
	}

	// PENDING, REJECTED, expired: not consumable.
	pending := mustApproval(t, s, a.ID, ag.ID, time.Hour)
	_, err = s.ConsumeApproval(ctx(t), a.ID, pending.ID, ag.ID, usNow())
	wantErr(t, err, persistence.ErrStateConflict)
	rejected := mustApproval(t, s, a.ID, ag.ID, time.Hour)
	mustDecide(t, s, a.ID, rejected.ID, persistence.ApprovalRejected, usNow())
	_, err = s.ConsumeApproval(ctx(t), a.ID, rejected.ID, ag.ID, usNow())
	wantErr(t, err, persistence.ErrStateConflict)
	expiredPending := mustApproval(t, s, a.ID, ag.ID, -time.Minute)
	_, err = s.ConsumeApproval(ctx(t), a.ID, expiredPending.ID, ag.ID, usNow())
	wantErr(t, err, persistence.ErrStateConflict)
	approved := mustApproved(t, s, a.ID, ag.ID)
	_, err = s.ConsumeApproval(ctx(t), a.ID, approved.ID, ag.ID, approved.ExpiresAt.Add(time.Second))
	wantErr(t, err, persistence.ErrStateConflict)
	_, err = s.ConsumeApproval(ctx(t), a.ID, approved.ID, "", approved.ExpiresAt)
	wantErr(t, err, persistence.ErrStateConflict)
	for _, x := range []persistence.Approval{pending, rejected, expiredPending, approved} {
		if g := mustGetApproval(t, s, a.ID, x.ID); g.ConsumedAt != nil || g.ConsumedDecisionID != nil {
			t.Fatalf("a failed consume marked %s consumed: %+v", x.ID, g)
		}
	}

	// Another agent's approval is unknown to an agent; unknown ids too.
	_, err = s.ConsumeApproval(ctx(t), a.ID, approved.ID, other.ID, usNow())
	wantErr(t, err, persistence.ErrNotFound)
	_, err = s.ConsumeApproval(ctx(t), a.ID, pending.ID, other.ID, usNow())
	wantErr(t, err, persistence.ErrNotFound)
	_, err = s.ConsumeApproval(ctx(t), a.ID, id(), ag.ID, usNow())
	wantErr(t, err, persistence.ErrNotFound)
	_, err = s.ConsumeApproval(ctx(t), a.ID, id(), "", usNow())
	wantErr(t, err, persistence.ErrNotFound)
	if g := mustGetApproval(t, s, a.ID, approved.ID); g.ConsumedAt != nil {
		t.Fatalf("another agent consumed the approval: %+v", g)
	}

	// The operator (agentID "") consumes any agent's approval.
	at = usNow()
	got, err = s.ConsumeApproval(ctx(t), a.ID, approved.ID, "", at)
	if err != nil || !timeEq(got.ConsumedAt, &at) || got.AgentID != ag.ID {
		t.Fatalf("operator consume = %+v, %v", got, err)
	}
}

// warmPool opens the store's connections before a race: on a cold pool
// each racer would wait for a new connection while the first one, on the
// connection already open, finishes alone, and the race would not happen.
func warmPool(t *testing.T, s persistence.Store) {
	t.Helper()
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Ping(ctx(t)); err != nil {
				t.Errorf("Ping: %v", err)
			}
		}()
	}
	wg.Wait()
}

// race runs n copies of fn at once on a warm pool and sorts their errors.
func race(t *testing.T, s persistence.Store, n int, fn func(i int) error) (wins []int, conflicts int, others []error) {
	t.Helper()
	warmPool(t, s)
	start := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = fn(i)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		switch {
		case err == nil:
			wins = append(wins, i)
		case errors.Is(err, persistence.ErrStateConflict):
			conflicts++
		default:
			others = append(others, err)
		}
	}
	return wins, conflicts, others
}

func reportRace(t *testing.T, what string, n int, wins []int, conflicts int, others []error) {
	t.Helper()
	for i, err := range others {
		if i == 5 {
			t.Errorf("%s: ... %d more", what, len(others)-5)
			break
		}
		t.Errorf("%s: unexpected error (busy, timeout?): %v", what, err)
	}
	if len(wins) != 1 || conflicts != n-1 {
		t.Fatalf("%s: %d succeeded, %d ErrStateConflict, %d other errors; want exactly 1 and %d",
			what, len(wins), conflicts, len(others), n-1)
	}
}

func testApprovalDecideRace(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	ag := mustAgent(t, s, a.ID, "bot")
	ap := mustApproval(t, s, a.ID, ag.ID, time.Hour)
	const n = 100
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	at := usNow()
	status := func(i int) string {
		if i%2 == 0 {
			return persistence.ApprovalApproved
		}
		return persistence.ApprovalRejected
	}
	wins, conflicts, others := race(t, s, n, func(i int) error {
		_, err := s.DecideApproval(c, persistence.ApprovalDecision{TenantID: a.ID, ID: ap.ID, Status: status(i),
			ApproverUserID: fmt.Sprintf("user-%d", i), At: at}, audit(a.ID, "approval_decided", fmt.Sprintf("decide_%d", i)))
		return err
	})
	reportRace(t, "100 DecideApproval", n, wins, conflicts, others)
	got := mustGetApproval(t, s, a.ID, ap.ID)
	if got.Status != status(wins[0]) || got.ApproverUserID == nil || *got.ApproverUserID != fmt.Sprintf("user-%d", wins[0]) {
		t.Fatalf("after the race: %s by %s, want the winner's %s by user-%d", got.Status, fmtStr(got.ApproverUserID),
			status(wins[0]), wins[0])
	}
	if acts := auditActions(t, s, a.ID, "approval_decided"); len(acts) != 1 || acts[fmt.Sprintf("decide_%d", wins[0])] != 1 {
		t.Fatalf("audit events of the race = %v, want only the winner's", acts)
	}
}

func testApprovalConsumeRace(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	ag := mustAgent(t, s, a.ID, "bot")
	ap := mustApproved(t, s, a.ID, ag.ID)
	const n = 100
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	at := usNow()
	wins, conflicts, others := race(t, s, n, func(i int) error {
		agentID := ag.ID
		if i%2 == 1 {
			agentID = "" // operators race agents too
		}
		_, err := s.ConsumeApproval(c, a.ID, ap.ID, agentID, at.Add(time.Duration(i)*time.Microsecond),
			audit(a.ID, "approval_consumed", fmt.Sprintf("consume_%d", i)))
		return err
	})
	reportRace(t, "100 ConsumeApproval", n, wins, conflicts, others)
	got := mustGetApproval(t, s, a.ID, ap.ID)
	winAt := at.Add(time.Duration(wins[0]) * time.Microsecond)
	if !timeEq(got.ConsumedAt, &winAt) {
		t.Fatalf("consumed_at = %s, want the winner's %v", fmtTime(got.ConsumedAt), winAt)
	}
	if acts := auditActions(t, s, a.ID, "approval_consumed"); len(acts) != 1 || acts[fmt.Sprintf("consume_%d", wins[0])] != 1 {
		t.Fatalf("audit events of the race = %v, want only the winner's", acts)
	}
}

func testApprovalUseRace(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	ag := mustAgent(t, s, a.ID, "bot")
	ap := mustApproved(t, s, a.ID, ag.ID)
	before := verifyChain(t, s, a.ID)
	const n = 100
	at := usNow()
	writes := make([]persistence.DecisionWrite, n)
	for i := range writes {
		writes[i] = useWrite(ap, at)
	}
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	wins, conflicts, others := race(t, s, n, func(i int) error {
		return s.CommitDecisions(c, []persistence.DecisionWrite{writes[i]}, testSeal)
	})
	reportRace(t, "100 CommitDecisions presenting one approval", n, wins, conflicts, others)
	winner := writes[wins[0]].Decision.ID
	found := 0
	for i, w := range writes {
		d, err := s.GetDecision(ctx(t), a.ID, w.Decision.ID)
		switch {
		case err == nil:
			found++
			if i != wins[0] || d.ReceiptID != w.Receipt.ID {
				t.Fatalf("decision %d (%s) written, but the winner was %d: %+v", i, w.Decision.ID, wins[0], d)
			}
		case errors.Is(err, persistence.ErrNotFound):
		default:
			t.Fatalf("GetDecision %d: %v", i, err)
		}
	}
	if found != 1 {
		t.Fatalf("%d decisions written, want exactly 1", found)
	}
	got := mustGetApproval(t, s, a.ID, ap.ID)
	if !timeEq(got.ConsumedAt, &at) || got.ConsumedDecisionID == nil || *got.ConsumedDecisionID != winner {
		t.Fatalf("approval after the race: consumed_at %s, consumed_decision_id %s; want %v, %q",
			fmtTime(got.ConsumedAt), fmtStr(got.ConsumedDecisionID), at, winner)
	}
	after := verifyChain(t, s, a.ID)
	if after.Seq != before.Seq+1 {
		t.Fatalf("chain grew from %d to %d, want one receipt", before.Seq, after.Seq)
	}
	if r, err := s.GetReceipt(ctx(t), a.ID, writes[wins[0]].Receipt.ID); err != nil || r.Seq != after.Seq || r.DecisionID != winner {
		t.Fatalf("winner's receipt = %+v, %v", r, err)
	}
}

func testApprovalUse(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	ag := mustAgent(t, s, a.ID, "bot")
	other := mustAgent(t, s, a.ID, "other")

	// failsClean commits ws expecting ErrStateConflict and nothing written.
	failsClean := func(what string, ws ...persistence.DecisionWrite) {
		t.Helper()
		head := verifyChain(t, s, a.ID)
		wantErrMsg(t, what, s.CommitDecisions(ctx(t), ws, testSeal), persistence.ErrStateConflict)
		for _, w := range ws {
			if _, err := s.GetDecision(ctx(t), w.Decision.TenantID, w.Decision.ID); !errors.Is(err, persistence.ErrNotFound) {
				t.Fatalf("%s: decision %s of the failed batch: %v, want ErrNotFound", what, w.Decision.ID, err)
			}
			if _, err := s.GetReceipt(ctx(t), w.Receipt.TenantID, w.Receipt.ID); !errors.Is(err, persistence.ErrNotFound) {
				t.Fatalf("%s: receipt of the failed batch: %v, want ErrNotFound", what, err)
			}
			if w.Approval != nil {
				if _, err := s.GetApproval(ctx(t), w.Approval.TenantID, w.Approval.ID); !errors.Is(err, persistence.ErrNotFound) {
					t.Fatalf("%s: approval created by the failed batch: %v, want ErrNotFound", what, err)
				}
			}
		}
		if h := verifyChain(t, s, a.ID); h != head {
			t.Fatalf("%s: chain head moved from %+v to %+v", what, head, h)
		}
	}
	unconsumed := func(what string, ap persistence.Approval) {
		t.Helper()
		if g := mustGetApproval(t, s, a.ID, ap.ID); g.ConsumedAt != nil || g.ConsumedDecisionID != nil {
			t.Fatalf("%s: approval consumed by a failed batch: %+v", what, g)
		}
	}

	ap := mustApproved(t, s, a.ID, ag.ID)
	now := usNow()

	w := useWrite(ap, now)
	w.Use.AgentID = other.ID
	w.Decision.AgentID = other.ID
	failsClean("wrong agent", w)
	unconsumed("wrong agent", ap)

	w = useWrite(ap, now)
	w.Use.ActionHash = "zz"
	failsClean("wrong action hash", w)
	unconsumed("wrong action hash", ap)

	w = useWrite(ap, now)
	w.Use.ApprovalID = id()
	failsClean("unknown approval", w)

	pending := mustApproval(t, s, a.ID, ag.ID, time.Hour)
	failsClean("pending", useWrite(pending, now))
	unconsumed("pending", pending)

	rejected := mustApproval(t, s, a.ID, ag.ID, time.Hour)
	mustDecide(t, s, a.ID, rejected.ID, persistence.ApprovalRejected, now)
	failsClean("rejected", useWrite(rejected, now))
	unconsumed("rejected", rejected)

	failsClean("expired", useWrite(ap, ap.ExpiresAt.Add(time.Second)))
	failsClean("at expiry", useWrite(ap, ap.ExpiresAt))
	unconsumed("expired", ap)

	consumed := mustApproved(t, s, a.ID, ag.ID)
	if _, err := s.ConsumeApproval(ctx(t), a.ID, consumed.ID, ag.ID, now); err != nil {
		t.Fatal(err)
	}
	failsClean("already consumed", useWrite(consumed, now))
	if g := mustGetApproval(t, s, a.ID, consumed.ID); g.ConsumedDecisionID != nil || !timeEq(g.ConsumedAt, &now) {
		t.Fatalf("already consumed approval rewritten: %+v", g)
	}

	// One unusable approval fails the whole group commit: the good
	// decision, a new approval and a valid use beside it are not written.
	good := decisionWrite(a.ID, ag.ID, "allow", nil)
	created := approvalWrite(a.ID, ag.ID, now, time.Hour)
	valid := useWrite(ap, now)
	failsClean("batch with one unusable approval", good, created, valid, useWrite(pending, now))
	unconsumed("batch with one unusable approval", ap)
	// The same approval presented twice in one batch.
	failsClean("one approval used twice in a batch", useWrite(ap, now), useWrite(ap, now))
	unconsumed("one approval used twice in a batch", ap)
	// A batch failing for another reason does not consume the approval.
	bad := decisionWrite("no-such-tenant", ag.ID, "allow", nil)
	if err := s.CommitDecisions(ctx(t), []persistence.DecisionWrite{useWrite(ap, now), bad}, testSeal); err == nil {
		t.Fatal("a batch with a write for an unknown tenant committed")
	}
	unconsumed("batch failing on another write", ap)

	// Matching: consumed by this decision, in its transaction.
	head := verifyChain(t, s, a.ID)
	w = useWrite(ap, now.Add(time.Second))
	if err := s.CommitDecisions(ctx(t), []persistence.DecisionWrite{w}, testSeal); err != nil {
		t.Fatalf("matching use: %v", err)
	}
	got := mustGetApproval(t, s, a.ID, ap.ID)
	want := ap
	want.ConsumedAt, want.ConsumedDecisionID = &w.Use.At, &w.Decision.ID
	sameApproval(t, "approval after a matching use", got, want)
	if d, err := s.GetDecision(ctx(t), a.ID, w.Decision.ID); err != nil || d.ReceiptID != w.Receipt.ID {
		t.Fatalf("the presenting decision = %+v, %v", d, err)
	}
	if h := verifyChain(t, s, a.ID); h.Seq != head.Seq+1 {
		t.Fatalf("chain head %+v after one decision from %+v", h, head)
	}
	// And only once.
	failsClean("used again", useWrite(ap, now.Add(2*time.Second)))
	_, err := s.ConsumeApproval(ctx(t), a.ID, ap.ID, ag.ID, now.Add(2*time.Second))
	wantErr(t, err, persistence.ErrStateConflict)

	// Several different approvals used in one batch are all consumed.
	x, y := mustApproved(t, s, a.ID, ag.ID), mustApproved(t, s, a.ID, ag.ID)
	wx, wy := useWrite(x, now), useWrite(y, now)
	if err := s.CommitDecisions(ctx(t), []persistence.DecisionWrite{wx, decisionWrite(a.ID, ag.ID, "deny", nil), wy}, testSeal); err != nil {
		t.Fatalf("batch of two uses: %v", err)
	}
	for _, pair := range []struct {
		ap persistence.Approval
		w  persistence.DecisionWrite
	}{{x, wx}, {y, wy}} {
		g := mustGetApproval(t, s, a.ID, pair.ap.ID)
		if g.ConsumedAt == nil || g.ConsumedDecisionID == nil || *g.ConsumedDecisionID != pair.w.Decision.ID {
			t.Fatalf("approval %s after a batch: consumed_at %s, consumed_decision_id %s, want %q", pair.ap.ID,
				fmtTime(g.ConsumedAt), fmtStr(g.ConsumedDecisionID), pair.w.Decision.ID)
		}
	}
}

func wantErrMsg(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

func testApprovalDeleteStale(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	ag := mustAgent(t, s, a.ID, "bot")
	bAgent := mustAgent(t, s, b.ID, "bot")
	cutoff := usNow()

	decidedBefore := mustApproval(t, s, a.ID, ag.ID, time.Hour)
	mustDecide(t, s, a.ID, decidedBefore.ID, persistence.ApprovalApproved, cutoff.Add(-time.Minute))
	rejectedBefore := mustApproval(t, s, a.ID, ag.ID, time.Hour)
	mustDecide(t, s, a.ID, rejectedBefore.ID, persistence.ApprovalRejected, cutoff.Add(-time.Microsecond))
	consumedBefore := mustApproval(t, s, a.ID, ag.ID, time.Hour)
	mustDecide(t, s, a.ID, consumedBefore.ID, persistence.ApprovalApproved, cutoff.Add(-time.Minute))
	if _, err := s.ConsumeApproval(ctx(t), a.ID, consumedBefore.ID, ag.ID, cutoff.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	expiredPending := mustApproval(t, s, a.ID, ag.ID, -time.Minute)
	otherTenantStale := mustApproval(t, s, b.ID, bAgent.ID, -time.Minute)

	pendingAlive := mustApproval(t, s, a.ID, ag.ID, time.Hour)
	decidedAfter := mustApproval(t, s, a.ID, ag.ID, time.Hour)
	mustDecide(t, s, a.ID, decidedAfter.ID, persistence.ApprovalApproved, cutoff.Add(time.Minute))
	decidedAtCutoff := mustApproval(t, s, a.ID, ag.ID, time.Hour)
	mustDecide(t, s, a.ID, decidedAtCutoff.ID, persistence.ApprovalRejected, cutoff)
	consumedAfter := mustApproved(t, s, a.ID, ag.ID) // decided at usNow(), after cutoff
	if _, err := s.ConsumeApproval(ctx(t), a.ID, consumedAfter.ID, ag.ID, usNow()); err != nil {
		t.Fatal(err)
	}

	stale := []persistence.Approval{decidedBefore, rejectedBefore, consumedBefore, expiredPending, otherTenantStale}
	kept := []persistence.Approval{pendingAlive, decidedAfter, decidedAtCutoff, consumedAfter}

	n, err := s.DeleteStaleApprovals(ctx(t), cutoff)
	if err != nil || n != int64(len(stale)) {
		t.Fatalf("DeleteStaleApprovals = %d, %v; want %d", n, err, len(stale))
	}
	for _, x := range stale {
		if _, err := s.GetApproval(ctx(t), x.TenantID, x.ID); !errors.Is(err, persistence.ErrNotFound) {
			t.Fatalf("stale approval %s survived: %v", x.ID, err)
		}
	}
	for _, x := range kept {
		if _, err := s.GetApproval(ctx(t), x.TenantID, x.ID); err != nil {
			t.Fatalf("approval %s deleted: %v", x.ID, err)
		}
	}
	list, err := s.ListApprovals(ctx(t), a.ID, "", persistence.Page{Limit: 100})
	if err != nil || len(list) != 4 {
		t.Fatalf("ListApprovals after cleanup = %v, %v", approvalIDs(list), err)
	}
	if n, err := s.DeleteStaleApprovals(ctx(t), cutoff); err != nil || n != 0 {
		t.Fatalf("second DeleteStaleApprovals = %d, %v; want 0", n, err)
	}
	// The decisions that created the approvals are not touched.
	if _, err := s.GetDecision(ctx(t), a.ID, decidedBefore.DecisionID); err != nil {
		t.Fatalf("cleanup deleted a decision: %v", err)
	}
}

func testApprovalTenants(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	ag := mustAgent(t, s, a.ID, "bot")
	bAgent := mustAgent(t, s, b.ID, "bot")
	pending := mustApproval(t, s, a.ID, ag.ID, time.Hour)
	approved := mustApproved(t, s, a.ID, ag.ID)
	now := usNow()

	for _, x := range []persistence.Approval{pending, approved} {
		_, err := s.GetApproval(ctx(t), b.ID, x.ID)
		wantErr(t, err, persistence.ErrNotFound)
		_, err = s.DecideApproval(ctx(t), persistence.ApprovalDecision{TenantID: b.ID, ID: x.ID,
			Status: persistence.ApprovalRejected, ApproverUserID: "mallory", At: now}, audit(b.ID, "approval_decided", "cross"))
		wantErr(t, err, persistence.ErrNotFound)
		_, err = s.ConsumeApproval(ctx(t), b.ID, x.ID, "", now, audit(b.ID, "approval_consumed", "cross"))
		wantErr(t, err, persistence.ErrNotFound)
		_, err = s.ConsumeApproval(ctx(t), b.ID, x.ID, ag.ID, now)
		wantErr(t, err, persistence.ErrNotFound)
		_, err = s.ConsumeApproval(ctx(t), b.ID, x.ID, bAgent.ID, now)
		wantErr(t, err, persistence.ErrNotFound)
	}
	for _, agentID := range []string{"", ag.ID, bAgent.ID} {
		list, err := s.ListApprovals(ctx(t), b.ID, agentID, persistence.Page{Limit: 100})
		wantIDs(t, "tenant b's ListApprovals (agent "+agentID+")", list, err)
	}
	wantCount(t, s, b.ID, now, 0)
	// A decision of tenant b cannot present tenant a's approval, even with
	// the right agent and hash.
	w := useWrite(approved, now)
	w.Decision.TenantID, w.Receipt.TenantID = b.ID, b.ID
	wantErr(t, s.CommitDecisions(ctx(t), []persistence.DecisionWrite{w}, testSeal), persistence.ErrStateConflict)
	if _, err := s.GetDecision(ctx(t), b.ID, w.Decision.ID); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("tenant b's decision presenting a's approval was written: %v", err)
	}

	sameApproval(t, "pending after tenant b's attempts", mustGetApproval(t, s, a.ID, pending.ID), pending)
	sameApproval(t, "approved after tenant b's attempts", mustGetApproval(t, s, a.ID, approved.ID), approved)
	if acts := auditActions(t, s, b.ID, "approval_decided"); len(acts) != 0 {
		t.Fatalf("tenant b's failed decide wrote audit events: %v", acts)
	}
	if acts := auditActions(t, s, b.ID, "approval_consumed"); len(acts) != 0 {
		t.Fatalf("tenant b's failed consume wrote audit events: %v", acts)
	}
	wantCount(t, s, a.ID, now, 1)

	// Deleting a tenant deletes its approvals, and only its.
	bPending := mustApproval(t, s, b.ID, bAgent.ID, time.Hour)
	if err := s.DeleteTenant(ctx(t), a.ID); err != nil {
		t.Fatal(err)
	}
	_, err := s.GetApproval(ctx(t), a.ID, pending.ID)
	wantErr(t, err, persistence.ErrNotFound)
	if _, err := s.GetApproval(ctx(t), b.ID, bPending.ID); err != nil {
		t.Fatalf("tenant b's approval after deleting a: %v", err)
	}
}
