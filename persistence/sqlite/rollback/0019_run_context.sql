-- Rolls migration 0019 (run context in policies) back: the durable run
-- taint, the decisions' run context, the receipts' context hash and the
-- skills' output trust are dropped. A receipt hashed with a context hash
-- (svc-receipt-2) no longer verifies under the older binary, which knows
-- only svc-receipt-1. Run it with every gateway on this database stopped,
-- before any older rollback script:
--
--     sqlite3 svc.db < persistence/sqlite/rollback/0019_run_context.sql
BEGIN IMMEDIATE;
DROP TABLE run_taint;
DROP VIEW receipts;
CREATE VIEW receipts AS SELECT receipt_id AS id, tenant_id, receipt_seq AS seq, id AS decision_id, action_hash, decision,
    receipt_hash, prev_receipt_hash, signature, key_id, created_at
FROM decisions WHERE receipt_id IS NOT NULL;
ALTER TABLE decisions DROP COLUMN run_context;
ALTER TABLE decisions DROP COLUMN context_hash;
ALTER TABLE skills DROP COLUMN output_trust;
DELETE FROM schema_migrations WHERE version = 19;
COMMIT;
