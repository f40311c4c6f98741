-- Each decision used to touch a random leaf page in five UUID indexes. Two
-- of them served no read that needs them:
--   * audit_events.id UNIQUE: audit events are never read by id;
--   * receipts (tenant_id, decision_id): only the decision-to-receipt join,
--     which now goes through decisions.receipt_id and the receipts' primary key.
ALTER TABLE decisions ADD COLUMN receipt_id TEXT;
UPDATE decisions d SET receipt_id = r.id FROM receipts r WHERE r.tenant_id = d.tenant_id AND r.decision_id = d.id;
DROP INDEX receipts_decision;
ALTER TABLE audit_events DROP CONSTRAINT audit_events_id_key;
