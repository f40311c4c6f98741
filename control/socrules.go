package control

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"svc/messages"
	"svc/persistence"
	"svc/rules/detect"
)

// Custom detection rules (SPEC 4.5, CONTRACT §7): each change drops the
// tenant's cached rules from the SOC pipeline on every node once committed,
// so the next event is evaluated with it.

// SOCRule is a custom detection rule as an operator gives it: AlertName
// nil or empty is the key, Enabled nil is true; Severity is INFO, LOW,
// MEDIUM or HIGH in any case; Condition is CONTRACT §7's.
type SOCRule struct {
	Key       string
	AlertName *string
	Severity  string
	Enabled   *bool
	Condition map[string]any
}

// PutSOCRule creates or replaces the tenant's custom rule r.Key, with a
// soc_rule_saved config_change event. Refusals: a key that is not
// [a-z0-9_]{1,64}, an unknown severity (Invalid, naming the field), a
// missing or invalid condition (Invalid invalid_condition with the
// condition's path in Details), a default rule's key (Conflict
// default_rule).
func (p *Plane) PutSOCRule(ctx context.Context, op Operator, r SOCRule) (persistence.CustomRule, error) {
	if !detect.ValidKey(r.Key) {
		return persistence.CustomRule{}, invalid("rule_key", "must match [a-z0-9_]{1,64}")
	}
	if detect.IsDefaultKey(r.Key) {
		return persistence.CustomRule{}, conflict("rule", "default_rule", "%s is a default rule's key", r.Key)
	}
	sev, err := detect.ParseSeverity(r.Severity)
	if err != nil {
		return persistence.CustomRule{}, invalid("severity", "one of INFO, LOW, MEDIUM, HIGH")
	}
	if r.Condition == nil {
		return persistence.CustomRule{}, conditionRefusal(&detect.ConditionError{Path: "condition", Msg: "a condition is required"})
	}
	cond, err := detect.ParseCondition(r.Condition)
	if err != nil {
		return persistence.CustomRule{}, conditionRefusal(err)
	}
	name := r.Key
	if r.AlertName != nil && *r.AlertName != "" {
		name = *r.AlertName
	}
	enabled := r.Enabled == nil || *r.Enabled
	raw, err := json.Marshal(cond)
	if err != nil {
		return persistence.CustomRule{}, err
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	ev := Event(op, "config_change", "soc_rule_saved", "", map[string]any{"rule_key": r.Key, "severity": sev, "enabled": enabled})
	ev.CreatedAt = now
	var saved persistence.CustomRule
	err = p.change(func() (err error) {
		saved, err = p.d.Store.PutRule(ctx, persistence.CustomRule{TenantID: op.TenantID, Key: r.Key, AlertName: name, Severity: sev,
			Enabled: enabled, Condition: raw, CreatedAt: now, UpdatedAt: now}, ev)
		return err
	}, func() { p.drop(ctx, messages.CacheSOCRules, op.TenantID, "-") })
	return saved, err
}

// DeleteSOCRule deletes the tenant's custom rule key, with a
// soc_rule_deleted config_change event. A default rule's key: Conflict
// default_rule; an unknown rule: NotFound.
func (p *Plane) DeleteSOCRule(ctx context.Context, op Operator, key string) error {
	if detect.IsDefaultKey(key) {
		return conflict("rule", "default_rule", "%s is a default rule and cannot be deleted", key)
	}
	return p.change(func() error {
		return refuse(p.d.Store.DeleteRule(ctx, op.TenantID, key, Event(op, "config_change", "soc_rule_deleted", "",
			map[string]any{"rule_key": key})), "rule", nil)
	}, func() { p.drop(ctx, messages.CacheSOCRules, op.TenantID, "-") })
}

// conditionRefusal refuses an invalid condition: naming its path when the
// parser says where it fails (invalid_condition), else the field.
func conditionRefusal(err error) *Refusal {
	var ce *detect.ConditionError
	if errors.As(err, &ce) {
		return &Refusal{Kind: Invalid, Code: "invalid_condition", Message: ce.Error(),
			Details: map[string]any{"path": ce.Path, "field": "condition"}}
	}
	return invalid("condition", "%v", err)
}
