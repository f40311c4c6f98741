package sqlstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"svc/persistence"
)

// The evidence reads find decisions by agent and by run through
// Dialect.AgentDecisions and RunDecisions (SQLite: side tables kept in
// bulk, brought up to date first by catchUpSearch; Postgres: decisions'
// own indexes), then read the decisions by seq.

// AgentDecisions implements persistence.EvidenceStore.
func (s *Store) AgentDecisions(ctx context.Context, tenantID, agentID string, limit int) ([]persistence.Decision, error) {
	if err := s.catchUpSearch(ctx); err != nil {
		return nil, err
	}
	rows, err := s.DB.Reader().Query(ctx, `SELECT `+decisionCols+decisionFrom+` WHERE d.seq IN (SELECT seq FROM `+s.Dialect.AgentDecisions+`
		WHERE tenant_id = $1 AND agent_id = $2 ORDER BY created_at DESC, seq DESC LIMIT $3) ORDER BY d.created_at DESC, d.seq DESC`,
		tenantID, agentID, limit)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanDecision)
}

// RunDecisions implements persistence.EvidenceStore.
func (s *Store) RunDecisions(ctx context.Context, tenantID, runID string, limit int) ([]persistence.Decision, error) {
	if err := s.catchUpSearch(ctx); err != nil {
		return nil, err
	}
	rows, err := s.DB.Reader().Query(ctx, `SELECT `+decisionCols+decisionFrom+` WHERE d.seq IN (SELECT seq FROM `+s.Dialect.RunDecisions+`
		WHERE tenant_id = $1 AND run_id = $2 ORDER BY seq DESC LIMIT $3) ORDER BY d.seq`, tenantID, runID, limit)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanDecision)
}

// EventDecisions implements persistence.EvidenceStore.
func (s *Store) EventDecisions(ctx context.Context, tenantID, agentID string, eventIDs []string, from, to time.Time) ([]persistence.Decision, error) {
	if len(eventIDs) == 0 {
		return []persistence.Decision{}, nil
	}
	if err := s.catchUpSearch(ctx); err != nil {
		return nil, err
	}
	args, in := inList([]any{tenantID, agentID, from, to}, eventIDs)
	rows, err := s.DB.Reader().Query(ctx, `SELECT `+decisionCols+decisionFrom+` WHERE d.seq IN (SELECT seq FROM `+s.Dialect.AgentDecisions+`
		WHERE tenant_id = $1 AND agent_id = $2 AND created_at >= $3 AND created_at <= $4)
		AND d.event_id IN (`+in+`) ORDER BY d.seq`, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanDecision)
}

// AgentRisk implements persistence.EvidenceStore: one range of the
// agent relation per agent, which holds the composite score.
func (s *Store) AgentRisk(ctx context.Context, tenantID string, agentIDs []string, from, split, to time.Time) ([]persistence.AgentRiskSums, error) {
	if err := s.catchUpSearch(ctx); err != nil {
		return nil, err
	}
	out := make([]persistence.AgentRiskSums, 0, len(agentIDs))
	for _, id := range agentIDs {
		r := persistence.AgentRiskSums{AgentID: id}
		err := s.DB.Reader().QueryRow(ctx, `SELECT
			COALESCE(SUM(CASE WHEN created_at < $4 THEN composite_risk_score ELSE 0 END), 0),
			COALESCE(SUM(CASE WHEN created_at >= $4 THEN composite_risk_score ELSE 0 END), 0),
			COALESCE(SUM(CASE WHEN created_at < $4 THEN 1 ELSE 0 END), 0),
			COALESCE(SUM(CASE WHEN created_at >= $4 THEN 1 ELSE 0 END), 0)
			FROM `+s.Dialect.AgentDecisions+` WHERE tenant_id = $1 AND agent_id = $2 AND created_at >= $3 AND created_at < $5`,
			tenantID, id, from, split, to).Scan(&r.PreviousSum, &r.CurrentSum, &r.PreviousCount, &r.CurrentCount)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// AlertsBySourceEvents implements persistence.EvidenceStore.
func (s *Store) AlertsBySourceEvents(ctx context.Context, tenantID string, eventIDs []string) ([]persistence.Alert, error) {
	if len(eventIDs) == 0 {
		return []persistence.Alert{}, nil
	}
	args, in := inList([]any{tenantID}, eventIDs)
	rows, err := s.DB.Reader().Query(ctx, `SELECT `+alertCols+` FROM alerts WHERE tenant_id = $1 AND source_event_id IN (`+in+`)`, args...)
	if err != nil {
		return nil, err
	}
	out, err := collect(rows, scanAlert)
	slices.SortFunc(out, func(a, b persistence.Alert) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, err
}

// DecisionStats implements persistence.EvidenceStore: one pass over the
// tenant's decisions of the range, counted here as the rows stream by.
// (A GROUP BY in SQL sorts every row of the range first: on SQLite, with
// temp_store MEMORY, a sorter the size of the range, which an evidence
// pack that must stream in little memory cannot afford.)
func (s *Store) DecisionStats(ctx context.Context, tenantID string, from, to time.Time) (persistence.DecisionStats, error) {
	st := persistence.DecisionStats{ByDecision: map[string]int64{}, ByTrustLevel: map[string]int64{}}
	rows, err := s.DB.Reader().Query(ctx, `SELECT decision, root_trust_level FROM decisions
		WHERE tenant_id = $1 AND created_at >= $2 AND created_at < $3`, tenantID, from, to)
	if err != nil {
		return st, err
	}
	defer rows.Close()
	for rows.Next() {
		var decision, trust string
		if err := rows.Scan(&decision, &trust); err != nil {
			return st, err
		}
		st.Total++
		st.ByDecision[decision]++
		st.ByTrustLevel[trust]++
	}
	return st, rows.Err()
}

// inList appends vals to args and returns the placeholders that name them,
// comma-separated, for an IN (...) list.
func inList(args []any, vals []string) ([]any, string) {
	marks := make([]string, len(vals))
	for i, v := range vals {
		args = append(args, v)
		marks[i] = fmt.Sprintf("$%d", len(args))
	}
	return args, strings.Join(marks, ",")
}
