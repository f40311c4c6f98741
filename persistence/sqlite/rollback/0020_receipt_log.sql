-- Rolls migration 0020 (signed checkpoints and proofs) back: the stored
-- Merkle trees and the signed checkpoints are dropped. The receipts
-- themselves are untouched; a newer binary rebuilds the trees from them,
-- but checkpoints published before (and cosigned by witnesses) are gone
-- from this database. Run it with every gateway on this database stopped,
-- before any older rollback script:
--
--     sqlite3 svc.db < persistence/sqlite/rollback/0020_receipt_log.sql
BEGIN IMMEDIATE;
DROP TABLE receipt_checkpoints;
DROP TABLE receipt_log_hashes;
DROP TABLE receipt_log;
DELETE FROM schema_migrations WHERE version = 20;
COMMIT;
