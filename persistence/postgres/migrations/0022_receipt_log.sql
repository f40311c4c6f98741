-- Signed checkpoints and proofs (CONTRACT §17).
--
-- receipt_log: per tenant, how many receipts (leaves, seq 1..leaves) the
-- stored Merkle tree holds, how many hashes are stored for them, and the
-- size of its latest signed checkpoint.
-- receipt_log_hashes: those hashes, in the order golang.org/x/mod's
-- sumdb/tlog stores them (its storage index), 32 bytes each, 256 to a
-- chunk (chunk k holds indexes 256k .. 256k+255; the last chunk is
-- partial). About 70 bytes a receipt: a proof reads O(log n) of them.
-- receipt_checkpoints: the signed notes of the tree's head, kept, so that
-- any two can be proven consistent.
CREATE TABLE receipt_log (
    tenant_id  TEXT PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
    leaves     BIGINT NOT NULL,
    hashes     BIGINT NOT NULL,
    signed     BIGINT NOT NULL DEFAULT 0,
    updated_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE receipt_log_hashes (
    tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    chunk     BIGINT NOT NULL,
    data      BYTEA NOT NULL,
    PRIMARY KEY (tenant_id, chunk)
);
CREATE TABLE receipt_checkpoints (
    tenant_id  TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    tree_size  BIGINT NOT NULL,
    root_hash  BYTEA NOT NULL,
    note       TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, tree_size)
);
-- The hashes do not compress: no attempt at it.
ALTER TABLE receipt_log_hashes ALTER COLUMN data SET STORAGE EXTERNAL;
