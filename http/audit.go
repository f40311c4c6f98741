package httpapi

import (
	"time"

	"svc/persistence"
)

type auditView struct {
	EventID    string         `json:"event_id"`
	TenantID   string         `json:"tenant_id"`
	EventType  string         `json:"event_type"`
	Action     string         `json:"action"`
	Actor      string         `json:"actor"`
	AgentID    *string        `json:"agent_id"`
	DecisionID *string        `json:"decision_id"`
	Details    map[string]any `json:"details"`
	CreatedAt  time.Time      `json:"created_at"`
	// Archived is beside SPEC's fields: true when the archival job has
	// moved the event out of the hot table (it is still listed; a keyword
	// search does not reach it).
	Archived bool `json:"archived"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (s *Server) registerAudit() {
	s.register(Route{Method: "GET", Path: "/audit/events", Access: AccessViewer, Tag: "audit", Resp: []auditView{}, Paginated: true,
		Query: []QueryParam{
			{Name: "event_type", Type: "string", Description: "exact event type"},
			{Name: "q", Type: "string", Description: "keywords over event type, action, actor, agent id and details: characters other than letters, digits, whitespace and underscore are stripped; every word must match, the last as a prefix; empty means no filter. " +
				"Indexed values lose their hyphens too, and other punctuation separates words, so an id pasted whole or a hyphenated word typed as shown (send-email) matches. " +
				"An authorize_decision event is its decision's record read as an event: it also matches every word its decision is searched by (tool, action, resource, decision, reason, matched policies, agent and run id). " +
				"Archived events (archived true) have no keyword index: a search does not reach them; list them without q, with event_type if need be"},
		},
		Summary: "The tenant's audit events, newest first: administrative events and every decision's authorize_decision event, in one order. " +
			"Administrative events older than SVC_AUDIT_RETENTION_DAYS are moved to the archive by the leader's archival job and still listed here (archived true); " +
			"authorize_decision events stay with their decisions and receipts and are never archived.",
		Handle: s.listAuditEvents})
}

// listAuditEvents serves GET /audit/events.
func (s *Server) listAuditEvents(c *Call) (any, error) {
	if err := s.Authorizer.Consistent(c.Ctx()); err != nil {
		return nil, err
	}
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	q := c.R.URL.Query()
	rows, err := s.Store.ListAudit(c.Ctx(), c.Principal.TenantID,
		persistence.AuditFilter{EventType: q.Get("event_type"), Query: q.Get("q")}, pg)
	if err != nil {
		return nil, err
	}
	rows = paginate(c, pg, rows, func(e persistence.AuditEvent) int64 { return e.Seq })
	return viewAll(rows, viewAuditEvent), nil
}

func viewAuditEvent(e persistence.AuditEvent) auditView {
	return auditView{EventID: e.ID, TenantID: e.TenantID, EventType: e.EventType, Action: e.Action, Actor: e.Actor,
		AgentID: nullable(e.AgentID), DecisionID: nullable(e.DecisionID), Details: e.Details, CreatedAt: e.CreatedAt.UTC(), Archived: e.Archived}
}
