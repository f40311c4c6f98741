package actors

import (
	"context"
	"testing"

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
