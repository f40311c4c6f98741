package detect

import (
	"math"
	"time"
)

// Backtest limits.
const (
	// MaxBacktestDecisions is the most events Backtest scans (SPEC 8); the
	// rest of a longer slice is ignored.
	MaxBacktestDecisions = 50_000
	// MaxBacktestMatchedIDs is the most decision ids BacktestResult lists;
	// MatchCount keeps counting past it.
	MaxBacktestMatchedIDs = 1000
)

// BacktestResult is the answer of POST /v1/soc/rules/:rule_key/backtest
// (SPEC 4.5).
type BacktestResult struct {
	MatchCount                int      `json:"match_count"`
	MatchedDecisionIDs        []string `json:"matched_decision_ids"`
	DecisionsScanned          int      `json:"decisions_scanned"`
	EstimatedDailyAlertVolume float64  `json:"estimated_daily_alert_volume"`
}

// Backtest runs rule over events, the tenant's decisions from the range
// [from, to) converted by the caller, oldest first. It is pure and reads
// no clock.
//
//   - DecisionsScanned is len(events), at most MaxBacktestDecisions (the
//     events after that are not scanned).
//   - MatchCount counts the scanned events rule.Matches (Enabled is
//     ignored: a disabled rule can be tried before it is enabled).
//   - MatchedDecisionIDs lists the DecisionID of the first
//     MaxBacktestMatchedIDs matches, in event order, skipping empty ids; it
//     is never nil.
//   - EstimatedDailyAlertVolume = MatchCount / days, where days is
//     (to - from) in days (24 h), fractional; a range under a day projects
//     up (3 matches in 6 hours: 12 a day). When to is not after from, days
//     is 1. The value is rounded to 2 decimals. It is an upper bound: an
//     alert deduplicated by name against another rule is still counted.
//
// from and to only scale the estimate: events are not filtered by
// OccurredAt, the caller selects them.
func Backtest(rule Rule, events []Event, from, to time.Time) BacktestResult {
	if len(events) > MaxBacktestDecisions {
		events = events[:MaxBacktestDecisions]
	}
	res := BacktestResult{MatchedDecisionIDs: []string{}, DecisionsScanned: len(events)}
	for _, e := range events {
		if !rule.Matches(e) {
			continue
		}
		res.MatchCount++
		if e.DecisionID != "" && len(res.MatchedDecisionIDs) < MaxBacktestMatchedIDs {
			res.MatchedDecisionIDs = append(res.MatchedDecisionIDs, e.DecisionID)
		}
	}
	res.EstimatedDailyAlertVolume = dailyVolume(res.MatchCount, from, to)
	return res
}

// dailyVolume projects count over the range [from, to) onto one day.
func dailyVolume(count int, from, to time.Time) float64 {
	days := 1.0
	if to.After(from) {
		days = float64(to.Sub(from)) / float64(24*time.Hour)
	}
	return math.Round(float64(count)/days*100) / 100
}
