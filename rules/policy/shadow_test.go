package policy_test

import (
	"context"
	"reflect"
	"testing"

	"svc/rules/policy"
)

const shadowDenyPayments = `package svc.policies.shadow_payments

results contains {"decision": "deny", "reason": "no_payments"} if input.tool_call.tool == "payments"
`

const shadowFails = `package svc.policies.shadow_fails

results contains {"decision": "deny", "reason": "never"} if {
	input.tool_call.tool == "payments"
	1 / 0 > 0
}
`

const shadowReadsRun = `package svc.policies.shadow_run

results contains {"decision": "require_approval", "reason": "long_run"} if input.run.totals.attempts > 3
`

func payments() policy.Input {
	return policy.Input{TenantID: "t1", Agent: policy.AgentInput{ID: "a1", RiskTier: "low", Status: "active"},
		ToolCall: policy.ToolCall{Tool: "payments", Action: "list", Parameters: map[string]any{}}, TrustLevel: "trusted_internal_signed",
		RootTrustLevel: "trusted_internal_signed"}
}

// TestShadowModulesNeverDecide: a shadow module's results are not in the
// live decision; EvaluateShadow reports what each shadow module alone
// would have added; a shadow module that fails only fails EvaluateShadow;
// what a shadow module reads of the run context is built for live calls.
func TestShadowModulesNeverDecide(t *testing.T) {
	ctx := context.Background()
	e, err := policy.NewEngine(policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SetTenantPolicies("t1", "1", []policy.Module{{Name: "shadow_payments", Rego: shadowDenyPayments, Shadow: true},
		{Name: "shadow_run", Rego: shadowReadsRun, Shadow: true}}); err != nil {
		t.Fatal(err)
	}
	res, err := e.Evaluate(ctx, "t1", payments())
	if err != nil || res.Decision != "allow" {
		t.Fatalf("the live decision with shadow modules: %+v, %v", res, err)
	}
	for _, p := range res.MatchedPolicies {
		if p == "shadow_payments" {
			t.Fatalf("a shadow module matched the live decision: %v", res.MatchedPolicies)
		}
	}
	if !e.HasShadow("t1") || e.HasShadow("t2") {
		t.Fatal("HasShadow")
	}
	outs, err := e.EvaluateShadow(ctx, "t1", payments())
	if want := []policy.ShadowOutcome{{Policy: "shadow_payments", Decision: "deny"}}; err != nil || !reflect.DeepEqual(outs, want) {
		t.Fatalf("EvaluateShadow = %+v, %v; want %+v", outs, err, want)
	}
	if !e.RunFields("t1").Any() {
		t.Error("a shadow module reading input.run does not have the run context built")
	}

	// A shadow module that fails at evaluation: the live decision stands.
	if err := e.SetTenantPolicies("t1", "2", []policy.Module{{Name: "shadow_fails", Rego: shadowFails, Shadow: true}}); err != nil {
		t.Fatal(err)
	}
	if res, err := e.Evaluate(ctx, "t1", payments()); err != nil || res.Decision != "allow" {
		t.Fatalf("the live decision beside a failing shadow module: %+v, %v", res, err)
	}
	if _, err := e.EvaluateShadow(ctx, "t1", payments()); err == nil {
		t.Error("a failing shadow module evaluated without an error")
	}
	// Enforced again: it decides.
	if err := e.SetTenantPolicies("t1", "3", []policy.Module{{Name: "shadow_payments", Rego: shadowDenyPayments}}); err != nil {
		t.Fatal(err)
	}
	if res, err := e.Evaluate(ctx, "t1", payments()); err != nil || res.Decision != "deny" || e.HasShadow("t1") {
		t.Fatalf("the module enforced: %+v, %v", res, err)
	}
}
