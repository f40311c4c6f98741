package actors

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"

	"svc/persistence"
	"svc/rules/policy"
)

// Shadow policies (CONTRACT §18): a tenant's shadow modules run on every
// live call after the policy decided it; what each would have added is
// recorded with the decision and counted here, never decided on. A
// failing shadow evaluation is counted and leaves the decision as it is.

// ShadowCounts counts shadow outcomes by policy and decision on this node
// (/metrics: svc_policy_shadow_outcomes_total), and the shadow evaluations
// that failed.
type ShadowCounts struct {
	m      sync.Map // shadowKey → *atomic.Uint64
	failed atomic.Uint64
}

type shadowKey struct{ policy, decision string }

func (c *ShadowCounts) add(policy, decision string) {
	k := shadowKey{policy, decision}
	v, ok := c.m.Load(k)
	if !ok {
		v, _ = c.m.LoadOrStore(k, new(atomic.Uint64))
	}
	if n, ok := v.(*atomic.Uint64); ok {
		n.Add(1)
	}
}

// Each calls fn with every (policy, decision) counted, sorted.
func (c *ShadowCounts) Each(fn func(policy, decision string, n uint64)) {
	var keys []shadowKey
	c.m.Range(func(k, _ any) bool {
		if key, ok := k.(shadowKey); ok {
			keys = append(keys, key)
		}
		return true
	})
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].policy != keys[j].policy {
			return keys[i].policy < keys[j].policy
		}
		return keys[i].decision < keys[j].decision
	})
	for _, k := range keys {
		v, _ := c.m.Load(k)
		if n, ok := v.(*atomic.Uint64); ok {
			fn(k.policy, k.decision, n.Load())
		}
	}
}

// Failed counts the shadow evaluations that failed.
func (c *ShadowCounts) Failed() uint64 { return c.failed.Load() }

// ShadowCounts returns the node's shadow outcome counts.
func (a *Authorizer) ShadowCounts() *ShadowCounts { return &a.facts.shadowCounts }

// shadowOutcomes evaluates the tenant's shadow modules on the call, when
// it has any: nil otherwise, or when they fail (counted, logged at debug).
func (f *factSource) shadowOutcomes(ctx context.Context, tenantID string, in policy.Input) []policy.ShadowOutcome {
	if !f.engine.HasShadow(tenantID) {
		return nil
	}
	outs, err := f.engine.EvaluateShadow(ctx, tenantID, in)
	if err != nil {
		f.shadowCounts.failed.Add(1)
		f.logger().Debug("shadow policies failed on a call; the decision stands", "tenant_id", tenantID, "error", err)
		return nil
	}
	return outs
}

// recordShadow is a decision's shadow outcomes as its record keeps them,
// counted (nil without any).
func (f *factSource) recordShadow(outs []policy.ShadowOutcome) []persistence.ShadowOutcome {
	if len(outs) == 0 {
		return nil
	}
	rec := make([]persistence.ShadowOutcome, len(outs))
	for i, o := range outs {
		rec[i] = persistence.ShadowOutcome{Policy: o.Policy, Decision: o.Decision}
		f.shadowCounts.add(o.Policy, o.Decision)
	}
	return rec
}
