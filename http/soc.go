package httpapi

import (
	"strings"
	"time"

	"github.com/google/uuid"

	"svc/persistence"
)

// alertView is the alert shape of CONTRACT §7.
type alertView struct {
	AlertID       string    `json:"alert_id"`
	TenantID      string    `json:"tenant_id"`
	RuleKey       string    `json:"rule_key"`
	AlertName     string    `json:"alert_name"`
	Severity      string    `json:"severity"`
	Source        string    `json:"source"`
	AgentID       string    `json:"agent_id"`
	DecisionID    *string   `json:"decision_id"`
	SourceEventID string    `json:"source_event_id"`
	Summary       string    `json:"summary"`
	CreatedAt     time.Time `json:"created_at"`
}

// incidentView is the incident shape of CONTRACT §7.
type incidentView struct {
	IncidentID     string     `json:"incident_id"`
	TenantID       string     `json:"tenant_id"`
	Kind           string     `json:"kind"`
	Severity       string     `json:"severity"`
	Status         string     `json:"status"`
	AgentID        string     `json:"agent_id"`
	Summary        string     `json:"summary"`
	SourceEventIDs []string   `json:"source_event_ids"`
	OpenedAt       time.Time  `json:"opened_at"`
	ClosedAt       *time.Time `json:"closed_at"`
	CloseReason    *string    `json:"close_reason"`
}

type closeIncidentReq struct {
	Reason *string `json:"reason"`
}

type socSummaryView struct {
	TenantID                string           `json:"tenant_id"`
	AlertsTotal             int64            `json:"alerts_total"`
	AlertsBySeverity        map[string]int64 `json:"alerts_by_severity"`
	IncidentsTotal          int64            `json:"incidents_total"`
	IncidentsOpen           int64            `json:"incidents_open"`
	IncidentsByStatus       map[string]int64 `json:"incidents_by_status"`
	OpenIncidentsBySeverity map[string]int64 `json:"open_incidents_by_severity"`
}

func viewAlert(a persistence.Alert) alertView {
	return alertView{AlertID: a.ID, TenantID: a.TenantID, RuleKey: a.RuleKey, AlertName: a.AlertName, Severity: a.Severity, Source: a.Source,
		AgentID: a.AgentID, DecisionID: nullable(a.DecisionID), SourceEventID: a.SourceEventID, Summary: a.Summary, CreatedAt: a.CreatedAt.UTC()}
}

func viewIncident(in persistence.Incident) incidentView {
	ids := in.SourceEventIDs
	if ids == nil {
		ids = []string{}
	}
	return incidentView{IncidentID: in.ID, TenantID: in.TenantID, Kind: in.Kind, Severity: in.Severity, Status: in.Status, AgentID: in.AgentID,
		Summary: in.Summary, SourceEventIDs: ids, OpenedAt: in.OpenedAt.UTC(), ClosedAt: utcPtr(in.ClosedAt), CloseReason: in.CloseReason}
}

// severityFilter accepts any case and answers 400 for an unknown severity.
func severityFilter(c *Call) (string, error) {
	v := strings.ToUpper(strings.TrimSpace(c.R.URL.Query().Get("severity")))
	switch v {
	case "", "INFO", "LOW", "MEDIUM", "HIGH":
		return v, nil
	}
	return "", invalidField("severity", "one of INFO, LOW, MEDIUM, HIGH")
}

func (s *Server) registerSOC() {
	s.register(Route{Method: "GET", Path: "/alerts", Access: AccessViewer, Tag: "soc", Resp: []alertView{}, Paginated: true,
		Query: []QueryParam{{Name: "severity", Type: "string", Description: "INFO, LOW, MEDIUM or HIGH (any case)"},
			{Name: "agent_id", Type: "string", Description: "only this agent's alerts"}},
		Summary: "The tenant's alerts, newest first.",
		Handle: func(c *Call) (any, error) {
			pg, err := c.page()
			if err != nil {
				return nil, err
			}
			sev, err := severityFilter(c)
			if err != nil {
				return nil, err
			}
			rows, err := s.Store.ListAlerts(c.Ctx(), c.Principal.TenantID, persistence.AlertFilter{Severity: sev, AgentID: c.R.URL.Query().Get("agent_id")}, pg)
			if err != nil {
				return nil, err
			}
			rows = paginate(c, pg, rows, func(a persistence.Alert) int64 { return a.Seq })
			return viewAll(rows, viewAlert), nil
		}})
	s.register(Route{Method: "GET", Path: "/incidents", Access: AccessViewer, Tag: "soc", Resp: []incidentView{}, Paginated: true,
		Query: []QueryParam{{Name: "status", Type: "string", Description: "open or closed"},
			{Name: "severity", Type: "string", Description: "INFO, LOW, MEDIUM or HIGH (any case)"},
			{Name: "agent_id", Type: "string", Description: "only this agent's incidents"},
			{Name: "kind", Type: "string", Description: "deny_storm, runaway, repeated_approval or trust_escalation"}},
		Summary: "The tenant's incidents, newest first.",
		Handle: func(c *Call) (any, error) {
			pg, err := c.page()
			if err != nil {
				return nil, err
			}
			sev, err := severityFilter(c)
			if err != nil {
				return nil, err
			}
			q := c.R.URL.Query()
			status := strings.ToLower(q.Get("status"))
			if status != "" && status != persistence.IncidentOpen && status != persistence.IncidentClosed {
				return nil, invalidField("status", "open or closed")
			}
			rows, err := s.Store.ListIncidents(c.Ctx(), c.Principal.TenantID, persistence.IncidentFilter{Status: status, Severity: sev,
				AgentID: q.Get("agent_id"), Kind: q.Get("kind")}, pg)
			if err != nil {
				return nil, err
			}
			rows = paginate(c, pg, rows, func(in persistence.Incident) int64 { return in.Seq })
			return viewAll(rows, viewIncident), nil
		}})
	s.register(Route{Method: "GET", Path: "/incidents/:incident_id", Access: AccessViewer, Tag: "soc", Resp: incidentView{}, Errors: []int{404},
		Summary: "One incident.",
		Handle: func(c *Call) (any, error) {
			in, err := s.Store.GetIncident(c.Ctx(), c.Principal.TenantID, c.Param("incident_id"))
			if err != nil {
				return nil, orNotFound(err, "incident")
			}
			return viewIncident(in), nil
		}})
	s.register(Route{Method: "POST", Path: "/incidents/:incident_id/close", Access: AccessAdmin, Tag: "soc", Body: &closeIncidentReq{},
		OptionalBody: true, Resp: incidentView{}, Errors: []int{404, 409},
		Summary: "Close an open incident, with an optional reason; closing a closed one is 409.",
		Handle: func(c *Call) (any, error) {
			b := bodyOf[closeIncidentReq](c)
			id, now := c.Param("incident_id"), nowUTC()
			details := map[string]any{"action": "incident_closed", "incident_id": id}
			if b.Reason != nil {
				details["reason"] = *b.Reason
			}
			in, err := s.Store.CloseIncident(c.Ctx(), c.Principal.TenantID, id, b.Reason, now, persistence.AuditEvent{ID: uuid.NewString(),
				TenantID: c.Principal.TenantID, EventType: "admin_action", Action: "incident_closed", Actor: c.Principal.Actor(),
				CreatedAt: now, Details: details})
			if err != nil {
				return nil, approvalError(orNotFound(err, "incident"), "the incident is already closed")
			}
			if s.SOC != nil {
				s.SOC.IncidentClosed(in)
			}
			return viewIncident(in), nil
		}})
	s.register(Route{Method: "GET", Path: "/soc/summary", Access: AccessViewer, Tag: "soc", Resp: socSummaryView{},
		Summary: "Alert counts by severity and incident counts by status (open ones by severity).",
		Handle: func(c *Call) (any, error) {
			sum, err := s.Store.SOCSummary(c.Ctx(), c.Principal.TenantID)
			if err != nil {
				return nil, err
			}
			return socSummaryView{TenantID: c.Principal.TenantID, AlertsTotal: sum.AlertsTotal, AlertsBySeverity: sum.AlertsBySeverity,
				IncidentsTotal: sum.IncidentsTotal, IncidentsOpen: sum.IncidentsByStatus[persistence.IncidentOpen],
				IncidentsByStatus: sum.IncidentsByStatus, OpenIncidentsBySeverity: sum.IncidentsBySeverity}, nil
		}})
}
