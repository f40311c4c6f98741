-- Full-text indexing in bulk instead of per row.
--
-- FTS5 writes a new segment (and rewrites its structure record, and merges)
-- in every transaction that adds rows, so with per-row triggers a group
-- commit of one decision wrote about 39 WAL pages, 22 of them for the two
-- full-text indexes. The group writer now indexes the rows added since
-- search_progress.upto in bulk, inside one of its transactions, once enough
-- of them wait; a search first indexes whatever still waits (sqlite.go,
-- indexSearch), so a search never misses a committed row.
CREATE TABLE search_progress (
    name TEXT PRIMARY KEY,
    upto INTEGER NOT NULL -- every row with seq <= upto is in the index
);
INSERT INTO search_progress (name, upto) VALUES
    ('decisions', COALESCE((SELECT max(seq) FROM decisions), 0)),
    ('audit_events', COALESCE((SELECT max(seq) FROM audit_events), 0));

DROP TRIGGER decisions_fts_insert;
DROP TRIGGER audit_events_fts_insert;

-- A row leaves the index only if it was added to it.
DROP TRIGGER decisions_fts_delete;
CREATE TRIGGER decisions_fts_delete AFTER DELETE ON decisions
WHEN old.seq <= (SELECT upto FROM search_progress WHERE name = 'decisions') BEGIN
    INSERT INTO decisions_fts (decisions_fts, rowid, tool, action, resource, decision, reason, matched_policy_ids, agent_id, run_id)
    VALUES ('delete', old.seq, old.tool, old.action, old.resource, old.decision, old.reason, old.matched_policy_ids, old.agent_id, old.run_id);
END;
DROP TRIGGER audit_events_fts_delete;
CREATE TRIGGER audit_events_fts_delete AFTER DELETE ON audit_events
WHEN old.seq <= (SELECT upto FROM search_progress WHERE name = 'audit_events') BEGIN
    INSERT INTO audit_events_fts (audit_events_fts, rowid, event_type, action, actor, agent_id, details)
    VALUES ('delete', old.seq, old.event_type, old.action, old.actor, old.agent_id, old.details);
END;

-- No query reads decisions by agent or by run: every decision paid a leaf
-- page in each of these indexes for nothing (a batch of 32 decisions over
-- 50 agents wrote 52 pages for decisions_agent alone).
DROP INDEX decisions_agent;
DROP INDEX decisions_run;
