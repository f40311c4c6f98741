package risk

import (
	"errors"
	"testing"
)

func TestScores(t *testing.T) {
	tests := []struct {
		name          string
		in            Inputs
		weights       map[string]float64
		wantComposite int
		wantAdvisory  int
	}{
		{name: "trusted read of a low-risk action", in: Inputs{TrustLevel: "trusted_internal_signed", SkillRisk: "low", RiskTier: "low"},
			wantComposite: 3, wantAdvisory: 10},
		{name: "critical action", in: Inputs{TrustLevel: "trusted_internal_signed", SkillRisk: "critical", MutatesState: true, RiskTier: "low"},
			wantComposite: 45, wantAdvisory: 100},
		{name: "malicious mutation by a high-tier agent with denials", in: Inputs{TrustLevel: "malicious_suspected", MutatesState: true,
			SkillRisk: "high", RiskTier: "high", RecentDenials: 9}, wantComposite: 93, wantAdvisory: 100},
		{name: "malicious read is halved", in: Inputs{TrustLevel: "malicious_suspected", SkillRisk: "low"}, wantComposite: 33, wantAdvisory: 50},
		{name: "unknown trust and unregistered skill", in: Inputs{TrustLevel: "", RiskTier: "low"}, wantComposite: 23, wantAdvisory: 30},
		{name: "only trust weighs", in: Inputs{TrustLevel: "untrusted_external", MutatesState: true, SkillRisk: "critical"},
			weights: map[string]float64{FactorTrust: 1}, wantComposite: 80, wantAdvisory: 100},
		{name: "all-zero weights", in: Inputs{TrustLevel: "untrusted_external"}, weights: map[string]float64{}, wantComposite: 0, wantAdvisory: 40},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Composite(tc.in, tc.weights); got != tc.wantComposite {
				t.Errorf("Composite = %d, want %d", got, tc.wantComposite)
			}
			if got := Advisory(tc.in); got != tc.wantAdvisory {
				t.Errorf("Advisory = %d, want %d", got, tc.wantAdvisory)
			}
		})
	}
}

func TestValidateWeights(t *testing.T) {
	tests := []struct {
		name string
		w    map[string]float64
		ok   bool
	}{
		{name: "defaults", w: DefaultWeights(), ok: true},
		{name: "missing factor", w: map[string]float64{FactorTrust: 1}},
		{name: "above one", w: map[string]float64{FactorTrust: 1.5, FactorMutation: 0, FactorSkillRisk: 0, FactorRiskTier: 0, FactorRecentDenials: 0}},
		{name: "negative", w: map[string]float64{FactorTrust: -0.1, FactorMutation: 0, FactorSkillRisk: 0, FactorRiskTier: 0, FactorRecentDenials: 0}},
		{name: "unknown factor", w: map[string]float64{FactorTrust: 0, FactorMutation: 0, FactorSkillRisk: 0, FactorRiskTier: 0, FactorRecentDenials: 0, "x": 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateWeights(tc.w)
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidWeights)) {
				t.Fatalf("ValidateWeights = %v", err)
			}
		})
	}
}

func TestNextTier(t *testing.T) {
	for _, tc := range []struct{ name, from, to string }{{"low", "low", "medium"}, {"medium", "medium", "high"}, {"high", "high", "high"}} {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := NextTier(tc.from); got != tc.to {
				t.Fatalf("NextTier(%s) = %s", tc.from, got)
			}
		})
	}
}
