-- One record per decision.
--
-- A decision used to be three rows in three tables: the decision, its
-- receipt and its authorize_decision audit event, each with its own
-- indexes, and two full-text indexes. They are now one row of decisions:
--   * the receipt's own columns (its id, seq, hashes, signature, key) are
--     columns of the decision; a receipt's tenant, decision id, action
--     hash, decision value and time always were the decision's. The
--     receipts table becomes a view of the same name and columns;
--   * the audit event is the decision read as one (its id in audit_id; the
--     audit list merges decisions with audit_events, which keeps every
--     other event). Events migrated here keep the details they were
--     written with (audit_details); new ones derive them from the row;
--   * one full-text index (decisions_fts) serves both `q` searches of a
--     decision: the decisions list's (every column but event) and the
--     audit list's (every column).
-- Decisions and audit events now number their rows from one sequence, so
-- that the merged audit list has one order and one cursor. Existing rows
-- are renumbered here in the order of their time: cursors handed out
-- before this migration no longer point where they did.

-- A receipt that disagrees with its decision on a field they now share
-- would no longer verify: refuse to migrate such a database (the
-- transaction rolls back and nothing changes).
-- (The receipt-id index, GET /v1/receipts/:id's, is made first: the check
-- joins through it.)
CREATE UNIQUE INDEX decisions_receipt ON decisions (receipt_id);
CREATE TEMP TABLE migration_0012_check (mismatched_receipts INTEGER CHECK (mismatched_receipts = 0));
INSERT INTO migration_0012_check SELECT count(*) FROM receipts r LEFT JOIN decisions d ON d.receipt_id = r.id
WHERE d.id IS NULL OR d.tenant_id <> r.tenant_id OR d.id <> r.decision_id OR d.action_hash <> r.action_hash
    OR d.decision <> r.decision OR d.created_at <> r.created_at;
DROP TABLE migration_0012_check;

ALTER TABLE decisions ADD COLUMN audit_id TEXT;
ALTER TABLE decisions ADD COLUMN audit_details TEXT;
ALTER TABLE decisions ADD COLUMN approval_id TEXT;
ALTER TABLE decisions ADD COLUMN receipt_seq INTEGER;
ALTER TABLE decisions ADD COLUMN receipt_hash TEXT;
ALTER TABLE decisions ADD COLUMN prev_receipt_hash TEXT;
ALTER TABLE decisions ADD COLUMN signature TEXT;
ALTER TABLE decisions ADD COLUMN key_id TEXT;

UPDATE decisions SET (receipt_seq, receipt_hash, prev_receipt_hash, signature, key_id) =
    (SELECT r.seq, r.receipt_hash, r.prev_receipt_hash, r.signature, r.key_id FROM receipts r WHERE r.id = decisions.receipt_id)
WHERE receipt_id IS NOT NULL;

-- (Each decision finds its event through this index; its three equality
-- columns make SQLite prefer it to audit_events_type, which would scan the
-- tenant's every authorize_decision event for each decision.)
CREATE INDEX migration_0012_audit ON audit_events (decision_id, event_type, tenant_id, seq);
UPDATE decisions SET (audit_id, audit_details) =
    (SELECT a.id, a.details FROM audit_events a
     WHERE a.event_type = 'authorize_decision' AND a.decision_id = decisions.id AND a.tenant_id = decisions.tenant_id
     ORDER BY a.seq LIMIT 1);
UPDATE decisions SET approval_id =
    (SELECT ap.id FROM approvals ap WHERE ap.tenant_id = decisions.tenant_id AND ap.decision_id = decisions.id);

-- The moved events leave audit_events (and its full-text index, rebuilt
-- below).
DROP TRIGGER audit_events_fts_delete;
DROP TRIGGER decisions_fts_delete;
DELETE FROM audit_events WHERE event_type = 'authorize_decision'
    AND EXISTS (SELECT 1 FROM decisions d WHERE d.id = audit_events.decision_id AND d.audit_id = audit_events.id);
DROP INDEX migration_0012_audit;

-- One sequence: every row of both tables renumbered in the order of time.
CREATE TEMP TABLE migration_0012_seq AS
    SELECT kind, old, row_number() OVER (ORDER BY created_at, kind, old) AS n
    FROM (SELECT 0 AS kind, seq AS old, created_at FROM decisions UNION ALL SELECT 1, seq, created_at FROM audit_events);
CREATE INDEX temp.migration_0012_seq_old ON migration_0012_seq (kind, old);
UPDATE decisions SET seq = -(SELECT n FROM migration_0012_seq WHERE kind = 0 AND old = decisions.seq);
UPDATE decisions SET seq = -seq;
UPDATE audit_events SET seq = -(SELECT n FROM migration_0012_seq WHERE kind = 1 AND old = audit_events.seq);
UPDATE audit_events SET seq = -seq;
-- Decisions draw from their AUTOINCREMENT counter, audit events reserve
-- numbers by moving it (sqlite.go, allocSeq): it starts past both tables.
INSERT INTO sqlite_sequence (name, seq) SELECT 'decisions', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'decisions');
UPDATE sqlite_sequence SET seq = COALESCE((SELECT max(n) FROM migration_0012_seq), 0) WHERE name IN ('decisions', 'audit_events');
DROP TABLE migration_0012_seq;

DROP TABLE receipts;
CREATE VIEW receipts AS SELECT receipt_id AS id, tenant_id, receipt_seq AS seq, id AS decision_id, action_hash, decision,
    receipt_hash, prev_receipt_hash, signature, key_id, created_at
FROM decisions WHERE receipt_id IS NOT NULL;

-- The chain position, unique per tenant: receipt ranges and the guard that
-- two receipts never take one place in a chain. Every index and the read
-- it serves are listed in persistence/doc.go.
CREATE UNIQUE INDEX decisions_receipt_seq ON decisions (tenant_id, receipt_seq);

-- The one full-text index of a decision, with the event's words beside
-- the decision's: its type and actor, action hash, receipt and approval,
-- and for migrated events the details they were written with.
DROP TABLE decisions_fts;
DROP VIEW decisions_search;
CREATE VIEW decisions_search AS SELECT seq,
    replace(tool, '-', '') AS tool, replace(action, '-', '') AS action, replace(resource, '-', '') AS resource,
    decision, replace(reason, '-', '') AS reason, replace(matched_policy_ids, '-', '') AS matched_policy_ids,
    replace(agent_id, '-', '') AS agent_id, replace(run_id, '-', '') AS run_id,
    replace('authorize_decision agent ' || action_hash || ' ' || COALESCE(receipt_id, '') || ' ' || COALESCE(approval_id, '') || ' ' ||
        COALESCE(audit_details, ''), '-', '') AS event
FROM decisions;
CREATE VIRTUAL TABLE decisions_fts USING fts5 (
    tool, action, resource, decision, reason, matched_policy_ids, agent_id, run_id, event,
    content = 'decisions_search', content_rowid = 'seq', tokenize = 'unicode61'
);
INSERT INTO decisions_fts (decisions_fts) VALUES ('rebuild');
INSERT INTO audit_events_fts (audit_events_fts) VALUES ('rebuild');
UPDATE search_progress SET upto = COALESCE((SELECT max(seq) FROM decisions), 0) WHERE name = 'decisions';
UPDATE search_progress SET upto = COALESCE((SELECT max(seq) FROM audit_events), 0) WHERE name = 'audit_events';

-- A row leaves the index only if it was added to it, with the values it was
-- indexed with.
CREATE TRIGGER decisions_fts_delete AFTER DELETE ON decisions
WHEN old.seq <= (SELECT upto FROM search_progress WHERE name = 'decisions') BEGIN
    INSERT INTO decisions_fts (decisions_fts, rowid, tool, action, resource, decision, reason, matched_policy_ids, agent_id, run_id, event)
    VALUES ('delete', old.seq, replace(old.tool, '-', ''), replace(old.action, '-', ''), replace(old.resource, '-', ''), old.decision,
        replace(old.reason, '-', ''), replace(old.matched_policy_ids, '-', ''), replace(old.agent_id, '-', ''), replace(old.run_id, '-', ''),
        replace('authorize_decision agent ' || old.action_hash || ' ' || COALESCE(old.receipt_id, '') || ' ' || COALESCE(old.approval_id, '') || ' ' ||
            COALESCE(old.audit_details, ''), '-', ''));
END;
CREATE TRIGGER audit_events_fts_delete AFTER DELETE ON audit_events
WHEN old.seq <= (SELECT upto FROM search_progress WHERE name = 'audit_events') BEGIN
    INSERT INTO audit_events_fts (audit_events_fts, rowid, event_type, action, actor, agent_id, details)
    VALUES ('delete', old.seq, old.event_type, replace(old.action, '-', ''), replace(old.actor, '-', ''),
        replace(old.agent_id, '-', ''), replace(old.details, '-', ''));
END;
