package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"svc/persistence"
)

// testSimulationReads: a simulation of the newest n decisions of a range
// starts just below the oldest of them, reads them in seq order from
// there, with their tool call and run context, one tenant's only.
func testSimulationReads(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	agA, agB := mustAgent(t, s, a.ID, "sim-a"), mustAgent(t, s, b.ID, "sim-b")
	base := time.Now().UTC().Truncate(time.Microsecond).Add(-time.Hour)
	var ws []persistence.DecisionWrite
	for i := range 5 {
		w := decisionWrite(a.ID, agA.ID, "allow", nil)
		w.Decision.CreatedAt = base.Add(time.Duration(i) * time.Minute)
		w.Receipt.CreatedAt = w.Decision.CreatedAt
		w.Decision.ToolCall = json.RawMessage(`{"tool":"payments","action":"refund","resource":null,"parameters":{"n":` + string(rune('0'+i)) + `}}`)
		if i == 4 {
			w.Decision.RunContext = json.RawMessage(`{"run":{"id":"r1"}}`)
			w.Decision.ContextHash = "c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4c4"
			w.Receipt.ContextHash = w.Decision.ContextHash
		}
		ws = append(ws, w)
	}
	ws = append(ws, decisionWrite(b.ID, agB.ID, "allow", nil))
	if err := s.CommitDecisions(ctx(t), ws, testSeal); err != nil {
		t.Fatal(err)
	}
	from, to := base.Add(-time.Minute), base.Add(10*time.Minute)
	all, err := s.SimulationDecisions(ctx(t), a.ID, from, to, 0, 100)
	if err != nil || len(all) != 5 {
		t.Fatalf("SimulationDecisions = %d, %v", len(all), err)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Seq <= all[i-1].Seq {
			t.Fatalf("not in seq order: %d after %d", all[i].Seq, all[i-1].Seq)
		}
	}
	if string(all[0].ToolCall) == "" || string(all[4].RunContext) != `{"run":{"id":"r1"}}` || all[4].ContextHash == "" || all[0].RunContext != nil {
		t.Errorf("tool call %s, run context %s / %s", all[0].ToolCall, all[4].RunContext, all[0].RunContext)
	}
	floor, err := s.SimulationFloor(ctx(t), a.ID, from, to, 2)
	if err != nil || floor != all[2].Seq {
		t.Fatalf("floor of the newest 2 = %d, %v; want %d", floor, err, all[2].Seq)
	}
	newest, err := s.SimulationDecisions(ctx(t), a.ID, from, to, floor, 100)
	if err != nil || len(newest) != 2 || newest[0].ID != all[3].ID || newest[1].ID != all[4].ID {
		t.Fatalf("the newest 2: %d, %v", len(newest), err)
	}
	if f, err := s.SimulationFloor(ctx(t), a.ID, from, to, 5); err != nil || f != 0 {
		t.Errorf("the floor of as many as the range holds = %d, %v; want 0", f, err)
	}
	page, err := s.SimulationDecisions(ctx(t), a.ID, from, to, all[1].Seq, 2)
	if err != nil || len(page) != 2 || page[0].ID != all[2].ID {
		t.Fatalf("a page after the second: %d, %v", len(page), err)
	}
	// The range is [from, to): the first decision's own time is in it, the
	// last one's as to is not.
	if got, err := s.SimulationDecisions(ctx(t), a.ID, all[0].CreatedAt, all[4].CreatedAt, 0, 100); err != nil || len(got) != 4 || got[0].ID != all[0].ID {
		t.Errorf("[first, last) = %d, %v; want the first four", len(got), err)
	}
	if got, err := s.SimulationDecisions(ctx(t), b.ID, from, to, 0, 100); err != nil || len(got) != 0 {
		t.Errorf("tenant b's decisions of a's range: %d, %v", len(got), err)
	}
}

// testShadowKept: a policy's mode is kept and changed; a decision's shadow
// outcomes are kept with it, and a decision without them reads none.
func testShadowKept(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	ag := mustAgent(t, s, a.ID, "shadow-a")
	p, err := s.CreatePolicy(ctx(t), persistence.Policy{TenantID: a.ID, Name: "watch", Rego: "package svc.policies.watch\n", Enabled: true,
		Mode: persistence.PolicyShadow})
	if err != nil || p.Mode != persistence.PolicyShadow {
		t.Fatalf("CreatePolicy = %+v, %v", p, err)
	}
	plain, err := s.CreatePolicy(ctx(t), persistence.Policy{TenantID: a.ID, Name: "plain", Rego: "package svc.policies.plain\n", Enabled: true})
	if err != nil || plain.Mode != persistence.PolicyEnforce {
		t.Fatalf("a policy created without a mode: %+v, %v", plain, err)
	}
	got, err := s.GetPolicy(ctx(t), a.ID, "watch")
	if err != nil || got.Mode != persistence.PolicyShadow {
		t.Fatalf("GetPolicy = %+v, %v", got, err)
	}
	got.Mode = persistence.PolicyEnforce
	if up, err := s.UpdatePolicy(ctx(t), got); err != nil || up.Mode != persistence.PolicyEnforce {
		t.Fatalf("UpdatePolicy = %+v, %v", up, err)
	}
	with, without := decisionWrite(a.ID, ag.ID, "allow", nil), decisionWrite(a.ID, ag.ID, "allow", nil)
	with.Decision.Shadow = []persistence.ShadowOutcome{{Policy: "watch", Decision: "deny"}, {Policy: "watch2", Decision: "quarantine"}}
	if err := s.CommitDecisions(ctx(t), []persistence.DecisionWrite{with, without}, testSeal); err != nil {
		t.Fatal(err)
	}
	d, err := s.GetDecision(ctx(t), a.ID, with.Decision.ID)
	if err != nil || len(d.Shadow) != 2 || d.Shadow[1] != (persistence.ShadowOutcome{Policy: "watch2", Decision: "quarantine"}) {
		t.Fatalf("the decision's shadow: %+v, %v", d.Shadow, err)
	}
	if d, err := s.GetDecision(ctx(t), a.ID, without.Decision.ID); err != nil || d.Shadow != nil {
		t.Fatalf("a decision without shadow outcomes: %+v, %v", d.Shadow, err)
	}
}
