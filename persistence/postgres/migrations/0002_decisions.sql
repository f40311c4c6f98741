-- Decisions, receipts and their per-tenant chain head; tenant policies,
-- the skill registry, and the tenant's risk settings.
CREATE TABLE decisions (
    seq             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
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
    mutates_state   BOOLEAN NOT NULL,
    trust_level     TEXT NOT NULL,
    root_trust_level TEXT NOT NULL,
    environment     TEXT,
    run_id          TEXT,
    parent_run_id   TEXT,
    trace_id        TEXT,
    tool_call       TEXT NOT NULL DEFAULT '{}',
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX decisions_tenant ON decisions (tenant_id, seq);
CREATE INDEX decisions_agent ON decisions (tenant_id, agent_id, seq);
CREATE INDEX decisions_run ON decisions (tenant_id, run_id);
CREATE UNIQUE INDEX decisions_request ON decisions (tenant_id, agent_id, request_id) WHERE request_id IS NOT NULL;

ALTER TABLE decisions ADD COLUMN search tsvector GENERATED ALWAYS AS (
    to_tsvector('simple', tool || ' ' || action || ' ' || coalesce(resource, '') || ' ' || decision || ' ' ||
        reason || ' ' || matched_policy_ids || ' ' || agent_id || ' ' || coalesce(run_id, ''))
) STORED;
CREATE INDEX decisions_search ON decisions USING GIN (search);

CREATE TABLE receipts (
    id                TEXT PRIMARY KEY,
    tenant_id         TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    seq               BIGINT NOT NULL,
    decision_id       TEXT NOT NULL,
    action_hash       TEXT NOT NULL,
    decision          TEXT NOT NULL,
    receipt_hash      TEXT NOT NULL,
    prev_receipt_hash TEXT NOT NULL,
    signature         TEXT,
    key_id            TEXT NOT NULL DEFAULT '',
    created_at        TIMESTAMPTZ NOT NULL,
    UNIQUE (tenant_id, seq)
);
CREATE INDEX receipts_decision ON receipts (tenant_id, decision_id);

-- The arbiter of each tenant's chain: advanced inside the writing
-- transaction, so the chain never forks.
CREATE TABLE receipt_heads (
    tenant_id TEXT PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
    seq       BIGINT NOT NULL,
    hash      TEXT NOT NULL
);

CREATE TABLE tenant_policies (
    tenant_id   TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    rego        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    enabled     BOOLEAN NOT NULL DEFAULT TRUE,
    version     INTEGER NOT NULL DEFAULT 1,
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, name)
);

CREATE TABLE skills (
    tenant_id   TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    skill_key   TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    actions     TEXT NOT NULL DEFAULT '{}',
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, skill_key)
);

ALTER TABLE tenants ADD COLUMN risk_weights TEXT;
ALTER TABLE tenants ADD COLUMN denial_threshold INTEGER NOT NULL DEFAULT 5;
ALTER TABLE tenants ADD COLUMN window_minutes INTEGER NOT NULL DEFAULT 60;
ALTER TABLE tenants ADD COLUMN policy_version BIGINT NOT NULL DEFAULT 0;
