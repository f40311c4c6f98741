package control

import (
	"context"
	"errors"

	"svc/credential"
	"svc/persistence"
)

// Transition is one operator status operation on an agent (CONTRACT §3):
// its name (the API's path segment), the action of its admin_action audit
// event, the statuses it applies to, and the status it leads to. The
// database applies it atomically (persistence TransitionAgent): from any
// other status it is a conflict.
type Transition struct {
	Op, Action string
	From       []string
	To         string
}

// Transitions are the operator transitions of an agent's lifecycle.
// Quarantine is not among them: it follows a recorded decision (SPEC 4.2
// rule 9, actors/aftercommit.go).
func Transitions() []Transition {
	return []Transition{
		{"freeze", "agent_frozen", []string{persistence.AgentActive, persistence.AgentQuarantined}, persistence.AgentFrozen},
		{"unfreeze", "agent_unfrozen", []string{persistence.AgentFrozen}, persistence.AgentActive},
		{"restore", "agent_restored", []string{persistence.AgentQuarantined, persistence.AgentFrozen}, persistence.AgentActive},
		{"revoke", "agent_revoked", []string{persistence.AgentActive, persistence.AgentQuarantined, persistence.AgentFrozen}, persistence.AgentRevoked},
	}
}

// TransitionAgent moves agent id from one of tr.From to tr.To, with an
// admin_action audit event. A status tr does not apply to: a Conflict
// refusal (invalid_transition); an unknown agent: NotFound. Agents are
// cached by the store itself (persistence.CachedStore), which drops its
// entry on the write.
func (p *Plane) TransitionAgent(ctx context.Context, op Operator, id string, tr Transition) (persistence.Agent, error) {
	var a persistence.Agent
	err := p.change(func() (err error) {
		a, err = p.store.TransitionAgent(ctx, op.TenantID, id, tr.From, tr.To,
			Event(op, "admin_action", tr.Action, id, map[string]any{"to": tr.To}))
		return refuse(err, "agent", conflict("agent", "invalid_transition", "the agent's status does not allow %s", tr.Op))
	}, nil)
	return a, err
}

// DeleteAgent soft-deletes agent id (from any status; its token stops
// working) with an agent_deleted admin_action event. An agent already
// deleted is NotFound, as an unknown one.
func (p *Plane) DeleteAgent(ctx context.Context, op Operator, id string) error {
	return p.change(func() error {
		_, err := p.store.TransitionAgent(ctx, op.TenantID, id,
			[]string{persistence.AgentActive, persistence.AgentQuarantined, persistence.AgentFrozen, persistence.AgentRevoked},
			persistence.AgentDeleted, Event(op, "admin_action", "agent_deleted", id, nil))
		if errors.Is(err, persistence.ErrStateConflict) {
			return notFound("agent") // already deleted
		}
		return refuse(err, "agent", nil)
	}, nil)
}

// RotateAgentToken mints a new token for agent id and stores its hash (the
// old token fails at once), with an agent_token_rotated event of the given
// action (operator_rotation, leak_rotation). It returns the token, which is
// shown once.
func (p *Plane) RotateAgentToken(ctx context.Context, op Operator, id, action string) (string, error) {
	tok, hash := credential.Mint(credential.AgentPrefix)
	err := p.change(func() error {
		_, err := p.store.RotateAgentToken(ctx, op.TenantID, id, hash, Event(op, "agent_token_rotated", action, id, nil))
		return refuse(err, "agent", nil)
	}, nil)
	if err != nil {
		return "", err
	}
	return tok, nil
}
