-- The agent's approval callback (issue 36, SPEC 4.2 webhook, CONTRACT §14).
--
-- approval_callbacks: the url and secret an agent registered with the call
-- that created an approval, written in that decision's transaction. When
-- the approval leaves PENDING or expires, a node claims an attempt
-- (attempts + 1, claimed_until), POSTs the outcome, and records it
-- (done_at, outcome, last_status). At most three attempts in all, on any
-- nodes; deleted with the approval or the tenant.
CREATE TABLE approval_callbacks (
    approval_id   TEXT PRIMARY KEY REFERENCES approvals(id) ON DELETE CASCADE,
    tenant_id     TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    url           TEXT NOT NULL,
    secret        TEXT NOT NULL,
    attempts      INTEGER NOT NULL DEFAULT 0,
    claimed_until TEXT,
    done_at       TEXT,
    outcome       TEXT,
    last_status   INTEGER,
    created_at    TEXT NOT NULL
);
CREATE INDEX approval_callbacks_open ON approval_callbacks (created_at) WHERE done_at IS NULL;
