package httpapi

// The evidence graph (SPEC 2.1, 4.4): read-only, built at query time from
// the stored records (rules/evidence decides its shape).

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"svc/persistence"
	"svc/rules/evidence"
)

// Bounds of the graphs' reads.
const (
	// agentGraphDecisions: SPEC 4.4, the agent's 50 most recent decisions.
	agentGraphDecisions = 50
	// runGraphDecisions caps a run's decisions in its graph (its most
	// recent); a run longer than this is drawn by its last 1,000 calls, and
	// the response is built in memory whole (SPEC 4.4 rule 5).
	runGraphDecisions = 1000
	// incidentLookback bounds the search for an incident's decisions: its
	// events are its agent's decisions from a correlation window (at most
	// ten minutes, rules/correlate) before it opened; a day covers any
	// backlog of the SOC pipeline. incidentLookahead covers clock skew
	// between the node that decided and the node that opened it.
	incidentLookback  = 24 * time.Hour
	incidentLookahead = 5 * time.Minute
)

func (s *Server) registerGraph() {
	s.register(Route{Method: "GET", Path: "/graph/run/:run_id", Access: AccessViewer, Tag: "evidence", Resp: evidence.Graph{}, Errors: []int{404},
		Summary: "The evidence graph of one run (trace.run_id), depth 3: agent, run, tool calls, decisions, approvals, receipts and matched policies. 404 when the tenant has no decision in the run. A run of more than 1,000 decisions is drawn by its 1,000 most recent.",
		Handle:  s.runGraph})
	s.register(Route{Method: "GET", Path: "/graph/incident/:incident_id", Access: AccessViewer, Tag: "evidence", Resp: evidence.Graph{}, Errors: []int{404},
		Summary: "The evidence graph of one incident, depth 2 (no policy nodes): the incident, its agent, and the decisions its source_event_ids name (each decision stores the id of its authorize_decision event), with their runs, approvals and receipts.",
		Handle:  s.incidentGraph})
	s.register(Route{Method: "GET", Path: "/graph/agent/:agent_id", Access: AccessViewer, Tag: "evidence", Resp: evidence.Graph{}, Errors: []int{404},
		Query:   []QueryParam{{Name: "depth", Type: "integer", Description: "1: tool calls and decisions with their runs; 2: also approvals and receipts; 3 (default): also matched policies. Clamped to 1..5; 4 and 5 act as 3"}},
		Summary: "The evidence graph of one agent's 50 most recent decisions.",
		Handle:  s.agentGraph})
}

// runGraph serves GET /graph/run/:run_id.
func (s *Server) runGraph(c *Call) (any, error) {
	if err := s.Authorizer.Consistent(c.Ctx()); err != nil {
		return nil, err
	}
	ds, err := s.Store.RunDecisions(c.Ctx(), c.Principal.TenantID, c.Param("run_id"), runGraphDecisions)
	if err != nil {
		return nil, err
	}
	if len(ds) == 0 {
		return nil, notFound("run")
	}
	recs, err := s.graphRecords(c, ds)
	if err != nil {
		return nil, err
	}
	return evidence.Build(recs, evidence.DepthPolicies, true), nil
}

// agentGraph serves GET /graph/agent/:agent_id.
func (s *Server) agentGraph(c *Call) (any, error) {
	depth := evidence.DepthPolicies
	// A depth that is present but empty (depth=) is not an integer
	// either: 400, as limit= and offset= are (CONTRACT §10).
	if q := c.R.URL.Query(); q.Has("depth") {
		n, err := strconv.Atoi(strings.TrimSpace(q.Get("depth")))
		if err != nil {
			return nil, invalidField("depth", "an integer (1 to 5)")
		}
		depth = evidence.ClampDepth(n)
	}
	if err := s.Authorizer.Consistent(c.Ctx()); err != nil {
		return nil, err
	}
	agent, err := s.Store.GetAgent(c.Ctx(), c.Principal.TenantID, c.Param("agent_id"))
	if err != nil {
		return nil, orNotFound(err, "agent")
	}
	ds, err := s.Store.AgentDecisions(c.Ctx(), c.Principal.TenantID, agent.ID, agentGraphDecisions)
	if err != nil {
		return nil, err
	}
	recs, err := s.graphRecords(c, ds, agent)
	if err != nil {
		return nil, err
	}
	recs.Subject = &agent // its node even before its first decision
	return evidence.Build(recs, depth, true), nil
}

// incidentGraph serves GET /graph/incident/:incident_id: SPEC 4.4's path
// source_event_ids → the decision that stores the event's id.
func (s *Server) incidentGraph(c *Call) (any, error) {
	recs, err := s.incidentRecords(c)
	if err != nil {
		return nil, err
	}
	return evidence.Build(recs, evidence.DepthRecords, false), nil
}

// incidentRecords reads the path's incident (404 for an unknown or
// another tenant's), the decisions behind its events, and their agents and
// approvals, its own agent among them.
func (s *Server) incidentRecords(c *Call) (evidence.Records, error) {
	if err := s.Authorizer.Consistent(c.Ctx()); err != nil {
		return evidence.Records{}, err
	}
	in, err := s.Store.GetIncident(c.Ctx(), c.Principal.TenantID, c.Param("incident_id"))
	if err != nil {
		return evidence.Records{}, orNotFound(err, "incident")
	}
	ds, err := s.incidentDecisions(c, in)
	if err != nil {
		return evidence.Records{}, err
	}
	recs, err := s.graphRecords(c, ds)
	if err != nil {
		return recs, err
	}
	if _, ok := recs.Agents[in.AgentID]; !ok && in.AgentID != "" {
		if a, err := s.Store.GetAgent(c.Ctx(), c.Principal.TenantID, in.AgentID); err == nil {
			recs.Agents[a.ID] = a
		}
	}
	recs.Incident = &in
	return recs, nil
}

// incidentDecisions are the decisions behind an incident's events.
func (s *Server) incidentDecisions(c *Call, in persistence.Incident) ([]persistence.Decision, error) {
	if in.AgentID == "" || len(in.SourceEventIDs) == 0 {
		return nil, nil
	}
	return s.Store.EventDecisions(c.Ctx(), c.Principal.TenantID, in.AgentID, in.SourceEventIDs,
		in.OpenedAt.Add(-incidentLookback), in.OpenedAt.Add(incidentLookahead))
}

// graphRecords reads what the decisions link to: their agents (but the
// known ones) and approvals.
func (s *Server) graphRecords(c *Call, ds []persistence.Decision, known ...persistence.Agent) (evidence.Records, error) {
	recs := evidence.Records{Decisions: ds, Agents: map[string]persistence.Agent{},
		Approvals: map[string]persistence.Approval{}, Now: time.Now()}
	for _, a := range known { // read already: not read again
		recs.Agents[a.ID] = a
	}
	for _, d := range ds {
		if _, ok := recs.Agents[d.AgentID]; !ok {
			a, err := s.Store.GetAgent(c.Ctx(), c.Principal.TenantID, d.AgentID)
			switch {
			case err == nil:
				recs.Agents[a.ID] = a
			case !errors.Is(err, persistence.ErrNotFound):
				return recs, err
			}
		}
		if d.ApprovalID != "" {
			a, err := s.Store.GetApproval(c.Ctx(), c.Principal.TenantID, d.ApprovalID)
			switch {
			case err == nil:
				recs.Approvals[a.ID] = a
			case !errors.Is(err, persistence.ErrNotFound):
				return recs, err
			}
		}
	}
	return recs, nil
}
