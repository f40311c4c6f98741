-- Rolls migration 0016 (the code-host webhook's replay memory and the
-- tenants' own webhook secrets) back: both tables are dropped, so the
-- older binary verifies every tenant's deliveries with the installation
-- secret again, and its own delivery-id memory starts empty. Run it with
-- every gateway on this database stopped, before any older rollback script:
--
--     sqlite3 svc.db < persistence/sqlite/rollback/0016_codehost.sql
BEGIN IMMEDIATE;
DROP INDEX codehost_deliveries_received;
DROP TABLE codehost_deliveries;
DROP TABLE codehost_webhook_secrets;
DELETE FROM schema_migrations WHERE version = 16;
COMMIT;
