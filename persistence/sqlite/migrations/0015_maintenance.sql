-- The leader's maintenance jobs (issue 28).
--
-- receipt_checks: per tenant, how far the receipt integrity job has
-- verified the chain (verified_seq and its receipt_hash, from which the
-- next run goes on), where its rolling re-verification of older links
-- stands (sweep_seq), and the first broken link it found (broken_seq 0:
-- none).
CREATE TABLE receipt_checks (
    tenant_id     TEXT PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
    verified_seq  INTEGER NOT NULL DEFAULT 0,
    verified_hash TEXT NOT NULL DEFAULT '',
    sweep_seq     INTEGER NOT NULL DEFAULT 0,
    broken_seq    INTEGER NOT NULL DEFAULT 0,
    broken_error  TEXT NOT NULL DEFAULT '',
    checked_at    TEXT
);

-- audit_archive: administrative audit events older than
-- SVC_AUDIT_RETENTION_DAYS, moved out of audit_events (and so out of its
-- full-text index) by the archival job, with the seq they had; GET
-- /v1/audit/events and evidence packs read them here too. Decisions, and
-- with them their authorize_decision events and receipts, stay where they
-- are: a receipt never leaves its chain.
CREATE TABLE audit_archive (
    seq         INTEGER PRIMARY KEY,
    id          TEXT NOT NULL,
    tenant_id   TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    event_type  TEXT NOT NULL,
    action      TEXT NOT NULL DEFAULT '',
    actor       TEXT NOT NULL DEFAULT '',
    agent_id    TEXT NOT NULL DEFAULT '',
    decision_id TEXT NOT NULL DEFAULT '',
    details     TEXT NOT NULL DEFAULT '{}',
    created_at  TEXT NOT NULL,
    archived_at TEXT NOT NULL
);
CREATE INDEX audit_archive_tenant ON audit_archive (tenant_id, seq);

-- maintenance_runs: each leader job's last run, whichever node ran it (the
-- status page reads it on every node), and its runs and failures counted
-- across the installation.
CREATE TABLE maintenance_runs (
    job         TEXT PRIMARY KEY,
    node_id     TEXT NOT NULL,
    started_at  TEXT NOT NULL,
    duration_us INTEGER NOT NULL,
    outcome     TEXT NOT NULL,
    summary     TEXT NOT NULL DEFAULT '',
    error       TEXT NOT NULL DEFAULT '',
    runs        INTEGER NOT NULL DEFAULT 0,
    failures    INTEGER NOT NULL DEFAULT 0
);
