-- A request_id replayed after a restart rebuilds its answer from the
-- decision row; a require_approval answer also names its approval, found by
-- the decision it belongs to (one entry per require_approval decision).
CREATE INDEX approvals_decision ON approvals (tenant_id, decision_id);
