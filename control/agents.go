package control

import (
	"context"
	"crypto/rand"
	"errors"
	"time"

	"github.com/google/uuid"

	"svc/credential"
	"svc/persistence"
)

// NewAgent is an agent to register.
type NewAgent struct {
	Name, RiskTier string
	// AllowedEnvironments: nil, unrestricted.
	AllowedEnvironments []string
	// SigningKey is the agent's request-signing key (nil: none) unless
	// GenerateSigningKey asks the plane to make one.
	SigningKey         []byte
	GenerateSigningKey bool
}

// CreateAgent registers an active agent with a freshly minted token, with
// an agent_registered admin_action event, and returns it with the token
// (shown once; a generated signing key is in the agent's SigningKey). A
// name taken in the tenant is a Conflict (already_exists).
func (p *Plane) CreateAgent(ctx context.Context, op Operator, n NewAgent) (persistence.Agent, string, error) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	a := persistence.Agent{ID: uuid.NewString(), TenantID: op.TenantID, Name: n.Name, Status: persistence.AgentActive,
		RiskTier: n.RiskTier, AllowedEnvironments: n.AllowedEnvironments, SigningKey: n.SigningKey, CreatedAt: now, UpdatedAt: now}
	if n.GenerateSigningKey {
		a.SigningKey = newSigningKey()
	}
	tok, hash := credential.Mint(credential.AgentPrefix)
	err := p.change(func() error {
		err := p.d.Store.CreateAgent(ctx, a, hash, Event(op, "admin_action", "agent_registered", a.ID,
			map[string]any{"name": a.Name, "risk_tier": a.RiskTier}))
		if errors.Is(err, persistence.ErrConflict) {
			return exists("agent", "an agent named %q already exists", n.Name)
		}
		return err
	}, nil)
	if err != nil {
		return persistence.Agent{}, "", err
	}
	return a, tok, nil
}

// AgentChange is a change of an agent's registration; a nil field is left
// as it is.
type AgentChange struct {
	Name, RiskTier *string
	// AllowedEnvironments: a pointer to nil clears the restriction.
	AllowedEnvironments *[]string
	// SigningKey: a pointer to nil removes the key; GenerateSigningKey
	// replaces it with one the plane makes.
	SigningKey         *[]byte
	GenerateSigningKey bool
}

// UpdateAgent applies ch to agent id with an agent_updated admin_action
// event naming what changed (for the signing key only that it did), and
// returns the agent (a generated key in its SigningKey). A name another
// agent has is a Conflict (already_exists); an unknown agent NotFound.
func (p *Plane) UpdateAgent(ctx context.Context, op Operator, id string, ch AgentChange) (persistence.Agent, error) {
	patch := persistence.AgentPatch{Name: ch.Name, RiskTier: ch.RiskTier, AllowedEnvironments: ch.AllowedEnvironments, SigningKey: ch.SigningKey}
	details := map[string]any{}
	if ch.Name != nil {
		details["name"] = *ch.Name
	}
	if ch.RiskTier != nil {
		details["risk_tier"] = *ch.RiskTier
	}
	if ch.AllowedEnvironments != nil {
		details["allowed_environments"] = *ch.AllowedEnvironments
	}
	if ch.GenerateSigningKey {
		key := newSigningKey()
		patch.SigningKey = &key
	}
	if patch.SigningKey != nil {
		details["signing_key_changed"] = true
	}
	var a persistence.Agent
	err := p.change(func() (err error) {
		a, err = p.d.Store.UpdateAgent(ctx, op.TenantID, id, patch, Event(op, "admin_action", "agent_updated", id, details))
		if errors.Is(err, persistence.ErrConflict) {
			return exists("agent", "an agent with that name already exists")
		}
		return refuse(err, "agent", nil)
	}, nil)
	return a, err
}

// newSigningKey makes a 32-byte request-signing key.
func newSigningKey() []byte {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return key
}

// GrantTool binds tool to agent id (from then on it may use only the tools
// bound to it), with an agent_tool_permission_granted admin_action event,
// and returns the binding. A tool already bound is a Conflict
// (already_exists); an unknown agent NotFound.
func (p *Plane) GrantTool(ctx context.Context, op Operator, id, tool string) (persistence.Permission, error) {
	perm := persistence.Permission{TenantID: op.TenantID, AgentID: id, ToolKey: tool, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	err := p.change(func() error {
		err := p.d.Store.AddPermission(ctx, perm, Event(op, "admin_action", "agent_tool_permission_granted", id,
			map[string]any{"tool_key": tool}))
		if errors.Is(err, persistence.ErrConflict) {
			return exists("permission", "tool %q is already bound", tool)
		}
		return refuse(err, "agent", nil)
	}, nil)
	if err != nil {
		return persistence.Permission{}, err
	}
	return perm, nil
}

// RevokeTool unbinds tool from agent id, with an
// agent_tool_permission_revoked admin_action event. A tool not bound (or
// an unknown agent) is NotFound (a permission).
func (p *Plane) RevokeTool(ctx context.Context, op Operator, id, tool string) error {
	return p.change(func() error {
		return refuse(p.d.Store.DeletePermission(ctx, op.TenantID, id, tool, Event(op, "admin_action", "agent_tool_permission_revoked", id,
			map[string]any{"tool_key": tool})), "permission", nil)
	}, nil)
}

// ReportLeakedToken records that agent id's token leaked. When the tenant's
// auto_rotate_token_on_leak is on, the token is rotated (an
// agent_token_rotated event, action leak_rotation) and the new one returned
// (shown once); otherwise an agent_token_leak_detected_no_rotation event is
// recorded and the token is "". An unknown or deleted agent is NotFound.
func (p *Plane) ReportLeakedToken(ctx context.Context, op Operator, id string) (rotated bool, token string, err error) {
	t, err := p.d.Store.GetTenant(ctx, op.TenantID)
	if err != nil {
		return false, "", err
	}
	if t.AutoRotateTokenOnLeak {
		tok, err := p.rotateAgentToken(ctx, op, id, "leak_rotation", map[string]any{"reason": "token reported leaked"})
		return err == nil, tok, err
	}
	return false, "", p.change(func() error {
		a, err := p.d.Store.GetAgent(ctx, op.TenantID, id)
		if err == nil && a.Status == persistence.AgentDeleted {
			err = persistence.ErrNotFound
		}
		if err != nil {
			return refuse(err, "agent", nil)
		}
		return p.d.Store.AppendAudit(ctx, []persistence.AuditEvent{Event(op, "agent_token_leak_detected_no_rotation", "leak_reported", id,
			map[string]any{"rotated": false})})
	}, nil)
}

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
		a, err = p.d.Store.TransitionAgent(ctx, op.TenantID, id, tr.From, tr.To,
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
		_, err := p.d.Store.TransitionAgent(ctx, op.TenantID, id,
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
	return p.rotateAgentToken(ctx, op, id, action, nil)
}

func (p *Plane) rotateAgentToken(ctx context.Context, op Operator, id, action string, details map[string]any) (string, error) {
	tok, hash := credential.Mint(credential.AgentPrefix)
	err := p.change(func() error {
		_, err := p.d.Store.RotateAgentToken(ctx, op.TenantID, id, hash, Event(op, "agent_token_rotated", action, id, details))
		return refuse(err, "agent", nil)
	}, nil)
	if err != nil {
		return "", err
	}
	return tok, nil
}
