package simulate_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"svc/rules/policy"
	"svc/rules/simulate"
	"svc/runstate"
)

// candidate prepares the base set with mods on a real engine.
func candidate(t *testing.T, mods ...policy.Module) (simulate.Evaluator, *policy.Candidate) {
	t.Helper()
	e, err := policy.NewEngine(policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.PrepareCandidate(mods)
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context, in policy.Input) (policy.Result, error) {
		return e.EvaluateCandidate(ctx, c, in)
	}, c
}

const denyPayments = `package svc.policies.no_payments

results contains {"decision": "deny", "reason": "no_payments"} if input.tool_call.tool == "payments"
`

// call is a recorded read of tool by an agent, in a run.
func call(id, run, tool, decision, reason string, matched ...string) *simulate.Recorded {
	return &simulate.Recorded{DecisionID: id, RunID: run, AgentID: "agent-1", Decision: decision, Reason: reason, MatchedPolicies: matched,
		Input: policy.Input{TenantID: "t1", Agent: policy.AgentInput{ID: "agent-1", RiskTier: "low", Status: "active"},
			ToolCall: policy.ToolCall{Tool: tool, Action: "read", Parameters: map[string]any{}}, TrustLevel: "trusted", RootTrustLevel: "trusted"}}
}

// TestAsRecorded: reads allowed under the base set; a candidate denying
// payments changes exactly the payments calls, names the policies that
// differ, and skips what no policy decided alone.
func TestAsRecorded(t *testing.T) {
	eval, c := candidate(t, policy.Module{Name: "no_payments", Rego: denyPayments})
	if c.RunFields().Any() {
		t.Fatal("a candidate that reads no run context says it does")
	}
	s := simulate.New(eval, simulate.AsRecorded, runstate.Fields{})
	ctx := context.Background()
	recorded := []*simulate.Recorded{
		call("d1", "r1", "search", "allow", "read_only", "default_allow_read"),
		call("d2", "r1", "payments", "allow", "read_only", "default_allow_read"),
		call("d3", "r2", "payments", "allow", "read_only", "default_allow_read"),
		call("d4", "r2", "search", "allow", "read_only", "default_allow_read"),
		call("d5", "r2", "payments", "deny", "agent_frozen"),
		call("d6", "r3", "payments", "allow", "approved"),
		call("d7", "r3", "payments", "deny", "replay_nonce_reused"),
		call("d8", "r3", "payments", "deny", "policy_error"),
		{DecisionID: "d9", Decision: "allow", Reason: "read_only", NoCall: true},
	}
	for _, r := range recorded {
		if err := s.Add(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	got := s.Report()
	if got.Evaluated != 4 || got.Changed != 2 || got.Skipped != 5 || got.Counterfactual != 0 {
		t.Fatalf("report %+v", got)
	}
	if want := map[string]int{"allow->deny": 2}; !reflect.DeepEqual(got.Transitions, want) {
		t.Errorf("transitions %v, want %v", got.Transitions, want)
	}
	if want := map[string]int{simulate.SkipFrozen: 1, simulate.SkipApproval: 1, simulate.SkipReplay: 1, simulate.SkipPolicyFailed: 1,
		simulate.SkipNoCall: 1}; !reflect.DeepEqual(got.SkippedReasons, want) {
		t.Errorf("skipped %v, want %v", got.SkippedReasons, want)
	}
	if len(got.Changes) != 2 || got.Changes[0].DecisionID != "d2" || got.Changes[1].DecisionID != "d3" ||
		got.Changes[0].Recorded != "allow" || got.Changes[0].Simulated != "deny" {
		t.Fatalf("changes %+v", got.Changes)
	}
	if want := []string{"no_payments"}; !reflect.DeepEqual(got.Changes[0].Policies, want) {
		t.Errorf("policies that differ %v, want %v", got.Changes[0].Policies, want)
	}
}

// TestRefoldMarksWhatFollowsADivergence: in refold, the calls of a run after
// its first change are counterfactual, and other runs are not.
func TestRefoldMarksWhatFollowsADivergence(t *testing.T) {
	eval, _ := candidate(t, policy.Module{Name: "no_payments", Rego: denyPayments})
	s := simulate.New(eval, simulate.Refold, runstate.Fields{})
	ctx := context.Background()
	for _, r := range []*simulate.Recorded{
		call("d1", "r1", "search", "allow", "read_only", "default_allow_read"),
		call("d2", "r1", "payments", "allow", "read_only", "default_allow_read"), // the divergence
		call("d3", "r1", "search", "allow", "read_only", "default_allow_read"),   // counterfactual, unchanged
		call("d4", "r1", "payments", "allow", "read_only", "default_allow_read"), // counterfactual, changed
		call("d5", "r2", "search", "allow", "read_only", "default_allow_read"),   // another run
		call("d6", "", "payments", "allow", "read_only", "default_allow_read"),   // the agent's ambient run diverges
		call("d7", "", "search", "allow", "read_only", "default_allow_read"),
	} {
		if err := s.Add(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	got := s.Report()
	if got.Evaluated != 7 || got.Changed != 3 || got.Counterfactual != 3 || got.CounterfactualChanged != 1 || got.RunsDiverged != 2 {
		t.Fatalf("report %+v", got)
	}
	var marked []string
	for _, c := range got.Changes {
		marked = append(marked, fmt.Sprintf("%s:%v", c.DecisionID, c.Counterfactual))
	}
	if want := []string{"d2:false", "d4:true", "d6:false"}; !reflect.DeepEqual(marked, want) {
		t.Errorf("changes %v, want %v", marked, want)
	}
}

// TestCandidateErrorsAreSkippedAndCancellationStops: a call the candidate
// cannot evaluate is skipped as candidate_error; a cancelled simulation
// stops with the context's error.
func TestCandidateErrorsAreSkippedAndCancellationStops(t *testing.T) {
	fails := func(context.Context, policy.Input) (policy.Result, error) {
		return policy.Result{}, errors.New("eval failed")
	}
	s := simulate.New(fails, simulate.AsRecorded, runstate.Fields{})
	if err := s.Add(context.Background(), call("d1", "r1", "search", "allow", "read_only")); err != nil {
		t.Fatal(err)
	}
	if got := s.Report(); got.Skipped != 1 || got.SkippedReasons[simulate.SkipEvalError] != 1 || got.Evaluated != 0 {
		t.Fatalf("report %+v", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Add(ctx, call("d2", "r1", "search", "allow", "read_only")); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// TestChangesAreBounded: past MaxChanges the changes are counted, not
// listed.
func TestChangesAreBounded(t *testing.T) {
	eval, _ := candidate(t, policy.Module{Name: "no_payments", Rego: denyPayments})
	s := simulate.New(eval, simulate.AsRecorded, runstate.Fields{})
	for i := range simulate.MaxChanges + 5 {
		if err := s.Add(context.Background(), call(fmt.Sprint("d", i), "r1", "payments", "allow", "read_only")); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Report(); got.Changed != simulate.MaxChanges+5 || len(got.Changes) != simulate.MaxChanges {
		t.Fatalf("changed %d, listed %d", got.Changed, len(got.Changes))
	}
}
