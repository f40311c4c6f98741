package sqlstore

import (
	"context"
	"time"

	"svc/persistence"
)

// ---- the reads of a policy simulation (CONTRACT §18) ----

// SimulationFloor implements persistence.DecisionStore.
func (s *Store) SimulationFloor(ctx context.Context, tenantID string, from, to time.Time, n int) (int64, error) {
	var seq int64
	err := s.DB.Replica().QueryRow(ctx, `SELECT seq FROM decisions WHERE tenant_id = $1 AND created_at >= $2 AND created_at < $3
		ORDER BY seq DESC LIMIT 1 OFFSET $4`, tenantID, from.UTC(), to.UTC(), n).Scan(&seq)
	if IsNoRows(err) {
		return 0, nil
	}
	return seq, err
}

// SimulationDecisions implements persistence.DecisionStore.
func (s *Store) SimulationDecisions(ctx context.Context, tenantID string, from, to time.Time, afterSeq int64, limit int) ([]persistence.Decision, error) {
	rows, err := s.DB.Replica().Query(ctx, `SELECT `+decisionCols+decisionFrom+` WHERE d.tenant_id = $1 AND d.seq > $2
		AND d.created_at >= $3 AND d.created_at < $4 ORDER BY d.seq LIMIT $5`, tenantID, afterSeq, from.UTC(), to.UTC(), limit)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanDecision)
}
