-- The evidence graph and packs (issue 24) follow a security event to its
-- decision (SPEC 4.4: source_event_ids -> audit event -> decision) and list
-- an agent's and a run's decisions.
--
-- event_id is the id of the decision's authorize_decision security event
-- (an AseEvent, UUID v4). Rows written before this migration have none:
-- their events were never stored, so an incident that names them finds its
-- decisions through its alerts (alerts.decision_id) instead.
ALTER TABLE decisions ADD COLUMN event_id TEXT;
-- decisions_agent serves an agent's most recent decisions (GET
-- /v1/graph/agent/:id), an incident's decisions among its agent's around
-- when it opened, and the risk scoreboard's 24-hour windows per agent (it
-- holds the composite score). SQLite keeps the same in a side table
-- filled in bulk (its migration 0013 says why); here a plain index: a
-- Postgres index insert writes a small WAL record, not a page, and four
-- alternated runs with and without it showed no difference beyond the
-- machine's noise (Postgres/OPA medians 1.03 and 1.04), where SQLite lost
-- 15%.
CREATE INDEX decisions_agent ON decisions (tenant_id, agent_id, created_at, composite_risk_score);
-- decisions_run serves GET /v1/graph/run/:run_id; only decisions with a run
-- id enter it.
CREATE INDEX decisions_run ON decisions (tenant_id, run_id, seq) WHERE run_id IS NOT NULL;
-- alerts_source_event serves an incident evidence pack's contributing
-- alerts (those raised by the incident's source events). Alerts are
-- written only when a rule fires, so this random-key index costs little.
CREATE INDEX alerts_source_event ON alerts (tenant_id, source_event_id);
