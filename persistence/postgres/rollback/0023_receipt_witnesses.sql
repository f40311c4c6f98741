-- Rolls migration 0023 (witnesses of the receipt log) back: the tenants'
-- witness settings are dropped; cosignatures already added to checkpoints
-- stay in their notes. Run it with every gateway on this database stopped,
-- before any older rollback script:
--
--     psql "$DATABASE_URL" -f persistence/postgres/rollback/0023_receipt_witnesses.sql
BEGIN;
DROP TABLE receipt_witnesses;
DELETE FROM schema_migrations WHERE version = 23;
COMMIT;
