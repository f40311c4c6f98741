package storetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"svc/persistence"
)

// hashedApproval commits a require_approval decision with a PENDING
// approval of agentID bound to actionHash, created at `at` and expiring at
// at+ttl.
func hashedApproval(t *testing.T, s persistence.Store, tenantID, agentID, actionHash string, at time.Time, ttl time.Duration) persistence.Approval {
	t.Helper()
	w := approvalWrite(tenantID, agentID, at, ttl)
	w.Decision.ActionHash, w.Receipt.ActionHash, w.Approval.ActionHash = actionHash, actionHash, actionHash
	if err := s.CommitDecisions(ctx(t), []persistence.DecisionWrite{w}, testSeal); err != nil {
		t.Fatalf("CommitDecisions with an approval: %v", err)
	}
	return *w.Approval
}

// testUsableApproval: UsableApproval finds, by tenant, agent and action
// hash, the newest approval stored APPROVED, unconsumed and unexpired at
// the time given, and nothing else.
func testUsableApproval(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	ag := mustAgent(t, s, a.ID, "bot")
	other := mustAgent(t, s, a.ID, "other")
	bAgent := mustAgent(t, s, b.ID, "bot")
	now := usNow()
	decided := now.Add(time.Second)
	at := now.Add(2 * time.Second)

	none := func(what, tenantID, agentID, hash string, when time.Time) {
		t.Helper()
		if got, err := s.UsableApproval(ctx(t), tenantID, agentID, hash, when); !errors.Is(err, persistence.ErrNotFound) {
			t.Fatalf("%s: UsableApproval = %s (%s), %v; want ErrNotFound", what, got.ID, got.Status, err)
		}
	}
	found := func(what, tenantID, agentID, hash string, when time.Time, want persistence.Approval) {
		t.Helper()
		got, err := s.UsableApproval(ctx(t), tenantID, agentID, hash, when)
		if err != nil {
			t.Fatalf("%s: UsableApproval: %v; want %s", what, err, want.ID)
		}
		sameApproval(t, what, got, want)
	}
	approve := func(ap persistence.Approval) persistence.Approval {
		t.Helper()
		mustDecide(t, s, ap.TenantID, ap.ID, persistence.ApprovalApproved, decided)
		return mustGetApproval(t, s, ap.TenantID, ap.ID)
	}

	none("no approval at all", a.ID, ag.ID, "h1", at)

	// Pending, then approved.
	p := hashedApproval(t, s, a.ID, ag.ID, "h1", now, time.Hour)
	none("a pending approval", a.ID, ag.ID, "h1", at)
	ap := approve(p)
	found("an approved approval", a.ID, ag.ID, "h1", at, ap)
	none("another action hash", a.ID, ag.ID, "h1-other", at)

	// Rejected.
	rej := hashedApproval(t, s, a.ID, ag.ID, "h-rejected", now, time.Hour)
	mustDecide(t, s, a.ID, rej.ID, persistence.ApprovalRejected, decided)
	none("a rejected approval", a.ID, ag.ID, "h-rejected", at)

	// Consumed.
	if _, err := s.ConsumeApproval(ctx(t), a.ID, ap.ID, ag.ID, at); err != nil {
		t.Fatalf("ConsumeApproval: %v", err)
	}
	none("a consumed approval", a.ID, ag.ID, "h1", at.Add(time.Second))

	// Expired: usable up to its expiry, not at it or after.
	short := approve(hashedApproval(t, s, a.ID, ag.ID, "h-short", now, time.Minute))
	found("before its expiry", a.ID, ag.ID, "h-short", now.Add(time.Minute-time.Microsecond), short)
	none("at its expiry", a.ID, ag.ID, "h-short", now.Add(time.Minute))
	none("an expired approval", a.ID, ag.ID, "h-short", now.Add(2*time.Minute))

	// Another agent's, another tenant's.
	theirs := approve(hashedApproval(t, s, a.ID, other.ID, "h-other", now, time.Hour))
	none("another agent's approval", a.ID, ag.ID, "h-other", at)
	found("that agent's own", a.ID, other.ID, "h-other", at, theirs)
	bs := approve(hashedApproval(t, s, b.ID, bAgent.ID, "h-b", now, time.Hour))
	none("another tenant's approval, this tenant's agent", a.ID, ag.ID, "h-b", at)
	none("another tenant's approval, its agent", a.ID, bAgent.ID, "h-b", at)
	found("that tenant's own", b.ID, bAgent.ID, "h-b", at, bs)

	// Of two approved, the newest (created last, though approved first);
	// a newer pending one does not count; once the newest is consumed, the
	// older one is found.
	older := hashedApproval(t, s, a.ID, ag.ID, "h2", now, time.Hour)
	newer := approve(hashedApproval(t, s, a.ID, ag.ID, "h2", now, time.Hour))
	older = approve(older)
	hashedApproval(t, s, a.ID, ag.ID, "h2", now, time.Hour)
	found("the newest of two approved", a.ID, ag.ID, "h2", at, newer)
	if _, err := s.ConsumeApproval(ctx(t), a.ID, newer.ID, ag.ID, at); err != nil {
		t.Fatalf("ConsumeApproval: %v", err)
	}
	found("the older, once the newest is consumed", a.ID, ag.ID, "h2", at, older)

	// An edited approval is found by its new action hash only.
	ed := hashedApproval(t, s, a.ID, ag.ID, "h-before-edit", now, time.Hour)
	if _, err := s.DecideApproval(ctx(t), persistence.ApprovalDecision{TenantID: a.ID, ID: ed.ID, Status: persistence.ApprovalApproved,
		ApproverUserID: "user-1", At: decided, ToolCall: json.RawMessage(`{"action":"create_issue","params":{"title":"y"},"tool":"github"}`),
		ActionHash: "h-after-edit"}); err != nil {
		t.Fatalf("edit: %v", err)
	}
	none("an edited approval, by its old hash", a.ID, ag.ID, "h-before-edit", at)
	found("an edited approval, by its new hash", a.ID, ag.ID, "h-after-edit", at, mustGetApproval(t, s, a.ID, ed.ID))
}
