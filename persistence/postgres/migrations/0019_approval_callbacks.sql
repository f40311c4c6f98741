-- The agent's approval callback (issue 36; SQLite: its migration 0017,
-- which says what the table is for).
CREATE TABLE approval_callbacks (
    approval_id   TEXT PRIMARY KEY REFERENCES approvals(id) ON DELETE CASCADE,
    tenant_id     TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    url           TEXT NOT NULL,
    secret        TEXT NOT NULL,
    attempts      INTEGER NOT NULL DEFAULT 0,
    claimed_until TIMESTAMPTZ,
    done_at       TIMESTAMPTZ,
    outcome       TEXT,
    last_status   INTEGER,
    created_at    TIMESTAMPTZ NOT NULL
);
CREATE INDEX approval_callbacks_open ON approval_callbacks (created_at) WHERE done_at IS NULL;
