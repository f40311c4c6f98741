package detect

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"
)

func denyRule(t *testing.T) Rule {
	t.Helper()
	c, err := ParseCondition(map[string]any{"decision": "deny"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewCustomRule("denies", "", "high", true, c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// decisions returns n events; every k-th (from the first) is a deny.
func decisions(n, k int) []Event {
	out := make([]Event, n)
	for i := range out {
		out[i] = Event{DecisionID: fmt.Sprintf("d-%d", i), Kind: KindAuthorizeDecision, Decision: "allow"}
		if i%k == 0 {
			out[i].Decision = "deny"
		}
	}
	return out
}

func TestBacktestArithmetic(t *testing.T) {
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		events  []Event
		to      time.Time
		matches int
		volume  float64
	}{
		{name: "7 days 14 matches", events: decisions(28, 2), to: from.Add(7 * 24 * time.Hour), matches: 14, volume: 2},
		{name: "exactly one day", events: decisions(5, 1), to: from.Add(24 * time.Hour), matches: 5, volume: 5},
		{name: "half a day projects up", events: decisions(3, 1), to: from.Add(12 * time.Hour), matches: 3, volume: 6},
		{name: "six hours projects up", events: decisions(3, 1), to: from.Add(6 * time.Hour), matches: 3, volume: 12},
		{name: "one hour", events: decisions(1, 1), to: from.Add(time.Hour), matches: 1, volume: 24},
		{name: "3 days rounds to 2 decimals", events: decisions(1, 1), to: from.Add(72 * time.Hour), matches: 1, volume: 0.33},
		{name: "3 days two matches rounds up", events: decisions(2, 1), to: from.Add(72 * time.Hour), matches: 2, volume: 0.67},
		{name: "fractional days", events: decisions(9, 1), to: from.Add(36 * time.Hour), matches: 9, volume: 6},
		{name: "no matches", events: decisions(10, 100)[1:], to: from.Add(7 * 24 * time.Hour), matches: 0, volume: 0},
		{name: "no events", events: nil, to: from.Add(7 * 24 * time.Hour), matches: 0, volume: 0},
		{name: "empty range counts as one day", events: decisions(4, 1), to: from, matches: 4, volume: 4},
		{name: "reversed range counts as one day", events: decisions(4, 1), to: from.Add(-time.Hour), matches: 4, volume: 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Backtest(denyRule(t), tc.events, from, tc.to)
			if got.MatchCount != tc.matches || got.EstimatedDailyAlertVolume != tc.volume ||
				got.DecisionsScanned != len(tc.events) {
				t.Fatalf("result %+v, want %d matches, volume %v, %d scanned", got, tc.matches, tc.volume, len(tc.events))
			}
			if len(got.MatchedDecisionIDs) != tc.matches {
				t.Fatalf("%d ids for %d matches", len(got.MatchedDecisionIDs), tc.matches)
			}
		})
	}
}

func TestBacktestIDs(t *testing.T) {
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	to := from.Add(24 * time.Hour)

	t.Run("ids in event order", func(t *testing.T) {
		got := Backtest(denyRule(t), decisions(7, 3), from, to)
		if want := []string{"d-0", "d-3", "d-6"}; !slices.Equal(got.MatchedDecisionIDs, want) {
			t.Fatalf("ids %v, want %v", got.MatchedDecisionIDs, want)
		}
	})
	t.Run("ids capped, count is not", func(t *testing.T) {
		got := Backtest(denyRule(t), decisions(1500, 1), from, to)
		if got.MatchCount != 1500 || len(got.MatchedDecisionIDs) != MaxBacktestMatchedIDs ||
			got.MatchedDecisionIDs[999] != "d-999" || got.EstimatedDailyAlertVolume != 1500 {
			t.Fatalf("count %d, %d ids, last %q, volume %v", got.MatchCount, len(got.MatchedDecisionIDs),
				got.MatchedDecisionIDs[len(got.MatchedDecisionIDs)-1], got.EstimatedDailyAlertVolume)
		}
	})
	t.Run("empty ids skipped but counted", func(t *testing.T) {
		evs := decisions(3, 1)
		evs[1].DecisionID = ""
		got := Backtest(denyRule(t), evs, from, to)
		if got.MatchCount != 3 || !slices.Equal(got.MatchedDecisionIDs, []string{"d-0", "d-2"}) {
			t.Fatalf("result %+v", got)
		}
	})
	t.Run("ids never nil", func(t *testing.T) {
		got := Backtest(denyRule(t), nil, from, to)
		out, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		want := `{"match_count":0,"matched_decision_ids":[],"decisions_scanned":0,"estimated_daily_alert_volume":0}`
		if string(out) != want {
			t.Fatalf("JSON %s, want %s", out, want)
		}
	})
}

func TestBacktestScanCap(t *testing.T) {
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	evs := decisions(MaxBacktestDecisions+1, MaxBacktestDecisions) // denies at 0 and 50,000
	got := Backtest(denyRule(t), evs, from, from.Add(24*time.Hour))
	if got.DecisionsScanned != MaxBacktestDecisions || got.MatchCount != 1 ||
		!slices.Equal(got.MatchedDecisionIDs, []string{"d-0"}) {
		t.Fatalf("scanned %d, %d matches, ids %v", got.DecisionsScanned, got.MatchCount, got.MatchedDecisionIDs)
	}
}

func TestBacktestRules(t *testing.T) {
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	to := from.Add(24 * time.Hour)
	var drifts []Event
	for _, risk := range []int{0, 39, 40, 74, 75, 99, 100} {
		drifts = append(drifts, Event{DecisionID: fmt.Sprint(risk), Kind: KindMCPManifestDrift, RiskScore: risk})
	}
	byKey := map[string]Rule{}
	for _, r := range Defaults() {
		byKey[r.Key] = r
	}
	disabled := denyRule(t)
	disabled.Enabled = false

	cases := []struct {
		name   string
		rule   Rule
		events []Event
		want   []string
	}{
		{name: "medium uses its Match bound", rule: byKey[KeyMCPManifestDriftMedium], events: drifts, want: []string{"40", "74"}},
		{name: "high", rule: byKey[KeyMCPManifestDriftHigh], events: drifts, want: []string{"75", "99", "100"}},
		{name: "low", rule: byKey[KeyMCPManifestDriftLow], events: drifts, want: []string{"0", "39"}},
		{name: "critical by score", rule: byKey[KeyCriticalDenyRiskScore], events: drifts, want: []string{"100"}},
		{name: "disabled rule still backtests", rule: disabled, events: decisions(4, 2), want: []string{"d-0", "d-2"}},
		{name: "events are not filtered by time", rule: denyRule(t),
			events: []Event{{DecisionID: "old", Decision: "deny", OccurredAt: from.Add(-48 * time.Hour)}}, want: []string{"old"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Backtest(tc.rule, tc.events, from, to)
			if !slices.Equal(got.MatchedDecisionIDs, tc.want) || got.MatchCount != len(tc.want) {
				t.Fatalf("ids %v (count %d), want %v", got.MatchedDecisionIDs, got.MatchCount, tc.want)
			}
		})
	}
}
