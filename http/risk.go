package httpapi

// A tenant's risk settings and statistics: /tenants/risk-weights,
// /tenants/risk-escalation and /tenants/stats.

import (
	"time"

	"svc/persistence"
	"svc/rules/risk"
)

// registerRisk registers the tenant's risk settings and statistics.
func (s *Server) registerRisk() {
	s.register(Route{Method: "GET", Path: "/tenants/risk-weights", Access: AccessViewer, Tag: "tenants", Resp: riskWeights{},
		Summary: "The composite-risk weights (defaults until set).",
		Handle:  s.getRiskWeights})
	s.register(Route{Method: "PUT", Path: "/tenants/risk-weights", Access: AccessAdmin, Tag: "tenants", Body: &riskWeights{}, Resp: riskWeights{},
		Summary: "Set the weights: trust, mutation, skill_risk, risk_tier, recent_denials, each a number from 0 to 1 (400 otherwise).",
		Handle:  s.putRiskWeights})
	s.register(Route{Method: "GET", Path: "/tenants/risk-escalation", Access: AccessViewer, Tag: "tenants", Resp: riskEscalation{},
		Summary: "Tier escalation: more than denial_threshold denies within window_minutes move an agent's tier one step (defaults 5 and 60).",
		Handle:  s.getRiskEscalation})
	s.register(Route{Method: "PUT", Path: "/tenants/risk-escalation", Access: AccessAdmin, Tag: "tenants", Body: &riskEscalation{}, Resp: riskEscalation{},
		Summary: "Set denial_threshold (1 to 10000) and window_minutes (1 to 10080).",
		Handle:  s.putRiskEscalation})
	s.register(Route{Method: "GET", Path: "/tenants/stats", Access: AccessViewer, Tag: "tenants", Resp: statsView{},
		Summary: "Decision counts by outcome and by effective trust level, and agent counts. pending_approvals counts PENDING, unexpired approvals; open_incidents the open incidents.",
		Handle:  s.tenantStats})
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

// getRiskWeights serves GET /tenants/risk-weights.
func (s *Server) getRiskWeights(c *Call) (any, error) {
	rs, err := s.Store.GetRiskSettings(c.Ctx(), c.Principal.TenantID)
	if err != nil {
		return nil, err
	}
	return weightsView(rs.Weights), nil
}

// putRiskWeights serves PUT /tenants/risk-weights.
func (s *Server) putRiskWeights(c *Call) (any, error) {
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
	if err := s.Control.PutRiskWeights(c.Ctx(), operator(c.Principal), w); err != nil {
		return nil, err
	}
	return weightsView(w), nil
}

// getRiskEscalation serves GET /tenants/risk-escalation.
func (s *Server) getRiskEscalation(c *Call) (any, error) {
	rs, err := s.Store.GetRiskSettings(c.Ctx(), c.Principal.TenantID)
	if err != nil {
		return nil, err
	}
	return riskEscalation{&rs.DenialThreshold, &rs.WindowMinutes}, nil
}

// putRiskEscalation serves PUT /tenants/risk-escalation.
func (s *Server) putRiskEscalation(c *Call) (any, error) {
	b := bodyOf[riskEscalation](c)
	if b.DenialThreshold == nil || *b.DenialThreshold < 1 || *b.DenialThreshold > 10000 {
		return nil, invalidField("denial_threshold", "must be an integer from 1 to 10000")
	}
	if b.WindowMinutes == nil || *b.WindowMinutes < 1 || *b.WindowMinutes > 10080 {
		return nil, invalidField("window_minutes", "must be an integer from 1 to 10080")
	}
	if err := s.Control.PutRiskEscalation(c.Ctx(), operator(c.Principal), *b.DenialThreshold, *b.WindowMinutes); err != nil {
		return nil, err
	}
	return *b, nil
}

// tenantStats serves GET /tenants/stats.
func (s *Server) tenantStats(c *Call) (any, error) {
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
}

func weightsView(w map[string]float64) riskWeights {
	if w == nil {
		w = risk.DefaultWeights()
	}
	get := func(k string) *float64 { v := w[k]; return &v }
	return riskWeights{Trust: get(risk.FactorTrust), Mutation: get(risk.FactorMutation), SkillRisk: get(risk.FactorSkillRisk),
		RiskTier: get(risk.FactorRiskTier), RecentDenials: get(risk.FactorRecentDenials)}
}
