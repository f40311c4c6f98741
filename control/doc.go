// Package control is the control plane: the one road every change an
// operator makes takes, between http/ (which turns requests into calls and
// outcomes into HTTP) and actors/, persistence/ and rules/.
//
// Every change is one audited write ([Plane.change]) with three
// obligations that no caller repeats:
//
//   - the audit event rides in the write's own transaction (the store's
//     variadic audit argument), so a change is never stored unaudited;
//   - the audit writer's health (the registry entry [ComponentAuditWriter],
//     which /readyz reports) is marked degraded when the write fails for
//     storage reasons and ok when it succeeds;
//   - after the commit, and only then, the caches that hold what changed
//     are dropped on every node.
//
// Domain checks beyond the shape of a request (a transition from a status
// that does not allow it, what may be changed in which state) are decided
// here and returned as a [*Refusal], which http/ maps to its status codes.
//
// Migration in progress (issue 39): agent lifecycle transitions, agent
// deletion and token rotation, and MCP server quarantine, restore, pin and
// deletion take this road; the other operator writes still do their own
// bookkeeping in http/ through [Plane.Settle] until they move here.
//
// actors/, rules/ and persistence/ never import control (a depguard rule).
package control
