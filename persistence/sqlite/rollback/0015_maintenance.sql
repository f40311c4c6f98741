-- Rolls migration 0015 (the maintenance jobs' tables) back: archived
-- audit events return to audit_events and its full-text index first
-- (nothing is lost), then the archive, the receipt integrity job's
-- progress (its next run starts again from each chain's first link) and
-- the jobs' last runs are dropped. Run it with every gateway on this
-- database stopped, before any older rollback script:
--
--     sqlite3 svc.db < persistence/sqlite/rollback/0015_maintenance.sql
BEGIN IMMEDIATE;
INSERT INTO audit_events (seq, id, tenant_id, event_type, action, actor, agent_id, decision_id, details, created_at)
    SELECT seq, id, tenant_id, event_type, action, actor, agent_id, decision_id, details, created_at FROM audit_archive;
-- Below the indexed point: the bulk indexer would not take them in.
INSERT INTO audit_events_fts (rowid, event_type, action, actor, agent_id, details)
    SELECT seq, event_type, action, actor, agent_id, details FROM audit_events_search
    WHERE seq IN (SELECT seq FROM audit_archive)
    AND seq <= (SELECT upto FROM search_progress WHERE name = 'audit_events');
DROP INDEX audit_archive_tenant;
DROP TABLE audit_archive;
DROP TABLE receipt_checks;
DROP TABLE maintenance_runs;
DELETE FROM schema_migrations WHERE version = 15;
COMMIT;
