-- The evidence graph and packs (issue 24) follow a security event to its
-- decision (SPEC 4.4: source_event_ids -> audit event -> decision) and list
-- an agent's and a run's decisions.
--
-- event_id is the id of the decision's authorize_decision security event
-- (an AseEvent, UUID v4). Rows written before this migration have none:
-- their events were never stored, so an incident that names them finds its
-- decisions through its alerts (alerts.decision_id) instead.
ALTER TABLE decisions ADD COLUMN event_id TEXT;

-- Reads by agent and by run come from two side tables kept in bulk, as the
-- full-text index is (migration 0007), not from indexes on decisions: an
-- index ordered by agent or run dirties one leaf page per agent or run a
-- group commit carries (migration 0007 dropped decisions_agent and
-- decisions_run for that: 52 pages for a batch of 32 decisions over 50
-- agents; put back as indexes they cost 15% of the throughput in
-- alternated runs). The group writer adds the rows written since
-- search_progress.upto ('decision_agents', 'decision_runs') once
-- sqlstore.LinkBatch of them wait, sorted, so an agent's leaf is written
-- once per bulk; every read catches up first, so it misses no committed
-- decision.
--
-- decision_agents serves an agent's most recent decisions (GET
-- /v1/graph/agent/:id), an incident's decisions among its agent's around
-- when it opened, and the risk scoreboard's 24-hour windows (it holds the
-- composite score).
CREATE TABLE decision_agents (
    tenant_id            TEXT NOT NULL,
    agent_id             TEXT NOT NULL,
    created_at           TEXT NOT NULL,
    seq                  INTEGER NOT NULL,
    composite_risk_score INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, agent_id, created_at, seq)
) WITHOUT ROWID;
-- decision_runs serves GET /v1/graph/run/:run_id.
CREATE TABLE decision_runs (
    tenant_id TEXT NOT NULL,
    run_id    TEXT NOT NULL,
    seq       INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, run_id, seq)
) WITHOUT ROWID;
INSERT INTO decision_agents (tenant_id, agent_id, created_at, seq, composite_risk_score)
    SELECT tenant_id, agent_id, created_at, seq, composite_risk_score FROM decisions;
INSERT INTO decision_runs (tenant_id, run_id, seq)
    SELECT tenant_id, run_id, seq FROM decisions WHERE run_id IS NOT NULL;
INSERT INTO search_progress (name, upto) VALUES
    ('decision_agents', COALESCE((SELECT max(seq) FROM decisions), 0)),
    ('decision_runs', COALESCE((SELECT max(seq) FROM decisions), 0));
-- A decision deleted (a tenant's, with the tenant) leaves them too, if it
-- was added.
CREATE TRIGGER decision_links_delete AFTER DELETE ON decisions BEGIN
    DELETE FROM decision_agents WHERE tenant_id = old.tenant_id AND agent_id = old.agent_id
        AND created_at = old.created_at AND seq = old.seq;
    DELETE FROM decision_runs WHERE old.run_id IS NOT NULL AND tenant_id = old.tenant_id
        AND run_id = old.run_id AND seq = old.seq;
END;

-- alerts_source_event serves an incident evidence pack's contributing
-- alerts (those raised by the incident's source events). Alerts are
-- written only when a rule fires, so this random-key index costs little.
CREATE INDEX alerts_source_event ON alerts (tenant_id, source_event_id);
