-- Tenants, operator tokens, agents, permissions, audit events, leader lease.
-- Timestamps are TEXT in the sortable UTC form 'YYYY-MM-DD HH:MM:SS.ffffff'.
CREATE TABLE tenants (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT NOT NULL UNIQUE,
    name       TEXT NOT NULL UNIQUE,
    auto_rotate_token_on_leak INTEGER NOT NULL DEFAULT 1,
    created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
);

CREATE TABLE operator_tokens (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT NOT NULL UNIQUE,
    tenant_id  TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    role       TEXT NOT NULL CHECK (role IN ('admin', 'approver', 'viewer')),
    token_hash TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE INDEX operator_tokens_tenant ON operator_tokens (tenant_id, seq);

CREATE TABLE agents (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT NOT NULL UNIQUE,
    tenant_id  TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    status     TEXT NOT NULL DEFAULT 'active',
    risk_tier  TEXT NOT NULL DEFAULT 'low',
    allowed_environments TEXT,
    signing_key BLOB,
    token_hash TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
    last_seen_at TEXT
);
CREATE UNIQUE INDEX agents_live_name ON agents (tenant_id, name) WHERE status <> 'deleted';
CREATE INDEX agents_tenant ON agents (tenant_id, seq);

CREATE TABLE agent_permissions (
    tenant_id  TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    agent_id   TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    tool_key   TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (agent_id, tool_key)
);
CREATE INDEX agent_permissions_tenant ON agent_permissions (tenant_id, agent_id);

CREATE TABLE audit_events (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    id          TEXT NOT NULL UNIQUE,
    tenant_id   TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    event_type  TEXT NOT NULL,
    action      TEXT NOT NULL DEFAULT '',
    actor       TEXT NOT NULL DEFAULT '',
    agent_id    TEXT NOT NULL DEFAULT '',
    decision_id TEXT NOT NULL DEFAULT '',
    details     TEXT NOT NULL DEFAULT '{}',
    created_at  TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE INDEX audit_events_tenant ON audit_events (tenant_id, seq);
CREATE INDEX audit_events_type ON audit_events (tenant_id, event_type, seq);

-- Keyword search (SPEC 4.1 `q`): an external-content FTS5 index kept in step
-- by triggers. unicode61 splits at underscores and punctuation.
CREATE VIRTUAL TABLE audit_events_fts USING fts5 (
    event_type, action, actor, agent_id, details,
    content = 'audit_events', content_rowid = 'seq', tokenize = 'unicode61'
);
CREATE TRIGGER audit_events_fts_insert AFTER INSERT ON audit_events BEGIN
    INSERT INTO audit_events_fts (rowid, event_type, action, actor, agent_id, details)
    VALUES (new.seq, new.event_type, new.action, new.actor, new.agent_id, new.details);
END;
CREATE TRIGGER audit_events_fts_delete AFTER DELETE ON audit_events BEGIN
    INSERT INTO audit_events_fts (audit_events_fts, rowid, event_type, action, actor, agent_id, details)
    VALUES ('delete', old.seq, old.event_type, old.action, old.actor, old.agent_id, old.details);
END;

CREATE TABLE leader_lease (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
