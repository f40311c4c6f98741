-- Rolls migration 0019 (approval callbacks) back: the table is dropped, so
-- callbacks registered and not yet delivered are never sent. Run it with
-- every gateway on this database stopped, before any older rollback script:
--
--     psql "$DATABASE_URL" -f persistence/postgres/rollback/0019_approval_callbacks.sql
BEGIN;
DROP TABLE approval_callbacks;
DELETE FROM schema_migrations WHERE version = 19;
COMMIT;
