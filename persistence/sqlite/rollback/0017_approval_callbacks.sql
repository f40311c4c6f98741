-- Rolls migration 0017 (approval callbacks) back: the table is dropped, so
-- callbacks registered and not yet delivered are never sent. Run it with
-- every gateway on this database stopped, before any older rollback script:
--
--     sqlite3 svc.db < persistence/sqlite/rollback/0017_approval_callbacks.sql
BEGIN IMMEDIATE;
DROP INDEX approval_callbacks_open;
DROP TABLE approval_callbacks;
DELETE FROM schema_migrations WHERE version = 17;
COMMIT;
