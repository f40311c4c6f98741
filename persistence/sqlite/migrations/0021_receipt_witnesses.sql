-- Witnesses of the receipt log (C2SP tlog-witness): each row is a witness
-- a tenant has its checkpoints cosigned by. url is its submission prefix
-- (POST url/add-checkpoint), vkey its cosignature verifier key; size is
-- the size of the last checkpoint it cosigned (the "old" size of the next
-- request), status and error its last answer (pending, ok, refused,
-- failing), checked_at when it was given.
CREATE TABLE receipt_witnesses (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT NOT NULL UNIQUE,
    tenant_id  TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    url        TEXT NOT NULL,
    vkey       TEXT NOT NULL,
    size       INTEGER NOT NULL DEFAULT 0,
    status     TEXT NOT NULL,
    error      TEXT NOT NULL DEFAULT '',
    checked_at TEXT,
    created_at TEXT NOT NULL,
    UNIQUE (tenant_id, vkey)
);
