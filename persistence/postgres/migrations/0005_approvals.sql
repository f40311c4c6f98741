-- Approvals (SPEC 3, CONTRACT §5). status holds PENDING, APPROVED or
-- REJECTED; EXPIRED is derived from expires_at on read. Every transition is
-- a conditional UPDATE on this table, the arbiter of single use across
-- nodes.
CREATE TABLE approvals (
    seq                  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id                   TEXT NOT NULL UNIQUE,
    tenant_id            TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    decision_id          TEXT NOT NULL,
    agent_id             TEXT NOT NULL,
    tool_call            TEXT NOT NULL,
    action_hash          TEXT NOT NULL,
    status               TEXT NOT NULL DEFAULT 'PENDING',
    reason               TEXT,
    approver_user_id     TEXT,
    created_at           TIMESTAMPTZ NOT NULL,
    decided_at           TIMESTAMPTZ,
    expires_at           TIMESTAMPTZ NOT NULL,
    consumed_at          TIMESTAMPTZ,
    consumed_decision_id TEXT
);
CREATE INDEX approvals_tenant ON approvals (tenant_id, seq);
CREATE INDEX approvals_agent ON approvals (tenant_id, agent_id, seq);
CREATE INDEX approvals_expiry ON approvals (expires_at);
