package control

import (
	"context"
	"errors"

	"svc/canonical"
	"svc/messages"
	"svc/persistence"
)

// The skill registry (SPEC 4.2 rule 9's skill input): each change drops the
// skill's cached entry on every node once committed.

// PutSkill registers or replaces skill key (already normalized as a call's
// tool is, SPEC 4.2 rule 7) with a skill_registered config_change event.
// Calls are matched on their normalized tool and action, so the registry
// stores its action keys normalized the same way: a skill registered as
// "Danger" with action "Wipe" applies to a call of Danger/Wipe, danger/wipe
// or DANGER/WIPE. An action whose risk is not low, medium, high or
// critical, an empty action key, or two that normalize alike are Invalid.
func (p *Plane) PutSkill(ctx context.Context, op Operator, key, description string, actions map[string]persistence.SkillAction) (persistence.Skill, error) {
	norm := make(map[string]persistence.SkillAction, len(actions))
	for name, a := range actions {
		switch a.Risk {
		case "low", "medium", "high", "critical":
		default:
			return persistence.Skill{}, invalid("actions."+name+".risk", "must be low, medium, high or critical")
		}
		k := canonical.NormalizeIdentifier(name)
		if k == "" {
			return persistence.Skill{}, invalid("actions."+name, "an action key must not be empty")
		}
		if _, dup := norm[k]; dup {
			return persistence.Skill{}, invalid("actions."+name, "two action keys normalize to %q", k)
		}
		norm[k] = a
	}
	var sk persistence.Skill
	err := p.change(func() (err error) {
		sk, err = p.d.Store.PutSkill(ctx, persistence.Skill{TenantID: op.TenantID, Key: key, Description: description, Actions: norm},
			Event(op, "config_change", "skill_registered", "", map[string]any{"skill_key": key}))
		return err
	}, func() { p.drop(ctx, messages.CacheSkill, op.TenantID, key) })
	return sk, err
}

// DeleteSkill removes the first of keys (the spellings one skill may be
// stored under, in order) that names a skill, with a skill_deleted
// config_change event; when none does it is NotFound.
func (p *Plane) DeleteSkill(ctx context.Context, op Operator, keys ...string) error {
	var key string
	return p.change(func() error {
		err := persistence.ErrNotFound
		for _, key = range keys {
			err = p.d.Store.DeleteSkill(ctx, op.TenantID, key, Event(op, "config_change", "skill_deleted", "", map[string]any{"skill_key": key}))
			if !errors.Is(err, persistence.ErrNotFound) {
				break
			}
		}
		return refuse(err, "skill", nil)
	}, func() { p.drop(ctx, messages.CacheSkill, op.TenantID, key) })
}
