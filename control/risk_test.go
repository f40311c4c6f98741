package control_test

import (
	"context"
	"testing"

	"svc/persistence"
	"svc/rules/risk"
)

func TestRiskSettingChanges(t *testing.T) {
	f := newSettingsFixture(t, "")
	weights := map[string]float64{risk.FactorTrust: 0.5, risk.FactorMutation: 0.25, risk.FactorSkillRisk: 1, risk.FactorRiskTier: 0,
		risk.FactorRecentDenials: 0.125}
	putWeights := func(ctx context.Context) error { return f.plane.PutRiskWeights(ctx, f.op, weights) }
	putEscalation := func(threshold, window int) func(ctx context.Context) error {
		return func(ctx context.Context) error { return f.plane.PutRiskEscalation(ctx, f.op, threshold, window) }
	}
	riskDrop := []string{"risk -"}
	f.run(t, []settingsCase{
		{name: "weights", change: putWeights, action: "risk_weights_updated", details: map[string]any{"weights": weights}, drops: riskDrop},
		{name: "weights, database down", change: putWeights, fail: persistence.ErrUnavailable, err: persistence.ErrUnavailable},
		{name: "escalation", change: putEscalation(7, 30), action: "risk_escalation_updated",
			details: map[string]any{"denial_threshold": 7, "window_minutes": 30}, drops: riskDrop},
		{name: "escalation, database down", change: putEscalation(8, 40), fail: persistence.ErrBusy, err: persistence.ErrBusy},
	})
	rs, err := f.store.GetRiskSettings(context.Background(), f.op.TenantID)
	if err != nil {
		t.Fatal(err)
	}
	if rs.Weights[risk.FactorRecentDenials] != 0.125 || rs.DenialThreshold != 7 || rs.WindowMinutes != 30 {
		t.Fatalf("stored %+v", rs)
	}
}
