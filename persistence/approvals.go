package persistence

import (
	"context"
	"encoding/json"
	"time"
)

// Approval statuses (CONTRACT §5). EXPIRED is never stored: a PENDING or
// APPROVED approval past expires_at reads as EXPIRED.
const (
	ApprovalPending  = "PENDING"
	ApprovalApproved = "APPROVED"
	ApprovalRejected = "REJECTED"
	ApprovalExpired  = "EXPIRED"
)

// Approval is a human decision on one require_approval call (SPEC 3,
// CONTRACT §5). ToolCall is the normalized tool call the agent must present
// again; ActionHash is its svc-jcs-1 hash.
type Approval struct {
	Seq                int64
	ID                 string
	TenantID           string
	DecisionID         string
	AgentID            string
	ToolCall           json.RawMessage
	ActionHash         string
	Status             string // as stored: PENDING, APPROVED or REJECTED
	Reason             *string
	ApproverUserID     *string
	CreatedAt          time.Time
	DecidedAt          *time.Time
	ExpiresAt          time.Time
	ConsumedAt         *time.Time
	ConsumedDecisionID *string
	// Callback, when set on a new approval, is written with it (never read
	// back with the approval: see ApprovalCallbackStore).
	Callback *ApprovalCallback
}

// EffectiveStatus is the status a reader sees at now: EXPIRED for a
// PENDING or APPROVED approval past its expiry (a consumed one keeps
// APPROVED).
func (a Approval) EffectiveStatus(now time.Time) string {
	if (a.Status == ApprovalPending || a.Status == ApprovalApproved) && a.ConsumedAt == nil && !now.Before(a.ExpiresAt) {
		return ApprovalExpired
	}
	return a.Status
}

// ApprovalUse consumes an approval inside a decision's transaction: the
// conditional update matches only an APPROVED, unexpired, unconsumed
// approval of this agent bound to this action hash, and when it matches
// nothing the whole transaction fails with ErrStateConflict.
type ApprovalUse struct {
	ApprovalID string
	AgentID    string
	ActionHash string
	At         time.Time
}

// ApprovalDecision is an approve, reject or edit.
type ApprovalDecision struct {
	TenantID       string
	ID             string
	Status         string // APPROVED or REJECTED
	ApproverUserID string
	Reason         *string
	At             time.Time
	// ToolCall and ActionHash, when set (edit), replace the stored ones.
	ToolCall   json.RawMessage
	ActionHash string
}

// ApprovalStore keeps approvals. The database is the arbiter of their
// transitions: each is one conditional update, never a read then a write,
// so a decision or a consumption happens once across requests and nodes.
type ApprovalStore interface {
	GetApproval(ctx context.Context, tenantID, id string) (Approval, error)
	// ListApprovals lists newest first; agentID "" lists every agent's.
	ListApprovals(ctx context.Context, tenantID, agentID string, p Page) ([]Approval, error)
	// ApprovalForDecision returns the approval a require_approval decision
	// created (ErrNotFound when there is none, or it was deleted).
	ApprovalForDecision(ctx context.Context, tenantID, decisionID string) (Approval, error)
	// DecideApproval moves a PENDING, unexpired approval to d.Status:
	// ErrNotFound when there is none, ErrStateConflict when it is decided
	// or expired.
	DecideApproval(ctx context.Context, d ApprovalDecision, audit ...AuditEvent) (Approval, error)
	// ConsumeApproval sets consumed_at on an APPROVED, unexpired,
	// unconsumed approval (of agentID when it is not ""): ErrNotFound, or
	// ErrStateConflict when it cannot be consumed.
	ConsumeApproval(ctx context.Context, tenantID, id, agentID string, at time.Time, audit ...AuditEvent) (Approval, error)
	// DeleteStaleApprovals deletes approvals decided, or expired, before
	// cutoff, returning how many.
	DeleteStaleApprovals(ctx context.Context, cutoff time.Time) (int64, error)
	// CountPendingApprovals counts the tenant's PENDING, unexpired approvals.
	CountPendingApprovals(ctx context.Context, tenantID string, now time.Time) (int64, error)
	// UsableApproval returns the newest (highest Seq) approval of the
	// tenant's agent bound to actionHash that could be consumed at now:
	// stored APPROVED, not consumed, expires_at after now. ErrNotFound
	// when there is none. It only reads: consuming it is still the
	// conditional update of ApprovalUse or ConsumeApproval.
	UsableApproval(ctx context.Context, tenantID, agentID, actionHash string, now time.Time) (Approval, error)
}

// ApprovalCallback is the callback an agent registered with the call that
// created an approval (SPEC 4.2 webhook, CONTRACT §14): when the approval
// reaches APPROVED, REJECTED or EXPIRED, the gateway POSTs its outcome to
// URL, signed with Secret. The secret is stored because an HMAC key must
// be readable to sign; it is never returned or logged.
type ApprovalCallback struct {
	URL    string
	Secret string
}

// MaxCallbackAttempts is how many times a callback is tried in all, across
// every node (CONTRACT §14).
const MaxCallbackAttempts = 3

// DueCallback is a callback whose approval has left PENDING (or expired)
// and that is neither done nor claimed: the approval as it stands, and
// the registration.
type DueCallback struct {
	Approval Approval
	Callback ApprovalCallback
	Attempts int
}

// ApprovalCallbackStore keeps the callbacks of approvals, written with the
// approval in its decision's transaction (Approval.Callback). Every attempt
// is claimed first, with one conditional update, so that across nodes a
// callback is tried at most MaxCallbackAttempts times and by one node at a
// time.
type ApprovalCallbackStore interface {
	// DueCallbacks lists up to limit callbacks due at now: not done, fewer
	// than MaxCallbackAttempts attempts, unclaimed (or their claim past),
	// and their approval no longer PENDING or expired.
	DueCallbacks(ctx context.Context, now time.Time, limit int) ([]DueCallback, error)
	// DueCallback is DueCallbacks for one approval (ErrNotFound when it has
	// no callback due).
	DueCallback(ctx context.Context, tenantID, approvalID string, now time.Time) (DueCallback, error)
	// ClaimCallbackAttempt counts one attempt and claims the callback until
	// until; false when it is done, out of attempts, or claimed by another.
	ClaimCallbackAttempt(ctx context.Context, approvalID string, now, until time.Time) (bool, error)
	// FinishCallback records the last attempt's outcome ("delivered" or
	// "failed") and the HTTP status it got (0 for none): the callback is
	// done.
	FinishCallback(ctx context.Context, approvalID, outcome string, status int, at time.Time) error
	// RetryCallbackAt keeps the claim of a failed attempt until at, when the
	// next attempt may be made.
	RetryCallbackAt(ctx context.Context, approvalID string, at time.Time) error
}
