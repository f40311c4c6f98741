-- Rolls migration 0013 (evidence links) back to the layout of 0012: the
-- event ids written since the upgrade are dropped (their incidents then
-- reach their decisions through alerts only). Run it with every gateway on
-- this file stopped, before any older rollback script:
--
--     sqlite3 svc.db < persistence/sqlite/rollback/0013_evidence_links.sql
BEGIN IMMEDIATE;
DROP INDEX alerts_source_event;
DROP TRIGGER decision_links_delete;
DROP TABLE decision_runs;
DROP TABLE decision_agents;
DELETE FROM search_progress WHERE name IN ('decision_agents', 'decision_runs');
ALTER TABLE decisions DROP COLUMN event_id;
DELETE FROM schema_migrations WHERE version = 13;
COMMIT;
