package control

import (
	"context"

	"svc/messages"
)

// A tenant's risk settings: each change drops the tenant's cached settings
// on every node once committed.

// PutRiskWeights sets the tenant's composite-risk weights (by factor, each
// from 0 to 1: the caller checks) with a risk_weights_updated config_change
// event.
func (p *Plane) PutRiskWeights(ctx context.Context, op Operator, weights map[string]float64) error {
	return p.change(func() error {
		return p.d.Store.PutRiskWeights(ctx, op.TenantID, weights, Event(op, "config_change", "risk_weights_updated", "",
			map[string]any{"weights": weights}))
	}, func() { p.drop(ctx, messages.CacheRisk, op.TenantID, "-") })
}

// PutRiskEscalation sets the tenant's tier escalation (more than threshold
// denies within windowMinutes move an agent's tier one step; the caller
// checks their ranges) with a risk_escalation_updated config_change event.
func (p *Plane) PutRiskEscalation(ctx context.Context, op Operator, threshold, windowMinutes int) error {
	return p.change(func() error {
		return p.d.Store.PutRiskEscalation(ctx, op.TenantID, threshold, windowMinutes, Event(op, "config_change", "risk_escalation_updated", "",
			map[string]any{"denial_threshold": threshold, "window_minutes": windowMinutes}))
	}, func() { p.drop(ctx, messages.CacheRisk, op.TenantID, "-") })
}
