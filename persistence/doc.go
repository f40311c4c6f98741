// Package persistence is the storage contract of svc: the records the gateway
// keeps, the interfaces that read and write them, and the errors they return.
//
// # Implementations
//
// Two implementations satisfy [Store]: persistence/sqlite (modernc.org/sqlite,
// the embedded single-node default) and persistence/postgres (pgx/v5, for
// several nodes). Both share their SQL through persistence/sqlstore and pass
// the one contract suite in persistence/storetest. Shared, rebuildable state
// between nodes (counters, nonces, invalidations) lives behind
// persistence/sharedstate, in process or in Valkey.
//
// # Tenancy
//
// Every method that reads or writes a tenant's rows takes the tenant id and
// scopes its query by it; there is no way to read another tenant's row by id.
// The only lookups without a tenant are by token hash, which is how the tenant
// is learned in the first place.
//
// # Indexes
//
// Each index the migrations leave, with what it serves (both backends hold
// the same ones; a decision's are listed with its one-record layout in
// SQLite migration 0012 and Postgres 0014):
//
//   - tenants: id and name UNIQUE (lookup by id; a name is taken once).
//   - operator_tokens: token_hash UNIQUE (authentication), id UNIQUE
//     (delete by id), (tenant_id, seq) (the list).
//   - agents: token_hash UNIQUE (authentication), id UNIQUE (every read by
//     id), agents_live_name (a live name is taken once per tenant),
//     (tenant_id, seq) (the list).
//   - agent_permissions: (agent_id, tool_key) PRIMARY KEY (an agent's
//     bindings, in tool order), (tenant_id, agent_id) (a tenant's deletion
//     cascades through it).
//   - decisions, one record per decision with its receipt and audit event
//     (SQLite migration 0012, Postgres 0014): seq (the row itself; search
//     and the merged audit list join by it), id UNIQUE (GET
//     /v1/decisions/:id, approvals' decision), decisions_tenant (tenant_id,
//     seq) (GET /v1/decisions and the decision side of the audit list,
//     newest first, by cursor), decisions_request (tenant_id, agent_id,
//     request_id), partial (idempotent replays, and it refuses a second
//     decision for one request), decisions_nonce_recent (created_at),
//     partial (the replay nonces a starting node rebuilds),
//     decisions_receipt_seq (tenant_id, receipt_seq) UNIQUE (receipt ranges:
//     export, verification, GET /v1/receipts; and the guard that two
//     receipts never take one place in a chain), decisions_receipt
//     (receipt_id) UNIQUE (GET /v1/receipts/:id; unique, as receipt ids are,
//     so that SQLite plans a lookup by id through it and not through the
//     tenant's chain index), the full-text index (`q` on decisions and
//     on the audit list), and, since SQLite 0013 and Postgres 0015, the
//     decisions by agent (tenant_id, agent_id, created_at, with the
//     composite score) and by run (tenant_id, run_id, seq): an agent's
//     most recent decisions for its evidence graph, an incident's
//     decisions among its agent's, the risk scoreboard's windows, a run's
//     evidence graph. On Postgres these are the indexes decisions_agent
//     and decisions_run (partial); on SQLite the side tables
//     decision_agents and decision_runs, kept in bulk by the group writer
//     as the full-text index is (an index ordered by agent costs a page
//     per agent per commit: 15% of the throughput).
//   - audit_events: (tenant_id, seq) (the list), (tenant_id, event_type,
//     seq) (the list by type), its full-text index (`q`).
//   - approvals: id UNIQUE (approve, reject, edit, present), (tenant_id,
//     seq) and (tenant_id, agent_id, seq) (the lists), (tenant_id,
//     decision_id) (a decision's approval), (expires_at) (left from the
//     cleanup's first form; today's cleanup, which also deletes decided
//     approvals, does not use it; approvals are written only for
//     require_approval decisions).
//   - alerts and incidents: (tenant_id, seq) (the lists); incidents.id
//     UNIQUE (close, get); alerts_source_event (tenant_id,
//     source_event_id) (an incident evidence pack's contributing alerts).
//   - webhook_subscriptions: id UNIQUE, (tenant_id, seq) (the list).
//   - receipt_heads, tenant_policies, skills, soc_rules, leader_lease,
//     search_progress, writer_probe: their primary keys, the only reads.
//
// # Errors
//
// Methods return the sentinel errors of this package (wrapped), so callers
// test them with errors.Is: [ErrNotFound], [ErrConflict], [ErrStateConflict],
// [ErrBusy] and [ErrUnavailable].
package persistence
