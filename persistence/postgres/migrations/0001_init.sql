-- Tenants, operator tokens, agents, permissions, audit events, leader lease.
-- Timestamps are TIMESTAMPTZ.
CREATE TABLE tenants (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         TEXT NOT NULL UNIQUE,
    name       TEXT NOT NULL UNIQUE,
    auto_rotate_token_on_leak BOOLEAN NOT NULL DEFAULT TRUE,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE operator_tokens (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         TEXT NOT NULL UNIQUE,
    tenant_id  TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    role       TEXT NOT NULL CHECK (role IN ('admin', 'approver', 'viewer')),
    token_hash TEXT NOT NULL UNIQUE,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX operator_tokens_tenant ON operator_tokens (tenant_id, seq);

CREATE TABLE agents (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         TEXT NOT NULL UNIQUE,
    tenant_id  TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    status     TEXT NOT NULL DEFAULT 'active',
    risk_tier  TEXT NOT NULL DEFAULT 'low',
    allowed_environments TEXT,
    signing_key BYTEA,
    token_hash TEXT NOT NULL UNIQUE,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_seen_at TIMESTAMPTZ
);
CREATE UNIQUE INDEX agents_live_name ON agents (tenant_id, name) WHERE status <> 'deleted';
CREATE INDEX agents_tenant ON agents (tenant_id, seq);

CREATE TABLE agent_permissions (
    tenant_id  TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    agent_id   TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    tool_key   TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_id, tool_key)
);
CREATE INDEX agent_permissions_tenant ON agent_permissions (tenant_id, agent_id);

CREATE TABLE audit_events (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
    tenant_id   TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    event_type  TEXT NOT NULL,
    action      TEXT NOT NULL DEFAULT '',
    actor       TEXT NOT NULL DEFAULT '',
    agent_id    TEXT NOT NULL DEFAULT '',
    decision_id TEXT NOT NULL DEFAULT '',
    details     TEXT NOT NULL DEFAULT '{}',
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX audit_events_tenant ON audit_events (tenant_id, seq);
CREATE INDEX audit_events_type ON audit_events (tenant_id, event_type, seq);

-- Keyword search (SPEC 4.1 `q`): a generated tsvector over the searchable
-- columns with the simple configuration (no stemming); the default parser
-- splits at underscores and punctuation, like SQLite's unicode61.
ALTER TABLE audit_events ADD COLUMN search tsvector GENERATED ALWAYS AS (
    to_tsvector('simple', event_type || ' ' || action || ' ' || actor || ' ' || agent_id || ' ' || details)
) STORED;
CREATE INDEX audit_events_search ON audit_events USING GIN (search);

CREATE TABLE leader_lease (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
