package risk

import (
	"cmp"
	"slices"
)

// Trends of the risk scoreboard (SPEC 4.7).
const (
	TrendRising  = "rising"
	TrendFalling = "falling"
	TrendStable  = "stable"
)

// TrendThreshold is the change of the 24-hour mean, in points, that the
// scoreboard calls a trend: strictly more than this.
const TrendThreshold = 5.0

// AgentWindows is one agent's composite risk over the previous and the
// current 24 hours: sums of composite_risk_score and decision counts.
type AgentWindows struct {
	AgentID, Name               string
	CurrentSum, PreviousSum     int64
	CurrentCount, PreviousCount int64
}

// ScoreboardEntry is one row of GET /v1/agents/risk-scoreboard (CONTRACT
// §13). A mean over a window without decisions is nil (JSON null): there is
// nothing to average.
type ScoreboardEntry struct {
	AgentID              string   `json:"agent_id" openapi:"format=uuid"`
	Name                 string   `json:"name"`
	MeanCompositeRisk24h *float64 `json:"mean_composite_risk_24h"`
	PreviousMean24h      *float64 `json:"previous_mean_24h"`
	Trend                string   `json:"trend" openapi:"enum=rising|falling|stable"`
	Decisions24h         int64    `json:"decisions_24h"`
}

// Scoreboard ranks agents by their current 24-hour mean, highest first;
// agents without decisions in the current window come last. Ties go to the
// agent with more decisions, then by name and id, so the order is stable.
func Scoreboard(ws []AgentWindows) []ScoreboardEntry {
	out := make([]ScoreboardEntry, 0, len(ws))
	for _, w := range ws {
		e := ScoreboardEntry{AgentID: w.AgentID, Name: w.Name, Trend: TrendStable, Decisions24h: w.CurrentCount}
		e.MeanCompositeRisk24h = mean(w.CurrentSum, w.CurrentCount)
		e.PreviousMean24h = mean(w.PreviousSum, w.PreviousCount)
		e.Trend = Trend(e.MeanCompositeRisk24h, e.PreviousMean24h)
		out = append(out, e)
	}
	slices.SortStableFunc(out, func(a, b ScoreboardEntry) int {
		switch {
		case a.MeanCompositeRisk24h == nil && b.MeanCompositeRisk24h != nil:
			return 1
		case a.MeanCompositeRisk24h != nil && b.MeanCompositeRisk24h == nil:
			return -1
		case a.MeanCompositeRisk24h != nil && *a.MeanCompositeRisk24h != *b.MeanCompositeRisk24h:
			return cmp.Compare(*b.MeanCompositeRisk24h, *a.MeanCompositeRisk24h)
		}
		if n := cmp.Compare(b.Decisions24h, a.Decisions24h); n != 0 {
			return n
		}
		if n := cmp.Compare(a.Name, b.Name); n != 0 {
			return n
		}
		return cmp.Compare(a.AgentID, b.AgentID)
	})
	return out
}

// Trend compares the current mean with the previous one: rising or falling
// past TrendThreshold points, otherwise stable, and stable without current
// activity or without a prior baseline.
func Trend(current, previous *float64) string {
	if current == nil || previous == nil {
		return TrendStable
	}
	switch d := *current - *previous; {
	case d > TrendThreshold:
		return TrendRising
	case d < -TrendThreshold:
		return TrendFalling
	}
	return TrendStable
}

func mean(sum, n int64) *float64 {
	if n == 0 {
		return nil
	}
	m := float64(sum) / float64(n)
	return &m
}
