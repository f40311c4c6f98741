package httpapi

import (
	"encoding/json"
	"time"

	"svc/persistence"
)

type decisionView struct {
	DecisionID         string   `json:"decision_id" openapi:"format=uuid"`
	TenantID           string   `json:"tenant_id" openapi:"format=uuid"`
	AgentID            string   `json:"agent_id" openapi:"format=uuid"`
	RequestID          *string  `json:"request_id"`
	Tool               string   `json:"tool"`
	Action             string   `json:"action"`
	Resource           *string  `json:"resource"`
	ActionHash         string   `json:"action_hash"`
	Decision           string   `json:"decision" openapi:"enum=allow|deny|require_approval|redact|quarantine"`
	Reason             string   `json:"reason"`
	RiskScore          int      `json:"risk_score"`
	CompositeRiskScore int      `json:"composite_risk_score"`
	MatchedPolicyIDs   []string `json:"matched_policy_ids"`
	RedactedFields     []string `json:"redacted_fields"`
	MutatesState       bool     `json:"mutates_state"`
	TrustLevel         string   `json:"trust_level"`
	RootTrustLevel     string   `json:"root_trust_level"`
	Environment        *string  `json:"environment"`
	RunID              *string  `json:"run_id"`
	ParentRunID        *string  `json:"parent_run_id"`
	TraceID            *string  `json:"trace_id"`
	ReceiptID          *string  `json:"receipt_id" openapi:"format=uuid"`
	ReceiptHash        *string  `json:"receipt_hash"`
	// EventID is the id of the decision's authorize_decision security
	// event (an incident's source_event_ids name it); null for decisions
	// recorded before it was stored.
	EventID   *string   `json:"event_id" openapi:"format=uuid"`
	CreatedAt time.Time `json:"created_at"`
	// RunContext is what the policy saw of the run (CONTRACT §16): the
	// canonical {agent_history, run} before this call, present only when
	// the tenant's policies read it; ContextHash is the lower-case hex
	// SHA-256 of those canonical bytes.
	RunContext  json.RawMessage `json:"run_context,omitempty"`
	ContextHash string          `json:"context_hash,omitempty"`
	// Shadow is what each of the tenant's shadow policies that fired on
	// the call would have added (CONTRACT §18): never the decision.
	Shadow []shadowView `json:"shadow"`
}

type shadowView struct {
	Policy   string `json:"policy"`
	Decision string `json:"decision"`
}

func viewShadow(s []persistence.ShadowOutcome) []shadowView {
	out := make([]shadowView, len(s))
	for i, o := range s {
		out[i] = shadowView{Policy: o.Policy, Decision: o.Decision}
	}
	return out
}

func viewDecision(d persistence.Decision) decisionView {
	return decisionView{DecisionID: d.ID, TenantID: d.TenantID, AgentID: d.AgentID, RequestID: d.RequestID, Tool: d.Tool, Action: d.Action,
		Resource: d.Resource, ActionHash: d.ActionHash, Decision: d.Decision, Reason: d.Reason, RiskScore: d.RiskScore,
		CompositeRiskScore: d.CompositeRiskScore, MatchedPolicyIDs: nonNilStrings(d.MatchedPolicyIDs), RedactedFields: nonNilStrings(d.RedactedFields),
		MutatesState: d.MutatesState, TrustLevel: d.TrustLevel, RootTrustLevel: d.RootTrustLevel, Environment: d.Environment,
		RunID: d.RunID, ParentRunID: d.ParentRunID, TraceID: d.TraceID, ReceiptID: nullable(d.ReceiptID), ReceiptHash: nullable(d.ReceiptHash),
		EventID: nullable(d.EventID), CreatedAt: d.CreatedAt.UTC(), RunContext: d.RunContext, ContextHash: d.ContextHash,
		Shadow: viewShadow(d.Shadow)}
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (s *Server) registerDecisions() {
	s.register(Route{Method: "GET", Path: "/decisions", Access: AccessViewer, Tag: "decisions", Resp: []decisionView{}, Paginated: true,
		Query: []QueryParam{{Name: "q", Type: "string", Description: "keywords over tool, action, resource, decision, reason, matched policies, agent and run ids: characters other than letters, digits, whitespace and underscore are stripped; every word must match, the last as a prefix; empty means no filter. " +
			"Indexed values lose their hyphens too, and other punctuation separates words, so an id pasted whole or a hyphenated word typed as shown (send-email) matches"}},
		Summary: "The tenant's decisions, newest first.",
		Handle:  s.listDecisions})
	s.register(Route{Method: "GET", Path: "/decisions/:decision_id", Access: AccessViewer, Tag: "decisions", Resp: decisionView{}, Errors: []int{404},
		Summary: "One decision, with its run linkage and receipt.",
		Handle:  s.getDecision})
}

// listDecisions serves GET /decisions.
func (s *Server) listDecisions(c *Call) (any, error) {
	if err := s.Authorizer.Consistent(c.Ctx()); err != nil {
		return nil, err
	}
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	rows, err := s.Store.ListDecisions(c.Ctx(), c.Principal.TenantID, c.R.URL.Query().Get("q"), pg)
	if err != nil {
		return nil, err
	}
	rows = paginate(c, pg, rows, func(d persistence.Decision) int64 { return d.Seq })
	return viewAll(rows, viewDecision), nil
}

// getDecision serves GET /decisions/:decision_id.
func (s *Server) getDecision(c *Call) (any, error) {
	if err := s.Authorizer.Consistent(c.Ctx()); err != nil {
		return nil, err
	}
	d, err := s.Store.GetDecision(c.Ctx(), c.Principal.TenantID, c.Param("decision_id"))
	if err != nil {
		return nil, orNotFound(err, "decision")
	}
	return viewDecision(d), nil
}
