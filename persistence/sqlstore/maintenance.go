package sqlstore

import (
	"context"
	"fmt"
	"time"

	"svc/persistence"
)

const chainCheckSelect = `SELECT t.id, COALESCE(c.verified_seq, 0), COALESCE(c.verified_hash, ''),
	COALESCE(c.sweep_seq, 0), COALESCE(c.broken_seq, 0), COALESCE(c.broken_error, ''), c.checked_at
	FROM tenants t LEFT JOIN receipt_checks c ON c.tenant_id = t.id`

func scanChainCheck(r Row) (persistence.ChainCheckState, error) {
	var st persistence.ChainCheckState
	var at *time.Time
	err := r.Scan(&st.TenantID, &st.VerifiedSeq, &st.VerifiedHash, &st.SweepSeq, &st.BrokenSeq, &st.BrokenError, NullTime{&at})
	if IsNoRows(err) {
		return st, persistence.ErrNotFound
	}
	if at != nil {
		st.CheckedAt = *at
	}
	return st, err
}

// ChainChecks implements persistence.MaintenanceStore.
func (s *Store) ChainChecks(ctx context.Context) ([]persistence.ChainCheckState, error) {
	rows, err := s.DB.Reader().Query(ctx, chainCheckSelect+` ORDER BY t.seq`)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanChainCheck)
}

// ChainCheck implements persistence.MaintenanceStore.
func (s *Store) ChainCheck(ctx context.Context, tenantID string) (persistence.ChainCheckState, error) {
	return scanChainCheck(s.DB.Reader().QueryRow(ctx, chainCheckSelect+` WHERE t.id = $1`, tenantID))
}

// SaveChainCheck implements persistence.MaintenanceStore.
func (s *Store) SaveChainCheck(ctx context.Context, st persistence.ChainCheckState) error {
	var at any
	if !st.CheckedAt.IsZero() {
		at = st.CheckedAt
	}
	return s.DB.Tx(ctx, func(q Querier) error {
		_, err := q.Exec(ctx, `INSERT INTO receipt_checks (tenant_id, verified_seq, verified_hash, sweep_seq, broken_seq, broken_error, checked_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (tenant_id) DO UPDATE SET verified_seq = excluded.verified_seq, verified_hash = excluded.verified_hash,
				sweep_seq = excluded.sweep_seq, broken_seq = excluded.broken_seq, broken_error = excluded.broken_error,
				checked_at = excluded.checked_at`,
			st.TenantID, st.VerifiedSeq, st.VerifiedHash, st.SweepSeq, st.BrokenSeq, st.BrokenError, at)
		return err
	})
}

// ArchiveAudit implements persistence.MaintenanceStore: one transaction
// copies the oldest events of the batch into audit_archive and deletes the
// same rows (the same selection, by seq, inside the transaction), so that
// a run stopped at any point leaves every event in exactly one of the two
// tables.
func (s *Store) ArchiveAudit(ctx context.Context, cutoff, archivedAt time.Time, limit int) (int, error) {
	var moved int64
	err := s.DB.Tx(ctx, func(q Querier) error {
		const batch = `SELECT seq FROM audit_events WHERE created_at < $1 ORDER BY seq LIMIT $2`
		copied, err := q.Exec(ctx, `INSERT INTO audit_archive (seq, id, tenant_id, event_type, action, actor, agent_id, decision_id,
			details, created_at, archived_at)
			SELECT seq, id, tenant_id, event_type, action, actor, agent_id, decision_id, details, created_at, $3
			FROM audit_events WHERE seq IN (`+batch+`)`, cutoff, limit, archivedAt)
		if err != nil {
			return err
		}
		if moved, err = q.Exec(ctx, `DELETE FROM audit_events WHERE seq IN (`+batch+`)`, cutoff, limit); err != nil {
			return err
		}
		if moved != copied {
			return fmt.Errorf("sqlstore: audit archival copied %d events but would delete %d; nothing moved", copied, moved)
		}
		return nil
	})
	return int(moved), err
}

// PruneRunTaint implements persistence.MaintenanceStore.
func (s *Store) PruneRunTaint(ctx context.Context, cutoff time.Time) (int, error) {
	var n int64
	err := s.DB.Tx(ctx, func(q Querier) error {
		var err error
		n, err = q.Exec(ctx, `DELETE FROM run_taint WHERE updated_at < $1`, cutoff.UTC())
		return err
	})
	return int(n), err
}

// RecordJobRun implements persistence.MaintenanceStore.
func (s *Store) RecordJobRun(ctx context.Context, r persistence.JobRunRecord) error {
	failed := 0
	if r.Outcome != "ok" {
		failed = 1
	}
	return s.DB.Tx(ctx, func(q Querier) error {
		_, err := q.Exec(ctx, `INSERT INTO maintenance_runs (job, node_id, started_at, duration_us, outcome, summary, error, runs, failures)
			VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8)
			ON CONFLICT (job) DO UPDATE SET node_id = excluded.node_id, started_at = excluded.started_at,
				duration_us = excluded.duration_us, outcome = excluded.outcome, summary = excluded.summary, error = excluded.error,
				runs = maintenance_runs.runs + 1, failures = maintenance_runs.failures + excluded.failures`,
			r.Job, r.NodeID, r.StartedAt, r.Duration.Microseconds(), r.Outcome, r.Summary, r.Error, failed)
		return err
	})
}

// JobRuns implements persistence.MaintenanceStore.
func (s *Store) JobRuns(ctx context.Context) ([]persistence.JobRunRecord, error) {
	rows, err := s.DB.Reader().Query(ctx, `SELECT job, node_id, started_at, duration_us, outcome, summary, error, runs, failures
		FROM maintenance_runs ORDER BY job`)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r Row) (persistence.JobRunRecord, error) {
		var j persistence.JobRunRecord
		var us int64
		err := r.Scan(&j.Job, &j.NodeID, Time{&j.StartedAt}, &us, &j.Outcome, &j.Summary, &j.Error, &j.Runs, &j.Failures)
		j.Duration = time.Duration(us) * time.Microsecond
		return j, err
	})
}

// Lease implements persistence.MaintenanceStore.
func (s *Store) Lease(ctx context.Context, name string) (persistence.Lease, error) {
	l := persistence.Lease{Name: name}
	err := s.DB.Reader().QueryRow(ctx, `SELECT holder, expires_at FROM leader_lease WHERE name = $1`, name).Scan(&l.Holder, Time{&l.ExpiresAt})
	if IsNoRows(err) {
		return l, persistence.ErrNotFound
	}
	return l, err
}
