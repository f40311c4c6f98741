package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"svc/credential"
	"svc/messages"
	"svc/persistence"
	"svc/rules/policy"
)

// SignatureHeader carries the agent's HMAC of the raw body (SPEC 5.3).
const SignatureHeader = "X-Svc-Request-Signature"

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func (s *Server) registerAuthorize() {
	s.register(Route{Method: "POST", Path: "/authorize", Access: AccessAgent, SelfAuth: true, Tag: "authorize",
		Body: &messages.AuthorizeRequest{}, Resp: messages.AuthorizeResponse{}, Errors: []int{404, 409, 429},
		Summary: "Decide a tool call (SPEC 4.2). Every policy outcome answers 200; a fail-closed deny when the decision " +
			"cannot be recorded answers 503 with {\"decision\":\"deny\",\"reason\":\"audit_writer_unavailable\"}. Failed token " +
			"attempts are counted per source IP and X-Svc-Tenant-ID; past SVC_AUTH_FAILURE_LIMIT in SVC_AUTH_FAILURE_WINDOW_SECS " +
			"further failed attempts from the pair are answered 429 auth_locked (with Retry-After) instead of 401, while a valid " +
			"agent token from the same address is still served. An agent token has at most SVC_RATE_LIMIT_CAPACITY calls in flight on a node, " +
			"bodies still arriving included: 429 agent_concurrency (with Retry-After) past it, before its body is read. An agent with a signing_key must send " +
			"X-Svc-Request-Signature: sha256=<hex HMAC-SHA256 of the raw body> (401 when missing or wrong). webhook {url, secret} " +
			"registers a callback for the approval a require_approval answer creates (CONTRACT §14): when it is approved, rejected, edited " +
			"or expires, the gateway POSTs {approval_id, decision_id, status, action_hash, decided_at} (for EXPIRED, decided_at is the " +
			"expiry) to url with X-Svc-Signature: sha256=<hex HMAC-SHA256 of the raw body under secret> and X-Svc-Timestamp (Unix " +
			"seconds), at most 3 attempts in all (after 1 s, then 4 s; a 2xx answer delivers), under the outbound address rules of " +
			"webhooks (SVC_ALLOW_PRIVATE_TARGETS). An approval's callback is sent once, for its first outcome. url must be an absolute " +
			"http or https URL and secret 1 to 1024 bytes (400 webhook.url, webhook.secret); the secret is never returned or logged; a " +
			"webhook with an empty url is ignored.",
		Handle: s.authorize})
}

func (s *Server) authorize(c *Call) (any, error) {
	r := c.R
	ctx := c.Ctx()
	// Failed token attempts count per source address and tenant; past
	// the limit, further failures are 429 until the window passes. Only
	// failures are counted and judged: a valid credential from a locked
	// address is served (CONTRACT §13), so a stranger sharing a NAT or a
	// proxy cannot lock the agents behind it out.
	fail := func(e *Error) (any, error) {
		failKey := "authfail:" + clientIP(r) + ":" + strings.TrimSpace(r.Header.Get(TenantHeader))
		n, ttl, err := s.Shared.Incr(ctx, failKey, s.cfg.AuthFailureWindow)
		if err != nil {
			s.log.Warn("auth failure not counted", "error", err)
			return nil, e
		}
		if n > int64(s.cfg.AuthFailureLimit) {
			s.metrics.authLocked.Inc()
			locked := apiErr("TooManyRequests", "auth_locked", "too many failed token attempts from this address; retry later")
			locked.RetryAfter = max(1, int(ttl.Seconds()+0.999))
			return nil, locked
		}
		return nil, e
	}
	tok := bearer(r)
	switch {
	case tok == "":
		return fail(unauthorized("missing bearer token"))
	case strings.HasPrefix(tok, credential.OperatorPrefix):
		// A live operator token is the wrong kind (403); an unknown or
		// deleted one is an unknown token (401, counted) like any other.
		_, err := s.Store.LookupOperatorToken(ctx, credential.Hash(tok))
		if errors.Is(err, persistence.ErrNotFound) {
			return fail(unauthorized("invalid token"))
		}
		if err != nil {
			return nil, err
		}
		return nil, forbidden("authorize requires an agent token")
	case s.cfg.SuperAdminEnabled() && subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.AdminToken)) == 1:
		return nil, forbidden("authorize requires an agent token")
	case !strings.HasPrefix(tok, credential.AgentPrefix):
		return fail(unauthorized("invalid agent token"))
	}
	agent, err := s.Store.LookupAgentToken(ctx, credential.Hash(tok))
	if errors.Is(err, persistence.ErrNotFound) {
		return fail(unauthorized("invalid agent token"))
	}
	if err != nil {
		return nil, err
	}
	if agent.Status != persistence.AgentActive && agent.Status != persistence.AgentFrozen {
		return fail(unauthorized("invalid agent token"))
	}
	// The body is read once the caller is known: a bad credential is
	// answered (and counted, or refused while locked) whatever the body,
	// and a tenant past its share of the node, or an agent token past its
	// calls in flight, waits no body.
	if e := c.admitTenant(agent.TenantID); e != nil {
		return nil, e
	}
	if e := c.admitAgent(agent.ID); e != nil {
		return nil, e
	}
	if err := c.ReadBody(); err != nil {
		return nil, err
	}
	if len(agent.SigningKey) > 0 {
		if !validSignature(agent.SigningKey, c.Raw, r.Header.Get(SignatureHeader)) {
			e := unauthorized("missing or invalid %s", SignatureHeader)
			e.Details["error"] = "invalid_signature"
			return nil, e
		}
	}
	req := bodyOf[messages.AuthorizeRequest](c)
	if err := validateAuthorize(req); err != nil {
		return nil, err
	}
	out := s.Authorizer.Authorize(ctx, &messages.Authorize{TenantID: agent.TenantID, AgentID: agent.ID, AgentName: agent.Name,
		AgentStatus: agent.Status, RiskTier: agent.RiskTier, AllowedEnvironments: agent.AllowedEnvironments, Request: *req,
		ReceivedAt: nowUTC()})
	if f := out.Failure; f != nil {
		e := apiErr(refusalReason(f.Refusal), f.Code, "%s", f.Message)
		e.RetryAfter = f.RetryAfter
		return nil, e
	}
	if out.FailClosed {
		return withStatus{http.StatusServiceUnavailable, messages.FailClosedBody{Decision: "deny", Reason: "audit_writer_unavailable"}}, nil
	}
	return out.Response, nil
}

// refusalReasons maps each authorize refusal to its envelope reason (and
// so its status, reasonStatus): the one place a refusal becomes HTTP.
var refusalReasons = map[messages.Refusal]string{
	messages.RefusalInvalid:          "BadRequest",
	messages.RefusalNotPermitted:     "Forbidden",
	messages.RefusalThrottled:        "TooManyRequests",
	messages.RefusalInFlight:         "Conflict",
	messages.RefusalStoreUnavailable: "InternalError",
	messages.RefusalUnavailable:      "ServiceUnavailable",
}

// refusalReason is the envelope reason of a refusal (an unknown one is an
// internal error).
func refusalReason(r messages.Refusal) string {
	if reason, ok := refusalReasons[r]; ok {
		return reason
	}
	return "InternalError"
}

// RefusalStatus is the HTTP status of a refusal (the Authorizer records it
// in authorize_refused audit events).
func RefusalStatus(r messages.Refusal) int { return reasonStatus[refusalReason(r)] }

// validSignature checks "sha256=<hex>" against the HMAC of the raw body, in
// constant time.
func validSignature(key, body []byte, header string) bool {
	hexSig, ok := strings.CutPrefix(strings.TrimSpace(header), "sha256=")
	if !ok {
		return false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

func validateAuthorize(req *messages.AuthorizeRequest) error {
	if strings.TrimSpace(req.ToolCall.Tool) == "" {
		return invalidField("tool_call.tool", "is required")
	}
	if strings.TrimSpace(req.ToolCall.Action) == "" {
		return invalidField("tool_call.action", "is required")
	}
	if _, ok := policy.ParseTrust(req.SourceTrust); !ok {
		return invalidField("source_trust", "must be one of %s", strings.Join(policy.TrustLevels(), ", "))
	}
	if req.Trace != nil && req.Trace.RootTrustLevel != nil {
		if _, ok := policy.ParseTrust(*req.Trace.RootTrustLevel); !ok {
			return invalidField("trace.root_trust_level", "must be one of %s", strings.Join(policy.TrustLevels(), ", "))
		}
	}
	if n := req.Nonce; n != nil && (utf8.RuneCountInString(*n) < 8 || utf8.RuneCountInString(*n) > 128) {
		return invalidField("nonce", "must be 8 to 128 characters")
	}
	if req.RequestID != nil && (*req.RequestID == "" || utf8.RuneCountInString(*req.RequestID) > 256) {
		return invalidField("request_id", "must be 1 to 256 characters")
	}
	if wh := req.Webhook; wh != nil && wh.URL != "" {
		if u, err := url.Parse(wh.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(wh.URL) > 2048 {
			return invalidField("webhook.url", "must be an absolute http or https URL of at most 2048 characters")
		}
		if wh.Secret == "" || len(wh.Secret) > 1024 {
			return invalidField("webhook.secret", "is required with webhook.url (1 to 1024 bytes): the callback is signed with it")
		}
	}
	return nil
}

func unavailable(code, msg string) *Error {
	e := apiErr("ServiceUnavailable", code, "%s", msg)
	e.RetryAfter = 1
	return e
}
