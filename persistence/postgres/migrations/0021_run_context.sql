-- Run context in policies (CONTRACT §16).
--
-- skills.output_trust: the trust level of what the skill's calls bring into
-- a run ('' for none); an action's own output_trust, in the actions JSON,
-- wins over it.
--
-- run_taint: the durable floor of each run's trust. A row is written in
-- the transaction of the decision whose call lowered the run's trust (at
-- most once per level, so at most six times per run) and read when a run
-- has no shared state while the state may have been lost (a restart, a
-- flush, an eviction): losing shared state never raises a run's trust.
-- level is the trust level's rank plus one (runstate.Level).
-- run_id is the call's trace.run_id, or "~ambient:<agent id>" for an
-- agent's ambient run.
--
-- decisions.run_context: the canonical {agent_history, run} the policy saw
-- (NULL when no loaded policy referred to it); decisions.context_hash: its
-- SHA-256, which the receipt's hash covers (svc-receipt-2; '' for a
-- receipt made without run context, hashed as svc-receipt-1). The receipts
-- view gains context_hash.
ALTER TABLE skills ADD COLUMN output_trust TEXT NOT NULL DEFAULT '';

CREATE TABLE run_taint (
    tenant_id  TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    run_id     TEXT NOT NULL,
    level      INTEGER NOT NULL,
    seq        BIGINT NOT NULL,
    via        TEXT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, run_id)
);
-- A node's start (and a cluster after a Valkey flush) loads the floors of
-- the last day (SVC_RUN_MAX_AGE) into shared state by this index.
CREATE INDEX run_taint_recent ON run_taint (updated_at);

ALTER TABLE decisions ADD COLUMN run_context TEXT;
ALTER TABLE decisions ADD COLUMN context_hash TEXT NOT NULL DEFAULT '';

DROP VIEW receipts;
CREATE VIEW receipts AS SELECT receipt_id AS id, tenant_id, receipt_seq AS seq, id AS decision_id, action_hash, decision,
    receipt_hash, prev_receipt_hash, signature, key_id, created_at, context_hash
FROM decisions WHERE receipt_id IS NOT NULL;
