package packcontents

import (
	"encoding/json"
	"time"

	"svc/persistence"
	"svc/receipt"
)

// The views below are the API's JSON shapes of the records a pack holds
// (http/'s tests compare them field for field), and what they leave out is
// what a pack must never carry.

type tenantView struct {
	TenantID                     string    `json:"tenant_id"`
	Name                         string    `json:"name"`
	CreatedAt                    time.Time `json:"created_at"`
	AutoRotateTokenOnLeakEnabled bool      `json:"auto_rotate_token_on_leak_enabled"`
}

func viewTenant(t persistence.Tenant) tenantView {
	return tenantView{TenantID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt.UTC(), AutoRotateTokenOnLeakEnabled: t.AutoRotateTokenOnLeak}
}

type policyView struct {
	Name        string    `json:"name"`
	Rego        string    `json:"rego"`
	Description string    `json:"description"`
	Enabled     bool      `json:"enabled"`
	Mode        string    `json:"mode"`
	Version     int64     `json:"version"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

func viewPolicy(p persistence.Policy) policyView {
	return policyView{Name: p.Name, Rego: p.Rego, Description: p.Description, Enabled: p.Enabled, Mode: p.Mode, Version: p.Version,
		CreatedAt: p.CreatedAt.UTC(), UpdatedAt: p.UpdatedAt.UTC()}
}

type skillView struct {
	SkillKey    string                             `json:"skill_key"`
	Description string                             `json:"description"`
	Actions     map[string]persistence.SkillAction `json:"actions"`
	CreatedAt   time.Time                          `json:"created_at"`
	UpdatedAt   time.Time                          `json:"updated_at"`
}

func viewSkill(sk persistence.Skill) skillView {
	return skillView{SkillKey: sk.Key, Description: sk.Description, Actions: sk.Actions, CreatedAt: sk.CreatedAt.UTC(), UpdatedAt: sk.UpdatedAt.UTC()}
}

// agentView is an agent without its token hash and signing key (whether
// it has one is shown).
type agentView struct {
	AgentID             string     `json:"agent_id"`
	Name                string     `json:"name"`
	Status              string     `json:"status"`
	RiskTier            string     `json:"risk_tier"`
	AllowedEnvironments []string   `json:"allowed_environments"`
	HasSigningKey       bool       `json:"has_signing_key"`
	CreatedAt           time.Time  `json:"created_at"`
	UpdatedAt           time.Time  `json:"updated_at"`
	LastSeenAt          *time.Time `json:"last_seen_at"`
}

func viewAgent(a persistence.Agent) agentView {
	v := agentView{AgentID: a.ID, Name: a.Name, Status: a.Status, RiskTier: a.RiskTier,
		HasSigningKey: len(a.SigningKey) > 0, CreatedAt: a.CreatedAt.UTC(), UpdatedAt: a.UpdatedAt.UTC()}
	if len(a.AllowedEnvironments) > 0 {
		// An empty list is unrestricted (SPEC 4.2 rule 5), shown as null
		// like no list (CONTRACT §3).
		v.AllowedEnvironments = a.AllowedEnvironments
	}
	if a.LastSeenAt != nil {
		t := a.LastSeenAt.UTC()
		v.LastSeenAt = &t
	}
	return v
}

// decisionView is a decision without its tool call (the parameters).
type decisionView struct {
	DecisionID         string    `json:"decision_id"`
	TenantID           string    `json:"tenant_id"`
	AgentID            string    `json:"agent_id"`
	RequestID          *string   `json:"request_id"`
	Tool               string    `json:"tool"`
	Action             string    `json:"action"`
	Resource           *string   `json:"resource"`
	ActionHash         string    `json:"action_hash"`
	Decision           string    `json:"decision"`
	Reason             string    `json:"reason"`
	RiskScore          int       `json:"risk_score"`
	CompositeRiskScore int       `json:"composite_risk_score"`
	MatchedPolicyIDs   []string  `json:"matched_policy_ids"`
	RedactedFields     []string  `json:"redacted_fields"`
	MutatesState       bool      `json:"mutates_state"`
	TrustLevel         string    `json:"trust_level"`
	RootTrustLevel     string    `json:"root_trust_level"`
	Environment        *string   `json:"environment"`
	RunID              *string   `json:"run_id"`
	ParentRunID        *string   `json:"parent_run_id"`
	TraceID            *string   `json:"trace_id"`
	ReceiptID          *string   `json:"receipt_id"`
	ReceiptHash        *string   `json:"receipt_hash"`
	EventID            *string   `json:"event_id"`
	CreatedAt          time.Time `json:"created_at"`
	// Shadow is what the tenant's shadow policies would have added.
	Shadow []persistence.ShadowOutcome `json:"shadow"`
}

func viewDecision(d persistence.Decision) decisionView {
	return decisionView{DecisionID: d.ID, TenantID: d.TenantID, AgentID: d.AgentID, RequestID: d.RequestID, Tool: d.Tool, Action: d.Action,
		Resource: d.Resource, ActionHash: d.ActionHash, Decision: d.Decision, Reason: d.Reason, RiskScore: d.RiskScore,
		CompositeRiskScore: d.CompositeRiskScore, MatchedPolicyIDs: nonNilStrings(d.MatchedPolicyIDs), RedactedFields: nonNilStrings(d.RedactedFields),
		MutatesState: d.MutatesState, TrustLevel: d.TrustLevel, RootTrustLevel: d.RootTrustLevel, Environment: d.Environment,
		RunID: d.RunID, ParentRunID: d.ParentRunID, TraceID: d.TraceID, ReceiptID: nullable(d.ReceiptID), ReceiptHash: nullable(d.ReceiptHash),
		EventID: nullable(d.EventID), CreatedAt: d.CreatedAt.UTC(), Shadow: nonNilShadow(d.Shadow)}
}

func nonNilShadow(s []persistence.ShadowOutcome) []persistence.ShadowOutcome {
	if s == nil {
		return []persistence.ShadowOutcome{}
	}
	return s
}

type auditView struct {
	EventID    string         `json:"event_id"`
	TenantID   string         `json:"tenant_id"`
	EventType  string         `json:"event_type"`
	Action     string         `json:"action"`
	Actor      string         `json:"actor"`
	AgentID    *string        `json:"agent_id"`
	DecisionID *string        `json:"decision_id"`
	Details    map[string]any `json:"details"`
	CreatedAt  time.Time      `json:"created_at"`
	Archived   bool           `json:"archived"`
}

func viewAuditEvent(e persistence.AuditEvent) auditView {
	return auditView{EventID: e.ID, TenantID: e.TenantID, EventType: e.EventType, Action: e.Action, Actor: e.Actor,
		AgentID: nullable(e.AgentID), DecisionID: nullable(e.DecisionID), Details: e.Details, CreatedAt: e.CreatedAt.UTC(), Archived: e.Archived}
}

// packApproval is an approval in a pack: its tool call without parameters.
type packApproval struct {
	ApprovalID     string     `json:"approval_id"`
	DecisionID     string     `json:"decision_id"`
	AgentID        string     `json:"agent_id"`
	Tool           string     `json:"tool"`
	Action         string     `json:"action"`
	ActionHash     string     `json:"action_hash"`
	Status         string     `json:"status"`
	Reason         *string    `json:"reason"`
	ApproverUserID *string    `json:"approver_user_id"`
	CreatedAt      time.Time  `json:"created_at"`
	DecidedAt      *time.Time `json:"decided_at"`
	ExpiresAt      time.Time  `json:"expires_at"`
	ConsumedAt     *time.Time `json:"consumed_at"`
}

func viewPackApproval(a persistence.Approval) packApproval {
	var tc struct{ Tool, Action string }
	_ = json.Unmarshal(a.ToolCall, &tc)
	return packApproval{ApprovalID: a.ID, DecisionID: a.DecisionID, AgentID: a.AgentID, Tool: tc.Tool, Action: tc.Action,
		ActionHash: a.ActionHash, Status: a.EffectiveStatus(time.Now()), Reason: a.Reason, ApproverUserID: a.ApproverUserID,
		CreatedAt: a.CreatedAt.UTC(), DecidedAt: utcPtr(a.DecidedAt), ExpiresAt: a.ExpiresAt.UTC(), ConsumedAt: utcPtr(a.ConsumedAt)}
}

// verifyChainView is receipts_verification.json: CONTRACT §13's
// verify-chain answer.
type verifyChainView struct {
	Valid   bool                 `json:"valid"`
	Checked int                  `json:"checked"`
	Errors  []receipt.ChainError `json:"errors"`
}

// viewReceipt is a receipt as the API and the exports show it (CONTRACT
// §13): the receipt package's form.
func viewReceipt(r persistence.Receipt) receipt.Receipt { return r.Sealable(r.Seq) }

// viewAll maps rows to their views (never nil, so an empty list encodes
// as []).
func viewAll[T, V any](rows []T, view func(T) V) []V {
	out := make([]V, len(rows))
	for i, r := range rows {
		out[i] = view(r)
	}
	return out
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
