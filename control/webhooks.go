package control

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"svc/credential"
	"svc/messages"
	"svc/outbound"
	"svc/persistence"
)

// Webhook export subscriptions (SPEC 6.5): each change drops the tenant's
// cached subscriptions from the exporter on every node once committed, so
// its next export reads them afresh.

// DeliveryKeyPrefix starts every delivery secret (the HMAC key of a
// subscription's signatures).
const DeliveryKeyPrefix = "svc_whsec_"

// maxTargetURL bounds a target URL's length.
const maxTargetURL = 2048

// WebhookSettings are a subscription's settings as an operator gives them:
// a nil one takes its default at creation (min_severity info, format json,
// enabled) and stays as it is in an update. Enumerated values are taken in
// any case.
type WebhookSettings struct {
	URL         *string
	MinSeverity *string
	Format      *string
	Enabled     *bool
}

// CreateWebhook subscribes settings.URL (required: AdmitTarget) to the
// tenant's webhook export, with a webhook_subscription_created
// config_change event. It returns the subscription and its delivery
// secret, which is shown once.
func (p *Plane) CreateWebhook(ctx context.Context, op Operator, settings WebhookSettings) (persistence.WebhookSubscription, string, error) {
	raw := ""
	if settings.URL != nil {
		raw = *settings.URL
	}
	target, err := p.AdmitTarget(raw)
	if err != nil {
		return persistence.WebhookSubscription{}, "", err
	}
	sev, format := persistence.WebhookSeverityInfo, persistence.WebhookFormatJSON
	if settings.MinSeverity != nil {
		if sev, err = webhookSeverity(*settings.MinSeverity); err != nil {
			return persistence.WebhookSubscription{}, "", err
		}
	}
	if settings.Format != nil {
		if format, err = webhookFormat(*settings.Format); err != nil {
			return persistence.WebhookSubscription{}, "", err
		}
	}
	enabled := settings.Enabled == nil || *settings.Enabled
	secret, _ := credential.Mint(DeliveryKeyPrefix)
	now := time.Now().UTC().Truncate(time.Microsecond)
	w := persistence.WebhookSubscription{ID: uuid.NewString(), TenantID: op.TenantID, URL: target, MinSeverity: sev, Format: format,
		Enabled: enabled, DeliverySecret: secret, CreatedAt: now, UpdatedAt: now}
	var created persistence.WebhookSubscription
	err = p.change(func() (err error) {
		created, err = p.d.Store.CreateWebhook(ctx, w, Event(op, "config_change", "webhook_subscription_created", "",
			map[string]any{"subscription_id": w.ID, "url_host": URLHost(target), "min_severity": sev, "format": format, "enabled": enabled}))
		return err
	}, func() { p.webhooksChanged(ctx, op.TenantID) })
	if err != nil {
		return persistence.WebhookSubscription{}, "", err
	}
	return created, secret, nil
}

// UpdateWebhook changes the settings given (validated as at creation) of
// subscription id, with a webhook_subscription_updated config_change event
// naming them. Every update, one that changes nothing too, resets the
// subscription's delivery failures (the store's UpdateWebhook). An unknown
// subscription: NotFound.
func (p *Plane) UpdateWebhook(ctx context.Context, op Operator, id string, settings WebhookSettings) (persistence.WebhookSubscription, error) {
	var patch persistence.WebhookPatch
	details := map[string]any{"subscription_id": id}
	if settings.URL != nil {
		target, err := p.AdmitTarget(*settings.URL)
		if err != nil {
			return persistence.WebhookSubscription{}, err
		}
		patch.URL, details["url_host"] = &target, URLHost(target)
	}
	if settings.MinSeverity != nil {
		sev, err := webhookSeverity(*settings.MinSeverity)
		if err != nil {
			return persistence.WebhookSubscription{}, err
		}
		patch.MinSeverity, details["min_severity"] = &sev, sev
	}
	if settings.Format != nil {
		format, err := webhookFormat(*settings.Format)
		if err != nil {
			return persistence.WebhookSubscription{}, err
		}
		patch.Format, details["format"] = &format, format
	}
	if settings.Enabled != nil {
		enabled := *settings.Enabled
		patch.Enabled, details["enabled"] = &enabled, enabled
	}
	var w persistence.WebhookSubscription
	err := p.change(func() (err error) {
		w, err = p.d.Store.UpdateWebhook(ctx, op.TenantID, id, patch, time.Now().UTC().Truncate(time.Microsecond),
			Event(op, "config_change", "webhook_subscription_updated", "", details))
		return refuse(err, "webhook subscription", nil)
	}, func() { p.webhooksChanged(ctx, op.TenantID) })
	return w, err
}

// DeleteWebhook deletes subscription id (deliveries to it stop at once),
// with a webhook_subscription_deleted config_change event. An unknown
// subscription: NotFound.
func (p *Plane) DeleteWebhook(ctx context.Context, op Operator, id string) error {
	return p.change(func() error {
		err := p.d.Store.DeleteWebhook(ctx, op.TenantID, id, Event(op, "config_change", "webhook_subscription_deleted", "",
			map[string]any{"subscription_id": id}))
		return refuse(err, "webhook subscription", nil)
	}, func() { p.webhooksChanged(ctx, op.TenantID) })
}

// webhooksChanged drops the exporter's cached subscriptions of the tenant
// on every node; without an invalidation hub (tests), on this node.
func (p *Plane) webhooksChanged(ctx context.Context, tenantID string) {
	if p.d.Invalidations == nil {
		p.d.Exporter.Invalidate(tenantID)
		return
	}
	p.drop(ctx, messages.CacheWebhooks, tenantID, "-")
}

func webhookSeverity(v string) (string, error) {
	return webhookEnum("min_severity", v, persistence.WebhookSeverityInfo, persistence.WebhookSeverityHigh)
}

func webhookFormat(v string) (string, error) {
	return webhookEnum("format", v, persistence.WebhookFormatJSON, persistence.WebhookFormatCEF)
}

// webhookEnum checks an enumerated value of field (any case, surrounding white
// space ignored) and returns it lower case.
func webhookEnum(field, v string, allowed ...string) (string, error) {
	low := strings.ToLower(strings.TrimSpace(v))
	for _, a := range allowed {
		if low == a {
			return a, nil
		}
	}
	return "", invalid(field, "must be %s", strings.Join(allowed, " or "))
}

// AdmitTarget admits the URL of an outbound target (a webhook
// subscription's, an MCP server's): absolute http or https with a host, at
// most 2048 bytes, no white space, and not a literal address outbound
// requests may not reach (CONTRACT §7; SVC_ALLOW_PRIVATE_TARGETS says
// whether loopback and private ones may be). A refusal is Invalid naming
// the field url; an address not allowed has the code forbidden_target.
// Names are checked again where each request dials (http's
// outbound.Client), so DNS cannot redirect them.
func (p *Plane) AdmitTarget(raw string) (string, error) {
	if strings.TrimSpace(raw) == "" {
		return "", invalid("url", "is required")
	}
	if len(raw) > maxTargetURL {
		return "", invalid("url", "must be at most %d bytes", maxTargetURL)
	}
	if strings.ContainsAny(raw, " \t\r\n") {
		return "", invalid("url", "must not contain white space")
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" {
		return "", invalid("url", "must be an absolute http or https URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", invalid("url", "scheme must be http or https, not %q", u.Scheme)
	}
	if u.Hostname() == "" {
		return "", invalid("url", "must name a host")
	}
	if err := outbound.CheckTargetHost(u.Hostname(), p.d.Config != nil && p.d.Config.AllowPrivateTargets); err != nil {
		r := invalid("url", "%v", err)
		r.Code, r.Details = "forbidden_target", map[string]any{"error": "forbidden_target"}
		return "", r
	}
	return raw, nil
}

// URLHost is the host of an admitted URL, for audit details (the rest of a
// URL may carry a receiver's credentials).
func URLHost(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Host
	}
	return ""
}
