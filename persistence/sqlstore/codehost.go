package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"svc/persistence"
)

// ---- code-host webhook: replay memory and tenants' own secrets ----

const codehostDeliveryCols = `tenant_id, delivery_id, digest, event_id, event, received_at`

func scanCodehostDelivery(r Row) (persistence.CodehostDelivery, error) {
	var d persistence.CodehostDelivery
	err := r.Scan(&d.TenantID, &d.DeliveryID, &d.Digest, &d.EventID, &d.Event, Time{&d.ReceivedAt})
	if IsNoRows(err) {
		return d, persistence.ErrNotFound
	}
	return d, err
}

// ClaimCodehostDelivery implements persistence.CodehostStore. The primary
// key (tenant_id, delivery_id) and the unique digest arbitrate: the
// insert that loses to either records nothing, and the row in its way is
// read back in the same transaction (on Postgres, after the winner's
// commit, which the losing insert waits for).
func (s *Store) ClaimCodehostDelivery(ctx context.Context, d persistence.CodehostDelivery, since time.Time) (persistence.CodehostDelivery, bool, error) {
	// Forgetting is a transaction of its own, so that the claim never
	// holds locks on other deliveries' expired rows.
	if err := s.DB.Tx(ctx, func(q Querier) error {
		_, err := q.Exec(ctx, `DELETE FROM codehost_deliveries WHERE received_at < $1`, since)
		return err
	}); err != nil {
		return persistence.CodehostDelivery{}, false, err
	}
	// A row in the way can vanish before it is read (its tenant deleted,
	// another node forgetting it): then the claim is tried again.
	for range 3 {
		var (
			in    persistence.CodehostDelivery
			fresh bool
		)
		err := s.DB.Tx(ctx, func(q Querier) error {
			n, err := q.Exec(ctx, `INSERT INTO codehost_deliveries (`+codehostDeliveryCols+`) VALUES ($1, $2, $3, $4, $5, $6)
				ON CONFLICT DO NOTHING`, d.TenantID, d.DeliveryID, d.Digest, d.EventID, d.Event, d.ReceivedAt)
			if err != nil {
				return err
			}
			if fresh = n == 1; fresh {
				return nil
			}
			// The row with this tenant's delivery id first: it tells a
			// retry from a reused id.
			in, err = scanCodehostDelivery(q.QueryRow(ctx, `SELECT `+codehostDeliveryCols+` FROM codehost_deliveries
				WHERE (tenant_id = $1 AND delivery_id = $2) OR digest = $3
				ORDER BY CASE WHEN tenant_id = $1 AND delivery_id = $2 THEN 0 ELSE 1 END LIMIT 1`,
				d.TenantID, d.DeliveryID, d.Digest))
			return err
		})
		switch {
		case err == nil && fresh:
			return d, true, nil
		case err == nil:
			return in, false, nil
		case !errors.Is(err, persistence.ErrNotFound):
			return persistence.CodehostDelivery{}, false, err
		}
	}
	return persistence.CodehostDelivery{}, false, fmt.Errorf("sqlstore: code-host delivery %q: the delivery in the way kept vanishing", d.DeliveryID)
}

// CodehostWebhookSecret implements persistence.CodehostStore.
func (s *Store) CodehostWebhookSecret(ctx context.Context, tenantID string) (string, error) {
	var secret string
	err := s.DB.Reader().QueryRow(ctx, `SELECT secret FROM codehost_webhook_secrets WHERE tenant_id = $1`, tenantID).Scan(&secret)
	if IsNoRows(err) {
		return "", nil
	}
	return secret, err
}

// SetCodehostWebhookSecret implements persistence.CodehostStore.
func (s *Store) SetCodehostWebhookSecret(ctx context.Context, tenantID, secret string, at time.Time, audit ...persistence.AuditEvent) error {
	return s.DB.Tx(ctx, func(q Querier) error {
		var one int
		if err := q.QueryRow(ctx, `SELECT 1 FROM tenants WHERE id = $1`, tenantID).Scan(&one); err != nil {
			if IsNoRows(err) {
				return persistence.ErrNotFound
			}
			return err
		}
		var err error
		if secret == "" {
			_, err = q.Exec(ctx, `DELETE FROM codehost_webhook_secrets WHERE tenant_id = $1`, tenantID)
		} else {
			_, err = q.Exec(ctx, `INSERT INTO codehost_webhook_secrets (tenant_id, secret, updated_at) VALUES ($1, $2, $3)
				ON CONFLICT (tenant_id) DO UPDATE SET secret = excluded.secret, updated_at = excluded.updated_at`, tenantID, secret, at)
		}
		if err != nil {
			return err
		}
		return s.insertAudit(ctx, q, audit)
	})
}
