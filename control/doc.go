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
// Every store write the API makes takes this road: tenants and their
// settings and operator tokens; agents, their tokens, signing keys, tool
// bindings and lifecycle; tenant policies and the base policy reload;
// skills; risk settings; webhook subscriptions (with target admission);
// SOC rules and incident closing; MCP servers (registration, changes,
// quarantine, pins, tool approval, discovery) and the response
// inspection's alerts; the code host's delivery claims. http/ sees the
// store only through a read-only interface (httpapi.Reads), so a handler
// that writes does not compile. An operator's MCP discovery is run by
// mcpregistry.Registry inside the plane's audited write
// ([Plane.DiscoverMCPServer]); the discoveries no operator asks for (the
// leader's re-discovery, the MCP proxy's after a server's tools changed)
// stay with the registry, audited as system actors. Approvals are decided
// by their actors.
//
// actors/, rules/ and persistence/ never import control (a depguard rule).
package control
