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
-- /v1/graph/agent/:id), the decisions behind an incident's events (its
-- agent's decisions up to when it opened, newest first, event_id checked on
-- each) and the risk scoreboard's 24-hour windows per agent (it covers the
-- composite score). An agent's entries grow at one end, so a commit dirties
-- one leaf per agent it carries, not one per decision as an index on the
-- random event ids would.
CREATE INDEX decisions_agent ON decisions (tenant_id, agent_id, created_at, composite_risk_score);
-- decisions_run serves GET /v1/graph/run/:run_id; only decisions with a run
-- id enter it.
CREATE INDEX decisions_run ON decisions (tenant_id, run_id, seq) WHERE run_id IS NOT NULL;
-- alerts_source_event serves an incident evidence pack's contributing
-- alerts (those raised by the incident's source events). Alerts are
-- written only when a rule fires, so this random-key index costs little.
CREATE INDEX alerts_source_event ON alerts (tenant_id, source_event_id);
