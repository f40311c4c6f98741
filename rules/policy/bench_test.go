package policy

import (
	"context"
	"testing"

	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
)

// benchTenantModules are three typical tenant modules.
func benchTenantModules() []Module {
	return []Module{
		{Name: "pci", Rego: pciModule},
		{Name: "business_hours", Rego: `package svc.policies.business_hours

blocked_envs := {"production"}

results contains {"decision": "require_approval", "reason": "prod_deploy"} if {
	input.tool_call.action == "deploy"
	input.environment in blocked_envs
}
`},
		{Name: "amount_limit", Rego: `package svc.policies.amount_limit

results contains {"decision": "deny", "reason": "amount_over_limit"} if {
	input.tool_call.action == "charge"
	input.tool_call.parameters.amount > 100000
}

results contains {"decision": "require_approval", "reason": "large_amount", "policy": "large_amount"} if {
	input.tool_call.action == "charge"
	input.tool_call.parameters.amount > 10000
	input.tool_call.parameters.amount <= 100000
}
`},
	}
}

func BenchmarkEvaluateBase(b *testing.B) {
	e := newTestEngine(b, Options{})
	in := call(nil) // read-only allow
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r, err := e.Evaluate(ctx, "tenant-a", in)
		if err != nil || r.Decision != DecisionAllow {
			b.Fatalf("%+v %v", r, err)
		}
	}
}

func BenchmarkEvaluateTenant(b *testing.B) {
	e := newTestEngine(b, Options{})
	if err := e.SetTenantPolicies("tenant-a", "v1", benchTenantModules()); err != nil {
		b.Fatal(err)
	}
	in := call(chargeCall)
	ctx, cancel := context.WithTimeout(context.Background(), 1<<40) // a request deadline, as in the server
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		r, err := e.Evaluate(ctx, "tenant-a", in)
		if err != nil || r.Decision != DecisionRedact {
			b.Fatalf("%+v %v", r, err)
		}
	}
}

// BenchmarkInputPassing compares the two ways of handing the input to a
// prepared query; Evaluate uses the parsed one.
func BenchmarkInputPassing(b *testing.B) {
	e := newTestEngine(b, Options{})
	q := e.snapshot.Load().baseQuery
	in := call(nil)
	ctx := context.Background()
	run := func(b *testing.B, input func() rego.EvalOption) {
		b.ReportAllocs()
		for b.Loop() {
			rs, err := q.Eval(ctx, input(), rego.EvalMetrics(metrics.NoOp()), rego.EvalGenerateJSON(decodeResults))
			if err != nil || len(rs) != 1 {
				b.Fatal(err)
			}
		}
	}
	b.Run("EvalParsedInput", func(b *testing.B) {
		run(b, func() rego.EvalOption {
			v, err := e.keys.value(&in)
			if err != nil {
				b.Fatal(err)
			}
			return rego.EvalParsedInput(v)
		})
	})
	b.Run("EvalInput", func(b *testing.B) {
		run(b, func() rego.EvalOption { return rego.EvalInput(in) })
	})
}
