package policy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"svc/runstate"
)

// collectModules use what a body can hold after compilation: helper rules
// and functions of the module, every, some ... in, comprehensions, a
// result built in the body or computed in the head, with, a default rule,
// another package's results, and the run context.
var collectModules = []Module{
	{Name: "helpers", Rego: `package svc.policies.helpers

default risky := false

risky if input.tool_call.action in {"delete", "merge_pull_request"}

limit(env) := 5 if env == "production"

limit(env) := 50 if env != "production"

results contains {"decision": "require_approval", "reason": sprintf("risky_%s", [input.tool_call.action])} if {
	risky
	input.mutates_state
}

results contains r if {
	n := object.get(input.tool_call.parameters, "limit", 0)
	n > limit(input.environment)
	r := {"decision": "deny", "reason": "over_limit", "policy": "limits"}
}
`},
	{Name: "loops", Rego: `package svc.policies.loops

results contains {"decision": "redact", "reason": "secrets", "redact_fields": fields} if {
	fields := [k | some k, v in input.tool_call.parameters; startswith(k, "secret")]
	count(fields) > 0
}

results contains {"decision": "deny", "reason": "all_numbers"} if {
	count(input.tool_call.parameters) > 1
	every _, v in input.tool_call.parameters {
		is_number(v)
	}
}

results contains {"decision": "allow", "reason": concat("+", sorted)} if {
	input.tool_call.tool == "sort"
	sorted := sort([k | some k, _ in input.tool_call.parameters])
}
`},
	{Name: "with_and_others", Rego: `package svc.policies.with_and_others

prod if input.environment == "production"

results contains {"decision": "deny", "reason": "staging_would_pass"} if {
	prod
	not prod with input.environment as "staging"
	input.tool_call.tool == "with"
}

results contains {"decision": "allow", "reason": "echo"} if {
	some r in data.svc.policies.helpers.results
	r.reason == "over_limit"
}

results contains {"decision": "deny", "reason": "tool_loop"} if {
	input.run.tools[input.tool_call.tool][input.tool_call.action].attempts >= 2
}
`},
}

// TestGatheredResultsMeanWhatEachPackageSays evaluates the modules both
// ways, gathered into one package (as Evaluate does) and each package's
// results read on its own (as the modules say), over inputs that make every
// rule fire and not fire, and requires the same results.
func TestGatheredResultsMeanWhatEachPackageSays(t *testing.T) {
	e := newTestEngine(t, Options{})
	if err := e.SetTenantPolicies("tenant-a", "v1", collectModules); err != nil {
		t.Fatal(err)
	}
	// The modules compiled as written, and a query per package.
	s := e.snapshot.Load()
	parsed := map[string]*ast.Module{}
	for _, m := range collectModules {
		pm, errs := parseTenantModule(s.base, m.Name, m.Rego, e.caps)
		if errs != nil {
			t.Fatal(errs)
		}
		parsed[tenantFilePrefix+m.Name] = pm
	}
	c, errs := compileModules(s.base, parsed, e.caps)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var names []string
	for _, m := range c.Modules {
		if name, _ := policyName(m); name != "" && slices.ContainsFunc(m.Rules, func(r *ast.Rule) bool { return r.Head.Ref()[0].Equal(ast.VarTerm("results")) }) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names) // the base package spans files
	var q []string
	for _, n := range names {
		q = append(q, fmt.Sprintf("[%q, data.svc.policies[%q].results]", n, n))
	}
	pq, err := rego.New(rego.Compiler(c), rego.Query(queryVar+" = ["+strings.Join(q, ", ")+"]"), rego.Capabilities(e.caps),
		rego.StrictBuiltinErrors(true)).PrepareForEval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	perPackage := func(in *Input) ([]RawResult, error) {
		v, err := e.keys.value(in, nil)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := pq.Eval(context.Background(), rego.EvalParsedInput(v), rego.EvalGenerateJSON(perPackageResults))
		if err != nil {
			return nil, err
		}
		if len(rs) != 1 {
			t.Fatalf("%v", rs)
		}
		out, ok := rs[0].Bindings[queryVar].([]RawResult)
		if !ok {
			t.Fatalf("%v", rs[0].Bindings)
		}
		return out, nil
	}
	inputs := map[string]Input{
		"read":        call(nil),
		"merge":       call(mutating(TrustTrustedInternalSigned)),
		"over limit":  call(func(in *Input) { in.ToolCall.Parameters = map[string]any{"limit": 9.0} }),
		"staging":     call(func(in *Input) { in.Environment = "staging"; in.ToolCall.Parameters = map[string]any{"limit": 60.0} }),
		"secrets":     call(func(in *Input) { in.ToolCall.Parameters = map[string]any{"secret_a": "x", "secret_b": "y", "q": 1.0} }),
		"all numbers": call(func(in *Input) { in.ToolCall.Parameters = map[string]any{"a": 1.0, "b": 2.0} }),
		"sort": call(func(in *Input) {
			in.ToolCall.Tool = "sort"
			in.ToolCall.Parameters = map[string]any{"b": 1.0, "a": "x"}
		}),
		"with":          call(func(in *Input) { in.ToolCall.Tool = "with" }),
		"loop":          call(func(in *Input) { in.Run = runWithAttempts("github", "list_issues", 3) }),
		"no loop":       call(func(in *Input) { in.Run = runWithAttempts("github", "list_issues", 1) }),
		"no parameters": call(func(in *Input) { in.ToolCall.Parameters = nil }),
	}
	for _, name := range slices.Sorted(maps.Keys(inputs)) {
		in := inputs[name]
		want, wantErr := perPackage(&in)
		got, err := e.eval(context.Background(), s.tenants["tenant-a"].query, &in)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%s: error %v, per package %v", name, err, wantErr)
		}
		if err != nil {
			if !strings.Contains(err.Error(), "object.get: operand 1 must be object") {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if !slices.EqualFunc(got, want, func(a, b RawResult) bool { return fmt.Sprint(a) == fmt.Sprint(b) }) {
			t.Errorf("%s:\ngathered    %v\nper package %v", name, got, want)
		}
		if len(want) < 2 {
			t.Errorf("%s: %d results: the input exercises too little", name, len(want))
		}
	}
}

// runWithAttempts is input.run after n calls of (tool, action).
func runWithAttempts(tool, action string, n int) runstate.Obj {
	r := &runstate.Run{}
	for i := range n {
		r.Apply(&runstate.Attempt{AgentID: "agent-1", At: int64(1_000_000 + i), Tool: tool, Action: action})
	}
	return runstate.RunDoc(r, "run-1", 1_000_100, runstate.AllFields.Run)
}

// perPackageResults decodes [[name, results set], ...] (the query of each
// package's results, as the engine read them before it gathered them).
func perPackageResults(t *ast.Term, _ *rego.EvalContext) (any, error) {
	modules, ok := t.Value.(*ast.Array)
	if !ok {
		return nil, fmt.Errorf("not an array: %v", t)
	}
	var out []RawResult
	for i := range modules.Len() {
		pair, ok := modules.Elem(i).Value.(*ast.Array)
		if !ok || pair.Len() != 2 {
			return nil, fmt.Errorf("not a pair: %v", modules.Elem(i))
		}
		name, _ := pair.Elem(0).Value.(ast.String)
		results, ok := pair.Elem(1).Value.(ast.Set)
		if !ok {
			return nil, fmt.Errorf("not a set: %v", pair.Elem(1))
		}
		for _, r := range results.Slice() {
			out = append(out, decodeResult(string(name), r.Value))
		}
	}
	return out, nil
}
