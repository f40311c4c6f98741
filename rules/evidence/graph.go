package evidence

import (
	"cmp"
	"slices"
	"time"

	"svc/persistence"
)

// Node types (SPEC 2.1 NodeType, a closed set).
const (
	NodeAgent     = "agent"
	NodeRun       = "run"
	NodeToolCall  = "tool_call"
	NodeDecision  = "decision"
	NodeApproval  = "approval"
	NodeReceipt   = "receipt"
	NodeIncident  = "incident"
	NodeMCPServer = "mcp_server"
	NodePolicy    = "policy"
)

// Edge types (SPEC 2.1 EdgeType, a closed set).
const (
	EdgeTriggeredBy = "triggered_by"
	EdgeExecuted    = "executed"
	EdgeDecided     = "decided"
	EdgeApproved    = "approved"
	EdgeProduced    = "produced"
	EdgeLinkedTo    = "linked_to"
)

// Graph is an EvidenceGraph (SPEC 2.1).
type Graph struct {
	Nodes []Node `json:"nodes"`
	Edges []Edge `json:"edges"`
}

// Node is a GraphNode. Metadata is set on decision nodes only.
type Node struct {
	ID        string        `json:"id"`
	Group     string        `json:"group" openapi:"enum=agent|run|tool_call|decision|approval|receipt|incident|mcp_server|policy"`
	Label     string        `json:"label"`
	Timestamp string        `json:"timestamp" openapi:"format=date-time"`
	Metadata  *DecisionMeta `json:"metadata"`
}

// DecisionMeta is a decision node's metadata.
type DecisionMeta struct {
	RiskScore int    `json:"risk_score"`
	Reason    string `json:"reason"`
}

// Edge is a GraphEdge.
type Edge struct {
	From      string `json:"from"`
	To        string `json:"to"`
	Label     string `json:"label" openapi:"enum=triggered_by|executed|decided|approved|produced|linked_to"`
	Timestamp string `json:"timestamp" openapi:"format=date-time"`
}

// Depths of SPEC 4.4: what a graph of each depth holds beyond the last.
const (
	// DepthCalls: tool_call and decision nodes with their run and agent.
	DepthCalls = 1
	// DepthRecords: approval and receipt nodes.
	DepthRecords = 2
	// DepthPolicies: one policy node per matched policy.
	DepthPolicies = 3
)

// ClampDepth is GET /graph/agent's depth: 1..5, and 4 and 5 act as 3.
func ClampDepth(d int) int { return min(max(d, DepthCalls), DepthPolicies) }

// Records are what a graph is built from; the caller reads them.
type Records struct {
	// Agents by id: the agents of the decisions (a decision whose agent is
	// missing is linked to a node labelled with the agent id).
	Agents map[string]persistence.Agent
	// Decisions, in any order.
	Decisions []persistence.Decision
	// Approvals by id (a decision's ApprovalID).
	Approvals map[string]persistence.Approval
	// Incident, for the incident graph.
	Incident *persistence.Incident
	// Subject, for an agent's graph: the agent, drawn even without
	// decisions.
	Subject *persistence.Agent
	// Now decides an approval's effective status (EXPIRED).
	Now time.Time
}

// Build returns the graph of depth over the records. policies false leaves
// policy nodes out whatever the depth (the incident graph).
func Build(r Records, depth int, policies bool) Graph {
	b := &builder{g: Graph{Nodes: []Node{}, Edges: []Edge{}}, nodes: map[string]int{}, edges: map[[3]string]bool{}}
	ds := slices.Clone(r.Decisions)
	slices.SortStableFunc(ds, func(a, c persistence.Decision) int {
		if n := a.CreatedAt.Compare(c.CreatedAt); n != 0 {
			return n
		}
		return cmp.Compare(a.Seq, c.Seq)
	})
	if a := r.Subject; a != nil {
		b.agent(map[string]persistence.Agent{a.ID: *a}, a.ID, a.CreatedAt)
	}
	if in := r.Incident; in != nil {
		b.node(Node{ID: id(NodeIncident, in.ID), Group: NodeIncident, Label: in.Summary, Timestamp: stamp(in.OpenedAt)})
		if in.AgentID != "" {
			b.agent(r.Agents, in.AgentID, in.OpenedAt)
			b.edge(id(NodeIncident, in.ID), id(NodeAgent, in.AgentID), EdgeLinkedTo, stamp(in.OpenedAt))
		}
	}
	for _, d := range ds {
		b.decision(r, d, depth, policies)
	}
	return b.g
}

type builder struct {
	g     Graph
	nodes map[string]int // id -> index in g.Nodes
	edges map[[3]string]bool
}

// node adds n unless a node with its id is there.
func (b *builder) node(n Node) {
	if _, ok := b.nodes[n.ID]; ok {
		return
	}
	b.nodes[n.ID] = len(b.g.Nodes)
	b.g.Nodes = append(b.g.Nodes, n)
}

// edge adds an edge between two nodes of the graph, once.
func (b *builder) edge(from, to, label, at string) {
	k := [3]string{from, to, label}
	_, okFrom := b.nodes[from]
	_, okTo := b.nodes[to]
	if b.edges[k] || !okFrom || !okTo {
		return
	}
	b.edges[k] = true
	b.g.Edges = append(b.g.Edges, Edge{From: from, To: to, Label: label, Timestamp: at})
}

// agent adds the agent's node; an agent without a stored record (none
// today: deleted agents keep theirs) is labelled with its id and placed at
// its first appearance.
func (b *builder) agent(agents map[string]persistence.Agent, agentID string, seen time.Time) string {
	nid := id(NodeAgent, agentID)
	if a, ok := agents[agentID]; ok {
		b.node(Node{ID: nid, Group: NodeAgent, Label: a.Name, Timestamp: stamp(a.CreatedAt)})
	} else {
		b.node(Node{ID: nid, Group: NodeAgent, Label: agentID, Timestamp: stamp(seen)})
	}
	return nid
}

func (b *builder) decision(r Records, d persistence.Decision, depth int, policies bool) {
	at := stamp(d.CreatedAt)
	agent := b.agent(r.Agents, d.AgentID, d.CreatedAt)
	call, dec := id(NodeToolCall, d.ID), id(NodeDecision, d.ID)
	b.node(Node{ID: call, Group: NodeToolCall, Label: d.Tool + "." + d.Action, Timestamp: at})
	b.node(Node{ID: dec, Group: NodeDecision, Label: d.Decision, Timestamp: at,
		Metadata: &DecisionMeta{RiskScore: d.RiskScore, Reason: d.Reason}})
	if d.RunID != nil && *d.RunID != "" {
		run := id(NodeRun, *d.RunID)
		b.node(Node{ID: run, Group: NodeRun, Label: *d.RunID, Timestamp: at}) // the first (earliest) decision places it
		b.edge(agent, run, EdgeTriggeredBy, b.g.Nodes[b.nodes[run]].Timestamp)
		b.edge(run, call, EdgeExecuted, at)
	} else {
		b.edge(agent, call, EdgeTriggeredBy, at)
	}
	b.edge(call, dec, EdgeDecided, at)
	if in := r.Incident; in != nil {
		b.edge(id(NodeIncident, in.ID), dec, EdgeLinkedTo, stamp(in.OpenedAt))
	}
	if depth >= DepthRecords {
		if a, ok := r.Approvals[d.ApprovalID]; ok && d.Decision == "require_approval" && d.ApprovalID != "" {
			ap := id(NodeApproval, a.ID)
			b.node(Node{ID: ap, Group: NodeApproval, Label: a.EffectiveStatus(r.Now), Timestamp: stamp(a.CreatedAt)})
			b.edge(dec, ap, EdgeApproved, stamp(a.CreatedAt))
		}
		if d.ReceiptID != "" {
			rc := id(NodeReceipt, d.ReceiptID)
			b.node(Node{ID: rc, Group: NodeReceipt, Label: d.ReceiptHash, Timestamp: at})
			b.edge(dec, rc, EdgeProduced, at)
		}
	}
	if depth >= DepthPolicies && policies {
		for _, p := range d.MatchedPolicyIDs {
			pn := id(NodePolicy, p)
			b.node(Node{ID: pn, Group: NodePolicy, Label: p, Timestamp: at})
			b.edge(dec, pn, EdgeLinkedTo, at)
		}
	}
}

func id(kind, underlying string) string { return kind + ":" + underlying }

// stamp is RFC 3339 UTC with the stored precision.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
