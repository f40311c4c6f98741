package control

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"

	"svc/canonical"
	"svc/messages"
	"svc/persistence"
	"svc/rules/policy"
	"svc/runstate"
)

// The skill registry (SPEC 4.2 rule 9's skill input): each change drops the
// skill's cached entry on every node once committed.

// PutSkill registers or replaces skill key (already normalized as a call's
// tool is, SPEC 4.2 rule 7) with a skill_registered config_change event.
// Calls are matched on their normalized tool and action, so the registry
// stores its action keys normalized the same way: a skill registered as
// "Danger" with action "Wipe" applies to a call of Danger/Wipe, danger/wipe
// or DANGER/WIPE. An action whose risk is not low, medium, high or
// critical, an empty action key, or two that normalize alike are Invalid,
// and so are an output_trust that is no trust level and labels or
// accumulated parameters beyond their bounds.
func (p *Plane) PutSkill(ctx context.Context, op Operator, key, description, outputTrust string, actions map[string]persistence.SkillAction) (persistence.Skill, error) {
	if outputTrust != "" && runstate.Level(outputTrust) == 0 {
		return persistence.Skill{}, invalid("output_trust", "must be one of %s", strings.Join(policy.TrustLevels(), ", "))
	}
	norm := make(map[string]persistence.SkillAction, len(actions))
	for name, a := range actions {
		switch a.Risk {
		case "low", "medium", "high", "critical":
		default:
			return persistence.Skill{}, invalid("actions."+name+".risk", "must be low, medium, high or critical")
		}
		if err := checkRunFields(name, &a); err != nil {
			return persistence.Skill{}, err
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
		sk, err = p.d.Store.PutSkill(ctx, persistence.Skill{TenantID: op.TenantID, Key: key, Description: description, OutputTrust: outputTrust, Actions: norm},
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

// labelPattern is what a label or an accumulated parameter's name may be.
var labelPattern = regexp.MustCompile(`^[a-z0-9_.:-]{1,64}$`)

// checkRunFields validates an action's run-context fields (CONTRACT §16) and
// sorts its labels and parameters, so that equal registrations store alike.
func checkRunFields(name string, a *persistence.SkillAction) error {
	if a.OutputTrust != "" && runstate.Level(a.OutputTrust) == 0 {
		return invalid("actions."+name+".output_trust", "must be one of %s", strings.Join(policy.TrustLevels(), ", "))
	}
	if len(a.Labels) > runstate.MaxLabels {
		return invalid("actions."+name+".labels", "at most %d labels", runstate.MaxLabels)
	}
	for _, l := range a.Labels {
		if !labelPattern.MatchString(l) {
			return invalid("actions."+name+".labels", "a label is 1 to 64 of a-z, 0-9, _ . : -")
		}
	}
	if len(a.Accumulate) > runstate.MaxSums {
		return invalid("actions."+name+".accumulate", "at most %d parameters", runstate.MaxSums)
	}
	for _, p := range a.Accumulate {
		if p == "" || len(p) > 64 {
			return invalid("actions."+name+".accumulate", "a parameter name is 1 to 64 characters")
		}
	}
	a.Labels = slices.Compact(slices.Sorted(slices.Values(a.Labels)))
	a.Accumulate = slices.Compact(slices.Sorted(slices.Values(a.Accumulate)))
	return nil
}
