-- Security operations (SPEC 6.2, 6.3; CONTRACT §7): tenants' custom
-- detection rules, alerts and incidents.
CREATE TABLE soc_rules (
    tenant_id  TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    rule_key   TEXT NOT NULL,
    alert_name TEXT NOT NULL,
    severity   TEXT NOT NULL,
    enabled    INTEGER NOT NULL DEFAULT 1,
    condition  TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (tenant_id, rule_key)
);

CREATE TABLE alerts (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL,
    tenant_id       TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    rule_key        TEXT NOT NULL,
    alert_name      TEXT NOT NULL,
    severity        TEXT NOT NULL,
    source          TEXT NOT NULL,
    agent_id        TEXT NOT NULL,
    decision_id     TEXT NOT NULL DEFAULT '',
    source_event_id TEXT NOT NULL,
    summary         TEXT NOT NULL,
    created_at      TEXT NOT NULL
);
CREATE INDEX alerts_tenant ON alerts (tenant_id, seq);

CREATE TABLE incidents (
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    id               TEXT NOT NULL UNIQUE,
    tenant_id        TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    kind             TEXT NOT NULL,
    severity         TEXT NOT NULL,
    status           TEXT NOT NULL DEFAULT 'open',
    agent_id         TEXT NOT NULL,
    summary          TEXT NOT NULL,
    source_event_ids TEXT NOT NULL DEFAULT '[]',
    opened_at        TEXT NOT NULL,
    closed_at        TEXT,
    close_reason     TEXT
);
CREATE INDEX incidents_tenant ON incidents (tenant_id, seq);
