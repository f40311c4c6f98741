package persistence

import (
	"context"
	"encoding/json"
	"time"

	"svc/receipt"
)

// Decision is the record of one authorize call (SPEC 2.4).
type Decision struct {
	Seq                int64
	ID                 string
	TenantID           string
	AgentID            string
	RequestID          *string
	Tool               string
	Action             string
	Resource           *string
	ActionHash         string
	Decision           string
	Reason             string
	RiskScore          int
	CompositeRiskScore int
	MatchedPolicyIDs   []string
	RedactedFields     []string
	MutatesState       bool
	TrustLevel         string
	RootTrustLevel     string
	Environment        *string
	RunID              *string
	ParentRunID        *string
	TraceID            *string
	// ToolCall is the normalized tool call as JSON (for approvals); it is
	// never copied into events.
	ToolCall  json.RawMessage
	CreatedAt time.Time
	// Nonce is the request's replay nonce (written, not read back: see
	// RecentNonces).
	Nonce *string
	// ReceiptID and ReceiptHash are filled on reads from the decision's
	// receipt, empty when none was written.
	ReceiptID   string
	ReceiptHash string
	// AuditID is the id of the decision's authorize_decision audit event,
	// which is the decision's own record read as an audit event
	// (AuditEvent); empty: the decision has none.
	AuditID string
	// ApprovalID is the approval created with a require_approval decision
	// (filled on reads; written from DecisionWrite.Approval).
	ApprovalID string
	// EventID is the id of the decision's authorize_decision security event
	// (messages.AseEvent, UUID v4), the link an incident's source_event_ids
	// follow back to the decision (SPEC 4.4); empty on decisions recorded
	// before it was stored.
	EventID string
	// RunContext is the canonical {agent_history, run} the policy saw
	// (CONTRACT §16), nil when no loaded policy referred to it;
	// ContextHash is its lower-case hex SHA-256 ("" without it).
	RunContext  json.RawMessage
	ContextHash string
	// Shadow is what each of the tenant's shadow policies that fired
	// would have added (CONTRACT §18); nil when none did.
	Shadow []ShadowOutcome
	// auditDetails are the details of an authorize_decision event written
	// before decisions carried their own (migrated rows); nil otherwise.
	auditDetails map[string]any
}

// EventAuthorizeDecision is the audit event type of every decision.
const EventAuthorizeDecision = "authorize_decision"

// AuditEvent is the decision read as its authorize_decision audit event.
// The decision, its receipt and this event are one stored record, so the
// event's fields are the decision's: the action is the decision, the actor
// the agent, and the details name the tool, the reason, the matched
// policies, the action hash, the receipt and any approval.
func (d Decision) AuditEvent() AuditEvent {
	details := d.auditDetails
	if details == nil {
		details = map[string]any{"action": d.Decision, "tool": d.Tool, "tool_action": d.Action, "reason": d.Reason,
			"matched_policies": nonNilStrings(d.MatchedPolicyIDs), "action_hash": d.ActionHash, "receipt_id": d.ReceiptID}
		if d.ApprovalID != "" {
			details["approval_id"] = d.ApprovalID
		}
		if d.EventID != "" {
			details["security_event_id"] = d.EventID // the AseEvent an incident names
		}
	}
	return AuditEvent{Seq: d.Seq, ID: d.AuditID, TenantID: d.TenantID, EventType: EventAuthorizeDecision, Action: d.Decision,
		Actor: "agent:" + d.AgentID, AgentID: d.AgentID, DecisionID: d.ID, Details: details, CreatedAt: d.CreatedAt}
}

// WithAuditDetails is the decision with the details its authorize_decision
// event was written with before the event became part of the decision's
// record (a backend reading a migrated row).
func (d Decision) WithAuditDetails(details map[string]any) Decision {
	d.auditDetails = details
	return d
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// NonceUse is one recorded use of a replay nonce.
type NonceUse struct {
	TenantID, AgentID, Nonce string
	At                       time.Time
}

// Receipt is one link of a tenant's receipt chain (CONTRACT §13).
type Receipt struct {
	ID         string
	TenantID   string
	DecisionID string
	Seq        int64
	ActionHash string
	Decision   string
	Hash       string
	PrevHash   string
	Signature  *string
	KeyID      string
	CreatedAt  time.Time
	// ContextHash is the decision's context hash, which the receipt's hash
	// covers (svc-receipt-2); "" without run context.
	ContextHash string
}

// ChainHead is the last link of a tenant's chain (Seq 0 and Hash "" before
// the first receipt): the head an export names (receipt.WriteExport).
type ChainHead = receipt.Head

// DecisionWrite is one decision with what travels in its transaction. The
// decision, its receipt and its authorize_decision audit event
// (Decision.AuditID) are written as one record.
type DecisionWrite struct {
	Decision Decision
	// Receipt is sealed (Seq, PrevHash, Hash, Signature) inside the
	// transaction by the Sealer; nil writes none. Its tenant, decision,
	// action hash, decision value and time are the decision's.
	Receipt *Receipt
	// Approval is created with a require_approval decision.
	Approval *Approval
	// Use consumes a presented approval in the decision's transaction.
	Use *ApprovalUse
	// Taint lowers the run's durable trust floor in the decision's
	// transaction: the call lowered its run's trust (CONTRACT §16).
	Taint *RunTaint
}

// RunTaint is a run's durable trust floor: the least trusted level its
// calls brought in (Level is runstate's level, the rank plus one), the
// attempt that brought it and how. A stored level only rises.
type RunTaint struct {
	TenantID  string
	RunID     string
	Level     int
	Seq       int64
	Via       string
	UpdatedAt time.Time
}

// Continues reports whether rs are sealed already as the continuation of
// head, link by link (receipts sealed ahead of time, as a lone node seals
// them on arrival).
func Continues(head ChainHead, rs []*Receipt) bool {
	for _, r := range rs {
		if r.Hash == "" || r.Seq != head.Seq+1 || r.PrevHash != head.Hash {
			return false
		}
		head = ChainHead{Seq: r.Seq, Hash: r.Hash}
	}
	return true
}

// Sealer fills in Seq, PrevHash, Hash and Signature of a tenant's new
// receipts, in order, continuing from head. CommitDecisions calls it inside
// the transaction with the head locked, so nodes never fork a chain.
type Sealer func(tenantID string, head ChainHead, rs []*Receipt) error

// TenantStats are the counts of GET /v1/tenants/stats.
type TenantStats struct {
	TotalDecisions      int64
	ByDecision          map[string]int64
	TrustLevelBreakdown map[string]int64
	AgentsTotal         int64
	AgentsActive        int64
}

// DecisionStore keeps decisions and receipts.
type DecisionStore interface {
	// CommitDecisions writes the decisions, each with its sealed receipt
	// and audit event in its one record, in one transaction (group commit).
	// ErrReceiptMismatch when a receipt does not belong to its decision.
	CommitDecisions(ctx context.Context, writes []DecisionWrite, seal Sealer) error
	GetDecision(ctx context.Context, tenantID, id string) (Decision, error)
	FindDecisionByRequest(ctx context.Context, tenantID, agentID, requestID string) (Decision, error)
	// RecentNonces lists the replay nonces of decisions made since since,
	// oldest first, in every tenant: what a starting node puts back into
	// the shared state.
	RecentNonces(ctx context.Context, since time.Time) ([]NonceUse, error)
	// ListDecisions lists newest first; query is the raw `q` value.
	ListDecisions(ctx context.Context, tenantID, query string, p Page) ([]Decision, error)
	// ListReceipts lists newest first by seq (the cursor is the seq).
	ListReceipts(ctx context.Context, tenantID string, p Page) ([]Receipt, error)
	GetReceipt(ctx context.Context, tenantID, id string) (Receipt, error)
	// ReceiptRange returns receipts with fromSeq <= seq <= toSeq in seq
	// order, at most limit of them (toSeq 0: no upper bound).
	ReceiptRange(ctx context.Context, tenantID string, fromSeq, toSeq int64, limit int) ([]Receipt, error)
	ReceiptsByID(ctx context.Context, tenantID string, ids []string) ([]Receipt, error)
	ChainHead(ctx context.Context, tenantID string) (ChainHead, error)
	TenantStats(ctx context.Context, tenantID string) (TenantStats, error)
	// RunTaint reads a run's durable trust floor; ErrNotFound when the
	// run never lowered its trust.
	RunTaint(ctx context.Context, tenantID, runID string) (RunTaint, error)
	// RecentRunTaints lists the durable trust floors set since since, in
	// every tenant (what a starting node puts back into shared state).
	RecentRunTaints(ctx context.Context, since time.Time) ([]RunTaint, error)
	// SimulationFloor is where a policy simulation of the newest n of the
	// tenant's decisions made in [from, to) starts: the seq just below the
	// oldest of them (0 when the range holds n or fewer).
	SimulationFloor(ctx context.Context, tenantID string, from, to time.Time, n int) (int64, error)
	// SimulationDecisions returns the tenant's decisions made in [from, to)
	// with seq > afterSeq, in seq order, at most limit, with their tool
	// call and run context (read from a replica when there is one).
	SimulationDecisions(ctx context.Context, tenantID string, from, to time.Time, afterSeq int64, limit int) ([]Decision, error)
}

// Policy modes (CONTRACT §18): an enforced policy decides; a shadow one
// runs on every live call and only records what it would have added.
const (
	PolicyEnforce = "enforce"
	PolicyShadow  = "shadow"
)

// ShadowOutcome is what one shadow policy alone would have added to a
// call's decision.
type ShadowOutcome struct {
	Policy   string `json:"policy"`
	Decision string `json:"decision"`
}

// Policy is a tenant's Rego module.
type Policy struct {
	TenantID    string
	Name        string
	Rego        string
	Description string
	Enabled     bool
	// Mode is PolicyEnforce or PolicyShadow.
	Mode      string
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Skill is one registry entry: its actions' risk metadata.
type Skill struct {
	TenantID    string
	Key         string
	Description string
	Actions     map[string]SkillAction
	// OutputTrust is the trust level of what every action of the skill
	// brings into a run (CONTRACT §16), "" for none; an action's own
	// OutputTrust wins over it.
	OutputTrust string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// SkillAction is the registry's metadata for one action of a skill.
type SkillAction struct {
	Risk             string `json:"risk"`
	MutatesState     bool   `json:"mutates_state"`
	ApprovalRequired bool   `json:"approval_required"`
	// OutputTrust is the trust level of what the action's calls bring
	// into their run ("" for the skill's); Labels classify the action for
	// run policies (egress, private_read, untrusted_ingest, destructive or
	// a tenant's own); Accumulate names the top-level numeric parameters a
	// run sums (input.run.sums["<tool>/<action>.<param>"]).
	OutputTrust string   `json:"output_trust,omitempty"`
	Labels      []string `json:"labels,omitempty"`
	Accumulate  []string `json:"accumulate,omitempty"`
}

// RiskSettings are a tenant's composite-risk weights and tier-escalation
// settings.
type RiskSettings struct {
	// Weights is nil when the tenant never set them (defaults apply).
	Weights         map[string]float64
	DenialThreshold int
	WindowMinutes   int
}

// PolicyStore keeps tenant policies. Every change bumps the tenant's
// policy version in the same transaction, which is how every node learns
// that its prepared query is stale.
type PolicyStore interface {
	CreatePolicy(ctx context.Context, p Policy, audit ...AuditEvent) (Policy, error)
	UpdatePolicy(ctx context.Context, p Policy, audit ...AuditEvent) (Policy, error)
	DeletePolicy(ctx context.Context, tenantID, name string, audit ...AuditEvent) error
	GetPolicy(ctx context.Context, tenantID, name string) (Policy, error)
	ListPolicies(ctx context.Context, tenantID string) ([]Policy, error)
	PolicyVersion(ctx context.Context, tenantID string) (int64, error)
}

// SkillStore keeps the skill registry.
type SkillStore interface {
	PutSkill(ctx context.Context, s Skill, audit ...AuditEvent) (Skill, error)
	GetSkill(ctx context.Context, tenantID, key string) (Skill, error)
	ListSkills(ctx context.Context, tenantID string) ([]Skill, error)
	DeleteSkill(ctx context.Context, tenantID, key string, audit ...AuditEvent) error
}

// RiskStore keeps the tenant's risk settings and escalates agent tiers.
type RiskStore interface {
	GetRiskSettings(ctx context.Context, tenantID string) (RiskSettings, error)
	PutRiskWeights(ctx context.Context, tenantID string, w map[string]float64, audit ...AuditEvent) error
	PutRiskEscalation(ctx context.Context, tenantID string, threshold, windowMinutes int, audit ...AuditEvent) error
	// EscalateTier moves the agent's tier from `from` to `to` only when it is
	// still `from` (conditional), reporting whether it moved.
	EscalateTier(ctx context.Context, tenantID, agentID, from, to string, audit ...AuditEvent) (bool, error)
}
