package control

import (
	"context"
	"errors"
	"fmt"

	"svc/messages"
	"svc/persistence"
	"svc/rules/policy"
)

// Tenant policy changes: each module is compiled first (one that does not
// compile is refused), and once committed the tenant's policy set is
// prepared again on this node and dropped on every other, so the tenant's
// very next call sees it.

// PolicyPatch is a change to a tenant policy; nil fields stay as they are.
type PolicyPatch struct {
	Rego        *string
	Description *string
	Enabled     *bool
	// Mode is persistence.PolicyEnforce or persistence.PolicyShadow.
	Mode *string
}

// modeDetail is a policy change's event details: its name, and its mode
// when it is shadow (an enforced policy's events read as they always did).
func modeDetail(pol persistence.Policy) map[string]any {
	d := map[string]any{"name": pol.Name}
	if pol.Mode == persistence.PolicyShadow {
		d["mode"] = pol.Mode
	}
	return d
}

// policyMode validates a policy's mode ("" is enforce).
func policyMode(mode string) (string, error) {
	switch mode {
	case "", persistence.PolicyEnforce:
		return persistence.PolicyEnforce, nil
	case persistence.PolicyShadow:
		return mode, nil
	}
	return "", invalid("mode", "must be %s or %s, not %q", persistence.PolicyEnforce, persistence.PolicyShadow, mode)
}

// CreatePolicy stores a new tenant policy (pol's tenant is op's) with a
// policy_created config_change event. A module that does not compile is
// Unprocessable (policy_compile_error, details.errors); a name already
// taken is Exists.
func (p *Plane) CreatePolicy(ctx context.Context, op Operator, pol persistence.Policy) (persistence.Policy, error) {
	mode, err := policyMode(pol.Mode)
	if err != nil {
		return persistence.Policy{}, err
	}
	pol.Mode = mode
	if r := p.compile(pol.Name, pol.Rego); r != nil {
		return persistence.Policy{}, r
	}
	pol.TenantID = op.TenantID
	var out persistence.Policy
	err = p.change(func() (err error) {
		out, err = p.d.Store.CreatePolicy(ctx, pol, Event(op, "config_change", "policy_created", "", modeDetail(pol)))
		if errors.Is(err, persistence.ErrConflict) {
			return exists("policy", "a policy named %q already exists", pol.Name)
		}
		return err
	}, func() { p.policiesChanged(ctx, op.TenantID) })
	return out, err
}

// UpdatePolicy applies patch to policy name with a policy_updated
// config_change event. An unknown policy is NotFound; new rego that does not
// compile is Unprocessable.
func (p *Plane) UpdatePolicy(ctx context.Context, op Operator, name string, patch PolicyPatch) (persistence.Policy, error) {
	cur, err := p.d.Store.GetPolicy(ctx, op.TenantID, name)
	if err != nil {
		return persistence.Policy{}, refuse(err, "policy", nil)
	}
	if patch.Rego != nil {
		if r := p.compile(cur.Name, *patch.Rego); r != nil {
			return persistence.Policy{}, r
		}
		cur.Rego = *patch.Rego
	}
	if patch.Description != nil {
		cur.Description = *patch.Description
	}
	if patch.Enabled != nil {
		cur.Enabled = *patch.Enabled
	}
	if patch.Mode != nil {
		if cur.Mode, err = policyMode(*patch.Mode); err != nil {
			return persistence.Policy{}, err
		}
	}
	var out persistence.Policy
	err = p.change(func() (err error) {
		out, err = p.d.Store.UpdatePolicy(ctx, cur, Event(op, "config_change", "policy_updated", "", modeDetail(cur)))
		return refuse(err, "policy", nil)
	}, func() { p.policiesChanged(ctx, op.TenantID) })
	return out, err
}

// DeletePolicy removes policy name with a policy_deleted config_change
// event; an unknown policy is NotFound.
func (p *Plane) DeletePolicy(ctx context.Context, op Operator, name string) error {
	return p.change(func() error {
		err := p.d.Store.DeletePolicy(ctx, op.TenantID, name, Event(op, "config_change", "policy_deleted", "", map[string]any{"name": name}))
		return refuse(err, "policy", nil)
	}, func() { p.policiesChanged(ctx, op.TenantID) })
}

// ReloadBasePolicies re-reads the base policy set (SVC_POLICY_FILE, or the
// embedded set) on this node, records a policy_file_reload config_change
// event and, once recorded, tells the other nodes. It returns the set's
// source (the file, or "embedded"). A set that does not compile is
// Unprocessable (details.errors name each error's file) and the set in
// force stays.
func (p *Plane) ReloadBasePolicies(ctx context.Context, op Operator) (string, error) {
	if err := p.d.Engine.ReloadBase(); err != nil {
		r := &Refusal{Kind: Unprocessable, Code: "policy_compile_error",
			Message: fmt.Sprintf("the base policy set does not compile: %v", err)}
		// The same details.errors as a tenant module's, with the file
		// each error is in.
		if me := (*policy.ModuleError)(nil); errors.As(err, &me) {
			r.Details = map[string]any{"errors": compileDetails(me.Module, me.Errors)}
		}
		return "", r
	}
	src := "embedded"
	if p.d.Config != nil && p.d.Config.PolicyFile != "" {
		src = p.d.Config.PolicyFile
	}
	err := p.change(func() error {
		return p.d.Store.AppendAudit(ctx, []persistence.AuditEvent{Event(op, "config_change", "policy_file_reload", "", map[string]any{"source": src})})
	}, func() {
		if p.d.Invalidations != nil {
			p.d.Invalidations.Broadcast(ctx, messages.Invalidation{Kind: messages.CacheBasePolicy, TenantID: "-", Key: "-"})
		}
	})
	if err != nil {
		return "", err
	}
	return src, nil
}

// compile refuses a tenant module that does not compile (CONTRACT §6: a
// 422 policy_compile_error with details.errors).
func (p *Plane) compile(name, rego string) *Refusal {
	errs := p.d.Engine.CompileTenant(name, rego)
	if len(errs) == 0 {
		return nil
	}
	return &Refusal{Kind: Unprocessable, Code: "policy_compile_error", Message: "the policy does not compile",
		Details: map[string]any{"errors": compileDetails("", errs)}}
}

// compileDetails is the details.errors of a policy_compile_error: line, col
// and message of each error, and its file when one is given (the base set,
// which has several).
func compileDetails(file string, errs []policy.CompileError) []map[string]any {
	list := make([]map[string]any, len(errs))
	for i, e := range errs {
		list[i] = map[string]any{"line": e.Line, "col": e.Col, "message": e.Message}
		if file != "" {
			list[i]["file"] = file
		}
	}
	return list
}

// policiesChanged prepares the tenant's new policy set on this node and
// drops it on the others (after a commit).
func (p *Plane) policiesChanged(ctx context.Context, tenantID string) {
	if p.d.Policies != nil {
		if err := p.d.Policies.PreparePolicies(ctx, tenantID); err != nil {
			p.log.Error("preparing the tenant's policies failed; the next authorize retries", "tenant_id", tenantID, "error", err)
		}
	}
	p.drop(ctx, messages.CachePolicy, tenantID, "-")
}
