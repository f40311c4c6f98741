package sqlstore

import (
	"context"
	"fmt"
	"time"

	"svc/persistence"
)

// ---- witnesses of the receipt log ----

const witnessCols = `seq, id, tenant_id, url, vkey, size, status, error, checked_at, created_at`

func scanWitness(row Row) (persistence.ReceiptWitness, error) {
	var w persistence.ReceiptWitness
	err := row.Scan(&w.Seq, &w.ID, &w.TenantID, &w.URL, &w.Key, &w.Size, &w.Status, &w.Error, NullTime{&w.CheckedAt}, Time{&w.CreatedAt})
	if IsNoRows(err) {
		return w, persistence.ErrNotFound
	}
	return w, err
}

// CreateWitness implements persistence.WitnessStore: the count and the
// insert are one transaction, and (tenant_id, vkey) is unique.
func (s *Store) CreateWitness(ctx context.Context, w persistence.ReceiptWitness, audit ...persistence.AuditEvent) (persistence.ReceiptWitness, error) {
	var out persistence.ReceiptWitness
	err := s.DB.Tx(ctx, func(q Querier) error {
		var n int
		if err := q.QueryRow(ctx, `SELECT count(*) FROM receipt_witnesses WHERE tenant_id = $1`, w.TenantID).Scan(&n); err != nil {
			return err
		}
		if n >= persistence.MaxWitnesses {
			return fmt.Errorf("%w: the tenant has %d witnesses, the most it may have", persistence.ErrConflict, n)
		}
		if _, err := q.Exec(ctx, `INSERT INTO receipt_witnesses (id, tenant_id, url, vkey, size, status, error, created_at)
			VALUES ($1, $2, $3, $4, 0, $5, '', $6)`, w.ID, w.TenantID, w.URL, w.Key, persistence.WitnessPending, w.CreatedAt.UTC()); err != nil {
			return err
		}
		if err := s.insertAudit(ctx, q, audit); err != nil {
			return err
		}
		var err error
		out, err = scanWitness(q.QueryRow(ctx, `SELECT `+witnessCols+` FROM receipt_witnesses WHERE id = $1`, w.ID))
		return err
	})
	return out, err
}

// ListWitnesses implements persistence.WitnessStore.
func (s *Store) ListWitnesses(ctx context.Context, tenantID string) ([]persistence.ReceiptWitness, error) {
	rows, err := s.DB.Reader().Query(ctx, `SELECT `+witnessCols+` FROM receipt_witnesses WHERE tenant_id = $1 ORDER BY seq`, tenantID)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanWitness)
}

// DeleteWitness implements persistence.WitnessStore.
func (s *Store) DeleteWitness(ctx context.Context, tenantID, id string, audit ...persistence.AuditEvent) error {
	return s.DB.Tx(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, `DELETE FROM receipt_witnesses WHERE tenant_id = $1 AND id = $2`, tenantID, id)
		if err != nil {
			return err
		}
		if n == 0 {
			return persistence.ErrNotFound
		}
		return s.insertAudit(ctx, q, audit)
	})
}

// WitnessesBehind implements persistence.WitnessStore.
func (s *Store) WitnessesBehind(ctx context.Context) ([]persistence.ReceiptWitness, error) {
	rows, err := s.DB.Reader().Query(ctx, `SELECT w.seq, w.id, w.tenant_id, w.url, w.vkey, w.size, w.status, w.error, w.checked_at, w.created_at
		FROM receipt_witnesses w
		JOIN receipt_log l ON l.tenant_id = w.tenant_id WHERE w.size < l.signed AND w.status <> $1 ORDER BY w.tenant_id, w.seq`,
		persistence.WitnessRefused)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanWitness)
}

// RecordWitness implements persistence.WitnessStore.
func (s *Store) RecordWitness(ctx context.Context, tenantID, id string, size int64, status, errText string, at time.Time) error {
	return s.updateOne(ctx, `UPDATE receipt_witnesses SET size = $3, status = $4, error = $5, checked_at = $6
		WHERE tenant_id = $1 AND id = $2`, tenantID, id, size, status, errText, at.UTC())
}

// AddCosignatures implements persistence.WitnessStore.
func (s *Store) AddCosignatures(ctx context.Context, tenantID string, size int64, lines string) error {
	return s.updateOne(ctx, `UPDATE receipt_checkpoints SET note = note || $3 WHERE tenant_id = $1 AND tree_size = $2`, tenantID, size, lines)
}

// updateOne runs one UPDATE in its own transaction: ErrNotFound when it
// changed no row.
func (s *Store) updateOne(ctx context.Context, stmt string, args ...any) error {
	return s.DB.Tx(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, stmt, args...)
		if err == nil && n == 0 {
			err = persistence.ErrNotFound
		}
		return err
	})
}
