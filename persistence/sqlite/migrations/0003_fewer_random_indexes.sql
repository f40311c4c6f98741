-- Each decision used to touch a random leaf page in five UUID indexes. Two
-- of them served no read that needs them:
--   * audit_events.id UNIQUE: audit events are never read by id;
--   * receipts (tenant_id, decision_id): only the decision-to-receipt join,
--     which now goes through decisions.receipt_id and the receipts' primary key.
ALTER TABLE decisions ADD COLUMN receipt_id TEXT;
UPDATE decisions SET receipt_id = (SELECT r.id FROM receipts r WHERE r.tenant_id = decisions.tenant_id AND r.decision_id = decisions.id);
DROP INDEX receipts_decision;

-- SQLite cannot drop a column's UNIQUE constraint: rebuild audit_events
-- (same columns, same seq values, so the FTS5 index stays valid).
DROP TRIGGER audit_events_fts_insert;
DROP TRIGGER audit_events_fts_delete;
CREATE TABLE audit_events_new (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    id          TEXT NOT NULL,
    tenant_id   TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    event_type  TEXT NOT NULL,
    action      TEXT NOT NULL DEFAULT '',
    actor       TEXT NOT NULL DEFAULT '',
    agent_id    TEXT NOT NULL DEFAULT '',
    decision_id TEXT NOT NULL DEFAULT '',
    details     TEXT NOT NULL DEFAULT '{}',
    created_at  TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
);
INSERT INTO audit_events_new (seq, id, tenant_id, event_type, action, actor, agent_id, decision_id, details, created_at)
    SELECT seq, id, tenant_id, event_type, action, actor, agent_id, decision_id, details, created_at FROM audit_events;
DROP TABLE audit_events;
ALTER TABLE audit_events_new RENAME TO audit_events;
CREATE INDEX audit_events_tenant ON audit_events (tenant_id, seq);
CREATE INDEX audit_events_type ON audit_events (tenant_id, event_type, seq);
CREATE TRIGGER audit_events_fts_insert AFTER INSERT ON audit_events BEGIN
    INSERT INTO audit_events_fts (rowid, event_type, action, actor, agent_id, details)
    VALUES (new.seq, new.event_type, new.action, new.actor, new.agent_id, new.details);
END;
CREATE TRIGGER audit_events_fts_delete AFTER DELETE ON audit_events BEGIN
    INSERT INTO audit_events_fts (audit_events_fts, rowid, event_type, action, actor, agent_id, details)
    VALUES ('delete', old.seq, old.event_type, old.action, old.actor, old.agent_id, old.details);
END;
