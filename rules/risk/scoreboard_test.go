package risk

import "testing"

func f(v float64) *float64 { return &v }

func TestTrendAtTheFivePointBoundary(t *testing.T) {
	for _, tc := range []struct {
		name              string
		current, previous *float64
		want              string
	}{
		{"up by exactly 5", f(45), f(40), TrendStable},
		{"up by more than 5", f(45.01), f(40), TrendRising},
		{"down by exactly 5", f(35), f(40), TrendStable},
		{"down by more than 5", f(34.99), f(40), TrendFalling},
		{"no change", f(40), f(40), TrendStable},
		{"no prior baseline", f(90), nil, TrendStable},
		{"no current activity", nil, f(90), TrendStable},
		{"neither", nil, nil, TrendStable},
	} {
		if got := Trend(tc.current, tc.previous); got != tc.want {
			t.Errorf("%s: Trend = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestScoreboardRanksByMean(t *testing.T) {
	board := Scoreboard([]AgentWindows{
		{AgentID: "idle", Name: "idle"},
		{AgentID: "low", Name: "low", CurrentSum: 30, CurrentCount: 3, PreviousSum: 80, PreviousCount: 2},    // 10 vs 40: falling
		{AgentID: "high", Name: "high", CurrentSum: 170, CurrentCount: 2, PreviousSum: 40, PreviousCount: 1}, // 85 vs 40: rising
		{AgentID: "tie-b", Name: "b", CurrentSum: 50, CurrentCount: 1},
		{AgentID: "tie-a", Name: "a", CurrentSum: 100, CurrentCount: 2, PreviousSum: 45, PreviousCount: 1}, // 50 vs 45: stable
	})
	order := []string{"high", "tie-a", "tie-b", "low", "idle"} // tie at 50: more decisions first
	for i, id := range order {
		if board[i].AgentID != id {
			t.Fatalf("rank %d is %s, want %v: %+v", i+1, board[i].AgentID, order, board)
		}
	}
	want := map[string]struct {
		mean, prev *float64
		trend      string
		n          int64
	}{
		"high": {f(85), f(40), TrendRising, 2}, "low": {f(10), f(40), TrendFalling, 3}, "tie-a": {f(50), f(45), TrendStable, 2},
		"tie-b": {f(50), nil, TrendStable, 1}, "idle": {nil, nil, TrendStable, 0},
	}
	eq := func(a, b *float64) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }
	for _, e := range board {
		w := want[e.AgentID]
		if !eq(e.MeanCompositeRisk24h, w.mean) || !eq(e.PreviousMean24h, w.prev) || e.Trend != w.trend || e.Decisions24h != w.n {
			t.Errorf("%s: %+v, want %+v", e.AgentID, e, w)
		}
	}
}
