package policy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"

	"svc/runstate"
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
			v, err := e.keys.value(&in, nil)
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

// benchRunModules are README's five run policies (bench/runs, which the
// end-to-end test holds equal to README).
func benchRunModules(b testing.TB) []Module {
	files, err := filepath.Glob(filepath.Join("..", "..", "bench", "runs", "*.rego"))
	if err != nil || len(files) != 5 {
		b.Fatalf("bench/runs: %v %v", files, err)
	}
	var mods []Module
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		mods = append(mods, Module{Name: strings.TrimSuffix(filepath.Base(f), ".rego"), Rego: string(src)})
	}
	return mods
}

// benchRun is a run of 12 earlier calls over four tools, one of them
// untrusted, all settled.
func benchRun() (*runstate.Run, *runstate.Agent) {
	r, g := &runstate.Run{}, &runstate.Agent{}
	at := int64(1_800_000_000_000)
	for i := range 12 {
		a := &runstate.Attempt{AgentID: "agent-1", At: at + int64(i)*1000, Tool: []string{"crm", "web", "email", "payments"}[i%4],
			Action: "get", Level: 2 + 3*(i/11), Via: "source_trust"}
		g.Apply(a, !r.Known())
		r.Apply(a)
		r.Settle(&runstate.Settlement{Seq: r.Seq, Tool: a.Tool, Action: a.Action, Decision: "allow", At: a.At})
	}
	return r, g
}

// BenchmarkEvaluateRunPolicies is a read evaluated with the base set and
// README's five run policies over a run of 12 calls (building the members
// of the run document they read and their canonical bytes included, as the
// agent actor does per call; the documents' terms are shared after the
// first call, as a run whose context repeats shares them); compare with
// BenchmarkEvaluateBase, the same read with the base set alone and no run
// context.
func BenchmarkEvaluateRunPolicies(b *testing.B) {
	e := newTestEngine(b, Options{})
	if err := e.SetTenantPolicies("tenant-a", "v1", benchRunModules(b)); err != nil {
		b.Fatal(err)
	}
	fields := e.RunFields("tenant-a")
	if !fields.Any() {
		b.Fatal("the run policies do not read the run")
	}
	r, _ := benchRun()
	in := call(nil)
	ctx := context.Background()
	now := int64(1_800_000_020_000)
	b.ReportAllocs()
	for b.Loop() {
		// What the agent actor builds: README's five read no agent history,
		// and of tools only the call's entry and payments/verify.
		in.Run = runstate.RunDocOf(r, "run-1", now, fields.ForCall(in.ToolCall.Tool, in.ToolCall.Action))
		c, err := runstate.NewContext(in.Run, nil)
		if err != nil {
			b.Fatal(err)
		}
		in.RunKey = c.Canonical
		res, err := e.Evaluate(ctx, "tenant-a", in)
		if err != nil || res.Decision != DecisionAllow {
			b.Fatalf("%+v %v", res, err)
		}
	}
}

// BenchmarkRunContextHash is the canonical bytes and hash of the context a
// decision keeps and its receipt commits to.
func BenchmarkRunContextHash(b *testing.B) {
	r, g := benchRun()
	now := int64(1_800_000_020_000)
	run, hist := runstate.RunDoc(r, "run-1", now, runstate.AllFields.Run), runstate.AgentDoc(g, now, runstate.AllFields.Agent)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := runstate.NewContext(run, hist); err != nil {
			b.Fatal(err)
		}
	}
}
