-- Rolls migration 0013 (evidence links) back to the layout of 0012: the
-- event ids written since the upgrade are dropped (their incidents then
-- reach their decisions through alerts only). Run it with every gateway on
-- this file stopped, before any older rollback script:
--
--     sqlite3 svc.db < persistence/sqlite/rollback/0013_evidence_links.sql
BEGIN IMMEDIATE;
DROP INDEX alerts_source_event;
DROP INDEX decisions_run;
DROP INDEX decisions_agent;
ALTER TABLE decisions DROP COLUMN event_id;
DELETE FROM schema_migrations WHERE version = 13;
COMMIT;
