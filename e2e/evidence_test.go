package e2e

// The evidence graph and the risk scoreboard end to end (issue 24; SPEC
// 2.1, 4.4, 4.7; CONTRACT §13), on SQLite, on Postgres and on two
// clustered nodes behind the round-robin balancer.

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"svc/persistence"
	"svc/persistence/postgres"
	"svc/persistence/sqlite"
	"svc/receipt"
	"svc/testkit"
	"svc/testkit/gateway"
)

// graph is a decoded EvidenceGraph, indexed.
type graph struct {
	raw   []byte
	nodes map[string]map[string]any // by id
	edges map[[3]string]map[string]any
}

var (
	nodeGroups = []string{"agent", "run", "tool_call", "decision", "approval", "receipt", "incident", "mcp_server", "policy"}
	edgeLabels = []string{"triggered_by", "executed", "decided", "approved", "produced", "linked_to"}
)

// getGraph reads a graph and checks what every graph must hold: node ids
// `{group}:{id}` and unique, groups and edge labels from the closed sets,
// RFC 3339 UTC timestamps, metadata on decision nodes only, and no edge to
// a node that is not there (the data sets go into vis-network as they are).
func getGraph(t testing.TB, s *gateway.Server, tok, path string) graph {
	t.Helper()
	raw := s.Want(t, 200, "GET", path, tok, nil)
	m := testkit.Obj(t, raw)
	g := graph{raw: raw, nodes: map[string]map[string]any{}, edges: map[[3]string]map[string]any{}}
	nodes, _ := m["nodes"].([]any)
	edges, _ := m["edges"].([]any)
	if m["nodes"] == nil || m["edges"] == nil {
		t.Fatalf("%s: nodes or edges missing or null: %s", path, raw)
	}
	utc := func(what string, v any) {
		s, _ := v.(string)
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil || !strings.HasSuffix(s, "Z") {
			t.Errorf("%s: %s timestamp %q is not RFC 3339 UTC", path, what, s)
		}
	}
	for _, x := range nodes {
		n := x.(map[string]any)
		id, group := fmt.Sprint(n["id"]), fmt.Sprint(n["group"])
		if _, dup := g.nodes[id]; dup {
			t.Errorf("%s: duplicate node id %s", path, id)
		}
		g.nodes[id] = n
		if !slices.Contains(nodeGroups, group) || !strings.HasPrefix(id, group+":") || len(id) == len(group)+1 {
			t.Errorf("%s: node %s in group %q", path, id, group)
		}
		if _, ok := n["label"].(string); !ok {
			t.Errorf("%s: node %s label %v", path, id, n["label"])
		}
		utc("node "+id, n["timestamp"])
		md, has := n["metadata"]
		switch {
		case !has:
			t.Errorf("%s: node %s has no metadata field", path, id)
		case group == "decision":
			meta, ok := md.(map[string]any)
			score, isNum := meta["risk_score"].(float64)
			_, isStr := meta["reason"].(string)
			if !ok || !isNum || score != math.Trunc(score) || !isStr || len(meta) != 2 {
				t.Errorf("%s: decision %s metadata %v, want risk_score (integer) and reason", path, id, md)
			}
		case md != nil:
			t.Errorf("%s: %s node %s has metadata %v, want null", path, group, id, md)
		}
	}
	for _, x := range edges {
		e := x.(map[string]any)
		k := [3]string{fmt.Sprint(e["from"]), fmt.Sprint(e["to"]), fmt.Sprint(e["label"])}
		if _, dup := g.edges[k]; dup {
			t.Errorf("%s: duplicate edge %v", path, k)
		}
		g.edges[k] = e
		if g.nodes[k[0]] == nil || g.nodes[k[1]] == nil {
			t.Errorf("%s: edge %v joins a node that is not in the graph", path, k)
		}
		if !slices.Contains(edgeLabels, k[2]) {
			t.Errorf("%s: edge label %q", path, k[2])
		}
		utc(fmt.Sprint("edge ", k), e["timestamp"])
	}
	return g
}

// group counts the graph's nodes of one group.
func (g graph) group(name string) int {
	n := 0
	for _, node := range g.nodes {
		if node["group"] == name {
			n++
		}
	}
	return n
}

// has asserts an edge.
func (g graph) has(t testing.TB, from, to, label string) {
	t.Helper()
	if g.edges[[3]string{from, to, label}] == nil {
		t.Errorf("no edge %s -[%s]-> %s in %s", from, label, to, g.raw)
	}
}

// node asserts a node and returns it.
func (g graph) node(t testing.TB, id string) map[string]any {
	t.Helper()
	n := g.nodes[id]
	if n == nil {
		t.Fatalf("no node %s in %s", id, g.raw)
	}
	return n
}

func withRun(body map[string]any, run string) map[string]any {
	body["trace"] = map[string]any{"run_id": run}
	return body
}

func TestE2EEvidenceGraph(t *testing.T) {
	t.Parallel()
	gateway.ForModes(t, func(t *testing.T, backend string) {
		s := gateway.Start(t, backend, map[string]string{"SVC_RATE_LIMIT_CAPACITY": "100000"})
		_, admin := s.Tenant(t, "graph-"+testkit.Uniq())
		_, otherAdmin := s.Tenant(t, "graph-other-"+testkit.Uniq())
		_, viewer := s.OpToken(t, admin, "graph-viewer", "viewer")
		const planted = "planted-parameter-value-7f3a"
		agentID, tok := s.Agent(t, admin, "graph-agent-"+testkit.Uniq(), map[string]any{"risk_tier": "high"})
		run := "run-" + testkit.Uniq()

		// A run of three calls (allow, deny, require_approval) and a
		// standalone call without a run id.
		read := gateway.AzWant(t, s, tok, withRun(gateway.AzBody("github", "list_issues", false, gateway.AzSigned,
			map[string]any{"tool_call": map[string]any{"tool": "github", "action": "list_issues", "parameters": map[string]any{"q": planted}}}), run), 200)
		deny := gateway.AzDecide(t, s, tok, withRun(gateway.AzUntrustedWrite(nil), run), "deny", "")
		approve := gateway.AzDecide(t, s, tok, withRun(gateway.ApCall(map[string]any{"secret": planted}, nil), run), "require_approval", "")
		alone := gateway.AzWant(t, s, tok, gateway.AzRead(nil), 200)
		runCalls := []map[string]any{read, deny, approve}

		t.Run("run graph: depth 3", func(t *testing.T) {
			g := getGraph(t, s, viewer, "/v2/graph/run/"+run)
			agentNode, runNode := "agent:"+agentID, "run:"+run
			if g.node(t, runNode)["label"] != run || g.group("agent") != 1 || g.group("run") != 1 {
				t.Errorf("run graph nodes: %s", g.raw)
			}
			g.has(t, agentNode, runNode, "triggered_by")
			if g.group("tool_call") != 3 || g.group("decision") != 3 || g.group("receipt") != 3 || g.group("approval") != 1 {
				t.Errorf("run graph: %d tool calls, %d decisions, %d receipts, %d approvals; want 3, 3, 3, 1: %s",
					g.group("tool_call"), g.group("decision"), g.group("receipt"), g.group("approval"), g.raw)
			}
			policies := map[string]bool{}
			for _, c := range runCalls {
				id := testkit.Str(t, c, "decision_id")
				call, dec, rc := "tool_call:"+id, "decision:"+id, "receipt:"+testkit.Str(t, c, "receipt_id")
				g.has(t, runNode, call, "executed")
				g.has(t, call, dec, "decided")
				g.has(t, dec, rc, "produced")
				if d := g.node(t, dec); d["label"] != c["decision"] || d["metadata"].(map[string]any)["risk_score"] != c["risk_score"] {
					t.Errorf("decision node %v for answer %v", d, c)
				}
				if g.node(t, rc)["label"] != c["receipt_hash"] {
					t.Errorf("receipt node %v, want the label %v", g.node(t, rc), c["receipt_hash"])
				}
				for _, p := range gateway.AzStrings(c["matched_policies"]) {
					policies[p] = true
					g.has(t, dec, "policy:"+p, "linked_to")
					if g.node(t, "policy:"+p)["label"] != p {
						t.Errorf("policy node %v", g.node(t, "policy:"+p))
					}
				}
			}
			if len(policies) == 0 || g.group("policy") != len(policies) {
				t.Errorf("%d policy nodes for matched policies %v", g.group("policy"), policies)
			}
			if g.node(t, "tool_call:"+testkit.Str(t, deny, "decision_id"))["label"] != "github.create_issue" {
				t.Errorf("tool_call label %v", g.node(t, "tool_call:"+testkit.Str(t, deny, "decision_id"))["label"])
			}
			ap := "approval:" + testkit.Str(t, approve, "approval_id")
			g.has(t, "decision:"+testkit.Str(t, approve, "decision_id"), ap, "approved")
			if g.node(t, ap)["label"] != "PENDING" {
				t.Errorf("approval node %v", g.node(t, ap))
			}
			if g.nodes["decision:"+testkit.Str(t, alone, "decision_id")] != nil {
				t.Error("the standalone call is in the run's graph")
			}
			if strings.Contains(string(g.raw), planted) || strings.Contains(string(g.raw), tok) {
				t.Errorf("the graph carries a parameter value or the agent token: %s", g.raw)
			}
			// An approval decided since shows its status.
			s.Want(t, 200, "POST", "/v2/approvals/"+testkit.Str(t, approve, "approval_id")+"/approve", admin, map[string]any{"approver_user_id": "u-1"})
			if l := getGraph(t, s, admin, "/v2/graph/run/"+run).node(t, ap)["label"]; l != "APPROVED" {
				t.Errorf("approval node label %v after approving, want APPROVED", l)
			}
		})

		t.Run("agent graph: depths, the standalone call, the 50 most recent", func(t *testing.T) {
			want := map[string][4]int{ // depth: tool calls, approvals, receipts, policies
				"depth=1": {4, 0, 0, 0}, "depth=0": {4, 0, 0, 0}, "depth=-3": {4, 0, 0, 0},
				"depth=2": {4, 1, 4, 0}, "": {4, 1, 4, -1}, "depth=3": {4, 1, 4, -1}, "depth=5": {4, 1, 4, -1}, "depth=99": {4, 1, 4, -1},
			}
			for q, w := range want {
				g := getGraph(t, s, viewer, "/v2/graph/agent/"+agentID+"?"+q)
				got := [4]int{g.group("tool_call"), g.group("approval"), g.group("receipt"), g.group("policy")}
				if w[3] == -1 && got[3] > 0 {
					w[3] = got[3]
				}
				if got != w || g.group("decision") != 4 || g.group("run") != 1 || g.group("agent") != 1 {
					t.Errorf("%s: tool calls, approvals, receipts, policies %v, want %v: %s", q, got, w, g.raw)
				}
				if strings.Contains(string(g.raw), planted) || strings.Contains(string(g.raw), tok) {
					t.Errorf("%s: the agent graph carries a parameter value or the agent token", q)
				}
				alone := testkit.Str(t, alone, "decision_id")
				g.has(t, "agent:"+agentID, "tool_call:"+alone, "triggered_by")
				g.has(t, "agent:"+agentID, "run:"+run, "triggered_by")
			}
			// Not an integer, and present but empty: 400 naming the field.
			for _, q := range []string{"depth=deep", "depth=", "depth", "depth=%20"} {
				e := gateway.Envelope(t, s.Want(t, 400, "GET", "/v2/graph/agent/"+agentID+"?"+q, admin, nil), 400, "v2", "BadRequest")
				if gateway.Detail(e, "field") != "depth" {
					t.Errorf("%s: %v", q, e)
				}
			}
			// 55 calls: the graph holds the 50 most recent.
			busyID, busyTok := s.Agent(t, admin, "graph-busy-"+testkit.Uniq(), nil)
			var ids []string
			for range 55 {
				ids = append(ids, testkit.Str(t, gateway.AzWant(t, s, busyTok, gateway.AzRead(nil), 200), "decision_id"))
			}
			g := getGraph(t, s, admin, "/v2/graph/agent/"+busyID+"?depth=1")
			if g.group("decision") != 50 {
				t.Errorf("%d decisions in the graph, want 50", g.group("decision"))
			}
			for i, id := range ids {
				if (g.nodes["decision:"+id] != nil) != (i >= 5) {
					t.Errorf("decision %d of 55 in the graph: %v", i+1, g.nodes["decision:"+id] != nil)
				}
			}
			// An agent without decisions: its node alone.
			idleID, _ := s.Agent(t, admin, "graph-idle-"+testkit.Uniq(), nil)
			if g := getGraph(t, s, admin, "/v2/graph/agent/"+idleID); len(g.nodes) != 1 || len(g.edges) != 0 || g.node(t, "agent:"+idleID) == nil {
				t.Errorf("idle agent's graph %s", g.raw)
			}
		})

		t.Run("incident graph: the decisions behind source_event_ids, depth 2", func(t *testing.T) {
			stormID, stormTok := s.Agent(t, admin, "graph-storm-"+testkit.Uniq(), nil)
			var denies []string
			for range 5 {
				denies = append(denies, testkit.Str(t, gateway.AzDecide(t, s, stormTok, gateway.AzUntrustedWrite(nil), "deny", ""), "decision_id"))
			}
			inc := gateway.WaitIncidents(t, s, admin, stormID, "deny_storm", 1)[0]
			incID := testkit.Str(t, inc, "incident_id")
			g := getGraph(t, s, viewer, "/v2/graph/incident/"+incID)
			in := g.node(t, "incident:"+incID)
			if in["label"] != inc["summary"] || g.group("policy") != 0 || g.group("decision") != 5 || g.group("receipt") != 5 {
				t.Errorf("incident graph: %s", g.raw)
			}
			g.has(t, "incident:"+incID, "agent:"+stormID, "linked_to")
			// The link itself: each decision names its security event, and
			// the incident names those events.
			sources := gateway.AzStrings(inc["source_event_ids"])
			for _, id := range denies {
				d := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/decisions/"+id, admin, nil))
				if !slices.Contains(sources, fmt.Sprint(d["event_id"])) {
					t.Errorf("decision %s event_id %v is not among the incident's source events %v", id, d["event_id"], sources)
				}
			}
			for _, id := range denies {
				g.has(t, "incident:"+incID, "decision:"+id, "linked_to")
				g.has(t, "agent:"+stormID, "tool_call:"+id, "triggered_by")
			}
		})

		t.Run("unknown and other tenants' ids: 404 alike; the scoreboard is not an agent id", func(t *testing.T) {
			incs := testkit.Arr(t, s.Want(t, 200, "GET", "/v2/incidents?limit=1", admin, nil))
			paths := []string{"/v2/graph/run/" + run, "/v2/graph/agent/" + agentID}
			if len(incs) > 0 {
				paths = append(paths, "/v2/graph/incident/"+testkit.Str(t, incs[0], "incident_id"))
			}
			for _, p := range paths {
				gateway.Envelope(t, s.Want(t, 404, "GET", p, otherAdmin, nil), 404, "v2", "NotFound")
			}
			for _, p := range []string{"/v2/graph/run/no-such-run", "/v2/graph/agent/" + testkit.RandomUUID(), "/v2/graph/incident/" + testkit.RandomUUID(),
				"/v2/graph/agent/not-a-uuid", "/v2/graph/incident/not-a-uuid"} {
				gateway.Envelope(t, s.Want(t, 404, "GET", p, admin, nil), 404, "v2", "NotFound")
			}
			s.Want(t, 401, "GET", "/v2/graph/run/"+run, "", nil)
			s.Want(t, 403, "GET", "/v2/graph/run/"+run, tok, nil) // an agent token is no operator's
		})
	})
}

func TestE2ERiskScoreboard(t *testing.T) {
	t.Parallel()
	gateway.ForModes(t, func(t *testing.T, backend string) {
		s := gateway.Start(t, backend, map[string]string{"SVC_RATE_LIMIT_CAPACITY": "100000"})
		_, admin := s.Tenant(t, "board-"+testkit.Uniq())
		_, viewer := s.OpToken(t, admin, "board-viewer", "viewer")
		type agent struct {
			id, name string
			scores   []float64
		}
		// Each agent's composite scores come from its answers.
		calls := map[string][]map[string]any{
			"calm":  {gateway.AzRead(nil), gateway.AzRead(nil)},
			"mixed": {gateway.AzRead(nil), gateway.AzUntrustedWrite(nil), gateway.AzTrustedWrite(nil)},
			"risky": {gateway.AzUntrustedWrite(nil), gateway.AzUntrustedWrite(nil)},
		}
		var agents []agent
		for _, name := range []string{"calm", "mixed", "risky"} {
			id, tok := s.Agent(t, admin, "board-"+name+"-"+testkit.Uniq(), nil)
			a := agent{id: id, name: name}
			for _, c := range calls[name] {
				a.scores = append(a.scores, gateway.AzWant(t, s, tok, c, 200)["composite_risk_score"].(float64))
			}
			agents = append(agents, a)
		}
		idleID, _ := s.Agent(t, admin, "board-idle-"+testkit.Uniq(), nil)

		board := testkit.Arr(t, s.Want(t, 200, "GET", "/v2/agents/risk-scoreboard", viewer, nil))
		if len(board) != 4 {
			t.Fatalf("%d entries, want 4 agents: %v", len(board), board)
		}
		byID := map[string]map[string]any{}
		for i, e := range board {
			byID[fmt.Sprint(e["agent_id"])] = e
			if i > 0 && board[i-1]["mean_composite_risk_24h"] != nil && e["mean_composite_risk_24h"] != nil &&
				board[i-1]["mean_composite_risk_24h"].(float64) < e["mean_composite_risk_24h"].(float64) {
				t.Errorf("not ranked by mean, highest first: %v", board)
			}
			if e["trend"] != "stable" || e["previous_mean_24h"] != nil {
				t.Errorf("no decisions before the last 24 hours: trend stable and no previous mean; got %v", e)
			}
		}
		for _, a := range agents {
			e := byID[a.id]
			sum := 0.0
			for _, v := range a.scores {
				sum += v
			}
			mean, _ := e["mean_composite_risk_24h"].(float64)
			if e == nil || math.Abs(mean-sum/float64(len(a.scores))) > 1e-9 || e["decisions_24h"] != float64(len(a.scores)) ||
				!strings.HasPrefix(fmt.Sprint(e["name"]), "board-"+a.name) {
				t.Errorf("%s: entry %v, want mean %v of %v", a.name, e, sum/float64(len(a.scores)), a.scores)
			}
		}
		if e := board[len(board)-1]; e["agent_id"] != idleID || e["mean_composite_risk_24h"] != nil || e["decisions_24h"] != 0.0 {
			t.Errorf("the idle agent last, with a null mean: %v", e)
		}

		resp, raw := s.Do(t, "GET", "/v2/agents/risk-scoreboard?format=csv", viewer, nil)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") {
			t.Fatalf("csv: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		rows, err := csv.NewReader(strings.NewReader(string(raw))).ReadAll()
		if err != nil || len(rows) != len(board)+1 ||
			strings.Join(rows[0], ",") != "agent_id,name,mean_composite_risk_24h,previous_mean_24h,trend,decisions_24h" {
			t.Fatalf("csv %q: %v", raw, err)
		}
		for i, r := range rows[1:] {
			e := board[i]
			mean := ""
			if v, ok := e["mean_composite_risk_24h"].(float64); ok {
				mean = strconv.FormatFloat(v, 'f', -1, 64)
			}
			if r[0] != e["agent_id"] || r[1] != e["name"] || r[2] != mean || r[3] != "" || r[4] != e["trend"] || r[5] != fmt.Sprint(e["decisions_24h"]) {
				t.Errorf("csv row %d %q, json %v", i+1, r, e)
			}
		}
		e := gateway.Envelope(t, s.Want(t, 400, "GET", "/v2/agents/risk-scoreboard?format=xml", admin, nil), 400, "v2", "BadRequest")
		if gateway.Detail(e, "field") != "format" {
			t.Errorf("format=xml: %v", e)
		}
		t.Run("trends at the 5-point boundary, from decisions of the day before", func(t *testing.T) {
			tenantID, adm := s.Tenant(t, "board-trend-"+testkit.Uniq())
			st := openStoreOf(t, s)
			now := time.Now().UTC()
			want := map[string]string{}
			for _, c := range []struct {
				name     string
				previous []int
				current  []int
				trend    string
			}{
				{"up-5.5", []int{40, 40}, []int{45, 46}, "rising"},
				{"up-5", []int{40}, []int{45, 45}, "stable"},
				{"down-5", []int{40, 40}, []int{35}, "stable"},
				{"down-6", []int{40}, []int{34}, "falling"},
				{"no-baseline", nil, []int{90}, "stable"},
				{"gone-quiet", []int{90}, nil, "stable"},
			} {
				id, _ := s.Agent(t, adm, "trend-"+c.name, nil)
				want[id] = c.trend
				var ws []persistence.DecisionWrite
				add := func(scores []int, at time.Time) {
					for i, v := range scores {
						ws = append(ws, persistence.DecisionWrite{Decision: persistence.Decision{ID: persistence.NewRecordID(), TenantID: tenantID,
							AgentID: id, Tool: "github", Action: "list_issues", ActionHash: strings.Repeat("a", 64), Decision: "allow", Reason: "x",
							CompositeRiskScore: v, MatchedPolicyIDs: []string{}, RedactedFields: []string{}, TrustLevel: "unknown",
							RootTrustLevel: "unknown", ToolCall: json.RawMessage(`{}`), CreatedAt: at.Add(time.Duration(i) * time.Second).Truncate(time.Microsecond),
							AuditID: persistence.NewRecordID()}})
					}
				}
				add(c.previous, now.Add(-30*time.Hour))
				add(c.current, now.Add(-time.Hour))
				if err := st.CommitDecisions(context.Background(), ws, func(string, persistence.ChainHead, []*persistence.Receipt) error { return nil }); err != nil {
					t.Fatal(err)
				}
			}
			board := testkit.Arr(t, s.Want(t, 200, "GET", "/v2/agents/risk-scoreboard", adm, nil))
			if len(board) != len(want) {
				t.Fatalf("%d entries, want %d", len(board), len(want))
			}
			for _, e := range board {
				if e["trend"] != want[fmt.Sprint(e["agent_id"])] {
					t.Errorf("%s: trend %v, want %s (%v)", e["name"], e["trend"], want[fmt.Sprint(e["agent_id"])], e)
				}
			}
			if board[0]["name"] != "trend-up-5.5" && board[0]["name"] != "trend-no-baseline" || board[len(board)-1]["name"] != "trend-gone-quiet" {
				t.Errorf("ranking %v", board)
			}
		})

		// Another tenant sees its own (empty) board.
		_, other := s.Tenant(t, "board-other-"+testkit.Uniq())
		if b := testkit.Arr(t, s.Want(t, 200, "GET", "/v2/agents/risk-scoreboard", other, nil)); len(b) != 0 {
			t.Errorf("another tenant's board %v", b)
		}
	})
}

// pack is a downloaded evidence pack, opened.
type pack struct {
	raw   []byte
	files map[string][]byte
	order []string
}

// getPack downloads a pack, opens it with archive/zip, and checks its
// manifest against every file: hashes recomputed, sizes, nothing unlisted.
func getPack(t testing.TB, s *gateway.Server, tok, path string) pack {
	t.Helper()
	resp, raw := s.Do(t, "GET", path, tok, nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/zip" ||
		!strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment; filename=") {
		t.Fatalf("GET %s: %d %v %.300s", path, resp.StatusCode, resp.Header, raw)
	}
	zr, err := zip.NewReader(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatalf("GET %s: not a ZIP: %v", path, err)
	}
	p := pack{raw: raw, files: map[string][]byte{}}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		p.files[f.Name] = b
		p.order = append(p.order, f.Name)
	}
	var m struct {
		Format string `json:"format"`
		Files  []struct {
			Name   string `json:"name"`
			SHA256 string `json:"sha256"`
			Bytes  int64  `json:"bytes"`
		} `json:"files"`
		KeyID string `json:"key_id"`
	}
	if err := json.Unmarshal(p.files["manifest.json"], &m); err != nil || m.Format != "svc-evidence-pack-1" {
		t.Fatalf("manifest %s: %v", p.files["manifest.json"], err)
	}
	listed := map[string]bool{"manifest.json": true, "manifest.sig": true}
	for _, f := range m.Files {
		sum := sha256.Sum256(p.files[f.Name])
		if p.files[f.Name] == nil || hex.EncodeToString(sum[:]) != f.SHA256 || int64(len(p.files[f.Name])) != f.Bytes {
			t.Errorf("%s: manifest says %s (%d bytes), the file hashes to %x (%d bytes)", f.Name, f.SHA256, f.Bytes, sum, len(p.files[f.Name]))
		}
		listed[f.Name] = true
	}
	for name := range p.files {
		if !listed[name] {
			t.Errorf("%s is in the pack but not in its manifest", name)
		}
	}
	if p.files["manifest.sig"] == nil || m.KeyID == "" {
		t.Errorf("the pack is not signed although receipts are: key_id %q", m.KeyID)
	}
	return p
}

// write puts the pack (or a variant of it) in a file.
func (p pack) write(t testing.TB, files map[string][]byte, order []string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range order {
		b, ok := files[name]
		if !ok {
			continue
		}
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "pack.zip")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestE2EEvidencePacks(t *testing.T) {
	t.Parallel()
	gateway.ForModes(t, func(t *testing.T, backend string) {
		_, seedB64 := gateway.AzSeed(t)
		s := gateway.Start(t, backend, map[string]string{"SVC_RATE_LIMIT_CAPACITY": "100000", "SVC_RECEIPT_SIGNING_KEY": seedB64,
			"SVC_CHECKPOINT_INTERVAL_SECS": "1"})
		tenantID, admin := s.Tenant(t, "packs-"+testkit.Uniq())
		_, otherAdmin := s.Tenant(t, "packs-other-"+testkit.Uniq())
		_, viewer := s.OpToken(t, admin, "packs-viewer", "viewer")
		const planted = "planted-secret-parameter-91c2"
		stormID, stormTok := s.Agent(t, admin, "packs-storm-"+testkit.Uniq(), nil)
		_, askTok := s.Agent(t, admin, "packs-ask-"+testkit.Uniq(), map[string]any{"risk_tier": "high"})
		ask := gateway.AzDecide(t, s, askTok, gateway.ApCall(map[string]any{"secret": planted}, nil), "require_approval", "")
		s.Want(t, 200, "POST", "/v2/approvals/"+testkit.Str(t, ask, "approval_id")+"/reject", admin, map[string]any{"approver_user_id": "u-7", "reason": "no"})
		var denies []map[string]any
		for range 5 {
			denies = append(denies, gateway.AzDecide(t, s, stormTok, withRun(gateway.AzBody("github", "create_issue", true, gateway.AzUntrusted,
				map[string]any{"tool_call": map[string]any{"tool": "github", "action": "create_issue", "parameters": map[string]any{"body": planted}}}), "run-packs"), "deny", ""))
		}
		inc := gateway.WaitIncidents(t, s, admin, stormID, "deny_storm", 1)[0]
		incID := testkit.Str(t, inc, "incident_id")
		gateway.Settle(t, s)
		pk := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/receipts/public-key", admin, nil))
		// A checkpoint of every receipt (the ask and the five denies):
		// each pack carries it, the incident pack its receipts' proofs.
		vkey := strings.TrimSpace(string(s.Want(t, 200, "GET", "/v2/receipts/checkpoint/key", admin, nil)))
		origin := "svc/" + tenantID
		waitCheckpoint(t, s, admin, vkey, origin, 6)
		secrets := []string{planted, stormTok, askTok, admin, viewer, seedB64, "token_hash", "signing_key\":\""}

		noSecrets := func(t *testing.T, p pack) {
			for name, b := range p.files {
				for _, sec := range secrets {
					if strings.Contains(string(b), sec) {
						t.Errorf("%s carries a secret or a parameter value (%.12s...)", name, sec)
					}
				}
			}
		}
		verifyReceipts := func(t *testing.T, b []byte, want int) {
			path := filepath.Join(t.TempDir(), "receipts.jsonl")
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := gateway.RunCLI("verify-receipts", "-public-key", fmt.Sprint(pk["public_key"]), path)
			if code != 0 || !strings.Contains(out, fmt.Sprintf("checked: %d\n", want)) {
				t.Errorf("svc verify-receipts on the pack's receipts: exit %d\n%s%s", code, out, errOut)
			}
		}

		t.Run("incident pack", func(t *testing.T) {
			p := getPack(t, s, viewer, "/v2/incidents/"+incID+"/evidence-pack")
			want := []string{"incident.json", "alerts.json", "decisions.json", "receipts.jsonl", "checkpoint.txt", "inclusion_proofs.json",
				"audit_events.json", "approvals.json", "narrative.md", "manifest.json", "manifest.sig"}
			if !slices.Equal(p.order, want) {
				t.Errorf("files %v, want %v", p.order, want)
			}
			if in := testkit.Obj(t, p.files["incident.json"]); in["incident_id"] != incID || in["kind"] != "deny_storm" {
				t.Errorf("incident.json %v", in)
			}
			ds := testkit.Arr(t, p.files["decisions.json"])
			events := map[string]bool{}
			for _, e := range gateway.AzStrings(inc["source_event_ids"]) {
				events[e] = true
			}
			if len(ds) != 5 {
				t.Errorf("%d decisions, want the storm's 5", len(ds))
			}
			for i, d := range denies {
				if i < len(ds) && ds[i]["decision_id"] != d["decision_id"] {
					t.Errorf("decision %d: %v, want %v", i, ds[i]["decision_id"], d["decision_id"])
				}
				if !strings.Contains(string(p.files["narrative.md"]), testkit.Str(t, d, "decision_id")) {
					t.Errorf("the narrative does not name decision %v", d["decision_id"])
				}
			}
			alerts := testkit.Arr(t, p.files["alerts.json"])
			if len(alerts) == 0 {
				t.Error("no contributing alert")
			}
			for _, a := range alerts {
				if !events[fmt.Sprint(a["source_event_id"])] {
					t.Errorf("alert %v was not raised by the incident's events", a)
				}
			}
			if ev := testkit.Arr(t, p.files["audit_events.json"]); len(ev) != 5 || ev[0]["event_type"] != "authorize_decision" {
				t.Errorf("audit_events.json %v", ev)
			}
			for _, w := range []string{"deny_storm", "untrusted_mutation", "confused_deputy_block", "## Timeline"} {
				if !strings.Contains(string(p.files["narrative.md"]), w) {
					t.Errorf("narrative lacks %q:\n%s", w, p.files["narrative.md"])
				}
			}
			// The same records give the same narrative.
			if again := getPack(t, s, admin, "/v2/incidents/"+incID+"/evidence-pack"); !bytes.Equal(again.files["narrative.md"], p.files["narrative.md"]) {
				t.Error("the narrative changed between two downloads of the same records")
			}
			verifyReceipts(t, p.files["receipts.jsonl"], 5)
			noSecrets(t, p)

			good := p.write(t, p.files, p.order)
			gateway.VerifyPackCLI(t, good, true, "kind: incident")
			gateway.VerifyPackCLI(t, good, true, "files: 9", "-public-key", fmt.Sprint(pk["public_key"]))
			gateway.VerifyPackCLI(t, good, true, "checkpoint: "+origin+", 6 receipts; 5 of the pack's receipts proven in its tree")
			// A proof of another leaf, the manifest signed again as an
			// insider with the key could: the proof does not verify.
			var proofs map[string]any
			if err := json.Unmarshal(p.files["inclusion_proofs.json"], &proofs); err != nil {
				t.Fatal(err)
			}
			list := proofs["proofs"].([]any)
			if int(proofs["tree_size"].(float64)) != 6 || len(list) != 5 {
				t.Fatalf("inclusion_proofs.json %v", proofs)
			}
			list[0].(map[string]any)["hashes"], list[1].(map[string]any)["hashes"] = list[1].(map[string]any)["hashes"], list[0].(map[string]any)["hashes"]
			swapped, _ := json.Marshal(proofs)
			resigned := maps.Clone(p.files)
			resigned["inclusion_proofs.json"] = swapped
			resigned["manifest.json"] = relist(t, p.files["manifest.json"], "inclusion_proofs.json", swapped)
			resigned["manifest.sig"] = []byte(fmt.Sprintf(`{"key_id":%q,"signature":%q}`, pk["key_id"],
				gatewaySigner(t, seedB64).SignManifest(sha256.Sum256(resigned["manifest.json"]))))
			gateway.VerifyPackCLI(t, p.write(t, resigned, p.order), false, "does not verify against the checkpoint's root")
			// The download itself, byte for byte.
			orig := filepath.Join(t.TempDir(), "orig.zip")
			if err := os.WriteFile(orig, p.raw, 0o600); err != nil {
				t.Fatal(err)
			}
			gateway.VerifyPackCLI(t, orig, true, "VALID")

			changed := maps.Clone(p.files)
			changed["decisions.json"] = append(slices.Clone(changed["decisions.json"]), ' ')
			gateway.VerifyPackCLI(t, p.write(t, changed, p.order), false, "decisions.json: SHA-256")
			flipped := slices.Clone(p.raw)
			flipped[len(flipped)/3] ^= 0x01
			flipPath := filepath.Join(t.TempDir(), "flipped.zip")
			if err := os.WriteFile(flipPath, flipped, 0o600); err != nil {
				t.Fatal(err)
			}
			gateway.VerifyPackCLI(t, flipPath, false, "error:")
			removed := maps.Clone(p.files)
			delete(removed, "alerts.json")
			gateway.VerifyPackCLI(t, p.write(t, removed, p.order), false, "alerts.json: missing")
			unsigned := maps.Clone(p.files)
			delete(unsigned, "manifest.sig")
			gateway.VerifyPackCLI(t, p.write(t, unsigned, p.order), false, "manifest.sig: missing")

			// A forged signature: another key signs the manifest.
			_, forgerSeed := gateway.AzSeed(t)
			forgerRaw, _ := base64.StdEncoding.DecodeString(forgerSeed)
			forger, err := receipt.NewSigner(forgerRaw)
			if err != nil {
				t.Fatal(err)
			}
			forged := maps.Clone(p.files)
			forged["manifest.sig"] = []byte(fmt.Sprintf(`{"key_id":%q,"signature":%q}`, pk["key_id"], forger.SignManifest(sha256.Sum256(p.files["manifest.json"]))))
			gateway.VerifyPackCLI(t, p.write(t, forged, p.order), false, "manifest.sig: the signature does not match")
			// A forger who also names their own key in the manifest: the
			// pack checks out against itself, not against the gateway's key.
			var m map[string]any
			if err := json.Unmarshal(p.files["manifest.json"], &m); err != nil {
				t.Fatal(err)
			}
			m["key_id"], m["public_key"] = forger.KeyID(), base64.StdEncoding.EncodeToString(forger.PublicKey())
			rewritten, _ := json.Marshal(m)
			forged["manifest.json"] = rewritten
			forged["manifest.sig"] = []byte(fmt.Sprintf(`{"key_id":%q,"signature":%q}`, forger.KeyID(), forger.SignManifest(sha256.Sum256(rewritten))))
			gateway.VerifyPackCLI(t, p.write(t, forged, p.order), false, "not with the public key given", "-public-key", fmt.Sprint(pk["public_key"]))
		})

		t.Run("compliance pack", func(t *testing.T) {
			p := getPack(t, s, viewer, "/v2/compliance/evidence-pack")
			want := []string{"tenant.json", "policies.json", "skills.json", "agents.json", "decision_stats.json", "receipts.jsonl",
				"receipts_verification.json", "checkpoint.txt", "audit_events.jsonl", "approvals.json", "incidents.json", "manifest.json", "manifest.sig"}
			if !slices.Equal(p.order, want) {
				t.Errorf("files %v, want %v", p.order, want)
			}
			n := len(gateway.AzDecisions(t, s, admin))
			if st := testkit.Obj(t, p.files["decision_stats.json"]); st["total"] != float64(n) || st["by_decision"].(map[string]any)["deny"] != 5.0 {
				t.Errorf("decision_stats.json %v, want %d decisions, 5 denies", st, n)
			}
			if v := testkit.Obj(t, p.files["receipts_verification.json"]); v["valid"] != true || v["checked"] != float64(n) {
				t.Errorf("receipts_verification.json %v", v)
			}
			verifyReceipts(t, p.files["receipts.jsonl"], n)
			if ag := testkit.Arr(t, p.files["agents.json"]); len(ag) != 2 {
				t.Errorf("agents.json %v", ag)
			}
			if ap := testkit.Arr(t, p.files["approvals.json"]); len(ap) != 1 || ap[0]["status"] != "REJECTED" || ap[0]["tool"] != "crm" {
				t.Errorf("approvals.json %v", ap)
			}
			if in := testkit.Arr(t, p.files["incidents.json"]); len(in) == 0 {
				t.Errorf("incidents.json %v", in)
			}
			if lines := strings.Count(string(p.files["audit_events.jsonl"]), "\n"); lines < n {
				t.Errorf("%d audit events, want at least the %d decisions' events", lines, n)
			}
			if pol := testkit.Obj(t, p.files["policies.json"]); len(pol["base"].(map[string]any)) == 0 {
				t.Errorf("policies.json without the base set: %v", pol)
			}
			noSecrets(t, p)
			gateway.VerifyPackCLI(t, p.write(t, p.files, p.order), true, "kind: compliance", "-public-key", fmt.Sprint(pk["public_key"]))
			gateway.VerifyPackCLI(t, p.write(t, p.files, p.order), true, "checkpoint: "+origin+", ")
			// A range that holds nothing: empty lists, the whole chain still.
			old := getPack(t, s, admin, "/v2/compliance/evidence-pack?from=2020-01-01T00:00:00Z&to=2020-02-01T00:00:00Z")
			if st := testkit.Obj(t, old.files["decision_stats.json"]); st["total"] != 0.0 || len(old.files["audit_events.jsonl"]) != 0 {
				t.Errorf("an empty range: %v, %d bytes of audit events", st, len(old.files["audit_events.jsonl"]))
			}
			for _, q := range []string{"from=yesterday", "to=2026-13-01T00:00:00Z", "from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z"} {
				gateway.Envelope(t, s.Want(t, 400, "GET", "/v2/compliance/evidence-pack?"+q, admin, nil), 400, "v2", "BadRequest")
			}
		})

		t.Run("other tenants, unknown ids, roles", func(t *testing.T) {
			gateway.Envelope(t, s.Want(t, 404, "GET", "/v2/incidents/"+incID+"/evidence-pack", otherAdmin, nil), 404, "v2", "NotFound")
			gateway.Envelope(t, s.Want(t, 404, "GET", "/v2/incidents/"+testkit.RandomUUID()+"/evidence-pack", admin, nil), 404, "v2", "NotFound")
			s.Want(t, 403, "GET", "/v2/compliance/evidence-pack", stormTok, nil)
			s.Want(t, 401, "GET", "/v2/compliance/evidence-pack", "", nil)
			other := getPack(t, s, otherAdmin, "/v2/compliance/evidence-pack")
			if st := testkit.Obj(t, other.files["decision_stats.json"]); st["total"] != 0.0 {
				t.Errorf("another tenant's pack counts %v", st)
			}
		})
	})
}

// gatewaySigner is the receipt key of a gateway started with seed.
func gatewaySigner(t *testing.T, seed string) *receipt.Signer {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(seed)
	if err != nil {
		t.Fatal(err)
	}
	s, err := receipt.NewSigner(raw)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// relist returns the manifest with name's hash and size those of content.
func relist(t *testing.T, manifest []byte, name string, content []byte) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(manifest, &m); err != nil {
		t.Fatal(err)
	}
	for _, f := range m["files"].([]any) {
		if f := f.(map[string]any); f["name"] == name {
			sum := sha256.Sum256(content)
			f["sha256"], f["bytes"] = hex.EncodeToString(sum[:]), len(content)
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// openStoreOf opens the server's database as the gateway does, for a test
// that writes what the API cannot (decisions of yesterday).
func openStoreOf(t testing.TB, s *gateway.Server) persistence.Store {
	t.Helper()
	ctx := context.Background()
	var st persistence.Store
	var err error
	if path, ok := strings.CutPrefix(s.DBURL, "sqlite://"); ok {
		st, err = sqlite.Open(ctx, sqlite.Options{Path: path})
	} else {
		st, err = postgres.Open(ctx, postgres.Options{URL: s.DBURL, PoolSize: 2})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}
