package control_test

import (
	"context"
	"fmt"
	"testing"

	"svc/control"
	"svc/persistence"
)

func TestSkillChanges(t *testing.T) {
	f := newSettingsFixture(t, "")
	ctx := context.Background()
	// A skill stored under a spelling that is not normalized (before keys
	// were).
	if _, err := f.store.PutSkill(ctx, persistence.Skill{TenantID: f.op.TenantID, Key: "Legacy", Actions: map[string]persistence.SkillAction{}}); err != nil {
		t.Fatal(err)
	}
	put := func(key string, actions map[string]persistence.SkillAction, want map[string]persistence.SkillAction) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			sk, err := f.plane.PutSkill(ctx, f.op, key, "d", "", actions)
			if err == nil && (sk.Key != key || sk.TenantID != f.op.TenantID || fmt.Sprint(sk.Actions) != fmt.Sprint(want)) {
				return fmt.Errorf("stored %+v", sk)
			}
			return err
		}
	}
	del := func(keys ...string) func(ctx context.Context) error {
		return func(ctx context.Context) error { return f.plane.DeleteSkill(ctx, f.op, keys...) }
	}
	high, low := persistence.SkillAction{Risk: "high", MutatesState: true}, persistence.SkillAction{Risk: "low"}
	unknown := &control.Refusal{Kind: control.NotFound, What: "skill"}
	f.run(t, []settingsCase{
		{name: "put: action keys normalized", change: put("danger", map[string]persistence.SkillAction{"Wipe": high, " Read ": low},
			map[string]persistence.SkillAction{"wipe": high, "read": low}),
			action: "skill_registered", details: map[string]any{"skill_key": "danger"}, drops: []string{"skill danger"}},
		{name: "put: no actions", change: put("calm", nil, map[string]persistence.SkillAction{}),
			action: "skill_registered", details: map[string]any{"skill_key": "calm"}, drops: []string{"skill calm"}},
		{name: "put: unknown risk", change: put("danger", map[string]persistence.SkillAction{"wipe": {Risk: "extreme"}}, nil),
			refusal: &control.Refusal{Kind: control.Invalid, Code: "invalid_field", Field: "actions.wipe.risk", Message: "must be low, medium, high or critical"}},
		{name: "put: empty action key", change: put("danger", map[string]persistence.SkillAction{" ": low}, nil),
			refusal: &control.Refusal{Kind: control.Invalid, Code: "invalid_field", Field: "actions. ", Message: "an action key must not be empty"}},
		{name: "put: two keys normalize alike", change: put("danger", map[string]persistence.SkillAction{"Wipe": low, "WIPE": low}, nil),
			refusal: &control.Refusal{Kind: control.Invalid, Code: "invalid_field", Message: `two action keys normalize to "wipe"`}},
		{name: "put: run fields sorted and deduplicated",
			change: put("web", map[string]persistence.SkillAction{"fetch": {Risk: "low", OutputTrust: "untrusted_external",
				Labels: []string{"untrusted_ingest", "egress", "egress"}, Accumulate: []string{"bytes"}}},
				map[string]persistence.SkillAction{"fetch": {Risk: "low", OutputTrust: "untrusted_external",
					Labels: []string{"egress", "untrusted_ingest"}, Accumulate: []string{"bytes"}}}),
			action: "skill_registered", details: map[string]any{"skill_key": "web"}, drops: []string{"skill web"}},
		{name: "put: an action's output_trust that is no trust level",
			change: put("web", map[string]persistence.SkillAction{"fetch": {Risk: "low", OutputTrust: "shady"}}, nil),
			refusal: &control.Refusal{Kind: control.Invalid, Code: "invalid_field", Field: "actions.fetch.output_trust",
				Message: "must be one of trusted_internal_signed, trusted_internal_unsigned, semi_trusted_customer, unknown, untrusted_external, malicious_suspected"}},
		{name: "put: a skill's output_trust that is no trust level", change: func(ctx context.Context) error {
			_, err := f.plane.PutSkill(ctx, f.op, "web", "d", "friendly", nil)
			return err
		}, refusal: &control.Refusal{Kind: control.Invalid, Code: "invalid_field", Field: "output_trust",
			Message: "must be one of trusted_internal_signed, trusted_internal_unsigned, semi_trusted_customer, unknown, untrusted_external, malicious_suspected"}},
		{name: "put: a label out of form", change: put("web", map[string]persistence.SkillAction{"fetch": {Risk: "low", Labels: []string{"Egress!"}}}, nil),
			refusal: &control.Refusal{Kind: control.Invalid, Code: "invalid_field", Field: "actions.fetch.labels", Message: "a label is 1 to 64 of a-z, 0-9, _ . : -"}},
		{name: "put: database down", change: put("danger", nil, nil), fail: persistence.ErrUnavailable, err: persistence.ErrUnavailable},
		{name: "delete", change: del("danger"), action: "skill_deleted", details: map[string]any{"skill_key": "danger"}, drops: []string{"skill danger"}},
		{name: "delete: the stored spelling", change: del("legacy", "Legacy"),
			action: "skill_deleted", details: map[string]any{"skill_key": "Legacy"}, drops: []string{"skill Legacy"}},
		{name: "delete: unknown", change: del("danger"), refusal: unknown},
		{name: "delete: no spelling known", change: del("legacy", "Legacy"), refusal: unknown},
		{name: "delete: database down", change: del("calm"), fail: context.DeadlineExceeded, err: context.DeadlineExceeded},
	})
	if _, err := f.store.GetSkill(ctx, f.op.TenantID, "calm"); err != nil {
		t.Fatalf("the skill whose deletion failed: %v", err)
	}
}
