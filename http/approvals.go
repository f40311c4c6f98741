package httpapi

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"svc/control"
	"svc/persistence"
)

// approvalView is the approval shape of CONTRACT §5 (tenant_id added).
type approvalView struct {
	ApprovalID     string          `json:"approval_id" openapi:"format=uuid"`
	TenantID       string          `json:"tenant_id" openapi:"format=uuid"`
	DecisionID     string          `json:"decision_id" openapi:"format=uuid"`
	AgentID        string          `json:"agent_id" openapi:"format=uuid"`
	ToolCall       json.RawMessage `json:"tool_call" openapi:"notnull"`
	ActionHash     string          `json:"action_hash"`
	Status         string          `json:"status" openapi:"enum=PENDING|APPROVED|REJECTED|EXPIRED"`
	Reason         *string         `json:"reason"`
	ApproverUserID *string         `json:"approver_user_id"`
	CreatedAt      time.Time       `json:"created_at"`
	DecidedAt      *time.Time      `json:"decided_at"`
	ExpiresAt      time.Time       `json:"expires_at"`
	ConsumedAt     *time.Time      `json:"consumed_at"`
}

type approvalDecideReq struct {
	ApproverUserID string  `json:"approver_user_id" openapi:"required,pattern=nonblank"`
	Reason         *string `json:"reason"`
}

type approvalEditReq struct {
	ApproverUserID string         `json:"approver_user_id" openapi:"required,pattern=nonblank"`
	Parameters     map[string]any `json:"parameters" openapi:"required"`
	Reason         *string        `json:"reason"`
}

type chatCallbackView struct {
	OK         bool   `json:"ok"`
	ApprovalID string `json:"approval_id" openapi:"format=uuid"`
	Status     string `json:"status" openapi:"enum=PENDING|APPROVED|REJECTED|EXPIRED"`
}

// ChatReason is the reason recorded for a decision made from the chat
// platform's button (SPEC 4.9).
const ChatReason = "Decided via chat interactive callback"

// Chat callback headers and their freshness window (SPEC 4.9).
const (
	ChatTimestampHeader = "X-Chat-Request-Timestamp"
	ChatSignatureHeader = "X-Chat-Signature"
	chatWindow          = 5 * time.Minute
)

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func (s *Server) viewApproval(a persistence.Approval) approvalView {
	tc := a.ToolCall
	if len(tc) == 0 {
		tc = json.RawMessage("{}")
	}
	return approvalView{ApprovalID: a.ID, TenantID: a.TenantID, DecisionID: a.DecisionID, AgentID: a.AgentID, ToolCall: tc,
		ActionHash: a.ActionHash, Status: a.EffectiveStatus(time.Now()), Reason: a.Reason, ApproverUserID: a.ApproverUserID,
		CreatedAt: a.CreatedAt.UTC(), DecidedAt: utcPtr(a.DecidedAt), ExpiresAt: a.ExpiresAt.UTC(), ConsumedAt: utcPtr(a.ConsumedAt)}
}

func (s *Server) registerApprovals() {
	s.register(Route{Method: "GET", Path: "/approvals", Access: AccessViewer, Tag: "approvals", Resp: []approvalView{}, Paginated: true,
		Query: []QueryParam{{Name: "agent_id", Type: "string", Description: "only this agent's approvals"}},
		Summary: "The tenant's approvals, newest first. An expired approval shows status EXPIRED. Operators only: an agent " +
			"token reads its own approvals by id (CONTRACT §2) and gets 403 here.",
		Handle: s.listApprovals})
	s.register(Route{Method: "GET", Path: "/approvals/:approval_id", Access: AccessAgentOrViewer, Tag: "approvals", Resp: approvalView{}, Waits: true,
		Query: []QueryParam{{Name: "wait", Type: "integer", Description: "seconds to wait, 0 to 25 (larger means 25; anything " +
			"else 400 invalid_wait), for the approval to leave PENDING: the answer comes as soon as it is approved, rejected, edited " +
			"or expired, on whichever node (within a second), else after wait seconds with the approval still PENDING"}},
		Errors: []int{400, 404}, Summary: "One approval (an agent token reads only its own; another's is 404). EXPIRED once expired. " +
			"With ?wait=N the request waits for a decision instead of being polled (CONTRACT §14): a waiting request holds none of " +
			"SVC_MAX_CONCURRENT_REQUESTS's slots nor its tenant's share; a node holds at most SVC_APPROVAL_MAX_WAITERS of them (an even " +
			"split among the waiting tenants once the last tenth is reached), and past that the wait answers at once with Retry-After: 1.",
		Handle: s.getApproval})
	decide := func(status string) func(c *Call) (any, error) {
		return func(c *Call) (any, error) {
			id := c.Param("approval_id")
			return s.guardApprovalCall(c, func() (any, error) {
				b := bodyOf[approvalDecideReq](c)
				if strings.TrimSpace(b.ApproverUserID) == "" {
					return nil, invalidField("approver_user_id", "required")
				}
				a, err := s.Control.DecideApproval(c.Ctx(), operator(c.Principal), control.ApprovalDecision{ID: id, Status: status,
					Approver: b.ApproverUserID, Reason: b.Reason})
				if err != nil {
					return nil, err
				}
				return s.viewApproval(a), nil
			})
		}
	}
	limits := " Approve, reject and edit share a per-source-IP token bucket (SVC_APPROVAL_CALLBACK_IP_LIMIT, refilling at limit/60 per second), " +
		"one per valid credential at each address and one for all calls without a valid credential, so strangers at an address never use up an approver's, " +
		"and a cap on failed (4xx) attempts per approval id (SVC_APPROVAL_ATTEMPT_LIMIT in SVC_APPROVAL_ATTEMPT_WINDOW_SECS); both answer 429 with Retry-After."
	s.register(Route{Method: "POST", Path: "/approvals/:approval_id/approve", Access: AccessApprover, SelfAuth: true, Tag: "approvals",
		Body: &approvalDecideReq{}, Resp: approvalView{}, Errors: []int{404, 409, 429},
		Summary: "Grant a pending approval once. 400 without approver_user_id; 409 when already decided or expired." + limits,
		Handle:  decide(persistence.ApprovalApproved)})
	s.register(Route{Method: "POST", Path: "/approvals/:approval_id/reject", Access: AccessApprover, SelfAuth: true, Tag: "approvals",
		Body: &approvalDecideReq{}, Resp: approvalView{}, Errors: []int{404, 409, 429},
		Summary: "Reject a pending approval (status REJECTED). 400 without approver_user_id; 409 when already decided or expired." + limits,
		Handle:  decide(persistence.ApprovalRejected)})
	s.register(Route{Method: "POST", Path: "/approvals/:approval_id/edit", Access: AccessApprover, SelfAuth: true, Tag: "approvals",
		Body: &approvalEditReq{}, Resp: approvalView{}, Errors: []int{404, 409, 429},
		Summary: "Grant a pending approval with its tool_call.parameters replaced and action_hash recomputed; the agent must present " +
			"the edited call. 400 without approver_user_id or parameters (an object); 409 when already decided or expired." + limits,
		Handle: s.editApproval})
	s.register(Route{Method: "POST", Path: "/approvals/:approval_id/consume", Access: AccessAgentOrAdmin, Tag: "approvals",
		Resp: approvalView{}, Errors: []int{404, 409},
		Summary: "Use an approved approval once (an agent only its own): consumed_at is set atomically. A second consume answers 409 " +
			"and emits replay_attempt; so does consuming a pending, rejected or expired approval (409, without the event).",
		Handle: s.consumeApproval})
	s.register(Route{Method: "POST", Path: "/callbacks/chat", Access: AccessPublic, OwnBody: true, Tag: "approvals", Resp: chatCallbackView{},
		Errors: []int{400, 401, 404, 409, 429},
		Summary: "The chat platform's interactive-button callback (SPEC 4.9): application/x-www-form-urlencoded with one field payload " +
			"(JSON: actions[0].value is {tenant_id}:{approval_id}, actions[0].action_id approve or reject, user.username or user.id the " +
			"approver), signed with X-Chat-Request-Timestamp and X-Chat-Signature: v0= + hex HMAC-SHA256 of v0:{timestamp}:{raw body} " +
			"under SVC_CHAT_SIGNING_SECRET. Checked in this order: 404 when the secret is unset; 401 stale_timestamp past 5 minutes; " +
			"401 invalid_signature; 400 for a malformed payload, value or approval id; then the REST approve or reject with reason " +
			"\"" + ChatReason + "\" (per-IP limit, 404, 409). Success: 200 {\"ok\":true,\"approval_id\":...,\"status\":...}.",
		Handle: s.chatCallback})
}

// listApprovals serves GET /approvals.
func (s *Server) listApprovals(c *Call) (any, error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	agent := c.R.URL.Query().Get("agent_id")
	if err := s.Authorizer.Consistent(c.Ctx()); err != nil {
		return nil, err
	}
	rows, err := s.Store.ListApprovals(c.Ctx(), c.Principal.TenantID, agent, pg)
	if err != nil {
		return nil, err
	}
	rows = paginate(c, pg, rows, func(a persistence.Approval) int64 { return a.Seq })
	return viewAll(rows, s.viewApproval), nil
}

// getApproval serves GET /approvals/:approval_id, waiting with ?wait=N
// (approvalwait.go).
func (s *Server) getApproval(c *Call) (any, error) {
	wait, err := waitParam(c)
	if err != nil {
		return nil, err
	}
	if err := s.Authorizer.Consistent(c.Ctx()); err != nil {
		return nil, err
	}
	a, err := s.readApproval(c.Ctx(), c)
	if err != nil {
		return nil, err
	}
	if wait > 0 && s.Waits != nil && a.EffectiveStatus(time.Now()) == persistence.ApprovalPending {
		if a, err = s.waitApproval(c, a, wait); err != nil {
			return nil, err
		}
	}
	return s.viewApproval(a), nil
}

// editApproval serves POST /approvals/:approval_id/edit.
func (s *Server) editApproval(c *Call) (any, error) {
	id := c.Param("approval_id")
	return s.guardApprovalCall(c, func() (any, error) {
		b := bodyOf[approvalEditReq](c)
		if strings.TrimSpace(b.ApproverUserID) == "" {
			return nil, invalidField("approver_user_id", "required")
		}
		if b.Parameters == nil {
			return nil, invalidField("parameters", "required (an object)")
		}
		a, err := s.Control.DecideApproval(c.Ctx(), operator(c.Principal), control.ApprovalDecision{ID: id,
			Status: persistence.ApprovalApproved, Approver: b.ApproverUserID, Reason: b.Reason, Parameters: b.Parameters})
		if err != nil {
			return nil, err
		}
		return s.viewApproval(a), nil
	})
}

// consumeApproval serves POST /approvals/:approval_id/consume.
func (s *Server) consumeApproval(c *Call) (any, error) {
	if err := s.Authorizer.Consistent(c.Ctx()); err != nil {
		return nil, err
	}
	agent := ""
	if c.Principal.Kind == KindAgent {
		agent = c.Principal.AgentID
	}
	a, err := s.Control.ConsumeApproval(c.Ctx(), operator(c.Principal), c.Param("approval_id"), agent)
	if err != nil {
		return nil, err
	}
	return s.viewApproval(a), nil
}

// guardApproval applies the abuse limits of approve, reject, edit and the
// chat callback (SPEC 4.3, part 8): the per-source-IP token bucket, then
// the cap on failed attempts per approval id; a 4xx answer of run (other
// than these 429s) counts as a failed attempt. Both limits live in shared
// state, so they hold across nodes.
func (s *Server) guardApproval(c *Call, tenantID, id string, run func() (any, error)) (any, error) {
	if err := s.approvalIPToken(c, "chat"); err != nil {
		return nil, err
	}
	failKey := approvalFailKey(tenantID, id)
	if err := s.approvalAttemptCap(c.Ctx(), failKey); err != nil {
		return nil, err
	}
	out, err := run()
	s.countApprovalFailure(c.Ctx(), failKey, err)
	return out, err
}

// guardApprovalCall is guardApproval for the REST approve, reject and edit
// (SelfAuth routes). Every call takes a token from a per-IP bucket once its
// credential is judged: a valid credential (of any role) from its own
// bucket for that address, every call without one from the address's
// shared bucket for strangers. So calls without a valid credential,
// however many, never use up the bucket of an approver at the same
// address (a NAT, a proxy), as the authorize lockout never catches a
// valid agent token (CONTRACT §13). Once the caller's tenant is known,
// every 4xx counts toward the approval's cap, a wrong role or a bad body
// included, not only the handler's own refusals.
func (s *Server) guardApprovalCall(c *Call, run func() (any, error)) (any, error) {
	p, err := s.authenticate(c.R, AccessApprover)
	who := "anonymous"
	if p.Kind != "" {
		who = p.Actor()
	}
	if ipErr := s.approvalIPToken(c, who); ipErr != nil {
		return nil, ipErr
	}
	c.Principal = p
	failKey := ""
	if p.TenantID != "" {
		failKey = approvalFailKey(p.TenantID, c.Param("approval_id"))
		if capErr := s.approvalAttemptCap(c.Ctx(), failKey); capErr != nil {
			return nil, capErr
		}
	}
	if err == nil {
		if e := c.admitTenant(p.TenantID); e != nil {
			err = e
		}
	}
	if err == nil {
		err = c.ReadBody()
	}
	var out any
	if err == nil {
		out, err = run()
	}
	s.countApprovalFailure(c.Ctx(), failKey, err)
	return out, err
}

func approvalFailKey(tenantID, id string) string { return "apfail:" + tenantID + ":" + id }

// approvalIPToken takes one token from the per-IP bucket of who at the
// caller's address: a credential's actor, "chat" for signed chat
// callbacks, "anonymous" for every call without a valid credential.
func (s *Server) approvalIPToken(c *Call, who string) error {
	limit := float64(s.cfg.ApprovalCallbackIPLimit)
	ok, retry, err := s.Shared.TakeToken(c.Ctx(), "apip:"+clientIP(c.R)+":"+who, limit, limit/60, 1)
	if err != nil {
		return unavailable("shared_state_unavailable", "shared state is unavailable; the call is refused (fail closed)")
	}
	if !ok {
		e := apiErr("TooManyRequests", "approval_ip_limited", "too many approval calls from this address; retry later")
		e.RetryAfter = max(1, int(math.Ceil(retry.Seconds())))
		return e
	}
	return nil
}

// approvalAttemptCap refuses a call on an approval whose failed attempts
// reached the cap within the window.
func (s *Server) approvalAttemptCap(ctx context.Context, failKey string) error {
	n, ttl, err := s.Shared.Count(ctx, failKey)
	if err != nil {
		return unavailable("shared_state_unavailable", "shared state is unavailable; the call is refused (fail closed)")
	}
	if n >= int64(s.cfg.ApprovalAttemptLimit) {
		e := apiErr("TooManyRequests", "approval_attempts_exceeded", "too many failed attempts on this approval; retry later")
		e.RetryAfter = max(1, int(math.Ceil(ttl.Seconds())))
		return e
	}
	return nil
}

// countApprovalFailure counts a 4xx answer as a failed attempt (failKey ""
// when the caller's tenant is unknown: the per-IP bucket alone applies).
func (s *Server) countApprovalFailure(ctx context.Context, failKey string, err error) {
	if err == nil || failKey == "" {
		return
	}
	if ae, _ := toAPIError(err); ae.Status() >= 400 && ae.Status() < 500 {
		if _, _, ierr := s.Shared.Incr(ctx, failKey, s.cfg.ApprovalAttemptWindow); ierr != nil {
			s.log.Warn("failed approval attempt not counted", "error", ierr)
		}
	}
}

// chatPayload is the part of the chat platform's callback payload svc reads.
type chatPayload struct {
	Actions []struct {
		Value    string `json:"value"`
		ActionID string `json:"action_id"`
	} `json:"actions"`
	User struct {
		ID       string `json:"id"`
		Username string `json:"username"`
	} `json:"user"`
}

// ChatSignature is the chat platform's request signature (SPEC 4.9):
// "v0=" + hex HMAC-SHA256 of "v0:{timestamp}:{body}" under secret.
func ChatSignature(secret, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + timestamp + ":"))
	m.Write(body)
	return "v0=" + hex.EncodeToString(m.Sum(nil))
}

func (s *Server) chatCallback(c *Call) (any, error) {
	secret := s.cfg.ChatSigningSecret
	if secret == "" {
		return nil, notFound("path " + c.R.URL.Path)
	}
	raw, e := s.readCapped(c)
	if e != nil {
		return nil, e
	}
	ts := c.R.Header.Get(ChatTimestampHeader)
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > chatWindow {
		return nil, apiErr("Unauthorized", "stale_timestamp", "%s is missing or more than 5 minutes away", ChatTimestampHeader)
	}
	if !hmac.Equal([]byte(c.R.Header.Get(ChatSignatureHeader)), []byte(ChatSignature(secret, ts, raw))) {
		return nil, apiErr("Unauthorized", "invalid_signature", "%s does not match the request", ChatSignatureHeader)
	}
	form, err := url.ParseQuery(string(raw))
	if err != nil || form.Get("payload") == "" {
		return nil, badRequest("invalid_payload", "the body must be form-encoded with a payload field")
	}
	payload := []byte(form.Get("payload"))
	if e := checkJSON(payload); e != nil {
		return nil, e // invalid_json (a duplicate key) or nul_character, as in any JSON body
	}
	var p chatPayload
	if decodeStrict(payload, &p) != nil || len(p.Actions) == 0 {
		return nil, badRequest("invalid_payload", "payload must be JSON with actions[0]")
	}
	act := p.Actions[0]
	tenantID, approvalID, found := strings.Cut(act.Value, ":")
	if !found || !isUUID(tenantID) || !isUUID(approvalID) {
		return nil, badRequest("invalid_value", "actions[0].value must be {tenant_id}:{approval_id}")
	}
	status := map[string]string{"approve": persistence.ApprovalApproved, "reject": persistence.ApprovalRejected}[act.ActionID]
	if status == "" {
		return nil, badRequest("invalid_action", "actions[0].action_id must be approve or reject")
	}
	approver := p.User.Username
	if approver == "" {
		approver = p.User.ID
	}
	if approver == "" {
		return nil, badRequest("invalid_payload", "user.username or user.id is required")
	}
	reason := ChatReason
	out, err := s.guardApproval(c, tenantID, approvalID, func() (any, error) {
		a, err := s.Control.DecideApproval(c.Ctx(), control.Operator{TenantID: tenantID, Actor: "chat:" + approver},
			control.ApprovalDecision{ID: approvalID, Status: status, Approver: approver, Reason: &reason})
		if err != nil {
			return nil, err
		}
		return chatCallbackView{OK: true, ApprovalID: a.ID, Status: a.EffectiveStatus(time.Now())}, nil
	})
	return out, err
}

func isUUID(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil && len(s) == 36
}
