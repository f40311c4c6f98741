package httpapi

import (
	"context"
	"errors"
	"regexp"
	"time"

	"svc/canonical"
	"svc/messages"
	"svc/persistence"
	"svc/rules/policy"
	"svc/rules/risk"
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

type skillPut struct {
	Description string                             `json:"description"`
	Actions     map[string]persistence.SkillAction `json:"actions"`
}

type skillView struct {
	SkillKey    string                             `json:"skill_key"`
	Description string                             `json:"description"`
	Actions     map[string]persistence.SkillAction `json:"actions"`
	CreatedAt   time.Time                          `json:"created_at"`
	UpdatedAt   time.Time                          `json:"updated_at"`
}

type riskWeights struct {
	Trust         *float64 `json:"trust" openapi:"required,min=0,max=1"`
	Mutation      *float64 `json:"mutation" openapi:"required,min=0,max=1"`
	SkillRisk     *float64 `json:"skill_risk" openapi:"required,min=0,max=1"`
	RiskTier      *float64 `json:"risk_tier" openapi:"required,min=0,max=1"`
	RecentDenials *float64 `json:"recent_denials" openapi:"required,min=0,max=1"`
}

type riskEscalation struct {
	DenialThreshold *int `json:"denial_threshold" openapi:"required,min=1,max=10000"`
	WindowMinutes   *int `json:"window_minutes" openapi:"required,min=1,max=10080"`
}

type statsView struct {
	TenantID                 string           `json:"tenant_id" openapi:"format=uuid"`
	TotalDecisions           int64            `json:"total_decisions"`
	DecisionsAllow           int64            `json:"decisions_allow"`
	DecisionsDeny            int64            `json:"decisions_deny"`
	DecisionsRequireApproval int64            `json:"decisions_require_approval"`
	DecisionsRedact          int64            `json:"decisions_redact"`
	DecisionsQuarantine      int64            `json:"decisions_quarantine"`
	TrustLevelBreakdown      map[string]int64 `json:"trust_level_breakdown"`
	AgentsTotal              int64            `json:"agents_total"`
	AgentsActive             int64            `json:"agents_active"`
	OpenIncidents            int64            `json:"open_incidents"`
	PendingApprovals         int64            `json:"pending_approvals"`
}

func viewPolicy(p persistence.Policy) policyView {
	return policyView{Name: p.Name, Rego: p.Rego, Description: p.Description, Enabled: p.Enabled, Version: p.Version,
		CreatedAt: p.CreatedAt.UTC(), UpdatedAt: p.UpdatedAt.UTC()}
}

func viewSkill(sk persistence.Skill) skillView {
	return skillView{SkillKey: sk.Key, Description: sk.Description, Actions: sk.Actions, CreatedAt: sk.CreatedAt.UTC(), UpdatedAt: sk.UpdatedAt.UTC()}
}

// skillKey is the path's skill key, normalized as a call's tool is (SPEC
// 4.2 rule 7), so that every spelling of one tool names one skill.
func skillKey(c *Call) string { return canonical.NormalizeIdentifier(c.Param("skill_key")) }

// invalidate drops a cached skill, policy set or risk setting on every node
// (a server built without the hub, in tests, caches none).
func (s *Server) invalidate(ctx context.Context, kind messages.CacheKind, tenantID, key string) {
	if s.Invalidations != nil {
		s.Invalidations.Invalidate(ctx, messages.Invalidation{Kind: kind, TenantID: tenantID, Key: key})
	}
}

// skillKeys are the keys GET and DELETE try, in order: the normalized key,
// then the path's own spelling when it differs, so that a skill stored as
// typed (before keys were normalized) can still be read and removed.
func skillKeys(c *Call) []string {
	if raw, key := c.Param("skill_key"), skillKey(c); raw != key {
		return []string{key, raw}
	}
	return []string{skillKey(c)}
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
		Handle: func(c *Call) (any, error) {
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
		}})
	s.register(Route{Method: "GET", Path: "/policies", Access: AccessViewer, Tag: "policies", Resp: []policyView{},
		Summary: "The tenant's policies.",
		Handle: func(c *Call) (any, error) {
			ps, err := s.Store.ListPolicies(c.Ctx(), c.Principal.TenantID)
			if err != nil {
				return nil, err
			}
			return viewAll(ps, viewPolicy), nil
		}})
	s.register(Route{Method: "GET", Path: "/policies/:name", Access: AccessViewer, Tag: "policies", Resp: policyView{}, Errors: []int{404},
		Summary: "One tenant policy.",
		Handle: func(c *Call) (any, error) {
			p, err := s.Store.GetPolicy(c.Ctx(), c.Principal.TenantID, c.Param("name"))
			if err != nil {
				return nil, orNotFound(err, "policy")
			}
			return viewPolicy(p), nil
		}})
	s.register(Route{Method: "PUT", Path: "/policies/:name", Access: AccessAdmin, Tag: "policies", Body: &policyUpdate{}, Resp: policyView{},
		Errors: []int{404, 422}, Summary: "Replace a policy's rego, description or enabled flag; applies to the tenant's very next call.",
		Handle: func(c *Call) (any, error) {
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
		}})
	s.register(Route{Method: "DELETE", Path: "/policies/:name", Access: AccessAdmin, Tag: "policies", Status: 204, Errors: []int{404},
		Summary: "Delete a tenant policy.",
		Handle: func(c *Call) (any, error) {
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
		}})
	s.register(Route{Method: "POST", Path: "/policies/reload", Access: AccessAdmin, Tag: "policies", Resp: reloadView{}, Errors: []int{422},
		Summary: "Re-read the base policy set (SVC_POLICY_FILE, or the embedded set) on this node and tell the others; " +
			"writes a config_change audit event with action policy_file_reload and clears every cached tenant policy set. A set that does not compile is 422 with details.errors (file, line, col, message), and the set in force stays.",
		Handle: func(c *Call) (any, error) {
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
		}})

	s.register(Route{Method: "PUT", Path: "/skills/:skill_key", Access: AccessAdmin, Tag: "policies", Body: &skillPut{}, Resp: skillView{},
		Summary: "Register or replace a skill: each action's risk (low, medium, high, critical), mutates_state and approval_required, as the policy input's `skill`. The skill key and action keys are normalized like a call's tool and action (percent-decoded, NFC, trimmed, lower-cased); two action keys that normalize alike are 400.",
		Handle: func(c *Call) (any, error) {
			b := bodyOf[skillPut](c)
			key := skillKey(c)
			if len(key) == 0 || len(key) > 128 {
				return nil, invalidField("skill_key", "must be 1 to 128 characters")
			}
			// Calls are matched on their normalized tool and action (SPEC 4.2
			// rule 7), so the registry stores its keys normalized the same way:
			// a skill registered as "Danger" with action "Wipe" applies to a
			// call of Danger/Wipe, danger/wipe or DANGER/WIPE.
			actions := make(map[string]persistence.SkillAction, len(b.Actions))
			for name, a := range b.Actions {
				switch a.Risk {
				case "low", "medium", "high", "critical":
				default:
					return nil, invalidField("actions."+name+".risk", "must be low, medium, high or critical")
				}
				norm := canonical.NormalizeIdentifier(name)
				if norm == "" {
					return nil, invalidField("actions."+name, "an action key must not be empty")
				}
				if _, dup := actions[norm]; dup {
					return nil, invalidField("actions."+name, "two action keys normalize to %q", norm)
				}
				actions[norm] = a
			}
			b.Actions = actions
			p := c.Principal
			sk, err := s.Store.PutSkill(c.Ctx(), persistence.Skill{TenantID: p.TenantID, Key: key, Description: b.Description, Actions: b.Actions},
				auditEvent(p, p.TenantID, "config_change", "skill_registered", "", map[string]any{"skill_key": key}))
			if err != nil {
				return nil, s.audited(err)
			}
			s.auditOK()
			s.invalidate(c.Ctx(), messages.CacheSkill, p.TenantID, key)
			return viewSkill(sk), nil
		}})
	s.register(Route{Method: "GET", Path: "/skills", Access: AccessViewer, Tag: "policies", Resp: []skillView{}, Summary: "The skill registry.",
		Handle: func(c *Call) (any, error) {
			list, err := s.Store.ListSkills(c.Ctx(), c.Principal.TenantID)
			if err != nil {
				return nil, err
			}
			return viewAll(list, viewSkill), nil
		}})
	s.register(Route{Method: "GET", Path: "/skills/:skill_key", Access: AccessViewer, Tag: "policies", Resp: skillView{}, Errors: []int{404},
		Summary: "One skill.",
		Handle: func(c *Call) (any, error) {
			var err error
			for _, key := range skillKeys(c) {
				var sk persistence.Skill
				if sk, err = s.Store.GetSkill(c.Ctx(), c.Principal.TenantID, key); err == nil {
					return viewSkill(sk), nil
				}
				if !errors.Is(err, persistence.ErrNotFound) {
					break
				}
			}
			return nil, orNotFound(err, "skill")
		}})
	s.register(Route{Method: "DELETE", Path: "/skills/:skill_key", Access: AccessAdmin, Tag: "policies", Status: 204, Errors: []int{404},
		Summary: "Remove a skill.",
		Handle: func(c *Call) (any, error) {
			p := c.Principal
			var key string
			var err error
			for _, key = range skillKeys(c) {
				err = s.Store.DeleteSkill(c.Ctx(), p.TenantID, key, auditEvent(p, p.TenantID, "config_change", "skill_deleted", "", map[string]any{"skill_key": key}))
				if !errors.Is(err, persistence.ErrNotFound) {
					break
				}
			}
			if errors.Is(err, persistence.ErrNotFound) {
				return nil, notFound("skill")
			}
			if err != nil {
				return nil, s.audited(err)
			}
			s.auditOK()
			s.invalidate(c.Ctx(), messages.CacheSkill, p.TenantID, key)
			return nil, nil
		}})

	s.register(Route{Method: "GET", Path: "/tenants/risk-weights", Access: AccessViewer, Tag: "tenants", Resp: riskWeights{},
		Summary: "The composite-risk weights (defaults until set).",
		Handle: func(c *Call) (any, error) {
			rs, err := s.Store.GetRiskSettings(c.Ctx(), c.Principal.TenantID)
			if err != nil {
				return nil, err
			}
			return weightsView(rs.Weights), nil
		}})
	s.register(Route{Method: "PUT", Path: "/tenants/risk-weights", Access: AccessAdmin, Tag: "tenants", Body: &riskWeights{}, Resp: riskWeights{},
		Summary: "Set the weights: trust, mutation, skill_risk, risk_tier, recent_denials, each a number from 0 to 1 (400 otherwise).",
		Handle: func(c *Call) (any, error) {
			b := bodyOf[riskWeights](c)
			w := map[string]float64{}
			for name, v := range map[string]*float64{risk.FactorTrust: b.Trust, risk.FactorMutation: b.Mutation, risk.FactorSkillRisk: b.SkillRisk,
				risk.FactorRiskTier: b.RiskTier, risk.FactorRecentDenials: b.RecentDenials} {
				if v == nil {
					return nil, invalidField(name, "is required (a number from 0 to 1)")
				}
				if *v < 0 || *v > 1 {
					return nil, invalidField(name, "must be a number from 0 to 1")
				}
				w[name] = *v
			}
			p := c.Principal
			if err := s.Store.PutRiskWeights(c.Ctx(), p.TenantID, w, auditEvent(p, p.TenantID, "config_change", "risk_weights_updated", "",
				map[string]any{"weights": w})); err != nil {
				return nil, s.audited(err)
			}
			s.auditOK()
			s.invalidate(c.Ctx(), messages.CacheRisk, p.TenantID, "-")
			return weightsView(w), nil
		}})
	s.register(Route{Method: "GET", Path: "/tenants/risk-escalation", Access: AccessViewer, Tag: "tenants", Resp: riskEscalation{},
		Summary: "Tier escalation: more than denial_threshold denies within window_minutes move an agent's tier one step (defaults 5 and 60).",
		Handle: func(c *Call) (any, error) {
			rs, err := s.Store.GetRiskSettings(c.Ctx(), c.Principal.TenantID)
			if err != nil {
				return nil, err
			}
			return riskEscalation{&rs.DenialThreshold, &rs.WindowMinutes}, nil
		}})
	s.register(Route{Method: "PUT", Path: "/tenants/risk-escalation", Access: AccessAdmin, Tag: "tenants", Body: &riskEscalation{}, Resp: riskEscalation{},
		Summary: "Set denial_threshold (1 to 10000) and window_minutes (1 to 10080).",
		Handle: func(c *Call) (any, error) {
			b := bodyOf[riskEscalation](c)
			if b.DenialThreshold == nil || *b.DenialThreshold < 1 || *b.DenialThreshold > 10000 {
				return nil, invalidField("denial_threshold", "must be an integer from 1 to 10000")
			}
			if b.WindowMinutes == nil || *b.WindowMinutes < 1 || *b.WindowMinutes > 10080 {
				return nil, invalidField("window_minutes", "must be an integer from 1 to 10080")
			}
			p := c.Principal
			if err := s.Store.PutRiskEscalation(c.Ctx(), p.TenantID, *b.DenialThreshold, *b.WindowMinutes,
				auditEvent(p, p.TenantID, "config_change", "risk_escalation_updated", "",
					map[string]any{"denial_threshold": *b.DenialThreshold, "window_minutes": *b.WindowMinutes})); err != nil {
				return nil, s.audited(err)
			}
			s.auditOK()
			s.invalidate(c.Ctx(), messages.CacheRisk, p.TenantID, "-")
			return *b, nil
		}})
	s.register(Route{Method: "GET", Path: "/tenants/stats", Access: AccessViewer, Tag: "tenants", Resp: statsView{},
		Summary: "Decision counts by outcome and by effective trust level, and agent counts. pending_approvals counts PENDING, unexpired approvals; open_incidents the open incidents.",
		Handle: func(c *Call) (any, error) {
			if err := s.Authorizer.Consistent(c.Ctx()); err != nil {
				return nil, err
			}
			st, err := s.Store.TenantStats(c.Ctx(), c.Principal.TenantID)
			if err != nil {
				return nil, err
			}
			pending, err := s.Store.CountPendingApprovals(c.Ctx(), c.Principal.TenantID, time.Now().UTC())
			if err != nil {
				return nil, err
			}
			soc, err := s.Store.SOCSummary(c.Ctx(), c.Principal.TenantID)
			if err != nil {
				return nil, err
			}
			return statsView{TenantID: c.Principal.TenantID, TotalDecisions: st.TotalDecisions, DecisionsAllow: st.ByDecision["allow"], PendingApprovals: pending, OpenIncidents: soc.IncidentsByStatus[persistence.IncidentOpen],
				DecisionsDeny: st.ByDecision["deny"], DecisionsRequireApproval: st.ByDecision["require_approval"],
				DecisionsRedact: st.ByDecision["redact"], DecisionsQuarantine: st.ByDecision["quarantine"],
				TrustLevelBreakdown: st.TrustLevelBreakdown, AgentsTotal: st.AgentsTotal, AgentsActive: st.AgentsActive}, nil
		}})
}

func weightsView(w map[string]float64) riskWeights {
	if w == nil {
		w = risk.DefaultWeights()
	}
	get := func(k string) *float64 { v := w[k]; return &v }
	return riskWeights{Trust: get(risk.FactorTrust), Mutation: get(risk.FactorMutation), SkillRisk: get(risk.FactorSkillRisk),
		RiskTier: get(risk.FactorRiskTier), RecentDenials: get(risk.FactorRecentDenials)}
}
