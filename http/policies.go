package httpapi

import (
	"context"
	"errors"
	"regexp"
	"time"

	"svc/messages"
	"svc/persistence"
	"svc/rules/policy"
)

var policyNameRE = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)

type policyCreate struct {
	Name        string `json:"name" openapi:"required,pattern=key"`
	Rego        string `json:"rego" openapi:"required,minLength=1"`
	Description string `json:"description"`
	Enabled     *bool  `json:"enabled"`
}

type policyUpdate struct {
	Rego        *string `json:"rego"`
	Description *string `json:"description"`
	Enabled     *bool   `json:"enabled"`
}

type policyView struct {
	Name        string    `json:"name"`
	Rego        string    `json:"rego"`
	Description string    `json:"description"`
	Enabled     bool      `json:"enabled"`
	Version     int64     `json:"version"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

type reloadView struct {
	Reloaded bool   `json:"reloaded"`
	Source   string `json:"source"`
}

func viewPolicy(p persistence.Policy) policyView {
	return policyView{Name: p.Name, Rego: p.Rego, Description: p.Description, Enabled: p.Enabled, Version: p.Version,
		CreatedAt: p.CreatedAt.UTC(), UpdatedAt: p.UpdatedAt.UTC()}
}

// invalidate drops a cached skill, policy set or risk setting on every node
// (a server built without the hub, in tests, caches none).
func (s *Server) invalidate(ctx context.Context, kind messages.CacheKind, tenantID, key string) {
	if s.Invalidations != nil {
		s.Invalidations.Invalidate(ctx, messages.Invalidation{Kind: kind, TenantID: tenantID, Key: key})
	}
}

// compileErr is the 422 for a module that does not compile (CONTRACT §6).
func (s *Server) compileErr(name, rego string) error {
	errs := s.Policy.CompileTenant(name, rego)
	if len(errs) == 0 {
		return nil
	}
	ae := apiErr("Invalid", "policy_compile_error", "the policy does not compile")
	ae.Details["errors"] = compileDetails("", errs)
	return ae
}

// compileDetails is the details.errors of a 422 policy_compile_error: line,
// col and message of each error, and its file when one is given (the base
// set, which has several).
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

// policyChanged prepares the tenant's new policy set on this node and tells
// the others, so the tenant's very next call sees it.
func (s *Server) policyChanged(ctx context.Context, tenantID string) {
	if err := s.Authorizer.PreparePolicies(ctx, tenantID); err != nil {
		s.log.Error("preparing the tenant's policies failed; the next authorize retries", "tenant_id", tenantID, "error", err)
	}
	s.invalidate(ctx, messages.CachePolicy, tenantID, "-")
}

func (s *Server) registerPolicies() {
	s.register(Route{Method: "POST", Path: "/policies", Access: AccessAdmin, Tag: "policies", Status: 201, Body: &policyCreate{},
		Resp: policyView{}, Errors: []int{409, 422},
		Summary: "Create a tenant policy: a Rego module in package svc.policies.<name> contributing objects to `results` " +
			"(decision, reason, optional policy id and redact_fields). 422 with details.errors (line, col, message) when it does not " +
			"compile (Rego v1 syntax), names another package, or defines no `results` set: `results` must be a multi-value rule " +
			"(`results contains {...} if {...}`), since a module without it contributes nothing and is almost always a typo.",
		Handle: s.createPolicy})
	s.register(Route{Method: "GET", Path: "/policies", Access: AccessViewer, Tag: "policies", Resp: []policyView{},
		Summary: "The tenant's policies.",
		Handle:  s.listPolicies})
	s.register(Route{Method: "GET", Path: "/policies/:name", Access: AccessViewer, Tag: "policies", Resp: policyView{}, Errors: []int{404},
		Summary: "One tenant policy.",
		Handle:  s.getPolicy})
	s.register(Route{Method: "PUT", Path: "/policies/:name", Access: AccessAdmin, Tag: "policies", Body: &policyUpdate{}, Resp: policyView{},
		Errors: []int{404, 422}, Summary: "Replace a policy's rego, description or enabled flag; applies to the tenant's very next call.",
		Handle: s.putPolicy})
	s.register(Route{Method: "DELETE", Path: "/policies/:name", Access: AccessAdmin, Tag: "policies", Status: 204, Errors: []int{404},
		Summary: "Delete a tenant policy.",
		Handle:  s.deletePolicy})
	s.register(Route{Method: "POST", Path: "/policies/reload", Access: AccessAdmin, Tag: "policies", Resp: reloadView{}, Errors: []int{422},
		Summary: "Re-read the base policy set (SVC_POLICY_FILE, or the embedded set) on this node and tell the others; " +
			"writes a config_change audit event with action policy_file_reload and clears every cached tenant policy set. A set that does not compile is 422 with details.errors (file, line, col, message), and the set in force stays.",
		Handle: s.reloadBasePolicies})
}

// createPolicy serves POST /policies.
func (s *Server) createPolicy(c *Call) (any, error) {
	b := bodyOf[policyCreate](c)
	if !policyNameRE.MatchString(b.Name) {
		return nil, invalidField("name", "must match [a-z0-9_]{1,64}")
	}
	if err := s.compileErr(b.Name, b.Rego); err != nil {
		return nil, err
	}
	p := c.Principal
	pol := persistence.Policy{TenantID: p.TenantID, Name: b.Name, Rego: b.Rego, Description: b.Description, Enabled: b.Enabled == nil || *b.Enabled}
	out, err := s.Store.CreatePolicy(c.Ctx(), pol, auditEvent(p, p.TenantID, "config_change", "policy_created", "", map[string]any{"name": b.Name}))
	if errors.Is(err, persistence.ErrConflict) {
		return nil, apiErr("AlreadyExists", "already_exists", "a policy named %q already exists", b.Name)
	}
	if err != nil {
		return nil, s.audited(err)
	}
	s.auditOK()
	s.policyChanged(c.Ctx(), p.TenantID)
	return viewPolicy(out), nil
}

// listPolicies serves GET /policies.
func (s *Server) listPolicies(c *Call) (any, error) {
	ps, err := s.Store.ListPolicies(c.Ctx(), c.Principal.TenantID)
	if err != nil {
		return nil, err
	}
	return viewAll(ps, viewPolicy), nil
}

// getPolicy serves GET /policies/:name.
func (s *Server) getPolicy(c *Call) (any, error) {
	p, err := s.Store.GetPolicy(c.Ctx(), c.Principal.TenantID, c.Param("name"))
	if err != nil {
		return nil, orNotFound(err, "policy")
	}
	return viewPolicy(p), nil
}

// putPolicy serves PUT /policies/:name.
func (s *Server) putPolicy(c *Call) (any, error) {
	b := bodyOf[policyUpdate](c)
	p := c.Principal
	cur, err := s.Store.GetPolicy(c.Ctx(), p.TenantID, c.Param("name"))
	if err != nil {
		return nil, orNotFound(err, "policy")
	}
	if b.Rego != nil {
		if err := s.compileErr(cur.Name, *b.Rego); err != nil {
			return nil, err
		}
		cur.Rego = *b.Rego
	}
	if b.Description != nil {
		cur.Description = *b.Description
	}
	if b.Enabled != nil {
		cur.Enabled = *b.Enabled
	}
	out, err := s.Store.UpdatePolicy(c.Ctx(), cur, auditEvent(p, p.TenantID, "config_change", "policy_updated", "", map[string]any{"name": cur.Name}))
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, notFound("policy")
	}
	if err != nil {
		return nil, s.audited(err)
	}
	s.auditOK()
	s.policyChanged(c.Ctx(), p.TenantID)
	return viewPolicy(out), nil
}

// deletePolicy serves DELETE /policies/:name.
func (s *Server) deletePolicy(c *Call) (any, error) {
	p := c.Principal
	err := s.Store.DeletePolicy(c.Ctx(), p.TenantID, c.Param("name"),
		auditEvent(p, p.TenantID, "config_change", "policy_deleted", "", map[string]any{"name": c.Param("name")}))
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, notFound("policy")
	}
	if err != nil {
		return nil, s.audited(err)
	}
	s.auditOK()
	s.policyChanged(c.Ctx(), p.TenantID)
	return nil, nil
}

// reloadBasePolicies serves POST /policies/reload.
func (s *Server) reloadBasePolicies(c *Call) (any, error) {
	p := c.Principal
	if err := s.Policy.ReloadBase(); err != nil {
		ae := apiErr("Invalid", "policy_compile_error", "the base policy set does not compile: %v", err)
		// The same details.errors as a tenant module's 422, with the
		// file each error is in.
		if me := (*policy.ModuleError)(nil); errors.As(err, &me) {
			ae.Details["errors"] = compileDetails(me.Module, me.Errors)
		}
		return nil, ae
	}
	src := s.cfg.PolicyFile
	if src == "" {
		src = "embedded"
	}
	if err := s.Store.AppendAudit(c.Ctx(), []persistence.AuditEvent{auditEvent(p, p.TenantID, "config_change", "policy_file_reload", "",
		map[string]any{"source": src})}); err != nil {
		return nil, s.audited(err)
	}
	s.auditOK()
	if s.Invalidations != nil {
		s.Invalidations.Broadcast(c.Ctx(), messages.Invalidation{Kind: messages.CacheBasePolicy, TenantID: "-", Key: "-"})
	}
	return reloadView{true, src}, nil
}
