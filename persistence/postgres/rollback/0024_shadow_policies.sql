-- Rolls migration 0024 (shadow policies) back: every shadow policy is
-- deleted (an older binary would enforce it), and the shadow outcomes
-- kept with decisions are dropped. Run it with every gateway on this
-- database stopped, before any older rollback script:
--
--     psql "$DATABASE_URL" -f persistence/postgres/rollback/0024_shadow_policies.sql
BEGIN;
DELETE FROM tenant_policies WHERE mode = 'shadow';
ALTER TABLE tenant_policies DROP COLUMN mode;
ALTER TABLE decisions DROP COLUMN shadow;
DELETE FROM schema_migrations WHERE version = 24;
COMMIT;
