package evidence

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"svc/persistence"
)

var t0 = time.Date(2026, 11, 26, 10, 0, 0, 123456000, time.UTC)

func dec(id, agent, run, decision string, at time.Duration, policies ...string) persistence.Decision {
	d := persistence.Decision{Seq: int64(at), ID: id, AgentID: agent, Tool: "github", Action: "create_issue", Decision: decision,
		Reason: "r-" + id, RiskScore: 42, MatchedPolicyIDs: policies, CreatedAt: t0.Add(at), ReceiptID: "rc-" + id, ReceiptHash: "h-" + id}
	if run != "" {
		d.RunID = &run
	}
	return d
}

func records(ds ...persistence.Decision) Records {
	return Records{Decisions: ds, Now: t0.Add(time.Hour),
		Agents:    map[string]persistence.Agent{"a1": {ID: "a1", Name: "bot", CreatedAt: t0.Add(-time.Hour)}},
		Approvals: map[string]persistence.Approval{}}
}

// check asserts the invariants every graph holds: unique node ids, edges
// between nodes of the graph, once each.
func check(t *testing.T, g Graph) (map[string]Node, map[[3]string]Edge) {
	t.Helper()
	nodes, edges := map[string]Node{}, map[[3]string]Edge{}
	for _, n := range g.Nodes {
		if _, dup := nodes[n.ID]; dup {
			t.Errorf("duplicate node %s", n.ID)
		}
		if !strings.HasPrefix(n.ID, n.Group+":") {
			t.Errorf("node %s in group %s", n.ID, n.Group)
		}
		if (n.Metadata != nil) != (n.Group == NodeDecision) {
			t.Errorf("node %s metadata %v", n.ID, n.Metadata)
		}
		nodes[n.ID] = n
	}
	for _, e := range g.Edges {
		k := [3]string{e.From, e.To, e.Label}
		if _, dup := edges[k]; dup {
			t.Errorf("duplicate edge %v", k)
		}
		if _, ok := nodes[e.From]; !ok {
			t.Errorf("edge %v from a missing node", k)
		}
		if _, ok := nodes[e.To]; !ok {
			t.Errorf("edge %v to a missing node", k)
		}
		edges[k] = e
	}
	return nodes, edges
}

func groups(nodes map[string]Node) map[string]int {
	out := map[string]int{}
	for _, n := range nodes {
		out[n.Group]++
	}
	return out
}

func TestBuildDepths(t *testing.T) {
	approval := persistence.Approval{ID: "ap1", Status: persistence.ApprovalPending, CreatedAt: t0.Add(3 * time.Second), ExpiresAt: t0.Add(2 * time.Hour)}
	ask := dec("d3", "a1", "run-1", "require_approval", 3*time.Second, "p_approve")
	ask.ApprovalID = "ap1"
	r := records(dec("d1", "a1", "run-1", "allow", time.Second, "p_read"), dec("d2", "a1", "", "deny", 2*time.Second, "p_read", "p_deny"), ask)
	r.Approvals["ap1"] = approval
	for _, tc := range []struct {
		name     string
		depth    int
		policies bool
		want     map[string]int
	}{
		{"depth 1", 1, true, map[string]int{"agent": 1, "run": 1, "tool_call": 3, "decision": 3}},
		{"depth 2", 2, true, map[string]int{"agent": 1, "run": 1, "tool_call": 3, "decision": 3, "approval": 1, "receipt": 3}},
		{"depth 3", 3, true, map[string]int{"agent": 1, "run": 1, "tool_call": 3, "decision": 3, "approval": 1, "receipt": 3, "policy": 3}},
		{"depth 3 without policies", 3, false, map[string]int{"agent": 1, "run": 1, "tool_call": 3, "decision": 3, "approval": 1, "receipt": 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes, edges := check(t, Build(r, tc.depth, tc.policies))
			got := groups(nodes)
			if len(got) != len(tc.want) {
				t.Errorf("groups %v, want %v", got, tc.want)
			}
			for g, n := range tc.want {
				if got[g] != n {
					t.Errorf("%d %s nodes, want %d", got[g], g, n)
				}
			}
			has := func(from, to, label string) {
				t.Helper()
				if _, ok := edges[[3]string{from, to, label}]; !ok {
					t.Errorf("no edge %s -[%s]-> %s", from, label, to)
				}
			}
			has("agent:a1", "run:run-1", EdgeTriggeredBy)
			has("run:run-1", "tool_call:d1", EdgeExecuted)
			has("agent:a1", "tool_call:d2", EdgeTriggeredBy) // standalone: straight to the agent
			has("tool_call:d2", "decision:d2", EdgeDecided)
			if tc.depth >= 2 {
				has("decision:d3", "approval:ap1", EdgeApproved)
				has("decision:d1", "receipt:rc-d1", EdgeProduced)
				if nodes["approval:ap1"].Label != "PENDING" || nodes["receipt:rc-d1"].Label != "h-d1" {
					t.Errorf("labels: %v %v", nodes["approval:ap1"], nodes["receipt:rc-d1"])
				}
			}
			if tc.depth >= 3 && tc.policies {
				has("decision:d2", "policy:p_deny", EdgeLinkedTo)
				if nodes["policy:p_read"].Timestamp != stamp(t0.Add(time.Second)) {
					t.Errorf("policy timestamp %s, want its first match's", nodes["policy:p_read"].Timestamp)
				}
			}
			if n := nodes["decision:d2"]; n.Label != "deny" || n.Metadata.RiskScore != 42 || n.Metadata.Reason != "r-d2" {
				t.Errorf("decision node %+v", n)
			}
			if n := nodes["tool_call:d2"]; n.Label != "github.create_issue" {
				t.Errorf("tool_call label %q", n.Label)
			}
			if n := nodes["agent:a1"]; n.Label != "bot" || n.Timestamp != "2026-11-26T09:00:00.123456Z" {
				t.Errorf("agent node %+v", n)
			}
		})
	}
}

// In whatever order the records come, a run is placed at its earliest
// decision and no node or edge repeats.
func TestBuildOrderAndDuplicates(t *testing.T) {
	ds := []persistence.Decision{
		dec("d1", "a1", "run-1", "allow", 5*time.Second, "p"), dec("d2", "a1", "run-1", "allow", time.Second, "p"),
		dec("d3", "a1", "run-1", "allow", 9*time.Second, "p"),
	}
	for range 5 {
		rand.Shuffle(len(ds), func(i, j int) { ds[i], ds[j] = ds[j], ds[i] })
		r := records(append(ds, ds[0])...) // one twice
		nodes, edges := check(t, Build(r, 3, true))
		if nodes["run:run-1"].Timestamp != stamp(t0.Add(time.Second)) {
			t.Errorf("run timestamp %s, want its earliest decision's", nodes["run:run-1"].Timestamp)
		}
		if e := edges[[3]string{"agent:a1", "run:run-1", EdgeTriggeredBy}]; e.Timestamp != stamp(t0.Add(time.Second)) {
			t.Errorf("triggered_by at %s", e.Timestamp)
		}
		if groups(nodes)["decision"] != 3 || groups(nodes)["policy"] != 1 {
			t.Errorf("nodes %v", groups(nodes))
		}
	}
}

// A decision whose approval is gone (deleted by the cleanup) or whose
// agent has no record still yields a whole graph.
func TestBuildMissingRecords(t *testing.T) {
	ask := dec("d1", "ghost", "", "require_approval", time.Second)
	ask.ApprovalID = "gone"
	nodes, edges := check(t, Build(records(ask), 3, true))
	if _, ok := nodes["approval:gone"]; ok {
		t.Error("an approval node without its record")
	}
	if n := nodes["agent:ghost"]; n.Label != "ghost" || n.Timestamp != stamp(t0.Add(time.Second)) {
		t.Errorf("agent without a record: %+v", n)
	}
	if _, ok := edges[[3]string{"agent:ghost", "tool_call:d1", EdgeTriggeredBy}]; !ok {
		t.Error("no triggered_by edge")
	}
}

func TestBuildIncident(t *testing.T) {
	in := persistence.Incident{ID: "i1", AgentID: "a1", Summary: "deny storm", OpenedAt: t0.Add(time.Minute)}
	r := records(dec("d1", "a1", "", "deny", time.Second, "p"), dec("d2", "a1", "", "deny", 2*time.Second, "p"))
	r.Incident = &in
	nodes, edges := check(t, Build(r, DepthRecords, false))
	if nodes["incident:i1"].Label != "deny storm" || groups(nodes)["policy"] != 0 {
		t.Errorf("incident graph nodes %v", nodes)
	}
	for _, k := range [][3]string{{"incident:i1", "agent:a1", EdgeLinkedTo}, {"incident:i1", "decision:d1", EdgeLinkedTo}, {"incident:i1", "decision:d2", EdgeLinkedTo}} {
		if e, ok := edges[k]; !ok || e.Timestamp != stamp(in.OpenedAt) {
			t.Errorf("edge %v: %+v %v", k, e, ok)
		}
	}
	// An incident whose decisions were not found: the incident and its agent.
	r.Decisions = nil
	nodes, edges = check(t, Build(r, DepthRecords, false))
	if len(nodes) != 2 || len(edges) != 1 {
		t.Errorf("empty incident: %v %v", nodes, edges)
	}
}

func TestClampDepth(t *testing.T) {
	for in, want := range map[int]int{-1: 1, 0: 1, 1: 1, 2: 2, 3: 3, 4: 3, 5: 3, 6: 3} {
		if got := ClampDepth(in); got != want {
			t.Errorf("ClampDepth(%d) = %d, want %d", in, got, want)
		}
	}
}
