package detect

import (
	"errors"
	"strings"
	"testing"
)

func TestParseSeverity(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want string // "" for an error
	}{
		{name: "info lower", in: "info", want: SeverityInfo},
		{name: "low mixed", in: "Low", want: SeverityLow},
		{name: "medium upper", in: "MEDIUM", want: SeverityMedium},
		{name: "high odd case", in: "hIgH", want: SeverityHigh},
		{name: "empty", in: ""},
		{name: "critical", in: "critical"},
		{name: "leading space", in: " high"},
		{name: "trailing newline", in: "HIGH\n"},
		{name: "abbreviation", in: "med"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSeverity(tc.in)
			if tc.want == "" {
				if !errors.Is(err, ErrInvalidSeverity) || got != "" {
					t.Fatalf("ParseSeverity(%q) = %q, %v; want ErrInvalidSeverity", tc.in, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseSeverity(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestValidKey(t *testing.T) {
	cases := []struct {
		name string
		key  string
		want bool
	}{
		{name: "one letter", key: "a", want: true},
		{name: "digits and underscore", key: "rule_2_x", want: true},
		{name: "64 chars", key: strings.Repeat("a", 64), want: true},
		{name: "65 chars", key: strings.Repeat("a", 65), want: false},
		{name: "empty", key: "", want: false},
		{name: "upper case", key: "Rule", want: false},
		{name: "dash", key: "my-rule", want: false},
		{name: "space", key: "my rule", want: false},
		{name: "trailing newline", key: "rule\n", want: false},
		{name: "non-ascii", key: "règle", want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ValidKey(tc.key); got != tc.want {
				t.Fatalf("ValidKey(%q) = %v, want %v", tc.key, got, tc.want)
			}
		})
	}
}

func TestIsDefaultKey(t *testing.T) {
	cases := []struct {
		name string
		key  string
		want bool
	}{
		{name: "confused deputy", key: KeyConfusedDeputyBlock, want: true},
		{name: "drift low", key: KeyMCPManifestDriftLow, want: true},
		{name: "critical deny policy", key: KeyCriticalDenyPolicy, want: true},
		{name: "alert name is not a key", key: AlertCriticalDeny, want: false},
		{name: "drift alert name is not a key", key: AlertMCPManifestDrift, want: false},
		{name: "behavioural anomaly", key: AnomalyRate, want: false},
		{name: "custom", key: "my_rule", want: false},
		{name: "empty", key: "", want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsDefaultKey(tc.key); got != tc.want {
				t.Fatalf("IsDefaultKey(%q) = %v, want %v", tc.key, got, tc.want)
			}
		})
	}
}

func TestNewCustomRule(t *testing.T) {
	cond, err := ParseCondition(map[string]any{"tool": "github"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		key       string
		alert     string
		severity  string
		enabled   bool
		cond      Condition
		wantErr   error
		wantAlert string
		wantSev   string
	}{
		{name: "alert defaults to key", key: "gh_rule", severity: "high", enabled: true, cond: cond, wantAlert: "gh_rule", wantSev: SeverityHigh},
		{name: "explicit alert", key: "gh_rule", alert: "GitHub activity", severity: "Info", cond: cond, wantAlert: "GitHub activity", wantSev: SeverityInfo},
		{name: "bad key", key: "GH", severity: "high", cond: cond, wantErr: ErrInvalidRuleKey},
		{name: "empty key", key: "", severity: "high", cond: cond, wantErr: ErrInvalidRuleKey},
		{name: "default key", key: KeyReplayAttempt, severity: "high", cond: cond, wantErr: ErrDefaultRuleKey},
		{name: "bad severity", key: "gh_rule", severity: "critical", cond: cond, wantErr: ErrInvalidSeverity},
		{name: "zero condition", key: "gh_rule", severity: "low", wantErr: ErrInvalidCondition},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewCustomRule(tc.key, tc.alert, tc.severity, tc.enabled, tc.cond)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				if errors.Is(tc.wantErr, ErrInvalidCondition) {
					var ce *ConditionError
					if !errors.As(err, &ce) || ce.Path != "condition" {
						t.Fatalf("err = %v, want a *ConditionError at condition", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Key != tc.key || r.AlertName != tc.wantAlert || r.Severity != tc.wantSev ||
				r.Source != SourceCustom || r.Enabled != tc.enabled || r.Match != nil {
				t.Fatalf("rule = %+v", r)
			}
			if !r.Matches(Event{Tool: "github"}) || r.Matches(Event{Tool: "gitlab"}) {
				t.Fatal("rule does not use its condition")
			}
		})
	}
}

func TestRuleMatches(t *testing.T) {
	cond, err := ParseCondition(map[string]any{"decision": "deny"})
	if err != nil {
		t.Fatal(err)
	}
	highRisk := func(e Event) bool { return e.RiskScore > 50 }
	cases := []struct {
		name  string
		rule  Rule
		event Event
		want  bool
	}{
		{name: "neither condition nor match", rule: Rule{Enabled: true}, event: Event{}, want: false},
		{name: "condition only hit", rule: Rule{Condition: cond}, event: Event{Decision: "deny"}, want: true},
		{name: "condition only miss", rule: Rule{Condition: cond}, event: Event{Decision: "allow"}, want: false},
		{name: "match only hit", rule: Rule{Match: highRisk}, event: Event{RiskScore: 51}, want: true},
		{name: "match only miss", rule: Rule{Match: highRisk}, event: Event{RiskScore: 50}, want: false},
		{name: "both hold", rule: Rule{Condition: cond, Match: highRisk}, event: Event{Decision: "deny", RiskScore: 60}, want: true},
		{name: "condition fails", rule: Rule{Condition: cond, Match: highRisk}, event: Event{Decision: "allow", RiskScore: 60}, want: false},
		{name: "match fails", rule: Rule{Condition: cond, Match: highRisk}, event: Event{Decision: "deny", RiskScore: 10}, want: false},
		{name: "disabled still matches", rule: Rule{Condition: cond, Enabled: false}, event: Event{Decision: "deny"}, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.rule.Matches(tc.event); got != tc.want {
				t.Fatalf("Matches = %v, want %v", got, tc.want)
			}
		})
	}
}
