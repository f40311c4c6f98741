package svcsdk

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// The decision values svc answers. Any other value is read as deny.
const (
	DecisionAllow           = "allow"
	DecisionDeny            = "deny"
	DecisionRequireApproval = "require_approval"
	DecisionRedact          = "redact"
	DecisionQuarantine      = "quarantine"
)

// The approval statuses (CONTRACT 5).
const (
	StatusPending  = "PENDING"
	StatusApproved = "APPROVED"
	StatusRejected = "REJECTED"
	StatusExpired  = "EXPIRED"
)

func knownDecision(s string) bool {
	switch s {
	case DecisionAllow, DecisionDeny, DecisionRequireApproval, DecisionRedact, DecisionQuarantine:
		return true
	}
	return false
}

// Decision is what svc decided about one call. Absent strings are "".
type Decision struct {
	Decision           string
	Reason             string
	DecisionID         string
	ActionHash         string
	RedactedFields     []string
	ApprovalID         string
	ApprovalExpiresAt  string
	ReceiptID          string
	ReceiptHash        string
	RootTrustLevel     string // forward it as trace["root_trust_level"] on the next hop
	MatchedPolicies    []string
	CompositeRiskScore *int
	RiskScore          *int
	RequestID          string
	DryRun             bool
	// Raw is the body as received (parsed; numbers as json.Number).
	Raw any
	// Status is the HTTP status of the answer (200; 403 for a refusal before
	// policy; 0 for a fail-open decision).
	Status int
	// Message is the server's text for a refusal without decision (403).
	Message string
	// LocalActionHash is svc-jcs-1 of the call as this SDK computed it.
	LocalActionHash string
	// HashCertain is false when the identifiers hold code points this
	// toolchain's Unicode tables may normalize otherwise than svc: the
	// server's action_hash is then trusted.
	HashCertain bool
	// HashMismatch: the server's action_hash differs from LocalActionHash.
	HashMismatch bool
	// FailOpen: a local allow because svc was unavailable and the tool is
	// listed in WithFailOpenTools (read-only calls only).
	FailOpen bool
	// ToolCall is the call as asked (parameters as JSON values).
	ToolCall     *ToolCall
	MutatesState bool
	// Receipt is the receipt, once fetched and verified.
	Receipt map[string]any
}

// Allowed is true only for allow and redact.
func (d *Decision) Allowed() bool {
	return d != nil && (d.Decision == DecisionAllow || d.Decision == DecisionRedact)
}

// ExpiresAt parses ApprovalExpiresAt (zero time when absent or malformed).
func (d *Decision) ExpiresAt() time.Time { return parseTime(d.ApprovalExpiresAt) }

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s))
	if err != nil {
		return time.Time{}
	}
	return t
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func strs(v any) []string {
	a, _ := v.([]any)
	out := []string{}
	for _, x := range a {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func intPtr(v any) *int {
	n, ok := v.(json.Number)
	if !ok {
		return nil
	}
	i, err := strconv.Atoi(string(n))
	if err != nil {
		return nil
	}
	return &i
}

// decisionFromBody reads a 200 authorize body. A missing or unknown decision
// value is read as deny.
func decisionFromBody(body map[string]any, status int) *Decision {
	dec, isStr := body["decision"].(string)
	reason, _ := body["reason"].(string)
	if !knownDecision(dec) || !isStr {
		if isStr {
			reason = "unknown_decision:" + dec
		} else {
			reason = "missing_decision"
		}
		dec = DecisionDeny
	}
	dry, _ := body["dry_run"].(bool)
	return &Decision{
		Decision:           dec,
		Reason:             reason,
		DecisionID:         str(body["decision_id"]),
		ActionHash:         str(body["action_hash"]),
		RedactedFields:     strs(body["redacted_fields"]),
		ApprovalID:         str(body["approval_id"]),
		ApprovalExpiresAt:  str(body["approval_expires_at"]),
		ReceiptID:          str(body["receipt_id"]),
		ReceiptHash:        str(body["receipt_hash"]),
		RootTrustLevel:     str(body["root_trust_level"]),
		MatchedPolicies:    strs(body["matched_policies"]),
		CompositeRiskScore: intPtr(body["composite_risk_score"]),
		RiskScore:          intPtr(body["risk_score"]),
		RequestID:          str(body["request_id"]),
		DryRun:             dry,
		Raw:                body,
		Status:             status,
		HashCertain:        true,
	}
}

// Outcome is what the SDK does with a 200 authorize body (parsed JSON, or
// raw JSON bytes): "run" for allow, "run_redacted" for redact (with
// well-formed redacted_fields), "wait_approval" for require_approval with a
// non-empty approval_id, and "deny" for everything else, including any
// unknown or missing decision value.
func Outcome(body any) string {
	if b, ok := body.([]byte); ok {
		v, err := ParseJSON(b)
		if err != nil {
			return "deny"
		}
		body = v
	}
	m, ok := body.(map[string]any)
	if !ok {
		return "deny"
	}
	switch d, _ := m["decision"].(string); d {
	case DecisionAllow:
		return "run"
	case DecisionRedact:
		f, present := m["redacted_fields"]
		if !present || f == nil {
			return "run_redacted"
		}
		arr, ok := f.([]any)
		if !ok {
			return "deny"
		}
		for _, p := range arr {
			s, ok := p.(string)
			if !ok {
				return "deny"
			}
			if _, err := parsePath(s); err != nil {
				return "deny"
			}
		}
		return "run_redacted"
	case DecisionRequireApproval:
		if id, _ := m["approval_id"].(string); id != "" {
			return "wait_approval"
		}
	}
	return "deny"
}

// Approval is an approval as read from GET /v2/approvals/:id (CONTRACT 5).
type Approval struct {
	ApprovalID     string
	Status         string
	DecisionID     string
	AgentID        string
	ActionHash     string
	Reason         *string
	ApproverUserID string
	CreatedAt      string
	DecidedAt      string
	ExpiresAt      string
	ConsumedAt     string
	// ToolCall is the approval's tool_call as svc returned it.
	ToolCall map[string]any
	// Raw is the body as received.
	Raw any
	// Edited: the approver changed the parameters.
	Edited bool
	// Call is the call to present again: the identifiers as asked and the
	// parameters the approver granted (set once APPROVED).
	Call *ToolCall
}

// Parameters returns the approved parameters.
func (a *Approval) Parameters() map[string]any {
	if a.Call != nil {
		return a.Call.Parameters
	}
	p, _ := a.ToolCall["parameters"].(map[string]any)
	if p == nil {
		p = map[string]any{}
	}
	return p
}

func approvalFromBody(body map[string]any) *Approval {
	tc, _ := body["tool_call"].(map[string]any)
	a := &Approval{
		ApprovalID:     str(body["approval_id"]),
		Status:         str(body["status"]),
		DecisionID:     str(body["decision_id"]),
		AgentID:        str(body["agent_id"]),
		ToolCall:       tc,
		ActionHash:     str(body["action_hash"]),
		ApproverUserID: str(body["approver_user_id"]),
		CreatedAt:      str(body["created_at"]),
		DecidedAt:      str(body["decided_at"]),
		ExpiresAt:      str(body["expires_at"]),
		ConsumedAt:     str(body["consumed_at"]),
		Raw:            body,
	}
	if r, ok := body["reason"].(string); ok {
		a.Reason = &r
	}
	return a
}
