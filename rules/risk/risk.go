// Package risk computes the advisory risk score and the composite risk score
// of an authorize call (SPEC 1.3, 2.4; CONTRACT §6), and the tier escalation
// step. Scores never gate a decision; the agent's stored tier does.
//
// # Factors
//
// Each factor is scored 0 to 100: trust (the effective trust level, from 0
// for trusted_internal_signed to 100 for malicious_suspected), mutation (100
// for a state-mutating call), skill_risk (the registry's risk of the action:
// low 10, medium 40, high 70, critical 100; 30 when unregistered), risk_tier
// (low 0, medium 50, high 100) and recent_denials (20 per deny in the
// tenant's escalation window, at most 100).
//
// # Composite
//
// The composite score is the weighted mean of the factors with the tenant's
// weights (each 0 to 1), rounded to an integer; all-zero weights give 0.
//
// # Advisory score
//
// risk_score is the larger of the skill factor and the trust factor, the
// trust factor halved for calls that do not mutate state: a critical action
// or a mutating call at malicious_suspected scores 100.
package risk

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// ErrInvalidWeights: a weight is missing its name, unknown, or outside 0..1.
var ErrInvalidWeights = errors.New("risk: invalid weights")

// Factor names, also the keys of the tenant's weights.
const (
	FactorTrust         = "trust"
	FactorMutation      = "mutation"
	FactorSkillRisk     = "skill_risk"
	FactorRiskTier      = "risk_tier"
	FactorRecentDenials = "recent_denials"
)

// Factors lists the factor names in a stable order.
func Factors() []string {
	return []string{FactorTrust, FactorMutation, FactorSkillRisk, FactorRiskTier, FactorRecentDenials}
}

// DefaultWeights apply to a tenant that never set its own.
func DefaultWeights() map[string]float64 {
	return map[string]float64{FactorTrust: 0.3, FactorMutation: 0.2, FactorSkillRisk: 0.25, FactorRiskTier: 0.15, FactorRecentDenials: 0.1}
}

// ValidateWeights checks a weights document: every factor present, each
// a number from 0 to 1, no unknown names.
func ValidateWeights(w map[string]float64) error {
	known := map[string]bool{}
	for _, f := range Factors() {
		known[f] = true
		v, ok := w[f]
		if !ok {
			return fmt.Errorf("%w: %s is required", ErrInvalidWeights, f)
		}
		if math.IsNaN(v) || v < 0 || v > 1 {
			return fmt.Errorf("%w: %s must be a number from 0 to 1", ErrInvalidWeights, f)
		}
	}
	names := make([]string, 0, len(w))
	for k := range w {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !known[k] {
			return fmt.Errorf("%w: unknown factor %s", ErrInvalidWeights, k)
		}
	}
	return nil
}

// Inputs are what the scores are computed from.
type Inputs struct {
	TrustLevel    string
	MutatesState  bool
	SkillRisk     string // low, medium, high, critical, or "" when unregistered
	RiskTier      string
	RecentDenials int
}

var trustScore = map[string]int{
	"trusted_internal_signed": 0, "trusted_internal_unsigned": 10, "semi_trusted_customer": 30,
	"unknown": 50, "untrusted_external": 80, "malicious_suspected": 100,
}

var skillScore = map[string]int{"low": 10, "medium": 40, "high": 70, "critical": 100}

var tierScore = map[string]int{"low": 0, "medium": 50, "high": 100}

// Scores returns each factor's score.
func Scores(in Inputs) map[string]int {
	trust, ok := trustScore[in.TrustLevel]
	if !ok {
		trust = trustScore["unknown"]
	}
	skill, ok := skillScore[in.SkillRisk]
	if !ok {
		skill = 30
	}
	mutation := 0
	if in.MutatesState {
		mutation = 100
	}
	return map[string]int{FactorTrust: trust, FactorMutation: mutation, FactorSkillRisk: skill,
		FactorRiskTier: tierScore[in.RiskTier], FactorRecentDenials: min(100, 20*max(in.RecentDenials, 0))}
}

// Composite is the weighted mean of the factor scores, 0 to 100.
func Composite(in Inputs, weights map[string]float64) int {
	if weights == nil {
		weights = DefaultWeights()
	}
	scores := Scores(in)
	var sum, total float64
	for _, f := range Factors() {
		w := weights[f]
		sum += w * float64(scores[f])
		total += w
	}
	if total == 0 {
		return 0
	}
	return int(math.Round(sum / total))
}

// Advisory is the risk_score of a call (see the package doc).
func Advisory(in Inputs) int {
	s := Scores(in)
	trust := s[FactorTrust]
	if !in.MutatesState {
		trust /= 2
	}
	return max(s[FactorSkillRisk], trust)
}

// NextTier is the tier one step up (low → medium → high); high stays high.
func NextTier(tier string) (string, bool) {
	switch tier {
	case "low":
		return "medium", true
	case "medium":
		return "high", true
	default:
		return tier, false
	}
}
