package httpapi

// The risk scoreboard (SPEC 4.7; CONTRACT §13): GET
// /agents/risk-scoreboard, a static path that /agents/:agent_id does not
// shadow (static paths are matched first, buildMux).

import (
	"bytes"
	"encoding/csv"
	"strconv"
	"strings"
	"time"

	"svc/persistence"
	"svc/rules/risk"
)

// scoreboardWindow is SPEC 4.7's rolling window; the trend compares it
// with the one before.
const scoreboardWindow = 24 * time.Hour

func (s *Server) registerScoreboard() {
	s.register(Route{Method: "GET", Path: "/agents/risk-scoreboard", Access: AccessViewer, Tag: "agents", Resp: []risk.ScoreboardEntry{}, AltBody: "text/csv",
		Query:   []QueryParam{{Name: "format", Type: "string", Description: "json (default) or csv: text/csv with a header row (agent_id,name,mean_composite_risk_24h,previous_mean_24h,trend,decisions_24h), RFC 4180 quoting, an empty cell for a null mean"}},
		Summary: "The tenant's agents (not deleted) ranked by the mean composite_risk_score of their decisions in the last 24 hours, highest first; agents without decisions in that window come last, with a null mean. trend is rising or falling when the mean moved by more than 5 points against the 24 hours before, otherwise stable (also stable without decisions now or before: previous_mean_24h is then null).",
		Handle:  s.riskScoreboard})
}

// riskScoreboard serves GET /agents/risk-scoreboard.
func (s *Server) riskScoreboard(c *Call) (any, error) {
	format := strings.ToLower(strings.TrimSpace(c.R.URL.Query().Get("format")))
	if format != "" && format != "json" && format != "csv" {
		return nil, invalidField("format", "json or csv")
	}
	if err := s.Authorizer.Consistent(c.Ctx()); err != nil {
		return nil, err
	}
	var agents []persistence.Agent
	for p := (persistence.Page{Limit: 500}); ; {
		page, err := s.Store.ListAgents(c.Ctx(), c.Principal.TenantID, persistence.AgentFilter{}, p)
		if err != nil {
			return nil, err
		}
		more := len(page) > p.Limit // the store reads one row past the page
		page = page[:min(len(page), p.Limit)]
		agents = append(agents, page...)
		if !more {
			break
		}
		p.After = page[len(page)-1].Seq
	}
	ids := make([]string, len(agents))
	for i, a := range agents {
		ids[i] = a.ID
	}
	now := time.Now().UTC()
	sums, err := s.Store.AgentRisk(c.Ctx(), c.Principal.TenantID, ids, now.Add(-2*scoreboardWindow), now.Add(-scoreboardWindow), now)
	if err != nil {
		return nil, err
	}
	ws := make([]risk.AgentWindows, len(sums))
	for i, r := range sums {
		ws[i] = risk.AgentWindows{AgentID: r.AgentID, Name: agents[i].Name, CurrentSum: r.CurrentSum, PreviousSum: r.PreviousSum,
			CurrentCount: r.CurrentCount, PreviousCount: r.PreviousCount}
	}
	board := risk.Scoreboard(ws)
	if format != "csv" {
		return board, nil
	}
	return rawAnswer{ContentType: "text/csv; charset=utf-8", Body: scoreboardCSV(board)}, nil
}

// scoreboardCSV writes the board as RFC 4180 CSV (encoding/csv quotes a
// field that holds a comma, a quote or a line break).
func scoreboardCSV(board []risk.ScoreboardEntry) []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.UseCRLF = true // RFC 4180 ends records with CRLF
	_ = w.Write([]string{"agent_id", "name", "mean_composite_risk_24h", "previous_mean_24h", "trend", "decisions_24h"})
	for _, e := range board {
		_ = w.Write([]string{e.AgentID, e.Name, csvFloat(e.MeanCompositeRisk24h), csvFloat(e.PreviousMean24h), e.Trend,
			strconv.FormatInt(e.Decisions24h, 10)})
	}
	w.Flush()
	return b.Bytes()
}

func csvFloat(v *float64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatFloat(*v, 'f', -1, 64)
}
