-- Rolls migration 0021 (witnesses of the receipt log) back: the tenants'
-- witness settings are dropped; cosignatures already added to checkpoints
-- stay in their notes. Run it with every gateway on this database stopped,
-- before any older rollback script:
--
--     sqlite3 svc.db < persistence/sqlite/rollback/0021_receipt_witnesses.sql
BEGIN IMMEDIATE;
DROP TABLE receipt_witnesses;
DELETE FROM schema_migrations WHERE version = 21;
COMMIT;
