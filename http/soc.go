package httpapi

import (
	"svc/rules/detect"

	"svc/messages"

	"strings"

	"svc/persistence"
)

// alertView and incidentView are the shapes of CONTRACT §7, shared with the
// live feed (messages).
type (
	alertView    = messages.AlertRecord
	incidentView = messages.IncidentRecord
)

type closeIncidentReq struct {
	Reason *string `json:"reason"`
}

type socSummaryView struct {
	TenantID                string           `json:"tenant_id" openapi:"format=uuid"`
	AlertsTotal             int64            `json:"alerts_total"`
	AlertsBySeverity        map[string]int64 `json:"alerts_by_severity"`
	IncidentsTotal          int64            `json:"incidents_total"`
	IncidentsOpen           int64            `json:"incidents_open"`
	IncidentsByStatus       map[string]int64 `json:"incidents_by_status"`
	OpenIncidentsBySeverity map[string]int64 `json:"open_incidents_by_severity"`
}

func viewAlert(a persistence.Alert) alertView { return a.Record() }

func viewIncident(in persistence.Incident) incidentView { return in.Record() }

// socList reads what the alert and incident lists share: watch, the page
// and the severity filter (any case; 400 for an unknown severity).
func socList(c *Call) (watching bool, pg persistence.Page, severity string, err error) {
	if watching, err = isWatch(c); err != nil {
		return
	}
	if pg, err = c.page(); err != nil {
		return
	}
	if v := c.R.URL.Query().Get("severity"); v != "" {
		if severity, err = detect.ParseSeverity(strings.TrimSpace(v)); err != nil {
			err = invalidField("severity", "one of INFO, LOW, MEDIUM, HIGH")
		}
	}
	return
}

func (s *Server) registerSOC() {
	s.registerIngest()
	s.register(Route{Method: "GET", Path: "/alerts", Access: AccessViewer, Tag: "soc", Resp: []alertView{}, Paginated: true, Stream: StreamOnWatch,
		Query: []QueryParam{{Name: "severity", Type: "string", Description: "INFO, LOW, MEDIUM or HIGH (any case)"},
			{Name: "agent_id", Type: "string", Description: "only this agent's alerts"}, watchParam},
		Summary: "The tenant's alerts, newest first; with watch=true, a server-sent event stream of the alerts created after the request (see watch).",
		Handle:  s.listAlerts})
	s.register(Route{Method: "GET", Path: "/incidents", Access: AccessViewer, Tag: "soc", Resp: []incidentView{}, Paginated: true, Stream: StreamOnWatch,
		Query: []QueryParam{{Name: "status", Type: "string", Description: "open or closed"},
			{Name: "severity", Type: "string", Description: "INFO, LOW, MEDIUM or HIGH (any case)"},
			{Name: "agent_id", Type: "string", Description: "only this agent's incidents"},
			{Name: "kind", Type: "string", Description: "deny_storm, runaway, repeated_approval or trust_escalation"}, watchParam},
		Summary: "The tenant's incidents, newest first; with watch=true, a server-sent event stream of the incidents opened after the request (see watch).",
		Handle:  s.listIncidents})
	s.register(Route{Method: "GET", Path: "/incidents/:incident_id", Access: AccessViewer, Tag: "soc", Resp: incidentView{}, Errors: []int{404},
		Summary: "One incident.",
		Handle:  s.getIncident})
	s.register(Route{Method: "POST", Path: "/incidents/:incident_id/close", Access: AccessAdmin, Tag: "soc", Body: &closeIncidentReq{},
		OptionalBody: true, Resp: incidentView{}, Errors: []int{404, 409},
		Summary: "Close an open incident, with an optional reason; closing a closed one is 409.",
		Handle:  s.closeIncident})
	s.register(Route{Method: "GET", Path: "/soc/summary", Access: AccessViewer, Tag: "soc", Resp: socSummaryView{},
		Summary: "Alert counts by severity and incident counts by status (open ones by severity).",
		Handle:  s.socSummary})
}

// listAlerts serves GET /alerts.
func (s *Server) listAlerts(c *Call) (any, error) {
	watching, pg, sev, err := socList(c)
	if err != nil {
		return nil, err
	}
	f := persistence.AlertFilter{Severity: sev, AgentID: c.R.URL.Query().Get("agent_id")}
	if watching {
		return s.watchAlerts(c, f)
	}
	rows, err := s.Store.ListAlerts(c.Ctx(), c.Principal.TenantID, f, pg)
	if err != nil {
		return nil, err
	}
	rows = paginate(c, pg, rows, func(a persistence.Alert) int64 { return a.Seq })
	return viewAll(rows, viewAlert), nil
}

// listIncidents serves GET /incidents.
func (s *Server) listIncidents(c *Call) (any, error) {
	watching, pg, sev, err := socList(c)
	if err != nil {
		return nil, err
	}
	q := c.R.URL.Query()
	status := strings.ToLower(q.Get("status"))
	if status != "" && status != persistence.IncidentOpen && status != persistence.IncidentClosed {
		return nil, invalidField("status", "open or closed")
	}
	f := persistence.IncidentFilter{Status: status, Severity: sev, AgentID: q.Get("agent_id"), Kind: q.Get("kind")}
	if watching {
		return s.watchIncidents(c, f)
	}
	rows, err := s.Store.ListIncidents(c.Ctx(), c.Principal.TenantID, f, pg)
	if err != nil {
		return nil, err
	}
	rows = paginate(c, pg, rows, func(in persistence.Incident) int64 { return in.Seq })
	return viewAll(rows, viewIncident), nil
}

// getIncident serves GET /incidents/:incident_id.
func (s *Server) getIncident(c *Call) (any, error) {
	in, err := s.Store.GetIncident(c.Ctx(), c.Principal.TenantID, c.Param("incident_id"))
	if err != nil {
		return nil, orNotFound(err, "incident")
	}
	return viewIncident(in), nil
}

// closeIncident serves POST /incidents/:incident_id/close.
func (s *Server) closeIncident(c *Call) (any, error) {
	b := bodyOf[closeIncidentReq](c)
	in, err := s.Control.CloseIncident(c.Ctx(), operator(c.Principal), c.Param("incident_id"), b.Reason)
	if err != nil {
		return nil, err
	}
	if s.SOC != nil {
		s.SOC.IncidentClosed(in) // MTTR
	}
	return viewIncident(in), nil
}

// socSummary serves GET /soc/summary.
func (s *Server) socSummary(c *Call) (any, error) {
	sum, err := s.Store.SOCSummary(c.Ctx(), c.Principal.TenantID)
	if err != nil {
		return nil, err
	}
	return socSummaryView{TenantID: c.Principal.TenantID, AlertsTotal: sum.AlertsTotal, AlertsBySeverity: sum.AlertsBySeverity,
		IncidentsTotal: sum.IncidentsTotal, IncidentsOpen: sum.IncidentsByStatus[persistence.IncidentOpen],
		IncidentsByStatus: sum.IncidentsByStatus, OpenIncidentsBySeverity: sum.IncidentsBySeverity}, nil
}

// watchParam documents the watch streams of the alert and incident lists.
var watchParam = QueryParam{Name: "watch", Type: "boolean", Description: "true: a text/event-stream of the rows created after the " +
	"request started, with the same filters, polled every 2 s: each row as `event: alert` (or `incident`), `id: <id>`, " +
	"`data: <row JSON>`, and a `: keep-alive` comment every 15 s. A client that falls behind is disconnected; a node that shuts down ends " +
	"its streams at once (reconnect to another node). Browsers may " +
	"authenticate with ?ticket= (POST /v1/stream-tickets)."}
