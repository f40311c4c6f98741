-- Rolls migration 0018 (the code-host webhook's replay memory and the
-- tenants' own webhook secrets) back: both tables are dropped, so the
-- older binary verifies every tenant's deliveries with the installation
-- secret again, and its own delivery-id memory starts empty. Run it with
-- every gateway on this database stopped, before any older rollback script:
--
--     psql "$DATABASE_URL" -f persistence/postgres/rollback/0018_codehost.sql
BEGIN;
DROP TABLE codehost_deliveries;
DROP TABLE codehost_webhook_secrets;
DELETE FROM schema_migrations WHERE version = 18;
COMMIT;
