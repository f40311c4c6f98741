-- One record per decision (SQLite: its migration 0012, which says why).
-- The decision, its receipt and its authorize_decision audit event become
-- one row of decisions; receipts becomes a view of the same name and
-- columns; decisions and audit events number their rows from one sequence
-- (record_seq), existing rows renumbered in the order of their time.

-- A receipt that disagrees with its decision on a field they now share
-- would no longer verify: refuse to migrate (nothing changes).
-- (The receipt-id index, GET /v1/receipts/:id's, is made first: the check
-- joins through it.)
CREATE UNIQUE INDEX decisions_receipt ON decisions (receipt_id);
DO $$
DECLARE n BIGINT;
BEGIN
    SELECT count(*) INTO n FROM receipts r LEFT JOIN decisions d ON d.receipt_id = r.id
    WHERE d.id IS NULL OR d.tenant_id <> r.tenant_id OR d.id <> r.decision_id OR d.action_hash <> r.action_hash
        OR d.decision <> r.decision OR d.created_at <> r.created_at;
    IF n > 0 THEN
        RAISE EXCEPTION 'migration 0014: % receipts disagree with their decisions; nothing was changed', n;
    END IF;
END
$$;

ALTER TABLE decisions ADD COLUMN audit_id TEXT, ADD COLUMN audit_details TEXT, ADD COLUMN approval_id TEXT,
    ADD COLUMN receipt_seq BIGINT, ADD COLUMN receipt_hash TEXT, ADD COLUMN prev_receipt_hash TEXT,
    ADD COLUMN signature TEXT, ADD COLUMN key_id TEXT;

UPDATE decisions d SET receipt_seq = r.seq, receipt_hash = r.receipt_hash, prev_receipt_hash = r.prev_receipt_hash,
    signature = r.signature, key_id = r.key_id
FROM receipts r WHERE r.id = d.receipt_id;

CREATE INDEX migration_0014_audit ON audit_events (decision_id, seq) WHERE event_type = 'authorize_decision';
UPDATE decisions d SET audit_id = a.id, audit_details = a.details
FROM (SELECT DISTINCT ON (decision_id, tenant_id) decision_id, tenant_id, id, details FROM audit_events
      WHERE event_type = 'authorize_decision' ORDER BY decision_id, tenant_id, seq) a
WHERE a.decision_id = d.id AND a.tenant_id = d.tenant_id;
UPDATE decisions d SET approval_id = ap.id FROM approvals ap WHERE ap.tenant_id = d.tenant_id AND ap.decision_id = d.id;
DELETE FROM audit_events a USING decisions d
WHERE a.event_type = 'authorize_decision' AND d.id = a.decision_id AND d.audit_id = a.id;
DROP INDEX migration_0014_audit;

-- One sequence: every row of both tables renumbered in the order of time.
CREATE SEQUENCE record_seq;
ALTER TABLE decisions ALTER COLUMN seq DROP IDENTITY;
ALTER TABLE audit_events ALTER COLUMN seq DROP IDENTITY;
CREATE TEMP TABLE migration_0014_seq ON COMMIT DROP AS
    SELECT kind, old, row_number() OVER (ORDER BY created_at, kind, old) AS n
    FROM (SELECT 0 AS kind, seq AS old, created_at FROM decisions UNION ALL SELECT 1, seq, created_at FROM audit_events) x;
CREATE INDEX ON migration_0014_seq (kind, old);
UPDATE decisions d SET seq = -m.n FROM migration_0014_seq m WHERE m.kind = 0 AND m.old = d.seq;
UPDATE decisions SET seq = -seq;
UPDATE audit_events a SET seq = -m.n FROM migration_0014_seq m WHERE m.kind = 1 AND m.old = a.seq;
UPDATE audit_events SET seq = -seq;
SELECT setval('record_seq', COALESCE((SELECT max(n) FROM migration_0014_seq), 0) + 1, false);
ALTER TABLE decisions ALTER COLUMN seq SET DEFAULT nextval('record_seq');
ALTER TABLE audit_events ALTER COLUMN seq SET DEFAULT nextval('record_seq');

DROP TABLE receipts;
CREATE VIEW receipts AS SELECT receipt_id AS id, tenant_id, receipt_seq AS seq, id AS decision_id, action_hash, decision,
    receipt_hash, prev_receipt_hash, signature, key_id, created_at
FROM decisions WHERE receipt_id IS NOT NULL;

-- The chain position, unique per tenant: receipt ranges and the guard that
-- two receipts never take one place in a chain. Every index and the read
-- it serves are listed in persistence/doc.go.
CREATE UNIQUE INDEX decisions_receipt_seq ON decisions (tenant_id, receipt_seq);

-- The one full-text index of a decision: the decision's words at weight A
-- (what `q` on decisions searches) and its audit event's at weight B (type
-- and actor, action hash, receipt and approval, and for migrated events
-- the details they were written with; `q` on the audit list searches
-- both).
DROP INDEX decisions_search;
ALTER TABLE decisions DROP COLUMN search;
ALTER TABLE decisions ADD COLUMN search tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('simple', svc_search_text(tool || ' ' || action || ' ' || coalesce(resource, '') || ' ' || decision || ' ' ||
        reason || ' ' || matched_policy_ids || ' ' || agent_id || ' ' || coalesce(run_id, ''))), 'A') ||
    setweight(to_tsvector('simple', svc_search_text('authorize_decision agent ' || action_hash || ' ' || coalesce(receipt_id, '') || ' ' ||
        coalesce(approval_id, '') || ' ' || coalesce(audit_details, ''))), 'B')
) STORED;
CREATE INDEX decisions_search ON decisions USING GIN (search) WITH (fastupdate = on, gin_pending_list_limit = 256);
