package control

import (
	"context"

	"svc/actors"
	"svc/persistence"
)

// Approvals are the approval actors: each approval's changes are
// serialized in its own actor, which writes the approval with its audit
// event in one transaction and wakes those waiting on it.
type Approvals interface {
	Decide(ctx context.Context, d persistence.ApprovalDecision, params map[string]any, actorName string) (persistence.Approval, error)
	Consume(ctx context.Context, tenantID, id, agentID, actorName string) (persistence.Approval, error)
}

// ApprovalDecision is an approver's answer to a pending approval.
type ApprovalDecision struct {
	ID string
	// Status is persistence.ApprovalApproved or persistence.ApprovalRejected.
	Status   string
	Approver string
	Reason   *string
	// Parameters, when set, replace the call's parameters (approve with
	// edits: the agent must present the edited call).
	Parameters map[string]any
}

// DecideApproval grants, edits or rejects a pending approval of op's
// tenant, as op (an operator, or "chat:<user>" for the chat callback). An
// unknown approval is NotFound; one already decided or expired a Conflict
// (approval_conflict); edited parameters that cannot be hashed an Invalid
// refusal of parameters.
func (p *Plane) DecideApproval(ctx context.Context, op Operator, d ApprovalDecision) (persistence.Approval, error) {
	var a persistence.Approval
	err := p.change(func() (err error) {
		a, err = p.d.Approvals.Decide(ctx, persistence.ApprovalDecision{TenantID: op.TenantID, ID: d.ID, Status: d.Status,
			ApproverUserID: d.Approver, Reason: d.Reason}, d.Parameters, op.Actor)
		if actors.IsInvalidParameters(err) {
			return invalid("parameters", "%v", err)
		}
		return refuse(err, "approval", conflict("approval", "approval_conflict", "the approval is already decided or has expired"))
	}, nil)
	return a, err
}

// ConsumeApproval uses an approved approval of op's tenant once: by its
// agent (agentID), or by an operator (agentID ""). An unknown approval (or
// another agent's) is NotFound; one not approved, expired or already
// consumed a Conflict (approval_conflict).
func (p *Plane) ConsumeApproval(ctx context.Context, op Operator, id, agentID string) (persistence.Approval, error) {
	var a persistence.Approval
	err := p.change(func() (err error) {
		a, err = p.d.Approvals.Consume(ctx, op.TenantID, id, agentID, op.Actor)
		return refuse(err, "approval", conflict("approval", "approval_conflict",
			"the approval is not approved, has expired, or was already consumed"))
	}, nil)
	return a, err
}
