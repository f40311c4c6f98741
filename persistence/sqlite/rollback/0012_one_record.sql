-- Rolls migration 0012 (one record per decision) back to the layout of
-- 0011, keeping every row, including those written since the upgrade:
-- receipts and authorize_decision audit events become rows of their own
-- tables again. Run it with every gateway on this file stopped, then start
-- the older binary:
--
--     sqlite3 svc.db < persistence/sqlite/rollback/0012_one_record.sql
--
-- It runs in one transaction: on any error nothing changes. A newer binary
-- started afterwards applies 0012 again. Cursors handed out since the
-- upgrade stay valid (the rows keep their numbers).
BEGIN IMMEDIATE;

DROP TRIGGER decisions_fts_delete;
DROP TRIGGER audit_events_fts_delete;
DROP VIEW receipts;
CREATE TABLE receipts (
    id                TEXT PRIMARY KEY,
    tenant_id         TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    seq               INTEGER NOT NULL,
    decision_id       TEXT NOT NULL,
    action_hash       TEXT NOT NULL,
    decision          TEXT NOT NULL,
    receipt_hash      TEXT NOT NULL,
    prev_receipt_hash TEXT NOT NULL,
    signature         TEXT,
    key_id            TEXT NOT NULL DEFAULT '',
    created_at        TEXT NOT NULL,
    UNIQUE (tenant_id, seq)
);
INSERT INTO receipts (id, tenant_id, seq, decision_id, action_hash, decision, receipt_hash, prev_receipt_hash, signature, key_id, created_at)
SELECT receipt_id, tenant_id, receipt_seq, id, action_hash, decision, receipt_hash, prev_receipt_hash, signature, COALESCE(key_id, ''), created_at
FROM decisions WHERE receipt_id IS NOT NULL;

-- Each decision's audit event, with the details the code before 0012 gave
-- it (or kept from before).
INSERT INTO audit_events (seq, id, tenant_id, event_type, action, actor, agent_id, decision_id, details, created_at)
SELECT seq, audit_id, tenant_id, 'authorize_decision', decision, 'agent:' || agent_id, agent_id, id,
    COALESCE(audit_details, CASE WHEN approval_id IS NULL
        THEN json_object('action', decision, 'action_hash', action_hash, 'matched_policies', json(matched_policy_ids),
            'reason', reason, 'receipt_id', receipt_id, 'tool', tool, 'tool_action', action)
        ELSE json_object('action', decision, 'action_hash', action_hash, 'approval_id', approval_id,
            'matched_policies', json(matched_policy_ids), 'reason', reason, 'receipt_id', receipt_id, 'tool', tool,
            'tool_action', action) END),
    created_at
FROM decisions WHERE audit_id IS NOT NULL;

DROP INDEX decisions_receipt_seq;
DROP INDEX decisions_receipt;
DROP TABLE decisions_fts;
DROP VIEW decisions_search;
ALTER TABLE decisions DROP COLUMN audit_id;
ALTER TABLE decisions DROP COLUMN audit_details;
ALTER TABLE decisions DROP COLUMN approval_id;
ALTER TABLE decisions DROP COLUMN receipt_seq;
ALTER TABLE decisions DROP COLUMN receipt_hash;
ALTER TABLE decisions DROP COLUMN prev_receipt_hash;
ALTER TABLE decisions DROP COLUMN signature;
ALTER TABLE decisions DROP COLUMN key_id;

-- The full-text indexes as 0008 left them.
CREATE VIEW decisions_search AS SELECT seq,
    replace(tool, '-', '') AS tool, replace(action, '-', '') AS action, replace(resource, '-', '') AS resource,
    decision, replace(reason, '-', '') AS reason, replace(matched_policy_ids, '-', '') AS matched_policy_ids,
    replace(agent_id, '-', '') AS agent_id, replace(run_id, '-', '') AS run_id
FROM decisions;
CREATE VIRTUAL TABLE decisions_fts USING fts5 (
    tool, action, resource, decision, reason, matched_policy_ids, agent_id, run_id,
    content = 'decisions_search', content_rowid = 'seq', tokenize = 'unicode61'
);
INSERT INTO decisions_fts (decisions_fts) VALUES ('rebuild');
INSERT INTO audit_events_fts (audit_events_fts) VALUES ('rebuild');
UPDATE search_progress SET upto = COALESCE((SELECT max(seq) FROM decisions), 0) WHERE name = 'decisions';
UPDATE search_progress SET upto = COALESCE((SELECT max(seq) FROM audit_events), 0) WHERE name = 'audit_events';
CREATE TRIGGER decisions_fts_delete AFTER DELETE ON decisions
WHEN old.seq <= (SELECT upto FROM search_progress WHERE name = 'decisions') BEGIN
    INSERT INTO decisions_fts (decisions_fts, rowid, tool, action, resource, decision, reason, matched_policy_ids, agent_id, run_id)
    VALUES ('delete', old.seq, replace(old.tool, '-', ''), replace(old.action, '-', ''), replace(old.resource, '-', ''), old.decision,
        replace(old.reason, '-', ''), replace(old.matched_policy_ids, '-', ''), replace(old.agent_id, '-', ''), replace(old.run_id, '-', ''));
END;
CREATE TRIGGER audit_events_fts_delete AFTER DELETE ON audit_events
WHEN old.seq <= (SELECT upto FROM search_progress WHERE name = 'audit_events') BEGIN
    INSERT INTO audit_events_fts (audit_events_fts, rowid, event_type, action, actor, agent_id, details)
    VALUES ('delete', old.seq, old.event_type, replace(old.action, '-', ''), replace(old.actor, '-', ''),
        replace(old.agent_id, '-', ''), replace(old.details, '-', ''));
END;

DELETE FROM schema_migrations WHERE version = 12;
COMMIT;
