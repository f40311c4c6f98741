// Package runstate is the run context a tenant's policy sees (CONTRACT §16):
// per run and per agent, bounded aggregates of the calls that reached
// policy evaluation before this one, and the documents `input.run` and
// `input.agent_history` built from them.
//
// # Why a package of its own
//
// Both shared-state backends keep the same state: the in-process table of
// a lone node applies [Run.Apply] under a lock, and Valkey applies the same
// fold in one Lua script (persistence/sharedstate). The agent actor
// classifies a call into an [Attempt]; the policy engine turns a [Doc] into
// its input; receipts commit to the canonical bytes of the same [Doc]. The
// package does no I/O, holds no state of its own and decides nothing.
//
// # Attempts, then settlements
//
// The state describes attempts: calls that reached policy evaluation,
// counted whatever the policy then decided, so the counts are exact on
// several nodes (one atomic step per call) and the same under any candidate
// policy. A retried request_id counts once (the attempt id, remembered for
// the run's last [Dedup] attempts). What depends on the decision (the
// decision counts, a tool's allowed count, the last allowed call, a recent
// entry's decision, consecutive denies) is settled after the decision is
// committed: exact on a lone node, and on several nodes a few milliseconds
// behind.
//
// # Trust only falls
//
// A run's level is the least trusted level any of its calls brought in:
// the call's effective trust (source_trust tightened by
// trace.root_trust_level), the skill's output_trust, the MCP server's
// trust_level, and the parent run's level when the run was created. It
// never rises: nothing in the fold raises it, and state restored after a
// loss only tightens ([Run.Tighten]).
//
// # Bounds
//
// A run keeps at most [MaxTools] (tool, action) pairs, [MaxLabels] labels
// and [MaxSums] sums (beyond them the run is marked truncated and the extra
// ones are not counted), [MaxAgents] agent ids, the [Recent] latest calls
// and [Dedup] attempt ids. Windows are fixed buckets ([Width60] ms ×
// [Slots60], [Width1h] ms × [Slots1h]). A run's state lives until it has
// been idle for the idle TTL or reaches its maximum age ([Limits]).
package runstate
