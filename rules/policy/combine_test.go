package policy

import (
	"slices"
	"testing"
)

func TestCombine(t *testing.T) {
	tests := []struct {
		name    string
		results []RawResult
		want    Result
	}{
		{
			name:    "no result fails closed",
			results: nil,
			want:    Result{Decision: DecisionDeny, Reason: ReasonNoMatchingPolicy},
		},
		{
			name:    "single allow",
			results: []RawResult{{Module: "default_allow_read", Policy: "default_allow_read", Decision: "allow", Reason: "read_only"}},
			want:    Result{Decision: DecisionAllow, Reason: "read_only", MatchedPolicies: []string{"default_allow_read"}},
		},
		{
			name: "deny beats require_approval, redact and allow; all matched",
			results: []RawResult{
				{Policy: "z_allow", Decision: "allow", Reason: "ok"},
				{Policy: "b_redact", Decision: "redact", Reason: "pii", RedactFields: []string{"parameters.ssn"}},
				{Policy: "c_approval", Decision: "require_approval", Reason: "needs human"},
				{Policy: "d_deny", Decision: "deny", Reason: "nope"},
			},
			want: Result{Decision: DecisionDeny, Reason: "nope",
				MatchedPolicies: []string{"b_redact", "c_approval", "d_deny", "z_allow"}},
		},
		{
			name: "quarantine beats deny and sets the annotation",
			results: []RawResult{
				{Policy: "untrusted_mutation", Decision: "deny", Reason: "untrusted_mutation"},
				{Policy: "malicious_quarantine", Decision: "quarantine", Reason: "malicious_mutation"},
			},
			want: Result{Decision: DecisionQuarantine, Reason: "malicious_mutation", Quarantine: true,
				MatchedPolicies: []string{"malicious_quarantine", "untrusted_mutation"}},
		},
		{
			name: "require_approval beats redact and allow",
			results: []RawResult{
				{Policy: "a", Decision: "allow", Reason: "ok"},
				{Policy: "r", Decision: "redact", Reason: "pii", RedactFields: []string{"parameters.x"}},
				{Policy: "h", Decision: "require_approval", Reason: "tier"},
			},
			want: Result{Decision: DecisionRequireApproval, Reason: "tier", MatchedPolicies: []string{"a", "h", "r"}},
		},
		{
			name: "redact beats allow; fields are the sorted union",
			results: []RawResult{
				{Policy: "allow_all", Decision: "allow", Reason: "ok"},
				{Policy: "pci", Decision: "redact", Reason: "card", RedactFields: []string{"parameters.card_number", "parameters.cvv"}},
				{Policy: "pii", Decision: "redact", Reason: "ssn", RedactFields: []string{"parameters.ssn", "parameters.cvv"}},
			},
			want: Result{Decision: DecisionRedact, Reason: "card",
				MatchedPolicies: []string{"allow_all", "pci", "pii"},
				RedactedFields:  []string{"parameters.card_number", "parameters.cvv", "parameters.ssn"}},
		},
		{
			name: "winner is the smallest policy id whatever the order",
			results: []RawResult{
				{Policy: "mcp_unknown_tool", Decision: "deny", Reason: "mcp_unknown_server"},
				{Policy: "critical", Decision: "deny", Reason: "critical_risk_action"},
			},
			want: Result{Decision: DecisionDeny, Reason: "critical_risk_action",
				MatchedPolicies: []string{"critical", "mcp_unknown_tool"}},
		},
		{
			name: "same policy id: smallest reason wins",
			results: []RawResult{
				{Policy: "p", Decision: "deny", Reason: "zeta"},
				{Policy: "p", Decision: "deny", Reason: "alpha"},
			},
			want: Result{Decision: DecisionDeny, Reason: "alpha", MatchedPolicies: []string{"p"}},
		},
		{
			name: "unknown decision counts as deny over allow and approval",
			results: []RawResult{
				{Policy: "a", Decision: "allow", Reason: "ok"},
				{Policy: "b", Decision: "require_approval", Reason: "x"},
				{Policy: "weird", Decision: "permit", Reason: ""},
			},
			want: Result{Decision: DecisionDeny, Reason: ReasonInvalidResult, MatchedPolicies: []string{"a", "b", "weird"}},
		},
		{
			name: "unknown decision keeps its own reason",
			results: []RawResult{
				{Policy: "weird", Decision: "DENY", Reason: "shouting"},
			},
			want: Result{Decision: DecisionDeny, Reason: "shouting", MatchedPolicies: []string{"weird"}},
		},
		{
			name: "quarantine still beats an unknown decision",
			results: []RawResult{
				{Policy: "weird", Decision: "", Reason: ""},
				{Policy: "q", Decision: "quarantine", Reason: "bad"},
			},
			want: Result{Decision: DecisionQuarantine, Reason: "bad", Quarantine: true, MatchedPolicies: []string{"q", "weird"}},
		},
		{
			name: "policy id defaults to the module; empty reason is the policy id",
			results: []RawResult{
				{Module: "mine", Decision: "allow"},
			},
			want: Result{Decision: DecisionAllow, Reason: "mine", MatchedPolicies: []string{"mine"}},
		},
		{
			name: "redact fields ignored when the outcome is not redact",
			results: []RawResult{
				{Policy: "pci", Decision: "redact", Reason: "card", RedactFields: []string{"parameters.card_number"}},
				{Policy: "approval", Decision: "require_approval", Reason: "ask"},
			},
			want: Result{Decision: DecisionRequireApproval, Reason: "ask", MatchedPolicies: []string{"approval", "pci"}},
		},
		{
			name: "duplicate ids appear once",
			results: []RawResult{
				{Policy: "x", Decision: "allow", Reason: "1"},
				{Policy: "x", Decision: "allow", Reason: "2"},
				{Module: "x", Decision: "allow", Reason: "3"},
			},
			want: Result{Decision: DecisionAllow, Reason: "1", MatchedPolicies: []string{"x"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.results)
			got := Combine(tc.results)
			assertResult(t, got, tc.want)
			if !slices.EqualFunc(in, tc.results, func(a, b RawResult) bool {
				return a.Policy == b.Policy && a.Decision == b.Decision && a.Reason == b.Reason
			}) {
				t.Error("Combine modified its input")
			}
			// Order independence.
			rev := slices.Clone(tc.results)
			slices.Reverse(rev)
			assertResult(t, Combine(rev), tc.want)
		})
	}
}

// assertResult compares two results; nil and empty slices are equal, but got's
// slices must be non-nil.
func assertResult(t *testing.T, got, want Result) {
	t.Helper()
	if got.Decision != want.Decision || got.Reason != want.Reason || got.Quarantine != want.Quarantine {
		t.Errorf("got decision %q reason %q quarantine %v, want %q %q %v",
			got.Decision, got.Reason, got.Quarantine, want.Decision, want.Reason, want.Quarantine)
	}
	if got.MatchedPolicies == nil || got.RedactedFields == nil {
		t.Errorf("nil slice in %+v", got)
	}
	if !slices.Equal(got.MatchedPolicies, want.MatchedPolicies) && (len(got.MatchedPolicies) > 0 || len(want.MatchedPolicies) > 0) {
		t.Errorf("matched policies = %q, want %q", got.MatchedPolicies, want.MatchedPolicies)
	}
	if !slices.Equal(got.RedactedFields, want.RedactedFields) && (len(got.RedactedFields) > 0 || len(want.RedactedFields) > 0) {
		t.Errorf("redacted fields = %q, want %q", got.RedactedFields, want.RedactedFields)
	}
}
