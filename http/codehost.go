package httpapi

// The code host's webhook receiver (SPEC 4.9, 5.5): POST /webhooks/codehost.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
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
	// CodehostDeliveryHeader carries the delivery's id, the same on every
	// retry of one delivery.
	CodehostDeliveryHeader = "X-Codehost-Delivery"
)

// deliveryWindow is how long a delivery id is remembered: the code host
// retries a failed delivery for a few hours at most.
const deliveryWindow = 72 * time.Hour

type codehostView struct {
	Status string `json:"status" openapi:"enum=accepted|ignored"`
	// EventID is the external_event:codehost_webhook event (accepted only;
	// a repeated delivery answers its first event's id).
	EventID *string `json:"event_id"`
	// Event is the normalized pair, e.g. pull_request.merged (accepted only).
	Event *string `json:"event,omitempty"`
	// Duplicate: this delivery id was accepted before; nothing new happened.
	Duplicate bool `json:"duplicate,omitempty"`
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
		Resp: codehostView{}, Errors: []int{400, 401, 404},
		Summary: "The code host's webhook receiver (SPEC 4.9). Checked in this order: 401 webhook_not_configured when " +
			"SVC_CODEHOST_WEBHOOK_SECRET is unset; 401 invalid_signature unless " + CodehostSignatureHeader + " is sha256= and the hex " +
			"HMAC-SHA256 of the raw body under the secret (compared in constant time); 400 tenant_required without a valid " +
			TenantHeader + ", 404 for an unknown tenant; 400 invalid_json for a body that is not a JSON object. Then " + CodehostEventHeader +
			" and the payload's action: pull_request opened, closed (merged or not), issues opened and issue_comment created become " +
			"an external_event:codehost_webhook event (tool codehost, action the normalized pair, resource <owner>/<repo>#<number>) " +
			"that detection rules match: 202 accepted with event_id. Anything else: 202 ignored. A delivery id (" + CodehostDeliveryHeader +
			") seen in the last 72 hours is accepted once: its retries answer 202 with the first event_id and duplicate true.",
		Handle: s.codehostWebhook})
	s.registerPulls()
}

// codehostWebhook serves POST /webhooks/codehost.
func (s *Server) codehostWebhook(c *Call) (any, error) {
	secret := s.cfg.CodehostWebhookSecret
	if secret == "" {
		return nil, apiErr("Unauthorized", "webhook_not_configured", "SVC_CODEHOST_WEBHOOK_SECRET is not set")
	}
	raw, e := s.readCapped(c)
	if e != nil {
		return nil, e
	}
	if !hmac.Equal([]byte(c.R.Header.Get(CodehostSignatureHeader)), []byte(CodehostSignature(secret, raw))) {
		return nil, apiErr("Unauthorized", "invalid_signature", "%s does not match the body", CodehostSignatureHeader)
	}
	tenantID := strings.TrimSpace(c.R.Header.Get(TenantHeader))
	if _, err := uuid.Parse(tenantID); err != nil {
		return nil, badRequest("tenant_required", "the %s header must name a tenant", TenantHeader)
	}
	if _, err := s.Store.GetTenant(c.Ctx(), tenantID); err != nil {
		if errors.Is(err, persistence.ErrNotFound) {
			return nil, notFound("tenant")
		}
		return nil, err
	}
	var payload map[string]any
	if err := json.Unmarshal(raw, &payload); err != nil || payload == nil {
		return nil, badRequest("invalid_json", "the body must be a JSON object")
	}
	pair := codehostPair(c.R.Header.Get(CodehostEventHeader), payload)
	if pair == "" {
		return codehostView{Status: "ignored"}, nil
	}
	ev := messages.AseEvent{EventID: uuid.NewString(), OccurredAt: nowUTC(), TenantID: tenantID, Kind: "external_event:codehost_webhook",
		AgentID: messages.UnknownAgent, Decision: "allow", Tool: ingestSources["codehost_webhook"], Action: pair, Resource: ingestResource(payload),
		RiskScore: 0, Reason: "codehost_webhook", MatchedPolicies: []string{}, RedactedFields: []string{}, SchemaVersion: messages.SchemaVersion}
	if id := strings.TrimSpace(c.R.Header.Get(CodehostDeliveryHeader)); id != "" && len(id) <= 128 {
		fresh, err := s.Shared.SetNX(c.Ctx(), "codehost:delivery:"+tenantID+":"+id, ev.EventID, deliveryWindow)
		if err != nil {
			return nil, err
		}
		if !fresh {
			first, _, err := s.Shared.Get(c.Ctx(), "codehost:delivery:"+tenantID+":"+id)
			if err != nil {
				return nil, err
			}
			return codehostView{Status: "accepted", EventID: &first, Event: &pair, Duplicate: true}, nil
		}
	}
	s.Events.Publish(ev)
	return codehostView{Status: "accepted", EventID: &ev.EventID, Event: &pair}, nil
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
