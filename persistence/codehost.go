package persistence

import (
	"context"
	"time"
)

// CodehostDelivery is one code-host webhook delivery that was accepted
// (it became an event), remembered for the replay window so that the same
// delivery is never accepted twice, on any node (issue 35).
type CodehostDelivery struct {
	TenantID string
	// DeliveryID is the code host's id of the delivery (X-Codehost-Delivery),
	// the same on every retry of one delivery; unique within a tenant.
	DeliveryID string
	// Digest identifies the signed body: the hex SHA-256 of its verified
	// signature, which covers the body and the secret that signed it.
	// Unique across tenants: a signed body is accepted once, into one
	// tenant, under one delivery id.
	Digest string
	// EventID and Event are what the delivery became (the event's id and
	// its normalized pair, e.g. pull_request.merged).
	EventID    string
	Event      string
	ReceivedAt time.Time
}

// CodehostStore keeps the code-host webhook's replay memory and the
// tenants' own webhook secrets.
type CodehostStore interface {
	// ClaimCodehostDelivery forgets the deliveries received before since,
	// then records d unless a remembered delivery has d's tenant and
	// delivery id, or d's digest. It reports whether it recorded d; when
	// it did not, it returns the remembered delivery in the way (the one
	// with d's tenant and delivery id when there is one). Atomic across
	// the nodes sharing the database: of concurrent claims of one delivery
	// id or one digest, one records.
	ClaimCodehostDelivery(ctx context.Context, d CodehostDelivery, since time.Time) (CodehostDelivery, bool, error)
	// CodehostWebhookSecret returns the tenant's own webhook secret, or ""
	// when it has none (or there is no such tenant). It reads the primary.
	CodehostWebhookSecret(ctx context.Context, tenantID string) (string, error)
	// SetCodehostWebhookSecret sets the tenant's own webhook secret, or
	// removes it when secret is "", with the audit events, in one
	// transaction. ErrNotFound when there is no such tenant.
	SetCodehostWebhookSecret(ctx context.Context, tenantID, secret string, at time.Time, audit ...AuditEvent) error
}
