package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"svc/persistence"
)

// ---- webhook export subscriptions ----

const webhookCols = `seq, id, tenant_id, url, min_severity, format, enabled, delivery_secret, consecutive_failures, delivery_status,
	revision, created_at, updated_at, last_delivery_at`

func scanWebhook(row Row) (persistence.WebhookSubscription, error) {
	var w persistence.WebhookSubscription
	err := row.Scan(&w.Seq, &w.ID, &w.TenantID, &w.URL, &w.MinSeverity, &w.Format, &w.Enabled, &w.DeliverySecret,
		&w.ConsecutiveFailures, &w.DeliveryStatus, &w.Revision, Time{&w.CreatedAt}, Time{&w.UpdatedAt}, NullTime{&w.LastDeliveryAt})
	if IsNoRows(err) {
		return w, persistence.ErrNotFound
	}
	return w, err
}

func getWebhook(ctx context.Context, q Querier, tenantID, id string) (persistence.WebhookSubscription, error) {
	return scanWebhook(q.QueryRow(ctx, `SELECT `+webhookCols+` FROM webhook_subscriptions WHERE tenant_id = $1 AND id = $2`, tenantID, id))
}

// CreateWebhook implements persistence.WebhookStore.
func (s *Store) CreateWebhook(ctx context.Context, w persistence.WebhookSubscription, audit ...persistence.AuditEvent) (persistence.WebhookSubscription, error) {
	var out persistence.WebhookSubscription
	err := s.DB.Tx(ctx, func(q Querier) error {
		if _, err := q.Exec(ctx, `INSERT INTO webhook_subscriptions (id, tenant_id, url, min_severity, format, enabled, delivery_secret,
			consecutive_failures, delivery_status, revision, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8, 1, $9, $10)`,
			w.ID, w.TenantID, w.URL, w.MinSeverity, w.Format, w.Enabled, w.DeliverySecret, persistence.WebhookHealthy,
			w.CreatedAt, w.UpdatedAt); err != nil {
			return err
		}
		if err := s.insertAudit(ctx, q, audit); err != nil {
			return err
		}
		var err error
		out, err = getWebhook(ctx, q, w.TenantID, w.ID)
		return err
	})
	return out, err
}

// GetWebhook implements persistence.WebhookStore.
func (s *Store) GetWebhook(ctx context.Context, tenantID, id string) (persistence.WebhookSubscription, error) {
	return getWebhook(ctx, s.DB.Reader(), tenantID, id)
}

// ListWebhooks implements persistence.WebhookStore.
func (s *Store) ListWebhooks(ctx context.Context, tenantID string, p persistence.Page) ([]persistence.WebhookSubscription, error) {
	tail, extra := pageClause(p, 2)
	rows, err := s.DB.Replica().Query(ctx, `SELECT `+webhookCols+` FROM webhook_subscriptions WHERE tenant_id = $1`+tail,
		append([]any{tenantID}, extra...)...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanWebhook)
}

// UpdateWebhook implements persistence.WebhookStore.
func (s *Store) UpdateWebhook(ctx context.Context, tenantID, id string, p persistence.WebhookPatch, at time.Time, audit ...persistence.AuditEvent) (persistence.WebhookSubscription, error) {
	var out persistence.WebhookSubscription
	sets := []string{`consecutive_failures = 0`, `delivery_status = $1`, `revision = revision + 1`, `updated_at = $2`}
	args := []any{persistence.WebhookHealthy, at}
	set := func(col string, v any) {
		args = append(args, v)
		sets = append(sets, fmt.Sprintf(`%s = $%d`, col, len(args)))
	}
	if p.URL != nil {
		set("url", *p.URL)
	}
	if p.MinSeverity != nil {
		set("min_severity", *p.MinSeverity)
	}
	if p.Format != nil {
		set("format", *p.Format)
	}
	if p.Enabled != nil {
		set("enabled", *p.Enabled)
	}
	n := len(args)
	stmt := `UPDATE webhook_subscriptions SET ` + strings.Join(sets, ", ") +
		fmt.Sprintf(` WHERE tenant_id = $%d AND id = $%d`, n+1, n+2)
	args = append(args, tenantID, id)
	err := s.DB.Tx(ctx, func(q Querier) error {
		changed, err := q.Exec(ctx, stmt, args...)
		if err != nil {
			return err
		}
		if changed == 0 {
			return persistence.ErrNotFound
		}
		if err := s.insertAudit(ctx, q, audit); err != nil {
			return err
		}
		out, err = getWebhook(ctx, q, tenantID, id)
		return err
	})
	return out, err
}

// DeleteWebhook implements persistence.WebhookStore.
func (s *Store) DeleteWebhook(ctx context.Context, tenantID, id string, audit ...persistence.AuditEvent) error {
	return s.DB.Tx(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, `DELETE FROM webhook_subscriptions WHERE tenant_id = $1 AND id = $2`, tenantID, id)
		if err != nil {
			return err
		}
		if n == 0 {
			return persistence.ErrNotFound
		}
		return s.insertAudit(ctx, q, audit)
	})
}

// DeliverableWebhooks implements persistence.WebhookStore.
func (s *Store) DeliverableWebhooks(ctx context.Context, tenantID string) ([]persistence.WebhookSubscription, error) {
	rows, err := s.DB.Reader().Query(ctx, `SELECT `+webhookCols+` FROM webhook_subscriptions
		WHERE tenant_id = $1 AND enabled = $2 AND consecutive_failures < $3 ORDER BY seq`, tenantID, true, persistence.WebhookDeadAfter)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanWebhook)
}

// RecordWebhookDelivery implements persistence.WebhookStore. Each result is
// one UPDATE whose new values are computed from the row's current ones, so
// concurrent results (several deliveries in flight, several nodes) all
// count; no read precedes it.
func (s *Store) RecordWebhookDelivery(ctx context.Context, tenantID, id string, revision int64, ok bool, at time.Time) (int, error) {
	// $1 healthy/degraded, $2 dead, $3 the dead threshold, $4 at, $5.. the row.
	stmt := `UPDATE webhook_subscriptions SET
		consecutive_failures = consecutive_failures + 1,
		delivery_status = CASE WHEN consecutive_failures + 1 >= $3 THEN $2 ELSE $1 END,
		last_delivery_at = $4
		WHERE tenant_id = $5 AND id = $6 AND revision = $7
		RETURNING consecutive_failures`
	first := persistence.WebhookDegraded
	if ok {
		// A success resets the count, except on a dead subscription: only an
		// update revives it.
		stmt = `UPDATE webhook_subscriptions SET
		consecutive_failures = CASE WHEN consecutive_failures >= $3 THEN consecutive_failures ELSE 0 END,
		delivery_status = CASE WHEN consecutive_failures >= $3 THEN $2 ELSE $1 END,
		last_delivery_at = $4
		WHERE tenant_id = $5 AND id = $6 AND revision = $7
		RETURNING consecutive_failures`
		first = persistence.WebhookHealthy
	}
	var failures int
	err := s.DB.Tx(ctx, func(q Querier) error {
		err := q.QueryRow(ctx, stmt, first, persistence.WebhookDead, persistence.WebhookDeadAfter, at, tenantID, id, revision).Scan(&failures)
		if IsNoRows(err) {
			return persistence.ErrNotFound
		}
		return err
	})
	return failures, err
}
