// Package evidence builds the evidence graph (SPEC 2.1, 4.4) from stored
// records: pure functions, no storage and no HTTP. The caller (http/graph.go)
// reads the records; this package decides the nodes, edges, labels and
// timestamps.
//
// # Shape
//
// The graph's field names are those vis-network takes as data sets (nodes:
// id, group, label; edges: from, to, label), so its nodes and edges go into
// the library unchanged. Two rules hold for every graph the Builder
// returns, whatever the records: no two nodes share an id, and every edge
// joins two nodes of the graph (vis-network draws a dangling edge to
// nowhere and a duplicate id throws).
//
// # Edge directions (CONTRACT §13)
//
// From the earlier or owning node to the later one: agent → run and agent →
// standalone tool_call (triggered_by), run → tool_call (executed),
// tool_call → decision (decided), decision → approval (approved), decision
// → receipt (produced), decision → policy and incident → agent or decision
// (linked_to).
//
// # Timestamps: the clock behind each node
//
// Every timestamp is RFC 3339 UTC, taken from a stored record, never from
// the time of the query:
//
//   - agent: the agent's registration (agents.created_at).
//   - run: its earliest decision in the graph (the first call the gateway
//     saw of the run).
//   - tool_call and decision: the decision's created_at, the gateway's clock
//     when it decided (both are the same moment: the call is known to the
//     gateway only as the request it decided).
//   - approval: its creation (with the require_approval decision).
//   - receipt: its created_at, which is the decision's by construction.
//   - policy: the earliest decision in the graph that matched it (when it
//     was seen to fire, not when it was written: the base policies have no
//     stored time).
//   - incident: when it opened (incidents.opened_at).
//
// An edge carries the timestamp of the node it points to, except
// triggered_by to a run (the run's) and linked_to from an incident (when it
// opened).
package evidence
