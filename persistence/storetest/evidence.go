package storetest

import (
	"testing"
	"time"

	"svc/persistence"
)

// testEvidenceReads: the reads of the evidence graph and the scoreboard
// (persistence.EvidenceStore) on decisions written at chosen times.
func testEvidenceReads(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	base := time.Now().UTC().Truncate(time.Microsecond)
	write := func(tenantID, agentID string, at time.Time, composite int, run, event string) persistence.Decision {
		t.Helper()
		w := decisionWrite(tenantID, agentID, "allow", nil)
		w.Decision.CreatedAt, w.Receipt.CreatedAt, w.Decision.CompositeRiskScore, w.Decision.EventID = at, at, composite, event
		if run != "" {
			w.Decision.RunID = &run
		}
		if err := s.CommitDecisions(ctx(t), []persistence.DecisionWrite{w}, testSeal); err != nil {
			t.Fatal(err)
		}
		return w.Decision
	}
	// bot: two decisions 30 and 26 hours ago (the previous window), three
	// in the last day; one more in the future is outside both.
	old1 := write(a.ID, "bot", base.Add(-30*time.Hour), 10, "run-1", "ev-old-1")
	write(a.ID, "bot", base.Add(-26*time.Hour), 30, "", "")
	r2 := write(a.ID, "bot", base.Add(-3*time.Hour), 40, "run-1", "ev-2")
	r3 := write(a.ID, "bot", base.Add(-2*time.Hour), 50, "run-1", "ev-3")
	last := write(a.ID, "bot", base.Add(-time.Hour), 90, "", "ev-4")
	write(a.ID, "bot", base.Add(time.Hour), 99, "", "")
	write(a.ID, "other", base.Add(-time.Hour), 70, "run-1", "ev-other")
	write(b.ID, "bot", base.Add(-time.Hour), 5, "run-1", "ev-b")

	got, err := s.AgentRisk(ctx(t), a.ID, []string{"bot", "other", "idle"}, base.Add(-48*time.Hour), base.Add(-24*time.Hour), base)
	if err != nil {
		t.Fatal(err)
	}
	want := []persistence.AgentRiskSums{
		{AgentID: "bot", PreviousSum: 40, PreviousCount: 2, CurrentSum: 180, CurrentCount: 3},
		{AgentID: "other", CurrentSum: 70, CurrentCount: 1},
		{AgentID: "idle"},
	}
	if len(got) != len(want) {
		t.Fatalf("AgentRisk = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("AgentRisk[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}

	recent, err := s.AgentDecisions(ctx(t), a.ID, "bot", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(recent) != 3 || recent[1].ID != last.ID || recent[2].ID != r3.ID || recent[0].CreatedAt.Before(recent[1].CreatedAt) {
		t.Errorf("AgentDecisions: %d, newest first want [future, %s, %s]: %v", len(recent), last.ID, r3.ID, ids(recent))
	}

	run, err := s.RunDecisions(ctx(t), a.ID, "run-1", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(run) != 4 || run[0].ID != old1.ID || run[1].ID != r2.ID || run[2].ID != r3.ID || run[3].AgentID != "other" {
		t.Errorf("RunDecisions: %v, want the tenant's four in order", ids(run))
	}
	if run, _ := s.RunDecisions(ctx(t), a.ID, "run-1", 2); len(run) != 2 || run[0].ID != r3.ID {
		t.Errorf("RunDecisions limit 2: %v, want the two most recent, oldest first", ids(run))
	}
	if run, _ := s.RunDecisions(ctx(t), a.ID, "no-run", 10); len(run) != 0 {
		t.Errorf("an unknown run: %v", ids(run))
	}

	found, err := s.EventDecisions(ctx(t), a.ID, "bot", []string{"ev-2", "ev-3", "ev-old-1", "ev-other", "ev-b", "missing"},
		base.Add(-4*time.Hour), base)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 2 || found[0].ID != r2.ID || found[1].ID != r3.ID || found[0].EventID != "ev-2" {
		t.Errorf("EventDecisions: %v, want the agent's two within the range (%s, %s)", ids(found), r2.ID, r3.ID)
	}
	if none, err := s.EventDecisions(ctx(t), a.ID, "bot", nil, base.Add(-time.Hour), base); err != nil || len(none) != 0 {
		t.Errorf("EventDecisions of no events: %v %v", none, err)
	}
	if d, err := s.GetDecision(ctx(t), a.ID, r2.ID); err != nil || d.EventID != "ev-2" {
		t.Errorf("GetDecision's EventID %q (%v)", d.EventID, err)
	}
}

func ids(ds []persistence.Decision) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}
