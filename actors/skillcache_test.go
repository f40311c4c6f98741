package actors

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"svc/messages"
	"svc/persistence"
)

// racingSkills runs a change and its drop once, after a skill read and
// before the read's answer is cached.
type racingSkills struct {
	persistence.Store
	after func()
}

func (r *racingSkills) GetSkill(ctx context.Context, tenantID, key string) (persistence.Skill, error) {
	sk, err := r.Store.GetSkill(ctx, tenantID, key)
	if f := r.after; f != nil {
		r.after = nil
		f()
	}
	return sk, err
}

// A skill read that raced a change and its drop is not cached: the next
// call sees the change, not what the racing read found.
func TestSkillCacheFillRacingADrop(t *testing.T) {
	ctx := context.Background()
	store, tenant := storeWithTenant(t)
	put := func(risk string) {
		if _, err := store.PutSkill(ctx, persistence.Skill{TenantID: tenant.ID, Key: "deploy",
			Actions: map[string]persistence.SkillAction{"run": {Risk: risk}}}); err != nil {
			t.Fatal(err)
		}
	}
	put("low")
	racing := &racingSkills{Store: store}
	f, err := newFactSource(racing, nil, nil, nil, AuthorizerOptions{SkillCacheCapacity: 8}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	racing.after = func() {
		put("critical")
		f.drop(messages.Invalidation{Kind: messages.CacheSkill, TenantID: tenant.ID, Key: "deploy"})
	}
	if e := f.skill(ctx, tenant.ID, "deploy"); e.skill.Actions["run"].Risk != "low" {
		t.Fatalf("the racing read: %+v", e)
	}
	if e := f.skill(ctx, tenant.ID, "deploy"); e.skill.Actions["run"].Risk != "critical" {
		t.Errorf("a fill that raced a drop was cached: %+v", e.skill.Actions)
	}
}

// countingReads counts the skill and risk-settings reads that reach the
// store.
type countingReads struct {
	persistence.Store
	skills, risk int
}

func (c *countingReads) GetSkill(ctx context.Context, tenantID, key string) (persistence.Skill, error) {
	c.skills++
	return c.Store.GetSkill(ctx, tenantID, key)
}

func (c *countingReads) GetRiskSettings(ctx context.Context, tenantID string) (persistence.RiskSettings, error) {
	c.risk++
	return c.Store.GetRiskSettings(ctx, tenantID)
}

// SVC_SKILL_CACHE_CAPACITY and SVC_RISK_WEIGHTS_CACHE_TTL_SECS decide how
// often five calls read the store: once with the cache (capacity 8, TTL a
// minute), every time without (capacity 0, TTL 0).
func TestSkillAndRiskCacheSettings(t *testing.T) {
	ctx := context.Background()
	store, tenant := storeWithTenant(t)
	if _, err := store.PutSkill(ctx, persistence.Skill{TenantID: tenant.ID, Key: "deploy",
		Actions: map[string]persistence.SkillAction{"run": {Risk: "low"}}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name             string
		capacity         int
		ttl              time.Duration
		wantSkill, wantR int
	}{
		{"caches on", 8, time.Minute, 1, 1},
		{"caches off", 0, 0, 5, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			counting := &countingReads{Store: store}
			f, err := newFactSource(counting, nil, nil, nil, AuthorizerOptions{SkillCacheCapacity: c.capacity, RiskWeightsTTL: c.ttl},
				hclog.NewNullLogger())
			if err != nil {
				t.Fatal(err)
			}
			for range 5 {
				if e := f.skill(ctx, tenant.ID, "deploy"); e.skill.Actions["run"].Risk != "low" {
					t.Fatalf("skill %+v", e)
				}
				f.riskSettings(ctx, tenant.ID)
			}
			if counting.skills != c.wantSkill || counting.risk != c.wantR {
				t.Errorf("store reads: %d skills, %d risk settings; want %d, %d", counting.skills, counting.risk, c.wantSkill, c.wantR)
			}
		})
	}
}
