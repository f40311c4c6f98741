-- Rolls migration 0014 (one record per decision) back to the layout of
-- 0013, keeping every row, including those written since the upgrade:
-- receipts and authorize_decision audit events become rows of their own
-- tables again. Run it with every gateway on this database stopped, then
-- start the older binary:
--
--     psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -f persistence/postgres/rollback/0014_one_record.sql
--
-- It runs in one transaction: on any error nothing changes. A newer binary
-- started afterwards applies 0014 again.
BEGIN;

DROP VIEW receipts;
CREATE TABLE receipts (
    id                TEXT PRIMARY KEY,
    tenant_id         TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    seq               BIGINT NOT NULL,
    decision_id       TEXT NOT NULL,
    action_hash       TEXT NOT NULL,
    decision          TEXT NOT NULL,
    receipt_hash      TEXT NOT NULL,
    prev_receipt_hash TEXT NOT NULL,
    signature         TEXT,
    key_id            TEXT NOT NULL DEFAULT '',
    created_at        TIMESTAMPTZ NOT NULL,
    UNIQUE (tenant_id, seq)
);
INSERT INTO receipts (id, tenant_id, seq, decision_id, action_hash, decision, receipt_hash, prev_receipt_hash, signature, key_id, created_at)
SELECT receipt_id, tenant_id, receipt_seq, id, action_hash, decision, receipt_hash, prev_receipt_hash, signature, COALESCE(key_id, ''), created_at
FROM decisions WHERE receipt_id IS NOT NULL;

-- Each decision's audit event, with the details the code before 0014 gave
-- it (or kept from before).
INSERT INTO audit_events (seq, id, tenant_id, event_type, action, actor, agent_id, decision_id, details, created_at)
SELECT seq, audit_id, tenant_id, 'authorize_decision', decision, 'agent:' || agent_id, agent_id, id,
    COALESCE(audit_details, jsonb_strip_nulls(jsonb_build_object('action', decision, 'action_hash', action_hash,
        'approval_id', approval_id, 'matched_policies', matched_policy_ids::jsonb, 'reason', reason, 'receipt_id', receipt_id,
        'tool', tool, 'tool_action', action))::text),
    created_at
FROM decisions WHERE audit_id IS NOT NULL;

DROP INDEX decisions_receipt_seq;
DROP INDEX decisions_receipt;
ALTER TABLE decisions DROP COLUMN search;
ALTER TABLE decisions DROP COLUMN audit_id, DROP COLUMN audit_details, DROP COLUMN approval_id, DROP COLUMN receipt_seq,
    DROP COLUMN receipt_hash, DROP COLUMN prev_receipt_hash, DROP COLUMN signature, DROP COLUMN key_id;
ALTER TABLE decisions ADD COLUMN search tsvector GENERATED ALWAYS AS (
    to_tsvector('simple', svc_search_text(tool || ' ' || action || ' ' || coalesce(resource, '') || ' ' || decision || ' ' ||
        reason || ' ' || matched_policy_ids || ' ' || agent_id || ' ' || coalesce(run_id, '')))
) STORED;
CREATE INDEX decisions_search ON decisions USING GIN (search) WITH (fastupdate = on, gin_pending_list_limit = 256);

-- Each table numbers its rows again (from past the shared sequence, so no
-- number is handed out twice).
ALTER TABLE decisions ALTER COLUMN seq DROP DEFAULT;
ALTER TABLE audit_events ALTER COLUMN seq DROP DEFAULT;
DO $$
DECLARE next BIGINT := (SELECT last_value + 1 FROM record_seq);
BEGIN
    EXECUTE format('ALTER TABLE decisions ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (START WITH %s)', next);
    EXECUTE format('ALTER TABLE audit_events ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (START WITH %s)', next);
END
$$;
DROP SEQUENCE record_seq;

DELETE FROM schema_migrations WHERE version = 14;
COMMIT;
