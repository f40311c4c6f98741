package detect

import (
	"fmt"
	"regexp"
	"strings"
)

// Severities of alerts, in increasing order (CONTRACT §7).
const (
	SeverityInfo   = "INFO"
	SeverityLow    = "LOW"
	SeverityMedium = "MEDIUM"
	SeverityHigh   = "HIGH"
)

// Rule sources (SPEC 2.4).
const (
	SourceDefault = "default"
	SourceCustom  = "custom"
)

// ParseSeverity accepts INFO, LOW, MEDIUM or HIGH in any case and returns
// it in upper case; anything else (including surrounding spaces) is an
// error wrapping ErrInvalidSeverity.
func ParseSeverity(s string) (string, error) {
	switch up := strings.ToUpper(s); up {
	case SeverityInfo, SeverityLow, SeverityMedium, SeverityHigh:
		return up, nil
	}
	return "", fmt.Errorf("%w: %q (want INFO, LOW, MEDIUM or HIGH)", ErrInvalidSeverity, s)
}

var keyPattern = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)

// ValidKey reports whether key is a well-formed rule key: 1 to 64 of
// a-z, 0-9 and underscore.
func ValidKey(key string) bool { return keyPattern.MatchString(key) }

// Rule is one detection rule. A rule raises an alert named AlertName with
// Severity for every event it matches (Matches). Defaults come from
// Defaults; custom rules from NewCustomRule.
type Rule struct {
	Key       string // [a-z0-9_]{1,64}
	AlertName string // the alert raised; alerts are deduplicated by it
	Severity  string // INFO, LOW, MEDIUM or HIGH
	Source    string // SourceDefault or SourceCustom
	Enabled   bool   // Evaluate skips a disabled rule; Backtest does not

	// Condition is what the rule matches, in the condition language. It
	// is what GET /v1/soc/rules shows.
	Condition Condition

	// Match, when not nil, is an extra test for what the language cannot
	// say (one operator per field): the rule matches when Condition and
	// Match both hold. Only default rules use it; Description then states
	// the whole condition in words.
	Match func(Event) bool

	// Description states the rule's condition in words (defaults only).
	Description string
}

// Matches reports whether the rule matches e: Condition holds and, when
// set, Match holds. A rule with neither a condition nor Match matches
// nothing. Matches ignores Enabled.
func (r Rule) Matches(e Event) bool {
	if r.Condition.IsZero() && r.Match == nil {
		return false
	}
	return r.Condition.Match(e) && (r.Match == nil || r.Match(e))
}

// alertName is AlertName, or Key when AlertName is empty.
func (r Rule) alertName() string {
	if r.AlertName != "" {
		return r.AlertName
	}
	return r.Key
}

// NewCustomRule validates a tenant's rule definition (CONTRACT §7) and
// returns the enabled or disabled custom rule. key must be ValidKey
// (ErrInvalidRuleKey) and not a default rule's key (ErrDefaultRuleKey);
// alertName defaults to key; severity is read with ParseSeverity
// (ErrInvalidSeverity); cond must not be the zero Condition
// (ErrInvalidCondition, a *ConditionError at path "condition").
func NewCustomRule(key, alertName, severity string, enabled bool, cond Condition) (Rule, error) {
	if !ValidKey(key) {
		return Rule{}, fmt.Errorf("%w: %q must match [a-z0-9_]{1,64}", ErrInvalidRuleKey, key)
	}
	if IsDefaultKey(key) {
		return Rule{}, fmt.Errorf("%w: %q", ErrDefaultRuleKey, key)
	}
	sev, err := ParseSeverity(severity)
	if err != nil {
		return Rule{}, err
	}
	if cond.IsZero() {
		return Rule{}, condErr("condition", emptyConditionMsg)
	}
	if alertName == "" {
		alertName = key
	}
	return Rule{
		Key:       key,
		AlertName: alertName,
		Severity:  sev,
		Source:    SourceCustom,
		Enabled:   enabled,
		Condition: cond,
	}, nil
}

// Evaluate returns the enabled rules of rules that match e, in the order
// given, keeping only the first rule for each alert name (an empty
// AlertName counts as the Key), so one event never raises two alerts of
// one name (SPEC 6.2). Pass WithDefaults(custom): the defaults first, then
// the tenant's custom rules. The result is nil when nothing matches.
func Evaluate(rules []Rule, e Event) []Rule {
	var out []Rule
	for _, r := range rules {
		if !r.Enabled || !r.Matches(e) {
			continue
		}
		name := r.alertName()
		dup := false
		for _, prev := range out {
			if prev.alertName() == name {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, r)
		}
	}
	return out
}
