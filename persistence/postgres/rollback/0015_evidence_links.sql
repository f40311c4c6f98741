-- Rolls migration 0015 (evidence links) back to the layout of 0014: the
-- event ids written since the upgrade are dropped (their incidents then
-- reach their decisions through alerts only). Run it with every gateway on
-- the database stopped, before any older rollback script:
--
--     psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -f persistence/postgres/rollback/0015_evidence_links.sql
BEGIN;
DROP INDEX alerts_source_event;
DROP INDEX decisions_run;
DROP INDEX decisions_agent;
ALTER TABLE decisions DROP COLUMN event_id;
DELETE FROM schema_migrations WHERE version = 15;
COMMIT;
