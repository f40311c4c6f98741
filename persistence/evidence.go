package persistence

import (
	"context"
	"time"
)

// EvidenceStore serves the evidence graph, the evidence packs and the risk
// scoreboard (SPEC 4.4, 4.5, 4.7): read-only views of the decision record.
type EvidenceStore interface {
	// AgentDecisions lists an agent's most recent decisions, newest first
	// (decisions_agent), at most limit of them.
	AgentDecisions(ctx context.Context, tenantID, agentID string, limit int) ([]Decision, error)
	// RunDecisions lists a run's decisions (trace.run_id) in the order they
	// were recorded; when the run has more than limit, its limit most
	// recent (decisions_run).
	RunDecisions(ctx context.Context, tenantID, runID string, limit int) ([]Decision, error)
	// EventDecisions finds the decisions whose authorize_decision security
	// event has one of eventIDs (Decision.EventID), among the agent's
	// decisions recorded within [from, to] (decisions_agent): an incident's
	// events are an agent's, from a correlation window before it opened.
	EventDecisions(ctx context.Context, tenantID, agentID string, eventIDs []string, from, to time.Time) ([]Decision, error)
	// AgentRisk sums each listed agent's composite risk scores over the
	// windows [from, split) and [split, to) (decisions_agent, which covers
	// the score).
	AgentRisk(ctx context.Context, tenantID string, agentIDs []string, from, split, to time.Time) ([]AgentRiskSums, error)
	// AlertsBySourceEvents lists the alerts raised by any of eventIDs, in
	// the order they were raised (alerts_source_event).
	AlertsBySourceEvents(ctx context.Context, tenantID string, eventIDs []string) ([]Alert, error)
	// DecisionStats counts the tenant's decisions recorded within [from,
	// to), by decision and by effective trust level.
	DecisionStats(ctx context.Context, tenantID string, from, to time.Time) (DecisionStats, error)
}

// DecisionStats are the counts of a compliance pack's decision statistics.
type DecisionStats struct {
	Total        int64            `json:"total"`
	ByDecision   map[string]int64 `json:"by_decision"`
	ByTrustLevel map[string]int64 `json:"by_trust_level"`
}

// AgentRiskSums is one agent's composite risk over the scoreboard's two
// windows: the previous and the current 24 hours.
type AgentRiskSums struct {
	AgentID                     string
	PreviousSum, CurrentSum     int64
	PreviousCount, CurrentCount int64
}
