-- Rolls migration 0022 (shadow policies) back: every shadow policy is
-- deleted (an older binary would enforce it), and the shadow outcomes
-- kept with decisions are dropped. Run it with every gateway on this
-- database stopped, before any older rollback script:
--
--     sqlite3 svc.db < persistence/sqlite/rollback/0022_shadow_policies.sql
BEGIN IMMEDIATE;
DELETE FROM tenant_policies WHERE mode = 'shadow';
ALTER TABLE tenant_policies DROP COLUMN mode;
ALTER TABLE decisions DROP COLUMN shadow;
DELETE FROM schema_migrations WHERE version = 22;
COMMIT;
