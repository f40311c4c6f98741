package httpapi

import (
	"time"

	"svc/control"
	"svc/persistence"
)

// webhookCreate is POST /webhooks/subscriptions. Absent min_severity and
// format default to info and json, absent enabled to true.
type webhookCreate struct {
	URL         *string `json:"url" openapi:"required,pattern=http_url,maxLength=2048"`
	MinSeverity *string `json:"min_severity" openapi:"pattern=webhook_severity"`
	Format      *string `json:"format" openapi:"pattern=webhook_format"`
	Enabled     *bool   `json:"enabled"`
}

// webhookPatch is PATCH /webhooks/subscriptions/:subscription_id; absent
// fields stay, null is 400.
type webhookPatch struct {
	URL         *string `json:"url" openapi:"notnull,pattern=http_url,maxLength=2048"`
	MinSeverity *string `json:"min_severity" openapi:"notnull,pattern=webhook_severity"`
	Format      *string `json:"format" openapi:"notnull,pattern=webhook_format"`
	Enabled     *bool   `json:"enabled" openapi:"notnull"`
}

// webhookView is a subscription as every read shows it: never the secret.
type webhookView struct {
	SubscriptionID      string     `json:"subscription_id" openapi:"format=uuid"`
	TenantID            string     `json:"tenant_id" openapi:"format=uuid"`
	URL                 string     `json:"url"`
	MinSeverity         string     `json:"min_severity" openapi:"enum=info|high"`
	Format              string     `json:"format" openapi:"enum=json|cef"`
	Enabled             bool       `json:"enabled"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	DeliveryStatus      string     `json:"delivery_status" openapi:"enum=healthy|degraded|dead"`
	CreatedAt           time.Time  `json:"created_at"`
	UpdatedAt           time.Time  `json:"updated_at"`
	LastDeliveryAt      *time.Time `json:"last_delivery_at"`
}

// webhookCreated is the creation answer, the only one with the secret.
type webhookCreated struct {
	webhookView
	// DeliverySecret signs every delivery (X-Svc-Signature); shown once.
	DeliverySecret string `json:"delivery_secret"`
}

func viewWebhook(w persistence.WebhookSubscription) webhookView {
	return webhookView{SubscriptionID: w.ID, TenantID: w.TenantID, URL: w.URL, MinSeverity: w.MinSeverity, Format: w.Format,
		Enabled: w.Enabled, ConsecutiveFailures: w.ConsecutiveFailures, DeliveryStatus: persistence.WebhookDeliveryStatus(w.ConsecutiveFailures),
		CreatedAt: w.CreatedAt.UTC(), UpdatedAt: w.UpdatedAt.UTC(), LastDeliveryAt: utcPtr(w.LastDeliveryAt)}
}

const webhookPayloadDoc = " Deliveries (SPEC 6.5) go out for every deny decision, a quarantine included (severity HIGH, CEF 8), every " +
	"require_approval decision (INFO, CEF 1) and every HIGH alert or incident (HIGH, CEF 8); min_severity info receives all of them, high only the HIGH " +
	"alerts and incidents. Each is one POST, up to 3 attempts (backoff 200 ms, 400 ms; 5 s timeout each; a 2xx answer is " +
	"success, redirects are not followed), signed in X-Svc-Signature: sha256=<hex HMAC-SHA256 of the body under the " +
	"delivery_secret>, with X-Svc-Delivery-ID (the same on every attempt) and X-Svc-Subscription-ID. json (application/json): " +
	`{"id","type" (decision, alert or incident),"kind" (deny or require_approval, the alert name or the incident kind),` +
	`"severity","tenant_id","agent_id","summary","occurred_at","schema_version":1}. cef (text/plain): one line ` +
	"CEF:0|svc|gateway|<version>|<rule key or kind>|<summary>|<0-10>|rt=<ms epoch> suser=<agent> cs1Label=tenant cs1=<tenant> " +
	"externalId=<id> cat=<type>, header fields escaping \\ and |, extension values \\, = and line breaks. No payload carries a " +
	"secret, token, tool parameter or approval id. Each delivery's final result sets last_delivery_at and " +
	"consecutive_failures (0 on success): delivery_status is healthy at 0, degraded from 1 to 9, dead from 10, and a dead " +
	"subscription gets nothing until it is PATCHed."

func (s *Server) registerWebhooks() {
	s.register(Route{Method: "POST", Path: "/webhooks/subscriptions", Access: AccessAdmin, Tag: "webhooks", Status: 201,
		Body: &webhookCreate{}, Resp: webhookCreated{},
		Summary: "Subscribe a URL to the webhook export: url (http or https; a literal address that outbound requests may not reach, " +
			"link-local or metadata always and loopback or private unless SVC_ALLOW_PRIVATE_TARGETS=true, is 400 forbidden_target), " +
			"min_severity (info or high; default info), format (json or cef; default json), enabled (default true). The answer " +
			"carries delivery_secret, the HMAC key of the signatures, once." + webhookPayloadDoc,
		Handle: s.createWebhook})
	s.register(Route{Method: "GET", Path: "/webhooks/subscriptions", Access: AccessViewer, Tag: "webhooks", Resp: []webhookView{},
		Paginated: true, Summary: "The tenant's webhook export subscriptions, newest first (never their secrets).",
		Handle: s.listWebhooks})
	s.register(Route{Method: "GET", Path: "/webhooks/subscriptions/:subscription_id", Access: AccessViewer, Tag: "webhooks",
		Resp: webhookView{}, Errors: []int{404}, Summary: "One webhook export subscription (never its secret).",
		Handle: s.getWebhook})
	s.register(Route{Method: "PATCH", Path: "/webhooks/subscriptions/:subscription_id", Access: AccessAdmin, Tag: "webhooks",
		Body: &webhookPatch{}, Resp: webhookView{}, Errors: []int{404},
		Summary: "Change any of url, min_severity, format and enabled (validated as at creation; null is 400). Every PATCH, an empty " +
			"one ({}) too, resets consecutive_failures to 0 and delivery_status to healthy, which revives a dead subscription; " +
			"results of deliveries started before it are not counted.",
		Handle: s.updateWebhook})
	s.register(Route{Method: "DELETE", Path: "/webhooks/subscriptions/:subscription_id", Access: AccessAdmin, Tag: "webhooks",
		Status: 204, Errors: []int{404}, Summary: "Delete a webhook export subscription; deliveries to it stop at once.",
		Handle: s.deleteWebhook})
}

// createWebhook serves POST /webhooks/subscriptions.
func (s *Server) createWebhook(c *Call) (any, error) {
	b := bodyOf[webhookCreate](c)
	created, secret, err := s.Control.CreateWebhook(c.Ctx(), operator(c.Principal), control.WebhookSettings{URL: b.URL,
		MinSeverity: b.MinSeverity, Format: b.Format, Enabled: b.Enabled})
	if err != nil {
		return nil, err
	}
	return webhookCreated{webhookView: viewWebhook(created), DeliverySecret: secret}, nil
}

// listWebhooks serves GET /webhooks/subscriptions.
func (s *Server) listWebhooks(c *Call) (any, error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	rows, err := s.Store.ListWebhooks(c.Ctx(), c.Principal.TenantID, pg)
	if err != nil {
		return nil, err
	}
	rows = paginate(c, pg, rows, func(w persistence.WebhookSubscription) int64 { return w.Seq })
	return viewAll(rows, viewWebhook), nil
}

// getWebhook serves GET /webhooks/subscriptions/:subscription_id.
func (s *Server) getWebhook(c *Call) (any, error) {
	w, err := s.Store.GetWebhook(c.Ctx(), c.Principal.TenantID, c.Param("subscription_id"))
	if err != nil {
		return nil, orNotFound(err, "webhook subscription")
	}
	return viewWebhook(w), nil
}

// updateWebhook serves PATCH /webhooks/subscriptions/:subscription_id.
func (s *Server) updateWebhook(c *Call) (any, error) {
	b := bodyOf[webhookPatch](c)
	for _, f := range []struct {
		name string
		null bool
	}{{"url", b.URL == nil}, {"min_severity", b.MinSeverity == nil}, {"format", b.Format == nil}, {"enabled", b.Enabled == nil}} {
		if f.null && c.HasField(f.name) {
			return nil, invalidField(f.name, "may not be null")
		}
	}
	w, err := s.Control.UpdateWebhook(c.Ctx(), operator(c.Principal), c.Param("subscription_id"), control.WebhookSettings{URL: b.URL,
		MinSeverity: b.MinSeverity, Format: b.Format, Enabled: b.Enabled})
	if err != nil {
		return nil, err
	}
	return viewWebhook(w), nil
}

// deleteWebhook serves DELETE /webhooks/subscriptions/:subscription_id.
func (s *Server) deleteWebhook(c *Call) (any, error) {
	return nil, s.Control.DeleteWebhook(c.Ctx(), operator(c.Principal), c.Param("subscription_id"))
}
