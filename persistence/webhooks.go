package persistence

import (
	"context"
	"time"
)

// Webhook subscription values (SPEC 2.3, CONTRACT §7).
const (
	WebhookSeverityInfo = "info"
	WebhookSeverityHigh = "high"

	WebhookFormatJSON = "json"
	WebhookFormatCEF  = "cef"

	WebhookHealthy  = "healthy"
	WebhookDegraded = "degraded"
	WebhookDead     = "dead"
)

// WebhookDeadAfter is the number of consecutive failed deliveries at which
// a subscription is dead (CONTRACT §7): healthy at 0, degraded from 1 to
// WebhookDeadAfter-1, dead from WebhookDeadAfter on. A dead subscription
// gets no deliveries until it is updated.
const WebhookDeadAfter = 10

// WebhookDeliveryStatus is the delivery_status of a subscription with the
// given count of consecutive failed deliveries.
func WebhookDeliveryStatus(consecutiveFailures int) string {
	switch {
	case consecutiveFailures <= 0:
		return WebhookHealthy
	case consecutiveFailures < WebhookDeadAfter:
		return WebhookDegraded
	default:
		return WebhookDead
	}
}

// WebhookSubscription is a tenant's generic export subscriber (SPEC 6.5).
//
// DeliverySecret is the HMAC-SHA256 key that signs every delivery, so it is
// stored as issued (a signing key must be readable to sign; it is not a
// credential presented to svc, which is why it is not hashed like tokens).
// The API shows it once, at creation, and never again.
type WebhookSubscription struct {
	// Seq orders subscriptions for cursor pagination.
	Seq            int64
	ID             string
	TenantID       string
	URL            string
	MinSeverity    string // WebhookSeverityInfo or WebhookSeverityHigh
	Format         string // WebhookFormatJSON or WebhookFormatCEF
	Enabled        bool
	DeliverySecret string
	// ConsecutiveFailures counts failed deliveries since the last success
	// or update; DeliveryStatus follows it (WebhookDeliveryStatus).
	ConsecutiveFailures int
	DeliveryStatus      string
	// Revision grows with every update. A delivery records its result
	// against the revision it was started with, so the outcome of a
	// delivery begun before an update (to an old URL, or before a reset)
	// is not counted after it.
	Revision       int64
	CreatedAt      time.Time
	UpdatedAt      time.Time
	LastDeliveryAt *time.Time
}

// WebhookPatch holds the fields of a subscription update; a nil field is
// left unchanged. Every update also resets ConsecutiveFailures to 0 and
// DeliveryStatus to healthy.
type WebhookPatch struct {
	URL         *string
	MinSeverity *string
	Format      *string
	Enabled     *bool
}

// WebhookStore keeps webhook export subscriptions. Delivery results are
// recorded by one conditional update each, never a read then a write, so
// concurrent deliveries (on one node or several) all count.
type WebhookStore interface {
	// CreateWebhook inserts w (its ConsecutiveFailures, DeliveryStatus and
	// Revision are set to 0, healthy and 1) with the audit events given.
	CreateWebhook(ctx context.Context, w WebhookSubscription, audit ...AuditEvent) (WebhookSubscription, error)
	GetWebhook(ctx context.Context, tenantID, id string) (WebhookSubscription, error)
	// ListWebhooks lists the tenant's subscriptions newest first.
	ListWebhooks(ctx context.Context, tenantID string, p Page) ([]WebhookSubscription, error)
	// UpdateWebhook applies p, resets the failure count and status, bumps
	// the revision and sets updated_at to at. ErrNotFound when the tenant
	// has no such subscription.
	UpdateWebhook(ctx context.Context, tenantID, id string, p WebhookPatch, at time.Time, audit ...AuditEvent) (WebhookSubscription, error)
	DeleteWebhook(ctx context.Context, tenantID, id string, audit ...AuditEvent) error
	// DeliverableWebhooks lists the tenant's enabled subscriptions that are
	// not dead, oldest first: the ones an export goes to.
	DeliverableWebhooks(ctx context.Context, tenantID string) ([]WebhookSubscription, error)
	// RecordWebhookDelivery records the final result of one delivery to the
	// subscription at revision, finished at `at`, in one conditional
	// update: a success resets the failure count to 0 (healthy), unless
	// the subscription is already dead, which only an update revives; a
	// failure adds one (degraded, then dead at WebhookDeadAfter). Both set
	// last_delivery_at. It returns the new failure count, or ErrNotFound
	// when the subscription is gone or was updated since (another
	// revision), in which case nothing changes.
	RecordWebhookDelivery(ctx context.Context, tenantID, id string, revision int64, ok bool, at time.Time) (int, error)
}
