-- The leader's maintenance jobs (issue 28; SQLite: its migration 0015,
-- which says what each table is for).
CREATE TABLE receipt_checks (
    tenant_id     TEXT PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
    verified_seq  BIGINT NOT NULL DEFAULT 0,
    verified_hash TEXT NOT NULL DEFAULT '',
    sweep_seq     BIGINT NOT NULL DEFAULT 0,
    broken_seq    BIGINT NOT NULL DEFAULT 0,
    broken_error  TEXT NOT NULL DEFAULT '',
    checked_at    TIMESTAMPTZ
);

CREATE TABLE audit_archive (
    seq         BIGINT PRIMARY KEY,
    id          TEXT NOT NULL,
    tenant_id   TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    event_type  TEXT NOT NULL,
    action      TEXT NOT NULL DEFAULT '',
    actor       TEXT NOT NULL DEFAULT '',
    agent_id    TEXT NOT NULL DEFAULT '',
    decision_id TEXT NOT NULL DEFAULT '',
    details     TEXT NOT NULL DEFAULT '{}',
    created_at  TIMESTAMPTZ NOT NULL,
    archived_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX audit_archive_tenant ON audit_archive (tenant_id, seq);

CREATE TABLE maintenance_runs (
    job         TEXT PRIMARY KEY,
    node_id     TEXT NOT NULL,
    started_at  TIMESTAMPTZ NOT NULL,
    duration_us BIGINT NOT NULL,
    outcome     TEXT NOT NULL,
    summary     TEXT NOT NULL DEFAULT '',
    error       TEXT NOT NULL DEFAULT '',
    runs        BIGINT NOT NULL DEFAULT 0,
    failures    BIGINT NOT NULL DEFAULT 0
);
