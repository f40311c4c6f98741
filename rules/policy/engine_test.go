package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func newTestEngine(t testing.TB, opts Options) *Engine {
	t.Helper()
	e, err := NewEngine(opts)
	if err != nil {
		t.Fatalf("NewEngine: %v", err)
	}
	return e
}

// call returns a realistic input; mutate adjusts it.
func call(mutate func(*Input)) Input {
	res := "acme/api#42"
	in := Input{
		TenantID:       "tenant-a",
		Agent:          AgentInput{ID: "agent-1", Name: "builder", RiskTier: "low", Status: "active"},
		ToolCall:       ToolCall{Tool: "github", Action: "list_issues", Resource: &res, Parameters: map[string]any{"state": "open", "limit": 10.0}},
		TrustLevel:     TrustTrustedInternalSigned,
		RootTrustLevel: TrustTrustedInternalSigned,
		Environment:    "production",
	}
	if mutate != nil {
		mutate(&in)
	}
	return in
}

func mutating(trust string) func(*Input) {
	return func(in *Input) {
		in.ToolCall.Action = "merge_pull_request"
		in.MutatesState = true
		in.TrustLevel = trust
		in.RootTrustLevel = trust
	}
}

func mcpCall(server, tool string) func(*Input) {
	return func(in *Input) {
		in.ToolCall.Tool = "mcp:files"
		in.ToolCall.Action = "read_file"
		in.MCP = &MCPInput{ServerKey: "files", ServerStatus: server, ToolStatus: tool, TrustLevel: TrustSemiTrustedCustomer}
	}
}

func evaluate(t testing.TB, e *Engine, tenant string, in Input) Result {
	t.Helper()
	r, err := e.Evaluate(context.Background(), tenant, in)
	if err != nil {
		t.Fatalf("Evaluate: %v", err)
	}
	return r
}

func TestBasePolicies(t *testing.T) {
	e := newTestEngine(t, Options{})
	tests := []struct {
		name     string
		in       Input
		decision string
		reason   string
		matched  []string // exactly these policy ids
	}{
		{
			name:     "read at trusted is allowed",
			in:       call(nil),
			decision: DecisionAllow, reason: "read_only",
			matched: []string{"default_allow_read"},
		},
		{
			name:     "read at unknown trust is allowed",
			in:       call(func(in *Input) { in.TrustLevel, in.RootTrustLevel = TrustUnknown, TrustUnknown }),
			decision: DecisionAllow, reason: "read_only",
			matched: []string{"default_allow_read"},
		},
		{
			name:     "read at malicious_suspected is allowed",
			in:       call(func(in *Input) { in.TrustLevel, in.RootTrustLevel = TrustMaliciousSuspected, TrustMaliciousSuspected }),
			decision: DecisionAllow, reason: "read_only",
			matched: []string{"default_allow_read"},
		},
		{
			name:     "mutation at trusted_internal_signed is allowed",
			in:       call(mutating(TrustTrustedInternalSigned)),
			decision: DecisionAllow, reason: "trusted_mutation",
			matched: []string{"default_allow_trusted_mutation"},
		},
		{
			name:     "mutation at trusted_internal_unsigned is allowed",
			in:       call(mutating(TrustTrustedInternalUnsigned)),
			decision: DecisionAllow, reason: "trusted_mutation",
			matched: []string{"default_allow_trusted_mutation"},
		},
		{
			name:     "mutation at semi_trusted_customer is allowed",
			in:       call(mutating(TrustSemiTrustedCustomer)),
			decision: DecisionAllow, reason: "trusted_mutation",
			matched: []string{"default_allow_trusted_mutation"},
		},
		{
			name:     "mutation with empty root trust follows the hop's trust",
			in:       call(func(in *Input) { mutating(TrustSemiTrustedCustomer)(in); in.RootTrustLevel = "" }),
			decision: DecisionAllow, reason: "trusted_mutation",
			matched: []string{"default_allow_trusted_mutation"},
		},
		{
			name:     "mutation at unknown trust fails closed",
			in:       call(mutating(TrustUnknown)),
			decision: DecisionDeny, reason: ReasonNoMatchingPolicy,
			matched: []string{},
		},
		{
			name:     "mutation with empty trust level fails closed",
			in:       call(func(in *Input) { mutating("")(in) }),
			decision: DecisionDeny, reason: ReasonNoMatchingPolicy,
			matched: []string{},
		},
		{
			name:     "mutation under an unknown root fails closed",
			in:       call(func(in *Input) { mutating(TrustTrustedInternalSigned)(in); in.RootTrustLevel = TrustUnknown }),
			decision: DecisionDeny, reason: ReasonNoMatchingPolicy,
			matched: []string{},
		},
		{
			name:     "mutation at untrusted_external is denied",
			in:       call(mutating(TrustUntrustedExternal)),
			decision: DecisionDeny, reason: "untrusted_mutation",
			matched: []string{"untrusted_mutation"},
		},
		{
			name:     "mutation under an untrusted root is denied",
			in:       call(func(in *Input) { mutating(TrustTrustedInternalSigned)(in); in.RootTrustLevel = TrustUntrustedExternal }),
			decision: DecisionDeny, reason: "untrusted_mutation",
			matched: []string{"untrusted_mutation"},
		},
		{
			name:     "mutation at malicious_suspected quarantines",
			in:       call(mutating(TrustMaliciousSuspected)),
			decision: DecisionQuarantine, reason: "malicious_mutation",
			matched: []string{"malicious_quarantine", "untrusted_mutation"},
		},
		{
			name: "registry-mutating action claimed as read is still a mutation",
			in: call(func(in *Input) {
				in.TrustLevel, in.RootTrustLevel = TrustUntrustedExternal, TrustUntrustedExternal
				in.Skill = &SkillInput{Key: "github", Action: "list_issues", Risk: "low", MutatesState: true}
			}),
			decision: DecisionDeny, reason: "untrusted_mutation",
			matched: []string{"untrusted_mutation"},
		},
		{
			name:     "high tier trusted mutation requires approval",
			in:       call(func(in *Input) { mutating(TrustTrustedInternalSigned)(in); in.Agent.RiskTier = "high" }),
			decision: DecisionRequireApproval, reason: "high_risk_tier_mutation",
			matched: []string{"default_allow_trusted_mutation", "high_tier_mutation"},
		},
		{
			name:     "high tier mutation at unknown trust requires approval",
			in:       call(func(in *Input) { mutating(TrustUnknown)(in); in.Agent.RiskTier = "high" }),
			decision: DecisionRequireApproval, reason: "high_risk_tier_mutation",
			matched: []string{"high_tier_mutation"},
		},
		{
			name:     "high tier read is allowed",
			in:       call(func(in *Input) { in.Agent.RiskTier = "high" }),
			decision: DecisionAllow, reason: "read_only",
			matched: []string{"default_allow_read"},
		},
		{
			name:     "medium tier trusted mutation is allowed",
			in:       call(func(in *Input) { mutating(TrustTrustedInternalSigned)(in); in.Agent.RiskTier = "medium" }),
			decision: DecisionAllow, reason: "trusted_mutation",
			matched: []string{"default_allow_trusted_mutation"},
		},
		{
			name: "registry approval_required requires approval",
			in: call(func(in *Input) {
				mutating(TrustTrustedInternalSigned)(in)
				in.Skill = &SkillInput{Key: "github", Action: "merge_pull_request", Risk: "high", MutatesState: true, ApprovalRequired: true}
			}),
			decision: DecisionRequireApproval, reason: "approval_required",
			matched: []string{"default_allow_trusted_mutation", "registered_approval"},
		},
		{
			name: "critical skill is denied even on a trusted read",
			in: call(func(in *Input) {
				in.Skill = &SkillInput{Key: "github", Action: "list_issues", Risk: "critical"}
			}),
			decision: DecisionDeny, reason: "critical_risk_action",
			matched: []string{"critical", "default_allow_read"},
		},
		{
			name: "critical skill beats approval and high tier",
			in: call(func(in *Input) {
				mutating(TrustTrustedInternalSigned)(in)
				in.Agent.RiskTier = "high"
				in.Skill = &SkillInput{Key: "github", Action: "delete_repo", Risk: "critical", MutatesState: true, ApprovalRequired: true}
			}),
			decision: DecisionDeny, reason: "critical_risk_action",
			matched: []string{"critical", "default_allow_trusted_mutation", "high_tier_mutation", "registered_approval"},
		},
		{
			name:     "mcp approved tool on active server is allowed",
			in:       call(mcpCall("active", "approved")),
			decision: DecisionAllow, reason: "read_only",
			matched: []string{"default_allow_read"},
		},
		{
			name:     "mcp unknown server is denied",
			in:       call(mcpCall("", "")),
			decision: DecisionDeny, reason: "mcp_unknown_server",
			matched: []string{"default_allow_read", "mcp_unknown_tool"},
		},
		{
			name:     "mcp tool without mcp object is denied",
			in:       call(func(in *Input) { in.ToolCall.Tool = "mcp:files" }),
			decision: DecisionDeny, reason: "mcp_unknown_server",
			matched: []string{"default_allow_read", "mcp_unknown_tool"},
		},
		{
			name:     "mcp unknown tool is denied",
			in:       call(mcpCall("active", "")),
			decision: DecisionDeny, reason: "mcp_unknown_tool",
			matched: []string{"default_allow_read", "mcp_unknown_tool"},
		},
		{
			name:     "mcp pending tool is denied",
			in:       call(mcpCall("active", "pending")),
			decision: DecisionDeny, reason: "mcp_tool_not_approved",
			matched: []string{"default_allow_read", "mcp_unknown_tool"},
		},
		{
			name:     "mcp disabled tool is denied",
			in:       call(mcpCall("active", "disabled")),
			decision: DecisionDeny, reason: "mcp_tool_not_approved",
			matched: []string{"default_allow_read", "mcp_unknown_tool"},
		},
		{
			name:     "every tool of a quarantined server is denied",
			in:       call(mcpCall("quarantined", "approved")),
			decision: DecisionDeny, reason: "mcp_server_quarantined",
			matched: []string{"default_allow_read", "mcp_unknown_tool"},
		},
		{
			name:     "mcp server in an unexpected status is denied",
			in:       call(mcpCall("retired", "approved")),
			decision: DecisionDeny, reason: "mcp_server_not_active",
			matched: []string{"default_allow_read", "mcp_unknown_tool"},
		},
		{
			name:     "mcp object on a non-mcp tool is ignored",
			in:       call(func(in *Input) { mcpCall("", "")(in); in.ToolCall.Tool = "github" }),
			decision: DecisionAllow, reason: "read_only",
			matched: []string{"default_allow_read"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := evaluate(t, e, "tenant-a", tc.in)
			assertResult(t, got, Result{Decision: tc.decision, Reason: tc.reason, MatchedPolicies: tc.matched,
				Quarantine: tc.decision == DecisionQuarantine})
		})
	}
}

const pciModule = `package svc.policies.pci

results contains {"decision": "redact", "reason": "card", "redact_fields": ["parameters.card_number"]} if {
	input.tool_call.action == "charge"
}
`

func chargeCall(in *Input) {
	mutating(TrustTrustedInternalUnsigned)(in)
	in.ToolCall.Tool = "stripe"
	in.ToolCall.Action = "charge"
	in.ToolCall.Parameters = map[string]any{"amount": json.Number("4200"), "card_number": "4242424242424242"}
}

func TestTenantRedact(t *testing.T) {
	e := newTestEngine(t, Options{})
	if errs := e.CompileTenant("pci", pciModule); errs != nil {
		t.Fatalf("CompileTenant: %v", errs)
	}
	if err := e.SetTenantPolicies("tenant-a", "v1", []Module{{Name: "pci", Rego: pciModule}}); err != nil {
		t.Fatal(err)
	}
	got := evaluate(t, e, "tenant-a", call(chargeCall))
	assertResult(t, got, Result{Decision: DecisionRedact, Reason: "card",
		MatchedPolicies: []string{"default_allow_trusted_mutation", "pci"},
		RedactedFields:  []string{"parameters.card_number"}})

	// The policy does not fire for another action.
	got = evaluate(t, e, "tenant-a", call(mutating(TrustTrustedInternalUnsigned)))
	assertResult(t, got, Result{Decision: DecisionAllow, Reason: "trusted_mutation",
		MatchedPolicies: []string{"default_allow_trusted_mutation"}})
}

func TestTenantIsolationAndVersions(t *testing.T) {
	e := newTestEngine(t, Options{})
	denyCharge := `package svc.policies.no_charge

results contains {"decision": "deny", "reason": "charges_disabled"} if input.tool_call.action == "charge"
`
	if err := e.SetTenantPolicies("tenant-a", "v1", []Module{{Name: "no_charge", Rego: denyCharge}}); err != nil {
		t.Fatal(err)
	}
	if !e.HasTenant("tenant-a", "v1") || e.HasTenant("tenant-a", "v2") || e.HasTenant("tenant-b", "v1") {
		t.Fatal("HasTenant wrong after first set")
	}

	a := evaluate(t, e, "tenant-a", call(chargeCall))
	if a.Decision != DecisionDeny || a.Reason != "charges_disabled" {
		t.Fatalf("tenant-a: %+v", a)
	}
	b := evaluate(t, e, "tenant-b", call(chargeCall))
	if b.Decision != DecisionAllow || slices.Contains(b.MatchedPolicies, "no_charge") {
		t.Fatalf("tenant-a's module affected tenant-b: %+v", b)
	}

	// Tenant B installs its own module under the same name; A is unchanged.
	if err := e.SetTenantPolicies("tenant-b", "v7", []Module{{Name: "pci", Rego: pciModule}}); err != nil {
		t.Fatal(err)
	}
	if got := evaluate(t, e, "tenant-b", call(chargeCall)); got.Decision != DecisionRedact {
		t.Fatalf("tenant-b: %+v", got)
	}
	if got := evaluate(t, e, "tenant-a", call(chargeCall)); got.Decision != DecisionDeny || slices.Contains(got.MatchedPolicies, "pci") {
		t.Fatalf("tenant-b's module affected tenant-a: %+v", got)
	}

	// Version 2 replaces version 1.
	if err := e.SetTenantPolicies("tenant-a", "v2", []Module{{Name: "pci", Rego: pciModule}}); err != nil {
		t.Fatal(err)
	}
	if e.HasTenant("tenant-a", "v1") || !e.HasTenant("tenant-a", "v2") {
		t.Fatal("HasTenant wrong after replace")
	}
	if got := evaluate(t, e, "tenant-a", call(chargeCall)); got.Decision != DecisionRedact || slices.Contains(got.MatchedPolicies, "no_charge") {
		t.Fatalf("v2 did not replace v1: %+v", got)
	}

	// Version 3 has no enabled module: base only.
	prepares := e.prepares.Load()
	if err := e.SetTenantPolicies("tenant-a", "v3", nil); err != nil {
		t.Fatal(err)
	}
	if e.prepares.Load() != prepares {
		t.Error("an empty module set was prepared instead of reusing the base query")
	}
	if got := evaluate(t, e, "tenant-a", call(chargeCall)); got.Decision != DecisionAllow || !e.HasTenant("tenant-a", "v3") {
		t.Fatalf("v3: %+v", got)
	}
}

func TestSetTenantPoliciesRejectsAndKeepsPrevious(t *testing.T) {
	e := newTestEngine(t, Options{})
	if err := e.SetTenantPolicies("t", "v1", []Module{{Name: "pci", Rego: pciModule}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		mods []Module
	}{
		{"syntax error", []Module{{Name: "broken", Rego: "package svc.policies.broken\n\nresults contains {\n"}}},
		{"wrong package", []Module{{Name: "pci2", Rego: strings.Replace(pciModule, "svc.policies.pci", "svc.policies.other", 1)}}},
		{"duplicate name", []Module{{Name: "pci", Rego: pciModule}, {Name: "pci", Rego: pciModule}}},
		{"base name", []Module{{Name: "base", Rego: "package svc.policies.base\n\nresults contains {\"decision\": \"allow\", \"reason\": \"x\"}\n"}}},
		{"invalid name", []Module{{Name: "Bad-Name", Rego: "package svc.policies.bad\n"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := e.SetTenantPolicies("t", "v2", tc.mods)
			var me *ModuleError
			if !errors.Is(err, ErrInvalidModule) || !errors.As(err, &me) || len(me.Errors) == 0 {
				t.Fatalf("err = %v, want a *ModuleError", err)
			}
			if !strings.HasPrefix(err.Error(), "policy: ") {
				t.Errorf("error not prefixed: %v", err)
			}
			if !e.HasTenant("t", "v1") || e.HasTenant("t", "v2") {
				t.Fatal("the previous version was not kept")
			}
			if got := evaluate(t, e, "t", call(chargeCall)); got.Decision != DecisionRedact {
				t.Fatalf("previous query lost: %+v", got)
			}
		})
	}
}

func TestCompileTenant(t *testing.T) {
	e := newTestEngine(t, Options{})
	tests := []struct {
		name     string
		module   string
		rego     string
		wantLine int // 0: any line
		wantMsg  string
	}{
		{
			name:     "syntax error on line 3",
			module:   "broken",
			rego:     "package svc.policies.broken\n\nresults contains {\"decision\": \"deny\" if {\n\ttrue\n}\n",
			wantLine: 3,
			wantMsg:  "rego_parse_error",
		},
		{
			name:     "wrong package",
			module:   "pci",
			rego:     strings.Replace(pciModule, "svc.policies.pci", "svc.policies.other", 1),
			wantLine: 1,
			wantMsg:  "package must be svc.policies.pci",
		},
		{
			name:     "package outside svc.policies",
			module:   "pci",
			rego:     strings.Replace(pciModule, "svc.policies.pci", "acme.pci", 1),
			wantLine: 1,
			wantMsg:  "package must be svc.policies.pci",
		},
		{
			name:     "nested package",
			module:   "pci",
			rego:     strings.Replace(pciModule, "svc.policies.pci", "svc.policies.pci.inner", 1),
			wantLine: 1,
			wantMsg:  "package must be svc.policies.pci",
		},
		{
			name:     "undefined function",
			module:   "undef",
			rego:     "package svc.policies.undef\n\nresults contains {\"decision\": \"deny\", \"reason\": \"x\"} if {\n\tno_such_function(input.tool_call.action)\n}\n",
			wantLine: 4,
			wantMsg:  "undefined function no_such_function",
		},
		{
			name:     "network builtin is not available",
			module:   "net",
			rego:     "package svc.policies.net\n\nresults contains {\"decision\": \"allow\", \"reason\": \"x\"} if {\n\thttp.send({\"method\": \"get\", \"url\": \"http://example.com\"})\n}\n",
			wantLine: 4,
			wantMsg:  "undefined function http.send",
		},
		{
			name:     "environment builtin is not available",
			module:   "env",
			rego:     "package svc.policies.env\n\nresults contains {\"decision\": \"allow\", \"reason\": x} if {\n\tx := opa.runtime().env.HOME\n}\n",
			wantLine: 4,
			wantMsg:  "undefined function opa.runtime",
		},
		{
			name:    "name taken by the base set",
			module:  "base",
			rego:    "package svc.policies.base\n",
			wantMsg: "taken by the base policy set",
		},
		{
			name:    "invalid name",
			module:  "PCI",
			rego:    "package svc.policies.PCI\n",
			wantMsg: "does not match",
		},
		{
			name:    "empty module",
			module:  "empty",
			rego:    "",
			wantMsg: "rego_parse_error",
		},
		{
			name:     "results as a complete rule",
			module:   "complete",
			rego:     "package svc.policies.complete\n\nresults := {{\"decision\": \"allow\", \"reason\": \"x\"}} if input.mutates_state\n",
			wantLine: 3,
			wantMsg:  "results must be a set",
		},
		{
			name:     "results as an object",
			module:   "object",
			rego:     "package svc.policies.object\n\nresults[\"a\"] := {\"decision\": \"allow\", \"reason\": \"x\"}\n",
			wantLine: 3,
			wantMsg:  "results must be a set",
		},
		{
			name:     "no results",
			module:   "typo",
			rego:     "package svc.policies.typo\n\nresult contains {\"decision\": \"deny\", \"reason\": \"x\"}\n",
			wantLine: 1,
			wantMsg:  "defines no results",
		},
		{
			name:     "v0 syntax is rejected",
			module:   "old",
			rego:     "package svc.policies.old\n\nresults[r] {\n\tr := {\"decision\": \"allow\", \"reason\": \"x\"}\n}\n",
			wantLine: 3,
			wantMsg:  "rego_parse_error",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errs := e.CompileTenant(tc.module, tc.rego)
			if len(errs) == 0 {
				t.Fatal("no error")
			}
			found := false
			for _, ce := range errs {
				if strings.Contains(ce.Message, tc.wantMsg) && (tc.wantLine == 0 || ce.Line == tc.wantLine) {
					found = true
					if tc.wantLine != 0 && ce.Col < 1 {
						t.Errorf("no column in %+v", ce)
					}
				}
			}
			if !found {
				t.Errorf("errors = %+v, want line %d with %q", errs, tc.wantLine, tc.wantMsg)
			}
		})
	}

	t.Run("valid module", func(t *testing.T) {
		if errs := e.CompileTenant("pci", pciModule); errs != nil {
			t.Fatalf("errors = %+v", errs)
		}
	})
	t.Run("valid module may use base helpers", func(t *testing.T) {
		src := "package svc.policies.mcp_extra\n\nresults contains {\"decision\": \"deny\", \"reason\": \"x\"} if data.svc.policies.base.mutating\n"
		if errs := e.CompileTenant("mcp_extra", src); errs != nil {
			t.Fatalf("errors = %+v", errs)
		}
	})
	t.Run("prepares nothing", func(t *testing.T) {
		before := e.prepares.Load()
		_ = e.CompileTenant("pci", pciModule)
		if e.prepares.Load() != before {
			t.Error("CompileTenant prepared a query")
		}
	})
}

func TestEvaluateNeverPrepares(t *testing.T) {
	e := newTestEngine(t, Options{})
	if got := e.prepares.Load(); got != 1 {
		t.Fatalf("NewEngine prepared %d queries, want 1", got)
	}
	if err := e.SetTenantPolicies("tenant-a", "v1", []Module{{Name: "pci", Rego: pciModule}}); err != nil {
		t.Fatal(err)
	}
	if got := e.prepares.Load(); got != 2 {
		t.Fatalf("after SetTenantPolicies: %d prepares, want 2", got)
	}
	for range 50 {
		evaluate(t, e, "tenant-a", call(chargeCall))
		// An unknown tenant uses the base query: no prepare either.
		if got := evaluate(t, e, "never-set", call(chargeCall)); got.Decision != DecisionAllow {
			t.Fatalf("unknown tenant: %+v", got)
		}
	}
	if got := e.prepares.Load(); got != 2 {
		t.Fatalf("Evaluate prepared: %d prepares, want 2", got)
	}
	if e.HasTenant("never-set", "") {
		t.Error("Evaluate installed a tenant")
	}
	if err := e.ReloadBase(); err != nil {
		t.Fatal(err)
	}
	if got := e.prepares.Load(); got != 4 { // base + tenant-a
		t.Fatalf("after ReloadBase: %d prepares, want 4", got)
	}
}

func TestReloadBase(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("allow_all.rego", "package svc.policies.allow_all\n\nresults contains {\"decision\": \"allow\", \"reason\": \"everything\"}\n")
	write("allow_all_test.rego", "package svc.policies.allow_all_test\n\nthis is not rego\n") // skipped
	write("README.md", "not a module")                                                        // skipped

	e := newTestEngine(t, Options{PolicyPath: dir})
	if err := e.SetTenantPolicies("tenant-a", "v1", []Module{{Name: "pci", Rego: pciModule}}); err != nil {
		t.Fatal(err)
	}
	got := evaluate(t, e, "x", call(mutating(TrustUnknown)))
	assertResult(t, got, Result{Decision: DecisionAllow, Reason: "everything", MatchedPolicies: []string{"allow_all"}})

	// Change the directory: a deny-everything set, and a helper library.
	if err := os.Remove(filepath.Join(dir, "allow_all.rego")); err != nil {
		t.Fatal(err)
	}
	write("lib.rego", "package svc.lib\n\nreason := \"closed\"\n")
	write("deny_all.rego", "package svc.policies.deny_all\n\nresults contains {\"decision\": \"deny\", \"reason\": data.svc.lib.reason}\n")
	if err := e.ReloadBase(); err != nil {
		t.Fatal(err)
	}
	got = evaluate(t, e, "x", call(nil))
	assertResult(t, got, Result{Decision: DecisionDeny, Reason: "closed", MatchedPolicies: []string{"deny_all"}})
	// The tenant was prepared again against the new base set.
	if !e.HasTenant("tenant-a", "v1") {
		t.Fatal("tenant lost its version")
	}
	got = evaluate(t, e, "tenant-a", call(chargeCall))
	assertResult(t, got, Result{Decision: DecisionDeny, Reason: "closed", MatchedPolicies: []string{"deny_all", "pci"}})

	// A broken base set is refused and the current one stays.
	write("broken.rego", "package svc.policies.broken\n\nresults contains {\n")
	err := e.ReloadBase()
	if !errors.Is(err, ErrInvalidModule) {
		t.Fatalf("ReloadBase with a broken file: %v", err)
	}
	if got := evaluate(t, e, "x", call(nil)); got.Reason != "closed" {
		t.Fatalf("broken reload changed behaviour: %+v", got)
	}
	if err := os.Remove(filepath.Join(dir, "broken.rego")); err != nil {
		t.Fatal(err)
	}

	// A base set that breaks a tenant's module is refused as a whole.
	write("pci.rego", "package svc.policies.pci\n\nresults contains {\"decision\": \"allow\", \"reason\": \"base pci\"}\n")
	err = e.ReloadBase()
	if err == nil || !strings.Contains(err.Error(), "tenant-a") {
		t.Fatalf("ReloadBase that breaks tenant-a: %v", err)
	}
	if got := evaluate(t, e, "x", call(nil)); got.Reason != "closed" || slices.Contains(got.MatchedPolicies, "pci") {
		t.Fatalf("refused reload changed behaviour: %+v", got)
	}

	// A single file replaces the set; here deny_all.rego alone refers to the
	// missing helper library, its rule never fires, and calls fail closed.
	e2 := newTestEngine(t, Options{PolicyPath: filepath.Join(dir, "deny_all.rego")})
	if got := evaluate(t, e2, "x", call(nil)); got.Reason != ReasonNoMatchingPolicy {
		t.Fatalf("single file: %+v", got)
	}
	// An unreadable path is ErrLoad.
	e2.opts.PolicyPath = filepath.Join(dir, "missing")
	if err := e2.ReloadBase(); !errors.Is(err, ErrLoad) {
		t.Fatalf("missing path: %v", err)
	}
	if _, err := NewEngine(Options{PolicyPath: t.TempDir()}); !errors.Is(err, ErrLoad) {
		t.Fatalf("empty dir: %v", err)
	}
}

func TestBaseModulePackages(t *testing.T) {
	tests := []struct {
		name, src string
	}{
		{"package svc.policies", "package svc.policies\n\nresults contains {\"decision\": \"allow\", \"reason\": \"x\"}\n"},
		{"nested package", "package svc.policies.a.b\n\nresults contains {\"decision\": \"allow\", \"reason\": \"x\"}\n"},
		{"invalid name", "package svc.policies.Upper\n\nresults contains {\"decision\": \"allow\", \"reason\": \"x\"}\n"},
		{"undefined function", "package svc.policies.p\n\nresults contains {\"decision\": \"allow\", \"reason\": x} if x := nope(1)\n"},
		{"network builtin", "package svc.policies.p\n\nresults contains {\"decision\": \"allow\", \"reason\": \"x\"} if http.send({\"method\": \"get\", \"url\": \"http://x\"})\n"},
		{"results not a set", "package svc.policies.p\n\nresults := {{\"decision\": \"allow\", \"reason\": \"x\"}}\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "p.rego")
			if err := os.WriteFile(f, []byte(tc.src), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := NewEngine(Options{PolicyPath: f}); !errors.Is(err, ErrInvalidModule) {
				t.Fatalf("err = %v, want ErrInvalidModule", err)
			}
		})
	}
}

func TestMalformedResultsFailClosed(t *testing.T) {
	e := newTestEngine(t, Options{})
	tests := []struct {
		name, src, reason string
	}{
		{"unknown decision", `results contains {"decision": "permit", "reason": "typo"}`, "typo"},
		{"decision not a string", `results contains {"decision": 1, "reason": "num"}`, "num"},
		{"not an object", `results contains "allow"`, ReasonInvalidResult},
		{"redact_fields not an array", `results contains {"decision": "redact", "reason": "r", "redact_fields": "parameters.a"}`, "r"},
		{"redact_fields not strings", `results contains {"decision": "redact", "reason": "r", "redact_fields": [1]}`, "r"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := "package svc.policies.odd\n\n" + tc.src + "\n"
			if err := e.SetTenantPolicies("t", tc.name, []Module{{Name: "odd", Rego: src}}); err != nil {
				t.Fatal(err)
			}
			got := evaluate(t, e, "t", call(nil))
			assertResult(t, got, Result{Decision: DecisionDeny, Reason: tc.reason, MatchedPolicies: []string{"default_allow_read", "odd"}})
		})
	}
}

func TestPolicyIDOverride(t *testing.T) {
	e := newTestEngine(t, Options{})
	src := `package svc.policies.pack

results contains {"decision": "require_approval", "reason": "big", "policy": "large_amount"} if input.tool_call.parameters.amount > 1000
`
	if err := e.SetTenantPolicies("t", "v1", []Module{{Name: "pack", Rego: src}}); err != nil {
		t.Fatal(err)
	}
	got := evaluate(t, e, "t", call(chargeCall))
	assertResult(t, got, Result{Decision: DecisionRequireApproval, Reason: "big",
		MatchedPolicies: []string{"default_allow_trusted_mutation", "large_amount"}})
}

func TestEvaluateErrorsFailClosed(t *testing.T) {
	e := newTestEngine(t, Options{})
	t.Run("builtin error is strict", func(t *testing.T) {
		src := `package svc.policies.amount

results contains {"decision": "deny", "reason": "too_big"} if to_number(input.tool_call.parameters.amount) > 100
`
		if err := e.SetTenantPolicies("t", "v1", []Module{{Name: "amount", Rego: src}}); err != nil {
			t.Fatal(err)
		}
		in := call(func(in *Input) { in.ToolCall.Parameters = map[string]any{"amount": "lots"} })
		if _, err := e.Evaluate(context.Background(), "t", in); !errors.Is(err, ErrEval) {
			t.Fatalf("err = %v, want ErrEval", err)
		}
		in.ToolCall.Parameters["amount"] = "500"
		if got := evaluate(t, e, "t", in); got.Reason != "too_big" {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := e.Evaluate(ctx, "t", call(nil)); !errors.Is(err, ErrEval) || !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("context cancelled during a long evaluation", func(t *testing.T) {
		src := `package svc.policies.slow

results contains {"decision": "allow", "reason": "slow"} if {
	count([x | some x in numbers.range(1, 100000000); x % 7 == 3]) > 0
}
`
		if err := e.SetTenantPolicies("slow", "v1", []Module{{Name: "slow", Rego: src}}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50_000_000) // 50 ms
		defer cancel()
		if _, err := e.Evaluate(ctx, "slow", call(nil)); !errors.Is(err, ErrEval) {
			t.Fatalf("err = %v, want ErrEval", err)
		}
	})
}

func TestInputExample(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "policy", "input_example.json"))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	var in Input
	if err := dec.Decode(&in); err != nil {
		t.Fatalf("the example does not match Input: %v", err)
	}
	// Every field of Input appears in the example.
	var generic map[string]any
	if err := json.Unmarshal(b, &generic); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"tenant_id", "agent", "tool_call", "mutates_state", "trust_level", "root_trust_level", "environment", "skill", "mcp"} {
		if _, ok := generic[k]; !ok {
			t.Errorf("example lacks %q", k)
		}
	}
	// The Go value the engine builds equals the JSON document.
	e := newTestEngine(t, Options{})
	v, err := e.keys.value(&in, nil)
	if err != nil {
		t.Fatal(err)
	}
	var fromJSON, fromValue any
	if err := json.Unmarshal(b, &fromJSON); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(v.String()), &fromValue); err != nil {
		t.Fatalf("%v: %s", err, v)
	}
	jb, _ := json.Marshal(fromJSON)
	vb, _ := json.Marshal(fromValue)
	if !bytes.Equal(jb, vb) {
		t.Errorf("input value differs from the example:\n%s\n%s", jb, vb)
	}
	if err := e.SetTenantPolicies(in.TenantID, "v1", []Module{{Name: "pci", Rego: pciModule}}); err != nil {
		t.Fatal(err)
	}
	got := evaluate(t, e, in.TenantID, in)
	assertResult(t, got, Result{Decision: DecisionRedact, Reason: "card",
		MatchedPolicies: []string{"default_allow_trusted_mutation", "pci"},
		RedactedFields:  []string{"parameters.card_number"}})
}

func TestConcurrentEvaluate(t *testing.T) {
	e := newTestEngine(t, Options{})
	if err := e.SetTenantPolicies("tenant-a", "v1", []Module{{Name: "pci", Rego: pciModule}}); err != nil {
		t.Fatal(err)
	}
	goroutines, per := 8, 100
	if testing.Short() {
		per = 20
	}
	var wg sync.WaitGroup
	errs := make(chan string, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			tenant := "tenant-a"
			want := DecisionRedact
			if g%2 == 1 {
				tenant, want = "tenant-b", DecisionAllow
			}
			for range per {
				r, err := e.Evaluate(context.Background(), tenant, call(chargeCall))
				if err != nil || r.Decision != want {
					errs <- tenant + ": " + r.Decision
					return
				}
			}
		})
	}
	// Writers run concurrently with the readers.
	wg.Go(func() {
		for i := range 5 {
			mods := []Module{{Name: "pci", Rego: pciModule}}
			if err := e.SetTenantPolicies("tenant-a", "v"+string(rune('2'+i)), mods); err != nil {
				errs <- err.Error()
				return
			}
			if err := e.ReloadBase(); err != nil {
				errs <- err.Error()
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for msg := range errs {
		t.Error(msg)
	}
}
