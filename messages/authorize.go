package messages

import (
	"time"
)

// ToolCall is the call an agent asks about (SPEC 4.2).
type ToolCall struct {
	Tool       string         `json:"tool" openapi:"required,pattern=nonblank"`
	Action     string         `json:"action" openapi:"required,pattern=nonblank"`
	Resource   *string        `json:"resource"`
	Parameters map[string]any `json:"parameters"`
}

// Trace carries run linkage and the upstream trust level.
type Trace struct {
	RunID          *string `json:"run_id"`
	TraceID        *string `json:"trace_id"`
	RootTrustLevel *string `json:"root_trust_level" openapi:"enum=|trusted_internal_signed|trusted_internal_unsigned|semi_trusted_customer|unknown|untrusted_external|malicious_suspected"`
	ParentRunID    *string `json:"parent_run_id"`
}

// WebhookRegistration is the SDK's optional callback registration.
type WebhookRegistration struct {
	URL    string `json:"url"`
	Secret string `json:"secret"`
}

// AuthorizeRequest is the body of POST /v1/authorize (SPEC 4.2, CONTRACT §4).
type AuthorizeRequest struct {
	ToolCall     ToolCall             `json:"tool_call" openapi:"required"`
	MutatesState bool                 `json:"mutates_state"`
	SourceTrust  string               `json:"source_trust" openapi:"enum=|trusted_internal_signed|trusted_internal_unsigned|semi_trusted_customer|unknown|untrusted_external|malicious_suspected"`
	Trace        *Trace               `json:"trace"`
	RequestID    *string              `json:"request_id" openapi:"minLength=1,maxLength=256"`
	DryRun       bool                 `json:"dry_run"`
	Webhook      *WebhookRegistration `json:"webhook"`
	Environment  *string              `json:"environment"`
	Nonce        *string              `json:"nonce" openapi:"minLength=8,maxLength=128"`
	ApprovalID   *string              `json:"approval_id"`
}

// AuthorizeResponse is the 200 body of POST /v1/authorize.
type AuthorizeResponse struct {
	Decision           string     `json:"decision" openapi:"enum=allow|deny|require_approval|redact|quarantine"`
	Reason             string     `json:"reason"`
	CompositeRiskScore int        `json:"composite_risk_score"`
	RootTrustLevel     string     `json:"root_trust_level"`
	RedactedFields     []string   `json:"redacted_fields"`
	DryRun             bool       `json:"dry_run"`
	DecisionID         string     `json:"decision_id,omitempty" openapi:"format=uuid"`
	ActionHash         string     `json:"action_hash"`
	RiskScore          int        `json:"risk_score"`
	MatchedPolicies    []string   `json:"matched_policies"`
	ReceiptID          string     `json:"receipt_id,omitempty" openapi:"format=uuid"`
	ReceiptHash        string     `json:"receipt_hash,omitempty"`
	ApprovalID         string     `json:"approval_id,omitempty" openapi:"format=uuid"`
	ApprovalExpiresAt  *time.Time `json:"approval_expires_at,omitempty"`
	RequestID          *string    `json:"request_id,omitempty"`
}

// Authorize asks an agent actor to decide one call. The HTTP layer has
// already authenticated the agent (AgentID, with its status and tier read
// from the store for this request) and checked the request signature.
type Authorize struct {
	TenantID    string
	AgentID     string
	AgentName   string
	AgentStatus string
	RiskTier    string
	// AllowedEnvironments is nil when the agent is unrestricted.
	AllowedEnvironments []string
	Request             AuthorizeRequest
	ReceivedAt          time.Time
	// Deadline is the request's: the agent actor does nothing for a call
	// past it and bounds what it does by it (the Authorizer sets it from
	// the caller's context).
	Deadline time.Time
}

// AuthorizeOutcome is the actor's answer. Exactly one of Response and
// Failure is meaningful: Failure is a refusal that is not a policy
// decision (the agent may not call, is throttled, or a dependency failed).
type AuthorizeOutcome struct {
	Response *AuthorizeResponse
	Failure  *AuthorizeFailure
	// FailClosed marks the deny answered when the audit writer is
	// unavailable, whose body is exactly
	// {"decision":"deny","reason":"audit_writer_unavailable"} (CONTRACT §4).
	FailClosed bool
}

// FailClosedBody is the body of the fail-closed deny.
type FailClosedBody struct {
	Decision string `json:"decision" openapi:"enum=deny"`
	Reason   string `json:"reason" openapi:"enum=audit_writer_unavailable"`
}

// Refusal is why an authorize call is refused without a decision. The
// HTTP layer maps each to a status and an envelope reason, in one place.
type Refusal uint8

// The refusals.
const (
	// RefusalInvalid: the call cannot be decided as sent (its tool call
	// does not canonicalize).
	RefusalInvalid Refusal = iota + 1
	// RefusalNotPermitted: the agent may not make the call (an environment
	// it is not allowed, a tool outside its bindings: SPEC 4.2 rules 4, 5).
	RefusalNotPermitted
	// RefusalThrottled: a rate limit or quota is exhausted; RetryAfter says
	// when to come back.
	RefusalThrottled
	// RefusalInFlight: a call with the same request_id is still being
	// decided.
	RefusalInFlight
	// RefusalStoreUnavailable: the database did not answer.
	RefusalStoreUnavailable
	// RefusalUnavailable: another dependency (the shared state, the
	// agent's actor) did not answer; the call is refused (fail closed).
	RefusalUnavailable
)

// Audited reports whether the refusal is the agent's own doing (not
// permitted, throttled), recorded as an authorize_refused audit event.
func (r Refusal) Audited() bool { return r == RefusalNotPermitted || r == RefusalThrottled }

// AuthorizeFailure is a refusal and what the caller is told.
type AuthorizeFailure struct {
	Refusal    Refusal
	Code       string // details.error
	Message    string
	RetryAfter int // seconds; 0 for none
}
