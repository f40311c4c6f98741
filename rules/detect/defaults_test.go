package detect

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
)

func TestDefaultsTable(t *testing.T) {
	want := []struct {
		key, alert, severity, condition string
		hasMatch                        bool
	}{
		{KeyConfusedDeputyBlock, "confused_deputy_block", SeverityHigh,
			`{"decision":{"in":["deny","quarantine"]},"mutates_state":{"eq":true},"source_trust":{"in":["untrusted_external","malicious_suspected"]}}`, false},
		{KeyApprovalRequiredSurface, "approval_required_surface", SeverityInfo,
			`{"decision":{"eq":"require_approval"}}`, false},
		{KeyCriticalDenyRiskScore, "critical_deny", SeverityHigh,
			`{"risk_score":{"gte":100}}`, false},
		{KeyCriticalDenyPolicy, "critical_deny", SeverityHigh,
			`{"matched_policies":{"in":["mcp_unknown_tool","critical"]}}`, false},
		{KeyReplayAttempt, "replay_attempt", SeverityHigh,
			`{"kind":{"eq":"replay_attempt"}}`, false},
		{KeyMCPManifestDriftHigh, "mcp_manifest_drift", SeverityHigh,
			`{"kind":{"eq":"mcp_manifest_drift"},"risk_score":{"gte":75}}`, false},
		{KeyMCPManifestDriftMedium, "mcp_manifest_drift", SeverityMedium,
			`{"kind":{"eq":"mcp_manifest_drift"},"risk_score":{"gte":40}}`, true},
		{KeyMCPManifestDriftLow, "mcp_manifest_drift", SeverityLow,
			`{"kind":{"eq":"mcp_manifest_drift"},"risk_score":{"lte":39}}`, false},
	}
	got := Defaults()
	if len(got) != len(want) {
		t.Fatalf("Defaults has %d rules, want %d", len(got), len(want))
	}
	for i, w := range want {
		t.Run(w.key, func(t *testing.T) {
			r := got[i]
			if r.Key != w.key || r.AlertName != w.alert || r.Severity != w.severity ||
				r.Source != SourceDefault || !r.Enabled || r.Description == "" {
				t.Fatalf("rule %d = %+v", i, r)
			}
			if (r.Match != nil) != w.hasMatch {
				t.Fatalf("Match set = %v, want %v", r.Match != nil, w.hasMatch)
			}
			out, err := json.Marshal(r.Condition)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != w.condition {
				t.Fatalf("condition = %s, want %s", out, w.condition)
			}
			if !IsDefaultKey(r.Key) {
				t.Fatalf("IsDefaultKey(%q) = false", r.Key)
			}
			if !ValidKey(r.Key) {
				t.Fatalf("default key %q is not a valid key", r.Key)
			}
		})
	}
}

func TestDefaultsReturnsACopy(t *testing.T) {
	d := Defaults()
	d[0].Enabled = false
	d[0].Severity = SeverityLow
	if again := Defaults(); !again[0].Enabled || again[0].Severity != SeverityHigh {
		t.Fatal("changing Defaults' result changed the defaults")
	}
	custom := []Rule{{Key: "c1", Enabled: true}}
	w1 := WithDefaults(custom)
	w2 := WithDefaults(nil)
	n := len(Evaluated())
	if len(w1) != n+1 || w1[n].Key != "c1" || len(w2) != n {
		t.Fatalf("WithDefaults lengths %d, %d", len(w1), len(w2))
	}
	w2 = append(w2, Rule{Key: "c2"})
	if w1[n].Key != "c1" || w2[n].Key != "c2" {
		t.Fatal("WithDefaults results share storage")
	}
}

// matchingDefaults lists the keys of the default rules that match e, each
// rule tested on its own (no deduplication).
func matchingDefaults(e Event) []string {
	var keys []string
	for _, r := range Defaults() {
		if r.Matches(e) {
			keys = append(keys, r.Key)
		}
	}
	return keys
}

func TestDefaultRulesBoundaries(t *testing.T) {
	drift := func(risk int) Event {
		return Event{Kind: KindMCPManifestDrift, AgentID: "unknown", Decision: "deny", Tool: "mcp:srv", Action: "discover", RiskScore: risk}
	}
	authz := func(f func(*Event)) Event {
		e := Event{Kind: KindAuthorizeDecision, Decision: "allow", Tool: "github", Action: "read",
			RiskScore: 10, SourceTrust: "trusted_internal_signed", MatchedPolicies: []string{}}
		if f != nil {
			f(&e)
		}
		return e
	}
	deputy := func(f func(*Event)) Event {
		return authz(func(e *Event) {
			e.Decision, e.MutatesState, e.SourceTrust = "deny", true, "untrusted_external"
			if f != nil {
				f(e)
			}
		})
	}
	cases := []struct {
		name  string
		event Event
		want  []string
	}{
		{name: "plain allow", event: authz(nil), want: nil},

		{name: "drift risk 0", event: drift(0), want: []string{KeyMCPManifestDriftLow}},
		{name: "drift risk 39", event: drift(39), want: []string{KeyMCPManifestDriftLow}},
		{name: "drift risk 40", event: drift(40), want: []string{KeyMCPManifestDriftMedium}},
		{name: "drift risk 74", event: drift(74), want: []string{KeyMCPManifestDriftMedium}},
		{name: "drift risk 75", event: drift(75), want: []string{KeyMCPManifestDriftHigh}},
		{name: "drift risk 99", event: drift(99), want: []string{KeyMCPManifestDriftHigh}},
		{name: "drift risk 100", event: drift(100), want: []string{KeyCriticalDenyRiskScore, KeyMCPManifestDriftHigh}},
		{name: "non-drift kind risk 75", event: authz(func(e *Event) { e.RiskScore = 75 }), want: nil},
		{name: "non-drift kind risk 30", event: authz(func(e *Event) { e.RiskScore = 30 }), want: nil},

		{name: "risk 99 not critical", event: authz(func(e *Event) { e.RiskScore = 99 }), want: nil},
		{name: "risk 100 critical", event: authz(func(e *Event) { e.RiskScore = 100 }), want: []string{KeyCriticalDenyRiskScore}},
		{name: "policy mcp_unknown_tool", event: authz(func(e *Event) { e.MatchedPolicies = []string{"base", "mcp_unknown_tool"} }),
			want: []string{KeyCriticalDenyPolicy}},
		{name: "policy critical", event: authz(func(e *Event) { e.MatchedPolicies = []string{"critical"} }),
			want: []string{KeyCriticalDenyPolicy}},
		{name: "policy critical_x is not critical", event: authz(func(e *Event) { e.MatchedPolicies = []string{"critical_x", "mcp"} }), want: nil},
		{name: "score and policy", event: authz(func(e *Event) { e.RiskScore = 100; e.MatchedPolicies = []string{"critical"} }),
			want: []string{KeyCriticalDenyRiskScore, KeyCriticalDenyPolicy}},

		{name: "require approval", event: authz(func(e *Event) { e.Decision = "require_approval" }), want: []string{KeyApprovalRequiredSurface}},
		{name: "redact is not approval", event: authz(func(e *Event) { e.Decision = "redact" }), want: nil},

		{name: "replay attempt", event: Event{Kind: KindReplayAttempt, Decision: "deny", RiskScore: 100, Tool: "replay_nonce_reused", Action: "replay_nonce_reused"},
			want: []string{KeyCriticalDenyRiskScore, KeyReplayAttempt}},
		{name: "replay attempt low risk", event: Event{Kind: KindReplayAttempt, Decision: "deny", RiskScore: 0}, want: []string{KeyReplayAttempt}},

		{name: "deputy untrusted", event: deputy(nil), want: []string{KeyConfusedDeputyBlock}},
		{name: "deputy malicious", event: deputy(func(e *Event) { e.SourceTrust = "malicious_suspected" }), want: []string{KeyConfusedDeputyBlock}},
		{name: "deputy unknown trust", event: deputy(func(e *Event) { e.SourceTrust = "unknown" }), want: nil},
		{name: "deputy semi trusted", event: deputy(func(e *Event) { e.SourceTrust = "semi_trusted_customer" }), want: nil},
		{name: "deputy not mutating", event: deputy(func(e *Event) { e.MutatesState = false }), want: nil},
		{name: "deputy allowed", event: deputy(func(e *Event) { e.Decision = "allow" }), want: nil},
		// A quarantine is a deny that also quarantines (CONTRACT §13); the base
		// policies quarantine every mutating call at malicious_suspected.
		{name: "deputy quarantine is a deny", event: deputy(func(e *Event) {
			e.Decision, e.SourceTrust = "quarantine", "malicious_suspected"
		}), want: []string{KeyConfusedDeputyBlock}},
		{name: "deputy redact is not a deny", event: deputy(func(e *Event) { e.Decision = "redact" }), want: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := matchingDefaults(tc.event); !slices.Equal(got, tc.want) {
				t.Fatalf("matching defaults = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestEvaluate(t *testing.T) {
	mustRule := func(key, alert, sev string, enabled bool, cond map[string]any) Rule {
		c, err := ParseCondition(cond)
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewCustomRule(key, alert, sev, enabled, c)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	githubDeny := mustRule("github_deny", "", "medium", true, map[string]any{"tool": "github", "decision": "deny"})
	sameNameAsDefault := mustRule("my_critical", AlertCriticalDeny, "low", true, map[string]any{"tool": "github"})
	disabled := mustRule("disabled_rule", "", "high", false, map[string]any{"tool": "github"})
	firstOfName := mustRule("first_of_name", "shared", "low", true, map[string]any{"tool": "github"})
	secondOfName := mustRule("second_of_name", "shared", "high", true, map[string]any{"tool": "github"})
	noAlertName := Rule{Key: "shared", Enabled: true, Condition: githubDeny.Condition, Source: SourceCustom}

	ev := func(risk int, decision string, policies ...string) Event {
		return Event{Kind: KindAuthorizeDecision, Tool: "github", Action: "merge", Decision: decision,
			RiskScore: risk, MatchedPolicies: policies}
	}
	cases := []struct {
		name  string
		rules []Rule
		event Event
		want  []string // rule keys in order
	}{
		{name: "nothing matches", rules: WithDefaults(nil), event: Event{Kind: "x"}, want: nil},
		{name: "score and policy give one critical_deny", rules: WithDefaults(nil), event: ev(100, "deny", "critical"),
			want: []string{KeyCriticalDenyRiskScore}},
		{name: "policy alone", rules: WithDefaults(nil), event: ev(10, "deny", "mcp_unknown_tool"),
			want: []string{KeyCriticalDenyPolicy}},
		{name: "custom after defaults", rules: WithDefaults([]Rule{githubDeny}), event: ev(100, "deny"),
			want: []string{KeyCriticalDenyRiskScore, "github_deny"}},
		{name: "custom with a default's alert name suppressed", rules: WithDefaults([]Rule{sameNameAsDefault}), event: ev(100, "allow"),
			want: []string{KeyCriticalDenyRiskScore}},
		{name: "custom with a default's alert name fires alone", rules: WithDefaults([]Rule{sameNameAsDefault}), event: ev(10, "allow"),
			want: []string{"my_critical"}},
		{name: "disabled custom skipped", rules: WithDefaults([]Rule{disabled}), event: ev(10, "allow"), want: nil},
		{name: "disabled default skipped", rules: func() []Rule {
			rs := Defaults()
			rs[2].Enabled = false // critical_deny_risk_score
			return rs
		}(), event: ev(100, "deny", "critical"), want: []string{KeyCriticalDenyPolicy}},
		{name: "first custom of a name wins", rules: []Rule{firstOfName, secondOfName}, event: ev(10, "allow"), want: []string{"first_of_name"}},
		{name: "order given decides", rules: []Rule{secondOfName, firstOfName}, event: ev(10, "allow"), want: []string{"second_of_name"}},
		{name: "empty alert name dedups by key", rules: []Rule{firstOfName, noAlertName}, event: ev(10, "deny"), want: []string{"first_of_name"}},
		{name: "distinct names all raised", rules: WithDefaults([]Rule{githubDeny}),
			event: Event{Kind: KindReplayAttempt, Tool: "github", Decision: "deny", RiskScore: 100},
			want:  []string{KeyCriticalDenyRiskScore, KeyReplayAttempt, "github_deny"}},
		{name: "drift 100", rules: WithDefaults(nil), event: Event{Kind: KindMCPManifestDrift, Decision: "deny", RiskScore: 100},
			want: []string{KeyCriticalDenyRiskScore, KeyMCPManifestDriftHigh}},
		{name: "drift 74", rules: WithDefaults(nil), event: Event{Kind: KindMCPManifestDrift, Decision: "deny", RiskScore: 74},
			want: []string{KeyMCPManifestDriftMedium}},
		{name: "no rules", rules: nil, event: ev(100, "deny"), want: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Evaluate(tc.rules, tc.event)
			var keys []string
			for _, r := range got {
				keys = append(keys, r.Key)
			}
			if !slices.Equal(keys, tc.want) {
				t.Fatalf("Evaluate = %v, want %v", keys, tc.want)
			}
		})
	}
}

func TestEvaluateReturnsRuleValues(t *testing.T) {
	got := Evaluate(WithDefaults(nil), Event{Decision: "require_approval"})
	if len(got) != 1 {
		t.Fatalf("got %d rules", len(got))
	}
	want := Defaults()[1]
	if got[0].Key != want.Key || got[0].Severity != SeverityInfo || got[0].Source != SourceDefault ||
		!reflect.DeepEqual(got[0].Condition.Raw(), want.Condition.Raw()) {
		t.Fatalf("rule = %+v", got[0])
	}
}

// receipt_chain_broken is evaluated and reserved, not listed with SPEC
// 6.2's eight.
func TestSystemRules(t *testing.T) {
	if len(Defaults()) != 8 || slices.ContainsFunc(Defaults(), func(r Rule) bool { return r.Key == KeyReceiptChainBroken }) {
		t.Errorf("Defaults lists %d rules", len(Defaults()))
	}
	if !IsDefaultKey(KeyReceiptChainBroken) {
		t.Error("receipt_chain_broken is not reserved")
	}
	e := Event{Kind: KindReceiptChainBroken, AgentID: "unknown", Decision: "deny", Tool: "receipts", Action: "verify_chain", RiskScore: 90}
	var keys []string
	for _, r := range WithDefaults(nil) {
		if r.Matches(e) {
			keys = append(keys, r.Key)
		}
	}
	if !slices.Equal(keys, []string{KeyReceiptChainBroken}) {
		t.Errorf("a receipt_chain_broken event matches %v", keys)
	}
}
