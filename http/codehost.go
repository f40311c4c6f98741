package httpapi

// The code host's webhook receiver (SPEC 4.9, 5.5): POST /webhooks/codehost.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"mime"
	"strings"
	"time"

	"github.com/google/uuid"

	"svc/actors"
	"svc/messages"
	"svc/persistence"
)

// Code-host webhook headers.
const (
	CodehostSignatureHeader = "X-Hub-Signature-256"
	CodehostEventHeader     = "X-Codehost-Event"
	// CodehostDeliveryHeader carries the delivery's id, unique to each
	// delivery and the same on every retry of one delivery (as the code
	// host's own delivery GUID header); required.
	CodehostDeliveryHeader = "X-Codehost-Delivery"
)

// deliveryWindow is how long an accepted delivery is remembered: the code
// host retries a failed delivery for a few hours at most, and a signed
// body older than this is no longer refused as a replay.
const deliveryWindow = 72 * time.Hour

// maxDeliveryIDLen bounds a delivery id (the code host's are 36-character
// GUIDs).
const maxDeliveryIDLen = 100

type codehostView struct {
	Status string `json:"status" openapi:"enum=accepted|ignored"`
	// EventID is the external_event:codehost_webhook event (accepted only;
	// a repeated delivery answers its first event's id).
	EventID *string `json:"event_id"`
	// Event is the normalized pair, e.g. pull_request.merged (accepted only).
	Event *string `json:"event,omitempty"`
	// Duplicate: this delivery id was accepted before; nothing new happened.
	Duplicate bool `json:"duplicate,omitempty"`
	// DeliveryID is the X-Codehost-Delivery id this answer is about.
	DeliveryID string `json:"delivery_id"`
}

// CodehostSignature is the X-Hub-Signature-256 value of body under secret.
func CodehostSignature(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// codehostPair normalizes an event and its payload's action into one of
// the five supported pairs (SPEC 4.9), or "".
func codehostPair(event string, payload map[string]any) string {
	action, _ := payload["action"].(string)
	switch strings.ToLower(strings.TrimSpace(event)) + "." + action {
	case "pull_request.opened":
		return "pull_request.opened"
	case "pull_request.closed":
		pr, _ := payload["pull_request"].(map[string]any)
		if merged, _ := pr["merged"].(bool); merged {
			return "pull_request.merged"
		}
		return "pull_request.closed"
	case "issues.opened":
		return "issues.opened"
	case "issue_comment.created":
		return "issue_comment.created"
	}
	return ""
}

func (s *Server) registerCodehost() {
	s.register(Route{Method: "POST", Path: "/webhooks/codehost", Access: AccessPublic, OwnBody: true, Tag: "soc", Status: 202,
		Resp: codehostView{}, Errors: []int{400, 401, 404, 409, 415},
		Summary: "The code host's webhook receiver (SPEC 4.9). Checked in this order: 401 webhook_not_configured for every " +
			"request while SVC_CODEHOST_WEBHOOK_SECRET is unset (SPEC 5.5). The secret that verifies a delivery is the tenant's own " +
			"(codehost_webhook_secret, PATCH /tenants/settings) when the tenant named by " + TenantHeader + " has one, and only then; " +
			"otherwise the installation's SVC_CODEHOST_WEBHOOK_SECRET: 401 invalid_signature unless " + CodehostSignatureHeader + " is sha256= and the hex " +
			"HMAC-SHA256 of the raw body under the secret (compared in constant time), so the installation secret is refused " +
			"for a tenant with its own; 400 tenant_required without a valid " + TenantHeader + ", 404 for an unknown tenant; " +
			"400 delivery_id_required without " + CodehostDeliveryHeader + ", 400 invalid_delivery_id unless it is one value of " +
			"1 to 100 printable ASCII characters without spaces; 415 unsupported_media_type unless Content-Type is " +
			"application/json; 400 invalid_json for a body that is not one strict JSON object (CONTRACT 10: a duplicate key " +
			"is details.reason duplicate_key, invalid UTF-8 or a lone surrogate is malformed) and 400 nul_character for U+0000 " +
			"in it. Then " + CodehostEventHeader +
			" and the payload's action: pull_request opened, closed (merged or not), issues opened and issue_comment created become " +
			"an external_event:codehost_webhook event (tool codehost, action the normalized pair, resource <owner>/<repo>#<number>) " +
			"that detection rules match: 202 accepted with event_id. Anything else: 202 ignored. An accepted delivery is " +
			"remembered for 72 hours on every node, by its tenant and delivery id and by its signed body (the signature): " +
			"the code host's retry (the same id and body into the same tenant) answers 202 with the first event_id and " +
			"duplicate true, and adds nothing; 409 delivery_replayed when the signed body was accepted under another " +
			"delivery id or into another tenant; 409 delivery_id_reused when the tenant's delivery id was accepted with " +
			"another body.",
		Handle: s.codehostWebhook})
	s.registerPulls()
}

// codehostWebhook serves POST /webhooks/codehost.
func (s *Server) codehostWebhook(c *Call) (any, error) {
	// SPEC 5.5: with SVC_CODEHOST_WEBHOOK_SECRET unset the receiver is off
	// for every request, a tenant's own secret included.
	if s.cfg.CodehostWebhookSecret == "" {
		return nil, apiErr("Unauthorized", "webhook_not_configured", "SVC_CODEHOST_WEBHOOK_SECRET is not set")
	}
	raw, e := s.readCapped(c)
	if e != nil {
		return nil, e
	}
	tenantID := strings.TrimSpace(c.R.Header.Get(TenantHeader))
	_, perr := uuid.Parse(tenantID)
	secret, err := s.codehostSecret(c, tenantID, perr == nil)
	if err != nil {
		return nil, err
	}
	want := CodehostSignature(secret, raw)
	if !hmac.Equal([]byte(c.R.Header.Get(CodehostSignatureHeader)), []byte(want)) {
		return nil, apiErr("Unauthorized", "invalid_signature", "%s does not match the body", CodehostSignatureHeader)
	}
	if perr != nil {
		return nil, badRequest("tenant_required", "the %s header must name a tenant", TenantHeader)
	}
	if _, err := s.Store.GetTenant(c.Ctx(), tenantID); err != nil {
		return nil, orNotFound(err, "tenant")
	}
	deliveryID, e := codehostDeliveryID(c)
	if e != nil {
		return nil, e
	}
	if mt, _, err := mime.ParseMediaType(c.R.Header.Get("Content-Type")); err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return nil, apiErr("UnsupportedMediaType", "unsupported_media_type", "Content-Type must be application/json")
	}
	// The same strict decoding as every other body (CONTRACT 10): a
	// duplicate key would let the code host and svc read two payloads.
	if e := checkJSON(raw); e != nil {
		return nil, e
	}
	var payload map[string]any
	if e := decodeStrict(raw, &payload); e != nil || payload == nil {
		return nil, badRequest("invalid_json", "the body must be a JSON object")
	}
	pair := codehostPair(c.R.Header.Get(CodehostEventHeader), payload)
	if pair == "" {
		return codehostView{Status: "ignored", DeliveryID: deliveryID}, nil
	}
	ev := messages.AseEvent{EventID: uuid.NewString(), OccurredAt: nowUTC(), TenantID: tenantID, Kind: "external_event:codehost_webhook",
		AgentID: messages.UnknownAgent, Decision: "allow", Tool: ingestSources["codehost_webhook"], Action: pair, Resource: ingestResource(payload),
		RiskScore: 0, Reason: "codehost_webhook", MatchedPolicies: []string{}, RedactedFields: []string{}, SchemaVersion: messages.SchemaVersion}
	// The signature stands for the body and the secret that signed it: the
	// same signed body is one delivery, whichever id or tenant it is sent
	// with.
	digest := sha256.Sum256([]byte(want))
	d := persistence.CodehostDelivery{TenantID: tenantID, DeliveryID: deliveryID, Digest: hex.EncodeToString(digest[:]),
		EventID: ev.EventID, Event: pair, ReceivedAt: ev.OccurredAt}
	first, fresh, err := s.Control.ClaimCodehostDelivery(c.Ctx(), d, ev.OccurredAt.Add(-deliveryWindow))
	if err != nil {
		return nil, err
	}
	if !fresh {
		return codehostRepeat(d, first)
	}
	s.Events.Publish(ev)
	return codehostView{Status: "accepted", EventID: &ev.EventID, Event: &pair, DeliveryID: deliveryID}, nil
}

// codehostSecret is the secret that verifies a delivery for tenantID: the
// tenant's own when it has one, else the installation's.
// A header that is not a tenant id has no secret of its own.
func (s *Server) codehostSecret(c *Call, tenantID string, valid bool) (string, error) {
	if valid {
		own, err := s.Store.CodehostWebhookSecret(c.Ctx(), tenantID)
		if err != nil || own != "" {
			return own, err
		}
	}
	return s.cfg.CodehostWebhookSecret, nil
}

// codehostDeliveryID returns the delivery's X-Codehost-Delivery id: one
// value of 1 to maxDeliveryIDLen printable ASCII characters without spaces.
func codehostDeliveryID(c *Call) (string, *Error) {
	vs := c.R.Header.Values(CodehostDeliveryHeader)
	if len(vs) == 0 || (len(vs) == 1 && vs[0] == "") {
		return "", badRequest("delivery_id_required", "the %s header must carry the delivery's id", CodehostDeliveryHeader)
	}
	bad := len(vs) > 1 || len(vs[0]) > maxDeliveryIDLen
	for i := 0; !bad && i < len(vs[0]); i++ {
		bad = vs[0][i] <= ' ' || vs[0][i] > '~'
	}
	if bad {
		return "", badRequest("invalid_delivery_id", "the %s header must be one value of 1 to %d printable ASCII characters without spaces",
			CodehostDeliveryHeader, maxDeliveryIDLen)
	}
	return vs[0], nil
}

// codehostRepeat answers a delivery whose tenant and id, or signed body,
// were accepted within the window (first): the code host's retry of that
// very delivery is its first answer again, marked duplicate; anything else
// is a replay, refused.
func codehostRepeat(d, first persistence.CodehostDelivery) (any, error) {
	switch {
	case first.TenantID == d.TenantID && first.DeliveryID == d.DeliveryID && first.Digest == d.Digest:
		return codehostView{Status: "accepted", EventID: &first.EventID, Event: &first.Event, Duplicate: true, DeliveryID: d.DeliveryID}, nil
	case first.TenantID == d.TenantID && first.DeliveryID == d.DeliveryID:
		e := apiErr("Conflict", "delivery_id_reused", "delivery %s was accepted with another body in the last 72 hours", d.DeliveryID)
		e.Details["delivery_id"] = d.DeliveryID
		return nil, e
	default:
		e := apiErr("Conflict", "delivery_replayed", "this signed body was accepted as another delivery in the last 72 hours; a replay is not accepted")
		e.Details["delivery_id"] = d.DeliveryID
		return nil, e
	}
}

// pullView is a pull request the tenant's agents touched, as the Security
// Gate counts it.
type pullView struct {
	PullRequest string `json:"pull_request"`
	Owner       string `json:"owner"`
	Repo        string `json:"repo"`
	Number      int    `json:"number"`
	// Conclusion is the tally's: failure, action_required or success.
	Conclusion string `json:"conclusion" openapi:"enum=failure|action_required|success"`
	Allowed    int64  `json:"allowed"`
	Denied     int64  `json:"denied"`
	Pending    int64  `json:"pending"`
	Comments   int64  `json:"comments"`
	// CheckRunID, HeadSHA and CheckRunConclusion are what the check run was
	// last written with; null until a write succeeded.
	CheckRunID         *string `json:"check_run_id"`
	HeadSHA            *string `json:"head_sha"`
	CheckRunConclusion *string `json:"check_run_conclusion"`
}

func (s *Server) registerPulls() {
	s.register(Route{Method: "GET", Path: "/codehost/pull-requests", Access: AccessViewer, Tag: "soc", Resp: []pullView{},
		Summary: "The pull requests the tenant's agents touched through the code-host tool (SVC_CODEHOST_TOOL_KEY, resource " +
			"<owner>/<repo>#<number>), the most recent first, at most 200: the Security Gate's tally (allow and redact allowed, " +
			"require_approval pending, anything else denied), its conclusion, the deny comments posted (at most 5), and what the " +
			"check run was last written with. Empty when SVC_CODEHOST_APP_TOKEN is unset. The tally lives in the shared state: " +
			"kept across restarts by Valkey when clustered, lost when a lone node restarts (SPEC 4.9); it expires 30 days after " +
			"a pull request's first decision.",
		Handle: s.listPulls})
}

// listPulls serves GET /codehost/pull-requests.
func (s *Server) listPulls(c *Call) (any, error) {
	pulls, err := actors.GatePulls(c.Ctx(), s.Shared, c.Principal.TenantID)
	if err != nil {
		return nil, err
	}
	return viewAll(pulls, func(p actors.GatePull) pullView {
		v := pullView{PullRequest: p.PR.String(), Owner: p.PR.Owner, Repo: p.PR.Repo, Number: p.PR.Number, Conclusion: p.Tally.Conclusion(),
			Allowed: p.Tally.Allowed, Denied: p.Tally.Denied, Pending: p.Tally.Pending, Comments: p.Comments}
		if sh := p.Shown; sh != nil {
			v.CheckRunID, v.HeadSHA, v.CheckRunConclusion = &sh.CheckRunID, &sh.HeadSHA, &sh.Conclusion
		}
		return v
	}), nil
}
