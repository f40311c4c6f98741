-- Rolls migration 0017 (the maintenance jobs' tables) back: archived
-- audit events return to audit_events first (nothing is lost), then the
-- archive, the receipt integrity job's progress (its next run starts
-- again from each chain's first link) and the jobs' last runs are dropped. Run it with every
-- gateway on this database stopped, before any older rollback script:
--
--     psql "$DATABASE_URL" -f persistence/postgres/rollback/0017_maintenance.sql
BEGIN;
INSERT INTO audit_events (seq, id, tenant_id, event_type, action, actor, agent_id, decision_id, details, created_at)
    SELECT seq, id, tenant_id, event_type, action, actor, agent_id, decision_id, details, created_at FROM audit_archive;
DROP TABLE audit_archive;
DROP TABLE receipt_checks;
DROP TABLE maintenance_runs;
DELETE FROM schema_migrations WHERE version = 17;
COMMIT;
