package httpapi

import (
	"regexp"
	"time"

	"svc/control"
	"svc/persistence"
)

var policyNameRE = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)

type policyCreate struct {
	Name        string  `json:"name" openapi:"required,pattern=key"`
	Rego        string  `json:"rego" openapi:"required,minLength=1"`
	Description string  `json:"description"`
	Enabled     *bool   `json:"enabled"`
	Mode        *string `json:"mode" openapi:"enum=enforce|shadow"`
}

type policyUpdate struct {
	Rego        *string `json:"rego"`
	Description *string `json:"description"`
	Enabled     *bool   `json:"enabled"`
	Mode        *string `json:"mode" openapi:"enum=enforce|shadow"`
}

type policyView struct {
	Name        string    `json:"name"`
	Rego        string    `json:"rego"`
	Description string    `json:"description"`
	Enabled     bool      `json:"enabled"`
	Mode        string    `json:"mode" openapi:"enum=enforce|shadow"`
	Version     int64     `json:"version"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

type reloadView struct {
	Reloaded bool   `json:"reloaded"`
	Source   string `json:"source"`
}

// deref is *s, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func viewPolicy(p persistence.Policy) policyView {
	return policyView{Name: p.Name, Rego: p.Rego, Description: p.Description, Enabled: p.Enabled, Mode: p.Mode, Version: p.Version,
		CreatedAt: p.CreatedAt.UTC(), UpdatedAt: p.UpdatedAt.UTC()}
}

func (s *Server) registerPolicies() {
	s.register(Route{Method: "POST", Path: "/policies", Access: AccessAdmin, Tag: "policies", Status: 201, Body: &policyCreate{},
		Resp: policyView{}, Errors: []int{409, 422},
		Summary: "Create a tenant policy: a Rego module in package svc.policies.<name> contributing objects to `results` " +
			"(decision, reason, optional policy id and redact_fields). 422 with details.errors (line, col, message) when it does not " +
			"compile (Rego v1 syntax), names another package, or defines no `results` set: `results` must be a multi-value rule " +
			"(`results contains {...} if {...}`), since a module without it contributes nothing and is almost always a typo. " +
			"mode (enforce, the default, or shadow; CONTRACT §18): a shadow policy runs on every live call and never decides; " +
			"what it alone would have added is recorded in the decision's shadow (policy, decision) and counted in /metrics " +
			"(svc_policy_shadow_outcomes_total by policy and decision). A shadow policy that fails leaves the decision as it is.",
		Handle: s.createPolicy})
	s.register(Route{Method: "GET", Path: "/policies", Access: AccessViewer, Tag: "policies", Resp: []policyView{},
		Summary: "The tenant's policies.",
		Handle:  s.listPolicies})
	s.register(Route{Method: "GET", Path: "/policies/:name", Access: AccessViewer, Tag: "policies", Resp: policyView{}, Errors: []int{404},
		Summary: "One tenant policy.",
		Handle:  s.getPolicy})
	s.register(Route{Method: "PUT", Path: "/policies/:name", Access: AccessAdmin, Tag: "policies", Body: &policyUpdate{}, Resp: policyView{},
		Errors: []int{404, 422}, Summary: "Replace a policy's rego, description, enabled flag or mode (enforce or shadow); applies to the tenant's very next call.",
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
	out, err := s.Control.CreatePolicy(c.Ctx(), operator(c.Principal), persistence.Policy{Name: b.Name, Rego: b.Rego, Description: b.Description,
		Enabled: b.Enabled == nil || *b.Enabled, Mode: deref(b.Mode)})
	if err != nil {
		return nil, err
	}
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
	out, err := s.Control.UpdatePolicy(c.Ctx(), operator(c.Principal), c.Param("name"),
		control.PolicyPatch{Rego: b.Rego, Description: b.Description, Enabled: b.Enabled, Mode: b.Mode})
	if err != nil {
		return nil, err
	}
	return viewPolicy(out), nil
}

// deletePolicy serves DELETE /policies/:name.
func (s *Server) deletePolicy(c *Call) (any, error) {
	return nil, s.Control.DeletePolicy(c.Ctx(), operator(c.Principal), c.Param("name"))
}

// reloadBasePolicies serves POST /policies/reload.
func (s *Server) reloadBasePolicies(c *Call) (any, error) {
	src, err := s.Control.ReloadBasePolicies(c.Ctx(), operator(c.Principal))
	if err != nil {
		return nil, err
	}
	return reloadView{true, src}, nil
}
