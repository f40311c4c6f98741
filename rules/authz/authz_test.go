package authz

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"svc/messages"
	"svc/rules/policy"
)

func strp(s string) *string { return &s }

func TestThrottle(t *testing.T) {
	for _, tc := range []struct {
		name  string
		l     Limits
		code  string
		retry int
	}{
		{"rule 3: a token, no quota", Limits{Token: true}, "", 0},
		{"rule 3: no token: rate_limited, retry rounded up", Limits{TokenAfter: 1500 * time.Millisecond}, "rate_limited", 2},
		{"rule 3: no token, retry under a second: 1", Limits{TokenAfter: time.Millisecond}, "rate_limited", 1},
		{"rule 3: quota reached, not exceeded", Limits{Token: true, Quota: 5, QuotaUsed: 5}, "", 0},
		{"rule 3: quota exceeded", Limits{Token: true, Quota: 5, QuotaUsed: 6, QuotaAfter: 30 * time.Second}, "quota_exceeded", 30},
		{"rule 3: no quota configured", Limits{Token: true, QuotaUsed: 1000}, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Throttle(tc.l)
			if tc.code == "" {
				if r != nil {
					t.Fatalf("refused %+v", r)
				}
				return
			}
			if r == nil || r.Refusal != messages.RefusalThrottled || r.Code != tc.code || r.RetryAfter != tc.retry {
				t.Fatalf("got %+v, want %s retry %d", r, tc.code, tc.retry)
			}
		})
	}
}

func TestAdmit(t *testing.T) {
	call := messages.ToolCall{Tool: " GitHub%2EIssues ", Action: "Cre\u0301ate", Parameters: nil}
	for _, tc := range []struct {
		name      string
		c         Call
		refusal   messages.Refusal
		frozen    bool
		effective string
	}{
		{name: "rule 4: an active agent passes", c: Call{AgentStatus: "active", ToolCall: call, SourceTrust: "trusted_internal_signed"},
			effective: "trusted_internal_signed"},
		{name: "rule 4: a frozen agent is denied (recorded)", c: Call{AgentStatus: "frozen", ToolCall: call, SourceTrust: "trusted_internal_signed"},
			frozen: true, effective: "trusted_internal_signed"},
		{name: "rule 4 before rule 5: frozen and outside its environments is the deny", c: Call{AgentStatus: "frozen", ToolCall: call,
			AllowedEnvironments: []string{"prod"}, Environment: strp("dev"), SourceTrust: "untrusted_external"}, frozen: true, effective: "untrusted_external"},
		{name: "rule 5: environment not in the list: 403", c: Call{AgentStatus: "active", ToolCall: call, AllowedEnvironments: []string{"prod"},
			Environment: strp("dev"), SourceTrust: "trusted_internal_signed"}, refusal: messages.RefusalNotPermitted, effective: "trusted_internal_signed"},
		{name: "rule 5: no environment sent with a list: 403", c: Call{AgentStatus: "active", ToolCall: call, AllowedEnvironments: []string{"prod"},
			SourceTrust: "trusted_internal_signed"}, refusal: messages.RefusalNotPermitted, effective: "trusted_internal_signed"},
		{name: "rule 5: environment in the list", c: Call{AgentStatus: "active", ToolCall: call, AllowedEnvironments: []string{"dev", "prod"},
			Environment: strp("prod"), SourceTrust: "trusted_internal_signed"}, effective: "trusted_internal_signed"},
		{name: "rule 5: an empty list is unrestricted", c: Call{AgentStatus: "active", ToolCall: call, AllowedEnvironments: []string{},
			Environment: strp("anything"), SourceTrust: "trusted_internal_signed"}, effective: "trusted_internal_signed"},
		{name: "rule 8: the root tightens the source", c: Call{AgentStatus: "active", ToolCall: call, SourceTrust: "trusted_internal_signed",
			RootTrust: strp("untrusted_external")}, effective: "untrusted_external"},
		{name: "rule 8: a root never loosens the source", c: Call{AgentStatus: "active", ToolCall: call, SourceTrust: "untrusted_external",
			RootTrust: strp("trusted_internal_signed")}, effective: "untrusted_external"},
		{name: "rule 8: an empty root is no upstream hop", c: Call{AgentStatus: "active", ToolCall: call, SourceTrust: "trusted_internal_signed",
			RootTrust: strp("")}, effective: "trusted_internal_signed"},
		{name: "rule 8: a missing source_trust is unknown", c: Call{AgentStatus: "active", ToolCall: call}, effective: "unknown"},
		{name: "rule 8: root semi_trusted_customer over a signed source", c: Call{AgentStatus: "active", ToolCall: call,
			SourceTrust: "trusted_internal_signed", RootTrust: strp("semi_trusted_customer")}, effective: "semi_trusted_customer"},
		{name: "rule 8: root unknown over an unsigned source", c: Call{AgentStatus: "active", ToolCall: call,
			SourceTrust: "trusted_internal_unsigned", RootTrust: strp("unknown")}, effective: "unknown"},
		{name: "rule 8: a signed root keeps an unsigned source", c: Call{AgentStatus: "active", ToolCall: call,
			SourceTrust: "trusted_internal_unsigned", RootTrust: strp("trusted_internal_signed")}, effective: "trusted_internal_unsigned"},
		{name: "rule 8: a malicious root over a signed source", c: Call{AgentStatus: "active", ToolCall: call,
			SourceTrust: "trusted_internal_signed", RootTrust: strp("malicious_suspected")}, effective: "malicious_suspected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Admit(tc.c)
			// Rule 7: identifiers normalized (percent-decoded, NFC, trimmed,
			// lower-cased) whatever the outcome; parameters never nil.
			if a.ToolCall.Tool != "github.issues" || a.ToolCall.Action != "cr\u00e9ate" || a.ToolCall.Parameters == nil || len(a.ActionHash) != 64 {
				t.Fatalf("normalized %+v hash %q", a.ToolCall, a.ActionHash)
			}
			if a.EffectiveTrust != tc.effective {
				t.Errorf("effective trust %q, want %q", a.EffectiveTrust, tc.effective)
			}
			// The source is kept as sent (a missing one is unknown): the
			// record stores it next to the effective trust.
			if want, _ := policy.ParseTrust(tc.c.SourceTrust); a.SourceTrust != want {
				t.Errorf("source trust %q, want %q", a.SourceTrust, want)
			}
			switch {
			case tc.frozen:
				if a.Frozen == nil || a.Frozen.Decision != "deny" || a.Frozen.Reason != "agent_frozen" || a.Refused != nil {
					t.Fatalf("frozen: %+v %+v", a.Frozen, a.Refused)
				}
			case tc.refusal != 0:
				if a.Refused == nil || a.Refused.Refusal != tc.refusal || a.Refused.Code != "FORBIDDEN" || a.Frozen != nil {
					t.Fatalf("refused: %+v", a.Refused)
				}
			default:
				if a.Refused != nil || a.Frozen != nil {
					t.Fatalf("admitted call refused: %+v %+v", a.Refused, a.Frozen)
				}
			}
		})
	}
	t.Run("rule 7: a tool call that cannot be canonicalized is invalid", func(t *testing.T) {
		a := Admit(Call{AgentStatus: "active", ToolCall: messages.ToolCall{Tool: "t", Action: "a", Parameters: map[string]any{"x": func() {}}}})
		if a.Refused == nil || a.Refused.Refusal != messages.RefusalInvalid || a.Refused.Code != "invalid_tool_call" {
			t.Fatalf("got %+v", a.Refused)
		}
	})
}

// Rule 7 on every shipped svc-jcs-1 vector (testdata/jcs/action_hash.json,
// CONTRACT §4): Admit normalizes once and hashes what it normalized, so the
// call's action_hash is the vector's ("percent-decoding happens once"
// among them).
func TestAdmitActionHashVectors(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "jcs", "action_hash.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vectors []struct {
		Name       string            `json:"name"`
		ToolCall   messages.ToolCall `json:"tool_call"`
		Normalized string            `json:"normalized"`
		ActionHash string            `json:"action_hash"`
	}
	if err := json.Unmarshal(raw, &vectors); err != nil {
		t.Fatal(err)
	}
	if len(vectors) < 20 {
		t.Fatalf("%d vectors in action_hash.json, expected the full set", len(vectors))
	}
	for _, v := range vectors {
		t.Run("rule 7: "+v.Name, func(t *testing.T) {
			a := Admit(Call{AgentStatus: "active", ToolCall: v.ToolCall, SourceTrust: "trusted_internal_signed"})
			if a.Refused != nil || a.ActionHash != v.ActionHash {
				t.Fatalf("action hash %s (refused %+v), want %s", a.ActionHash, a.Refused, v.ActionHash)
			}
			var norm struct{ Tool, Action string }
			if err := json.Unmarshal([]byte(v.Normalized), &norm); err != nil {
				t.Fatal(err)
			}
			if a.ToolCall.Tool != norm.Tool || a.ToolCall.Action != norm.Action {
				t.Errorf("normalized %q/%q, want %q/%q", a.ToolCall.Tool, a.ToolCall.Action, norm.Tool, norm.Action)
			}
		})
	}
}

func TestBound(t *testing.T) {
	for _, tc := range []struct {
		name     string
		bindings []string
		tool     string
		refused  bool
	}{
		{"rule 6: no bindings: unrestricted", nil, "github", false},
		{"rule 6: a bound tool", []string{"slack", "github"}, "github", false},
		{"rule 6: bindings compared normalized", []string{" GitHub "}, "github", false},
		{"rule 6: a tool outside the bindings: 403", []string{"slack"}, "github", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Bound(tc.bindings, tc.tool)
			if (r != nil) != tc.refused || (r != nil && (r.Refusal != messages.RefusalNotPermitted || r.Code != "FORBIDDEN")) {
				t.Fatalf("got %+v, refused want %v", r, tc.refused)
			}
		})
	}
}

func TestReplayed(t *testing.T) {
	if r := Replayed(); r.Decision != "deny" || r.Reason != "replay_nonce_reused" {
		t.Fatalf("rule 13: %+v", r)
	}
}

func TestDecide(t *testing.T) {
	own := func(reason string) []Event { return []Event{{Kind: "authorize_decision", Reason: reason}} }
	esc := Escalation{Window: time.Hour, Threshold: 5}
	for _, tc := range []struct {
		name  string
		res   policy.Result
		facts Facts
		want  Verdict
	}{
		{"rule 9: a read allow is low risk (rule 10: best effort)", policy.Result{Decision: "allow", Reason: "r"}, Facts{},
			Verdict{Decision: "allow", Reason: "r", LowRisk: true, Events: own("r")}},
		{"rule 9: a mutating allow is not low risk", policy.Result{Decision: "allow"}, Facts{RequestMutates: true},
			Verdict{Decision: "allow", Mutates: true, Events: own("")}},
		{"rule 9: a registered mutation sent as a read mutates", policy.Result{Decision: "allow"}, Facts{Skill: Skill{Risk: "low", Mutates: true}},
			Verdict{Decision: "allow", Mutates: true, Events: own("")}},
		{"rule 9: a read of a high-risk skill is not low risk", policy.Result{Decision: "allow"}, Facts{Skill: Skill{Risk: "high"}},
			Verdict{Decision: "allow", Events: own("")}},
		{"rule 9: a read of a critical skill is not low risk", policy.Result{Decision: "allow"}, Facts{Skill: Skill{Risk: "critical"}},
			Verdict{Decision: "allow", Events: own("")}},
		{"CONTRACT §4: a read allowed by an approval is not best effort", policy.Result{Decision: "allow", Reason: "approved"}, Facts{ApprovalUsed: true},
			Verdict{Decision: "allow", Reason: "approved", Events: own("approved")}},
		{"rule 9, part 3: a deny counts towards escalation in the tenant's window", policy.Result{Decision: "deny", Reason: "x"}, Facts{Escalation: esc},
			Verdict{Decision: "deny", Reason: "x", Deny: true, Escalation: &esc, Events: own("x")}},
		{"rule 9: @decision(quarantine) quarantines after the record, and escalates", policy.Result{Decision: "deny", Quarantine: true},
			Facts{RequestMutates: true, Escalation: esc},
			Verdict{Decision: "quarantine", Mutates: true, Quarantine: true, Deny: true, Escalation: &esc, Events: own("")}},
		{"rule 9: redact is not an allow for the best effort", policy.Result{Decision: "redact", RedactedFields: []string{"a"}}, Facts{},
			Verdict{Decision: "redact", Events: own("")}},
		{"rule 9: require_approval", policy.Result{Decision: "require_approval"}, Facts{RequestMutates: true},
			Verdict{Decision: "require_approval", Mutates: true, Events: own("")}},
		{"rule 13: a reused nonce is denied and raises replay_attempt", Replayed(), Facts{Replay: NonceReplay, Escalation: esc},
			Verdict{Decision: "deny", Reason: "replay_nonce_reused", Deny: true, Escalation: &esc, Events: append(own("replay_nonce_reused"),
				Event{Kind: "replay_attempt", Reason: "replay nonce reused", RiskScore: 100, Subject: "replay_nonce_reused"})}},
		{"CONTRACT §4: an approval presented again is denied and raises replay_attempt",
			policy.Result{Decision: "deny", Reason: "approval_consumed"}, Facts{Replay: ApprovalReplay, Escalation: esc},
			Verdict{Decision: "deny", Reason: "approval_consumed", Deny: true, Escalation: &esc, Events: append(own("approval_consumed"),
				Event{Kind: "replay_attempt", Reason: "approval presented again after use", RiskScore: 100})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Decide(tc.res, tc.facts); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
