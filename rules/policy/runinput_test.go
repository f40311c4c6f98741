package policy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"svc/runstate"
)

func TestUsesRun(t *testing.T) {
	e := newTestEngine(t, Options{})
	if e.RunFields("nobody").Any() {
		t.Fatal("the base set alone uses the run context")
	}
	all := runstate.AllFields
	for _, c := range []struct {
		name, body string
		want       runstate.Fields
	}{
		{"plain", `results contains {"decision": "deny"} if input.tool_call.tool == "x"`, runstate.Fields{}},
		{"run", `results contains {"decision": "deny"} if input.run.totals.calls > 3`, runstate.Fields{Run: runstate.RunMember("totals")}},
		{"two", `results contains {"decision": "deny"} if { input.run.totals.calls > 3; input.run.trust.min == "unknown" }`,
			runstate.Fields{Run: runstate.RunMember("totals") | runstate.RunMember("trust"), Trust: runstate.TrustMember("min")}},
		{"trust_members", `results contains {"decision": "deny"} if { input.run.trust.untrusted_seen; count(input.run.trust.sources) > 1 }`,
			runstate.Fields{Run: runstate.RunMember("trust"), Trust: runstate.TrustMember("untrusted_seen") | runstate.TrustMember("sources")}},
		{"trust_whole", `results contains {"decision": "deny"} if { t := input.run.trust; t.min == "unknown" }`,
			runstate.Fields{Run: runstate.RunMember("trust"), Trust: runstate.AllTrust}},
		{"history", `results contains {"decision": "deny"} if input.agent_history.window.w1h.calls > 3`, runstate.Fields{Agent: runstate.AgentMember("window")}},
		{"whole", `results contains {"decision": "deny"} if { x := input.run; x.known }`, runstate.Fields{Run: all.Run, Trust: all.Trust}},
		{"dynamic_member", `results contains {"decision": "deny"} if { some k; input.run[k] == 1 }`, runstate.Fields{Run: all.Run, Trust: all.Trust}},
		{"bare", `results contains {"decision": "deny"} if { x := input; x.run.known }`, all},
		{"dynamic", `results contains {"decision": "deny"} if { some k; input[k].known }`, all},
		{"nested", `results contains {"decision": "deny"} if input.tool_call.parameters[input.run.id]`, runstate.Fields{Run: runstate.RunMember("id")}},
		{"with", `results contains {"decision": "deny"} if { data.svc.policies.with.x with input as {} }
x if true`, all},
		{"loop_breaker", `results contains {"decision": "deny"} if input.run.tools[input.tool_call.tool][input.tool_call.action].attempts >= 5`,
			runstate.Fields{Run: runstate.RunMember("tools"), Tools: sel(leaf("attempts"), pat(callKey, callKey))}},
		{"constants", `results contains {"decision": "deny"} if input.run.tools.payments.verify.allowed > 0`,
			runstate.Fields{Run: runstate.RunMember("tools"), Tools: sel(leaf("allowed"), pat(name("payments"), name("verify")))}},
		{"bound_vars", `results contains {"decision": "deny"} if { t := input.tool_call.tool; a := input.tool_call.action; input.run.tools[t][a].first_seq > 1 }`,
			runstate.Fields{Run: runstate.RunMember("tools"), Tools: sel(leaf("first_seq"), pat(callKey, callKey))}},
		{"whole_entry", `results contains {"decision": "deny"} if { e := input.run.tools.web[input.tool_call.action]; e.attempts > 1 }`,
			runstate.Fields{Run: runstate.RunMember("tools"), Tools: sel(runstate.AllLeaves, pat(name("web"), callKey))}},
		{"a_tools_actions", `results contains {"decision": "deny"} if count(input.run.tools[input.tool_call.tool]) > 1`,
			runstate.Fields{Run: runstate.RunMember("tools"), Tools: sel(runstate.AllLeaves, pat(callKey, anyKey))}},
		{"iterated", `results contains {"decision": "deny"} if { some t, a; input.run.tools[t][a].attempts > 1 }`,
			runstate.Fields{Run: runstate.RunMember("tools"), Tools: sel(leaf("attempts"), pat(anyKey, anyKey))}},
		{"swapped", `results contains {"decision": "deny"} if { t := input.tool_call.action; input.run.tools[t].x.attempts > 1 }`,
			runstate.Fields{Run: runstate.RunMember("tools"), Tools: sel(leaf("attempts"), pat(anyKey, name("x")))}},
		{"bound_in_else_only", `p if { input.run.tools[t][a].attempts > 1 } else if { t = input.tool_call.tool; a = input.tool_call.action }
results contains {"decision": "deny"} if p`,
			runstate.Fields{Run: runstate.RunMember("tools"), Tools: sel(leaf("attempts"), pat(anyKey, anyKey))}},
		{"comprehension_sees_outer", `results contains {"decision": "deny"} if { t := input.tool_call.tool; n := [x | x := input.run.tools[t][_].attempts]; count(n) > 0 }`,
			runstate.Fields{Run: runstate.RunMember("tools"), Tools: sel(leaf("attempts"), pat(callKey, anyKey))}},
		{"with_a_call", `results contains {"decision": "deny"} if { data.svc.policies.with_a_call.p with input.tool_call.tool as "x" }
p if input.run.tools[input.tool_call.tool].y.attempts > 1`, runstate.Fields{Run: runstate.RunMember("tools")}},
		{"whole_tools", `results contains {"decision": "deny"} if count(input.run.tools) > 1`, runstate.Fields{Run: runstate.RunMember("tools")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tenant := "t-" + c.name
			src := "package svc.policies." + c.name + "\n\n" + c.body + "\n"
			if err := e.SetTenantPolicies(tenant, "1", []Module{{Name: c.name, Rego: src}}); err != nil {
				t.Fatal(err)
			}
			if got := e.RunFields(tenant); got.Run != c.want.Run || got.Agent != c.want.Agent || got.Trust != c.want.Trust || !reflect.DeepEqual(got.Tools, c.want.Tools) {
				t.Fatalf("RunFields = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestRunInput(t *testing.T) {
	e := newTestEngine(t, Options{})
	src := `package svc.policies.loop

results contains {"decision": "deny", "reason": "loop"} if input.run.tools[input.tool_call.tool][input.tool_call.action].attempts >= 3

results contains {"decision": "require_approval", "reason": "tainted"} if {
	input.run.trust.min == "untrusted_external"
	input.agent_history.window.w1h.calls > 0
}
`
	if err := e.SetTenantPolicies("t", "1", []Module{{Name: "loop", Rego: src}}); err != nil {
		t.Fatal(err)
	}
	r, g := &runstate.Run{}, &runstate.Agent{}
	at := int64(1_000_000)
	decide := func() Result {
		t.Helper()
		in := call(func(in *Input) {
			in.Run, in.AgentHistory = runstate.RunDoc(r, "run-1", at, runstate.AllFields.Run), runstate.AgentDoc(g, at, runstate.AllFields.Agent)
		})
		res, err := e.Evaluate(context.Background(), "t", in)
		if err != nil {
			t.Fatal(err)
		}
		a := &runstate.Attempt{AgentID: "agent-1", At: at, Tool: in.ToolCall.Tool, Action: in.ToolCall.Action}
		g.Apply(a, !r.Known())
		r.Apply(a)
		return res
	}
	for i, want := range []string{"allow", "allow", "allow", "deny"} {
		if res := decide(); res.Decision != want {
			t.Fatalf("call %d: %s (%s), want %s", i+1, res.Decision, res.Reason, want)
		}
	}
	r, g = &runstate.Run{}, &runstate.Agent{}
	g.Apply(&runstate.Attempt{AgentID: "agent-1", At: at, Tool: "web", Action: "fetch"}, true)
	r.Apply(&runstate.Attempt{AgentID: "agent-1", At: at, Tool: "web", Action: "fetch", Level: runstate.LevelUntrusted})
	if res := decide(); res.Decision != "require_approval" || res.Reason != "tainted" {
		t.Fatalf("after untrusted content: %s (%s)", res.Decision, res.Reason)
	}
}

// Helpers for the expected tools selections of TestUsesRun.
var (
	callKey = runstate.Key{Kind: runstate.KeyCall}
	anyKey  = runstate.Key{}
)

func name(n string) runstate.Key { return runstate.Key{Kind: runstate.KeyName, Name: n} }

func pat(tool, action runstate.Key) runstate.ToolPattern {
	return runstate.ToolPattern{Tool: tool, Action: action}
}

func leaf(n string) uint8 { return runstate.ToolLeaf(n) }

func sel(leaves uint8, ps ...runstate.ToolPattern) *runstate.ToolSel {
	return &runstate.ToolSel{Patterns: ps, Leaves: leaves}
}

// TestNarrowedRunDecidesAlike evaluates policies that read input.run.tools
// and input.run.trust in several ways over random runs and calls, once with the document the
// engine narrows to what they read (as the agent actor builds it) and once
// with the whole document: the decisions must be the same.
func TestNarrowedRunDecidesAlike(t *testing.T) {
	e := newTestEngine(t, Options{})
	mods := append(benchRunModules(t), Module{Name: "shapes", Rego: `package svc.policies.shapes

results contains {"decision": "deny", "reason": "tainted_early"} if {
	input.run.trust.first_untrusted_seq < 3
	count(input.run.trust.sources) > 2
}

results contains {"decision": "deny", "reason": "bound"} if {
	t := input.tool_call.tool
	a := input.tool_call.action
	input.run.tools[t][a].first_seq > 2
}

results contains {"decision": "require_approval", "reason": "many_actions"} if count(input.run.tools[input.tool_call.tool]) > 2

results contains {"decision": "deny", "reason": "web_entry"} if {
	e := input.run.tools.web[input.tool_call.action]
	e.attempts > e.allowed + 1
}

results contains {"decision": "redact", "reason": "comprehension", "redact_fields": ["x"]} if {
	t := input.tool_call.tool
	n := [x | x := input.run.tools[t][_].since_last_s]
	count(n) > 1
}
`})
	if err := e.SetTenantPolicies("tenant-a", "v1", mods); err != nil {
		t.Fatal(err)
	}
	fields := e.RunFields("tenant-a")
	if fields.Tools == nil || len(fields.Tools.Patterns) == 0 || fields.Trust == runstate.AllTrust {
		t.Fatalf("what is read was not narrowed: %+v %b", fields.Tools, fields.Trust)
	}
	rng := rand.New(rand.NewPCG(7, 11))
	tools, actions := []string{"payments", "web", "crm"}, []string{"pay", "verify", "fetch"}
	decisions := map[string]int{}
	for i := range 400 {
		r := &runstate.Run{}
		at := int64(1_000_000)
		for range rng.IntN(14) {
			at += int64(rng.IntN(5000))
			a := &runstate.Attempt{AgentID: "a", At: at, Tool: tools[rng.IntN(3)], Action: actions[rng.IntN(3)], Level: rng.IntN(6), Via: "source_trust"}
			r.Apply(a)
			if rng.IntN(2) == 0 {
				r.Settle(&runstate.Settlement{Seq: r.Seq, Tool: a.Tool, Action: a.Action, Decision: "allow", At: at})
			}
		}
		in := call(func(in *Input) {
			in.ToolCall.Tool, in.ToolCall.Action = tools[rng.IntN(3)], actions[rng.IntN(3)]
			in.ToolCall.Parameters = map[string]any{"amount": float64(rng.IntN(2000))}
		})
		now := at + 1000
		in.Run = runstate.RunDocOf(r, "run", now, fields.ForCall(in.ToolCall.Tool, in.ToolCall.Action))
		narrow := evaluate(t, e, "tenant-a", in)
		// As the agent actor evaluates: the documents' terms shared by
		// their canonical bytes (built on the first, reused on the second).
		c, err := runstate.NewContext(in.Run, nil)
		if err != nil {
			t.Fatal(err)
		}
		in.RunKey = c.Canonical
		for range 2 {
			if shared := evaluate(t, e, "tenant-a", in); !reflect.DeepEqual(narrow, shared) {
				t.Fatalf("step %d: shared terms %+v, built %+v", i, shared, narrow)
			}
		}
		in.RunKey = nil
		in.Run = runstate.RunDoc(r, "run", now, runstate.AllFields.Run)
		whole := evaluate(t, e, "tenant-a", in)
		if !reflect.DeepEqual(narrow, whole) {
			t.Fatalf("step %d: narrowed %+v, whole %+v", i, narrow, whole)
		}
		decisions[narrow.Decision+"/"+narrow.Reason]++
	}
	if len(decisions) < 5 {
		t.Fatalf("the random runs exercise too little: %v", decisions)
	}
}

// TestDocTermsShareAndStayBounded: a key's terms are built once and
// returned again; past the bound, shards drop documents rather than grow.
func TestDocTermsShareAndStayBounded(t *testing.T) {
	c := newDocTerms()
	builds := 0
	build := func(n int) func() docTerm {
		return func() docTerm {
			builds++
			return docTerm{run: ast.InternedTerm(n)}
		}
	}
	first := c.get([]byte(`{"run":{"seq":1}}`), build(1))
	again := c.get([]byte(`{"run":{"seq":1}}`), build(2))
	if builds != 1 || again.run != first.run {
		t.Fatalf("%d builds; the second get returned %v, the first %v", builds, again.run, first.run)
	}
	if other := c.get([]byte(`{"run":{"seq":2}}`), build(2)); builds != 2 || other.run == first.run {
		t.Fatalf("another key shared a term: %d builds", builds)
	}
	for i := range 3 * docTermShards * docTermsPerShard {
		c.get([]byte(fmt.Sprintf(`{"run":{"seq":%d}}`, i+3)), build(i))
	}
	total := 0
	for i := range c.shards {
		if n := len(c.shards[i].m); n > docTermsPerShard {
			t.Errorf("shard %d holds %d documents, bound %d", i, n, docTermsPerShard)
		}
		total += len(c.shards[i].m)
	}
	if total < docTermShards*docTermsPerShard/2 {
		t.Errorf("only %d documents kept", total)
	}
}
