-- Decisions, receipts and their per-tenant chain head; tenant policies,
-- the skill registry, and the tenant's risk settings.
CREATE TABLE decisions (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE,
    tenant_id       TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    agent_id        TEXT NOT NULL,
    request_id      TEXT,
    tool            TEXT NOT NULL,
    action          TEXT NOT NULL,
    resource        TEXT,
    action_hash     TEXT NOT NULL,
    decision        TEXT NOT NULL,
    reason          TEXT NOT NULL,
    risk_score      INTEGER NOT NULL,
    composite_risk_score INTEGER NOT NULL,
    matched_policy_ids TEXT NOT NULL DEFAULT '[]',
    redacted_fields TEXT NOT NULL DEFAULT '[]',
    mutates_state   INTEGER NOT NULL,
    trust_level     TEXT NOT NULL,
    root_trust_level TEXT NOT NULL,
    environment     TEXT,
    run_id          TEXT,
    parent_run_id   TEXT,
    trace_id        TEXT,
    tool_call       TEXT NOT NULL DEFAULT '{}',
    created_at      TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE INDEX decisions_tenant ON decisions (tenant_id, seq);
CREATE INDEX decisions_agent ON decisions (tenant_id, agent_id, seq);
CREATE INDEX decisions_run ON decisions (tenant_id, run_id);
CREATE UNIQUE INDEX decisions_request ON decisions (tenant_id, agent_id, request_id) WHERE request_id IS NOT NULL;

CREATE VIRTUAL TABLE decisions_fts USING fts5 (
    tool, action, resource, decision, reason, matched_policy_ids, agent_id, run_id,
    content = 'decisions', content_rowid = 'seq', tokenize = 'unicode61'
);
CREATE TRIGGER decisions_fts_insert AFTER INSERT ON decisions BEGIN
    INSERT INTO decisions_fts (rowid, tool, action, resource, decision, reason, matched_policy_ids, agent_id, run_id)
    VALUES (new.seq, new.tool, new.action, new.resource, new.decision, new.reason, new.matched_policy_ids, new.agent_id, new.run_id);
END;
CREATE TRIGGER decisions_fts_delete AFTER DELETE ON decisions BEGIN
    INSERT INTO decisions_fts (decisions_fts, rowid, tool, action, resource, decision, reason, matched_policy_ids, agent_id, run_id)
    VALUES ('delete', old.seq, old.tool, old.action, old.resource, old.decision, old.reason, old.matched_policy_ids, old.agent_id, old.run_id);
END;

CREATE TABLE receipts (
    id                TEXT PRIMARY KEY,
    tenant_id         TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    seq               INTEGER NOT NULL,
    decision_id       TEXT NOT NULL,
    action_hash       TEXT NOT NULL,
    decision          TEXT NOT NULL,
    receipt_hash      TEXT NOT NULL,
    prev_receipt_hash TEXT NOT NULL,
    signature         TEXT,
    key_id            TEXT NOT NULL DEFAULT '',
    created_at        TEXT NOT NULL,
    UNIQUE (tenant_id, seq)
);
CREATE INDEX receipts_decision ON receipts (tenant_id, decision_id);

-- The arbiter of each tenant's chain: advanced inside the writing
-- transaction, so the chain never forks.
CREATE TABLE receipt_heads (
    tenant_id TEXT PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
    seq       INTEGER NOT NULL,
    hash      TEXT NOT NULL
);

CREATE TABLE tenant_policies (
    tenant_id   TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    rego        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    enabled     INTEGER NOT NULL DEFAULT 1,
    version     INTEGER NOT NULL DEFAULT 1,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (tenant_id, name)
);

CREATE TABLE skills (
    tenant_id   TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    skill_key   TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    actions     TEXT NOT NULL DEFAULT '{}',
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (tenant_id, skill_key)
);

ALTER TABLE tenants ADD COLUMN risk_weights TEXT;
ALTER TABLE tenants ADD COLUMN denial_threshold INTEGER NOT NULL DEFAULT 5;
ALTER TABLE tenants ADD COLUMN window_minutes INTEGER NOT NULL DEFAULT 60;
ALTER TABLE tenants ADD COLUMN policy_version INTEGER NOT NULL DEFAULT 0;
