package policy

import (
	"context"
	"testing"

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
			runstate.Fields{Run: runstate.RunMember("totals") | runstate.RunMember("trust")}},
		{"history", `results contains {"decision": "deny"} if input.agent_history.window.w1h.calls > 3`, runstate.Fields{Agent: runstate.AgentMember("window")}},
		{"whole", `results contains {"decision": "deny"} if { x := input.run; x.known }`, runstate.Fields{Run: all.Run}},
		{"dynamic_member", `results contains {"decision": "deny"} if { some k; input.run[k] == 1 }`, runstate.Fields{Run: all.Run}},
		{"bare", `results contains {"decision": "deny"} if { x := input; x.run.known }`, all},
		{"dynamic", `results contains {"decision": "deny"} if { some k; input[k].known }`, all},
		{"nested", `results contains {"decision": "deny"} if input.tool_call.parameters[input.run.id]`, runstate.Fields{Run: runstate.RunMember("id")}},
		{"with", `results contains {"decision": "deny"} if { data.svc.policies.with.x with input as {} }
x if true`, all},
	} {
		t.Run(c.name, func(t *testing.T) {
			tenant := "t-" + c.name
			src := "package svc.policies." + c.name + "\n\n" + c.body + "\n"
			if err := e.SetTenantPolicies(tenant, "1", []Module{{Name: c.name, Rego: src}}); err != nil {
				t.Fatal(err)
			}
			if got := e.RunFields(tenant); got != c.want {
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
