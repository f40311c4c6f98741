package actors

// Unit tests of the agent actor's rule order (SPEC 4.2 rules 3 to 9, 11
// and 13, CONTRACT §4): agentActor.decide over a fake fact source. The
// fake holds what the store, the shared state and the registries would say,
// and records what the actor read, in order; the policy is the real
// in-process engine with the base set (and, where a case says so, tenant
// modules), so each case asserts the outcome the HTTP tests assert, one
// layer down: the decision, reason, matched policies and redacted fields,
// the trust, and the record the actor drafts.

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"svc/canonical"
	"svc/messages"
	"svc/persistence"
	"svc/persistence/sharedstate"
	"svc/rules/authz"
	"svc/rules/policy"
	"svc/runstate"
)

// fakeFacts is an agentFacts over fields. calls records each read, in order
// ("skill <key>" and "mcp <server>/<tool>" name what was asked).
type fakeFacts struct {
	engine *policy.Engine
	calls  []string
	beats  []messages.Heartbeat

	lim    authz.Limits
	limErr error
	binds  []string
	// bindErr, nonceErr, policiesErr, evalErr and approvalErr fail the
	// read they are named after.
	bindErr, nonceErr, policiesErr, evalErr, approvalErr error
	nonces                                               map[string]bool // tenant/agent/nonce taken
	skills                                               map[string]persistence.Skill
	mcp                                                  map[string]policy.MCPInput // by server key; none: unknown
	modules                                              []policy.Module            // the tenant's enabled modules
	inputs                                               []policy.Input             // what the policy was asked
	ttl                                                  time.Duration              // 0: approvals off
	now                                                  time.Time
	approvals                                            map[string]persistence.Approval
	reserved                                             map[string]bool
	risk                                                 persistence.RiskSettings
	denials                                              int
}

var _ agentFacts = (*fakeFacts)(nil)

// agentEngine is one engine with the base set for every case; each case
// has a tenant of its own, so tenant modules do not leak between cases.
var agentEngine = sync.OnceValues(func() (*policy.Engine, error) { return policy.NewEngine(policy.Options{}) })

func newFakeFacts(t *testing.T) *fakeFacts {
	t.Helper()
	e, err := agentEngine()
	if err != nil {
		t.Fatal(err)
	}
	return &fakeFacts{engine: e, lim: authz.Limits{Token: true}, nonces: map[string]bool{}, skills: map[string]persistence.Skill{},
		mcp: map[string]policy.MCPInput{}, ttl: 30 * time.Minute, now: time.Now().UTC(), approvals: map[string]persistence.Approval{},
		reserved: map[string]bool{}, risk: persistence.RiskSettings{DenialThreshold: 5, WindowMinutes: 60}}
}

func (f *fakeFacts) touch(h messages.Heartbeat) {
	f.calls = append(f.calls, "touch")
	f.beats = append(f.beats, h)
}

func (f *fakeFacts) limits(context.Context, string, string) (authz.Limits, error) {
	f.calls = append(f.calls, "limits")
	return f.lim, f.limErr
}

func (f *fakeFacts) bindings(context.Context, string, string) ([]string, error) {
	f.calls = append(f.calls, "bindings")
	return f.binds, f.bindErr
}

func (f *fakeFacts) claimNonce(_ context.Context, tenantID, agentID, nonce string) (bool, error) {
	f.calls = append(f.calls, "nonce")
	if f.nonceErr != nil {
		return false, f.nonceErr
	}
	k := tenantID + "/" + agentID + "/" + nonce
	if f.nonces[k] {
		return false, nil
	}
	f.nonces[k] = true
	return true, nil
}

func (f *fakeFacts) skill(_ context.Context, _, key string) skillEntry {
	f.calls = append(f.calls, "skill "+key)
	sk, ok := f.skills[key]
	return skillEntry{skill: sk, found: ok}
}

func (f *fakeFacts) mcpInput(_ context.Context, _, serverKey, toolKey string) *policy.MCPInput {
	f.calls = append(f.calls, "mcp "+serverKey+"/"+toolKey)
	if in, ok := f.mcp[serverKey]; ok {
		return &in
	}
	return &policy.MCPInput{ServerKey: serverKey} // unknown, as mcpFacts.input answers
}

func (f *fakeFacts) ensurePolicies(_ context.Context, tenantID string) error {
	f.calls = append(f.calls, "policies")
	if f.policiesErr != nil {
		return f.policiesErr
	}
	if f.modules != nil {
		return f.engine.SetTenantPolicies(tenantID, "1", f.modules)
	}
	return nil
}

func (f *fakeFacts) shadowOutcomes(context.Context, string, policy.Input) []policy.ShadowOutcome {
	return nil
}

func (f *fakeFacts) recordShadow([]policy.ShadowOutcome) []persistence.ShadowOutcome { return nil }

func (f *fakeFacts) evaluatePolicy(ctx context.Context, tenantID string, in policy.Input) (policy.Result, error) {
	f.calls = append(f.calls, "evaluate")
	f.inputs = append(f.inputs, in)
	if f.evalErr != nil {
		return policy.Result{}, f.evalErr
	}
	return f.engine.Evaluate(ctx, tenantID, in)
}

func (f *fakeFacts) approvalTTL() (time.Duration, bool) { return f.ttl, f.ttl > 0 }

func (f *fakeFacts) checkApproval(_ context.Context, _, id, agentID, hash string) (string, error) {
	f.calls = append(f.calls, "check")
	if f.approvalErr != nil {
		return "", f.approvalErr
	}
	return classifyApproval(f.approvals[id], agentID, hash, f.now, false), nil
}

func (f *fakeFacts) reserveApproval(_ context.Context, _, id, agentID, hash string) (string, error) {
	f.calls = append(f.calls, "reserve")
	if f.approvalErr != nil {
		return "", f.approvalErr
	}
	reason := classifyApproval(f.approvals[id], agentID, hash, f.now, f.reserved[id])
	if reason == "" {
		f.reserved[id] = true
	}
	return reason, nil
}

func (f *fakeFacts) riskSettings(context.Context, string) persistence.RiskSettings {
	f.calls = append(f.calls, "risk")
	return f.risk
}

func (f *fakeFacts) recentDenials(context.Context, string, string) int {
	f.calls = append(f.calls, "denials")
	return f.denials
}

func (f *fakeFacts) logger() hclog.Logger { return hclog.NewNullLogger() }

// The run context is tested end to end (e2e/runs_test.go) and in
// runstate and sharedstate: these rule-order tests run without it.
func (f *fakeFacts) runFields(string) runstate.Fields { return runstate.Fields{} }

func (f *fakeFacts) runContext(context.Context, *messages.Authorize, *runstate.Attempt, runstate.Fields) (*runTicket, error) {
	return nil, errors.New("no run context in the rule-order tests")
}

// agentCase is one call to agentActor.decide. call changes the default
// request (a read-only call of github/list_issues at
// trusted_internal_signed by an active low-tier agent); facts sets what the
// fact source holds, after call; check asserts more than want does.
type agentCase struct {
	name  string
	call  func(m *messages.Authorize)
	facts func(f *fakeFacts, m *messages.Authorize)
	want  agentWant
	check func(t *testing.T, m *messages.Authorize, d *draft, f *fakeFacts)
}

// agentWant is what every case asserts: the facts read, in order, and
// either a refusal without a decision or the decision.
type agentWant struct {
	calls []string
	// refused is the refusal's code (details.error); "" for a decision.
	refused string
	refusal messages.Refusal
	retry   int
	// The decision, reason, matched policies and redacted fields (nil:
	// none), and the root_trust_level answered ("": trusted_internal_signed).
	decision, reason  string
	matched, redacted []string
	rootTrust         string
	// dryRun: answered as simulated, nothing drafted to record.
	dryRun bool
}

// Reads of the rules, for the wanted call lists.
func decided(tool string, extra ...string) []string {
	return append(append([]string{"touch", "limits", "bindings", "skill " + tool, "policies", "evaluate"}, extra...), "risk", "denials")
}

var (
	beforeDecision = []string{"touch", "limits"}
	scored         = []string{"risk", "denials"}
)

func agentCall(tenantID string) *messages.Authorize {
	return &messages.Authorize{TenantID: tenantID, AgentID: "agent-" + tenantID[:8], AgentName: "decider", AgentStatus: "active",
		RiskTier: "low", ReceivedAt: time.Now().UTC(), Request: messages.AuthorizeRequest{
			ToolCall:    messages.ToolCall{Tool: "github", Action: "list_issues", Parameters: map[string]any{}},
			SourceTrust: policy.TrustTrustedInternalSigned}}
}

// mutation makes the call github/create_issue, mutating, at trust.
func mutation(trust string) func(*messages.Authorize) {
	return func(m *messages.Authorize) {
		m.Request.ToolCall.Action, m.Request.MutatesState, m.Request.SourceTrust = "create_issue", true, trust
	}
}

func both(fs ...func(*messages.Authorize)) func(*messages.Authorize) {
	return func(m *messages.Authorize) {
		for _, f := range fs {
			f(m)
		}
	}
}

func strPtr(s string) *string { return &s }

func runAgentCases(t *testing.T, cases []agentCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := agentCall(uuid.NewString())
			if tc.call != nil {
				tc.call(m)
			}
			f := newFakeFacts(t)
			if tc.facts != nil {
				tc.facts(f, m)
			}
			d := (&agentActor{facts: f}).decide(context.Background(), m)
			checkDraft(t, m, d, f, tc.want)
			if tc.check != nil && !t.Failed() {
				tc.check(t, m, d, f)
			}
		})
	}
}

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// checkDraft asserts what every case wants, and what every decision drafts.
func checkDraft(t *testing.T, m *messages.Authorize, d *draft, f *fakeFacts, w agentWant) {
	t.Helper()
	if !slices.Equal(f.calls, w.calls) {
		t.Errorf("facts read %q, want %q", f.calls, w.calls)
	}
	// Rule 3: the last-seen time is touched first, whatever follows.
	if len(f.beats) != 1 || f.beats[0] != (messages.Heartbeat{TenantID: m.TenantID, AgentID: m.AgentID, At: m.ReceivedAt}) {
		t.Errorf("heartbeats %+v, want one of the call", f.beats)
	}
	if w.refused != "" {
		if d.outcome == nil || d.outcome.Failure == nil || d.write != nil || d.response != nil {
			t.Fatalf("draft %+v, want the refusal %s without a decision", d, w.refused)
		}
		if fl := d.outcome.Failure; fl.Code != w.refused || fl.Refusal != w.refusal || fl.RetryAfter != w.retry {
			t.Fatalf("refusal %+v, want %s (%d) retry %d", fl, w.refused, w.refusal, w.retry)
		}
		return
	}
	var resp *messages.AuthorizeResponse
	if w.dryRun {
		if d.write != nil || d.outcome == nil || d.outcome.Response == nil || d.outcome.Failure != nil || len(d.events) != 0 {
			t.Fatalf("dry run drafted %+v, want an answer and nothing to record", d)
		}
		resp = d.outcome.Response
		if !resp.DryRun || resp.DecisionID != "" || resp.ReceiptID != "" || resp.ApprovalID != "" {
			t.Errorf("dry-run answer %+v: want dry_run and no decision, receipt or approval", resp)
		}
	} else {
		if d.outcome != nil || d.write == nil || d.response == nil {
			t.Fatalf("draft %+v, want a decision to record", d)
		}
		resp = d.response
	}
	root := w.rootTrust
	if root == "" {
		root = policy.TrustTrustedInternalSigned
	}
	if resp.Decision != w.decision || resp.Reason != w.reason || resp.RootTrustLevel != root {
		t.Errorf("decision %q reason %q root_trust_level %q, want %q %q %q", resp.Decision, resp.Reason, resp.RootTrustLevel, w.decision, w.reason, root)
	}
	if resp.MatchedPolicies == nil || !slices.Equal(resp.MatchedPolicies, nonNil(w.matched)) {
		t.Errorf("matched_policies %q, want %q", resp.MatchedPolicies, nonNil(w.matched))
	}
	if resp.RedactedFields == nil || !slices.Equal(resp.RedactedFields, nonNil(w.redacted)) {
		t.Errorf("redacted_fields %q, want %q", resp.RedactedFields, nonNil(w.redacted))
	}
	if !hex64.MatchString(resp.ActionHash) || resp.CompositeRiskScore < 0 || resp.CompositeRiskScore > 100 || resp.RiskScore < 0 || resp.RiskScore > 100 {
		t.Errorf("action_hash %q composite %d risk %d", resp.ActionHash, resp.CompositeRiskScore, resp.RiskScore)
	}
	if resp.DryRun != w.dryRun || resp.RequestID != m.Request.RequestID {
		t.Errorf("dry_run %v request_id %v", resp.DryRun, resp.RequestID)
	}
	if !w.dryRun {
		checkRecord(t, m, d, f)
	}
}

// checkRecord asserts the decision the draft records (rule 10) is the one
// it answers, with its receipt, its event and, for require_approval, its
// approval.
func checkRecord(t *testing.T, m *messages.Authorize, d *draft, f *fakeFacts) {
	t.Helper()
	resp, rec, rc := d.response, d.write.Decision, d.write.Receipt
	if rc == nil {
		t.Fatal("a decision without a receipt")
	}
	for _, id := range []string{rec.ID, rc.ID} {
		if u, err := uuid.Parse(id); err != nil || u.Version() != 7 {
			t.Errorf("id %q, want a UUID v7 (appended in time order)", id)
		}
	}
	if rec.ID >= rc.ID || resp.DecisionID != rec.ID || resp.ReceiptID != rc.ID || rc.DecisionID != rec.ID {
		t.Errorf("decision %s receipt %s (of %s) answered %s %s", rec.ID, rc.ID, rc.DecisionID, resp.DecisionID, resp.ReceiptID)
	}
	if rec.TenantID != m.TenantID || rec.AgentID != m.AgentID || rec.Decision != resp.Decision || rc.Decision != resp.Decision ||
		d.verdict.Decision != resp.Decision || rec.Reason != resp.Reason || rec.RootTrustLevel != resp.RootTrustLevel ||
		rec.ActionHash != resp.ActionHash || rc.ActionHash != resp.ActionHash || rec.CompositeRiskScore != resp.CompositeRiskScore ||
		rec.RiskScore != resp.RiskScore || !slices.Equal(rec.MatchedPolicyIDs, resp.MatchedPolicies) ||
		!slices.Equal(rec.RedactedFields, resp.RedactedFields) || rec.MutatesState != d.verdict.Mutates {
		t.Errorf("recorded %+v, answered %+v, verdict %+v", rec, resp, d.verdict)
	}
	if len(d.events) == 0 || d.events[0].Kind != messages.KindAuthorizeDecision || d.events[0].EventID != rec.EventID ||
		d.events[0].Decision != rec.Decision {
		t.Errorf("events %+v, want the decision's authorize_decision first", d.events)
	}
	ap := d.write.Approval
	if resp.Decision != "require_approval" || f.ttl == 0 {
		if ap != nil || resp.ApprovalID != "" {
			t.Errorf("an approval %+v created with a %s decision (approvals on: %v)", ap, resp.Decision, f.ttl > 0)
		}
		return
	}
	if ap == nil || ap.Status != persistence.ApprovalPending || ap.DecisionID != rec.ID || ap.AgentID != m.AgentID ||
		ap.ActionHash != rec.ActionHash || !ap.ExpiresAt.Equal(rec.CreatedAt.Add(f.ttl)) || resp.ApprovalID != ap.ID ||
		resp.ApprovalExpiresAt == nil || !resp.ApprovalExpiresAt.Equal(ap.ExpiresAt) {
		t.Errorf("require_approval created approval %+v, answered %q %v", ap, resp.ApprovalID, resp.ApprovalExpiresAt)
	}
}

// SPEC 4.2 rule 9 with the base policies: the outcomes of
// TestE2EAuthorize/decisions, decided by the actor.
func TestAgentActorDecisions(t *testing.T) {
	runAgentCases(t, []agentCase{
		{name: "rule 9: read-only allow at trusted (low risk, rule 10)",
			want: agentWant{calls: decided("github"), decision: "allow", reason: "read_only", matched: []string{"default_allow_read"}},
			check: func(t *testing.T, m *messages.Authorize, d *draft, f *fakeFacts) {
				if !d.verdict.LowRisk || d.verdict.Escalation != nil || len(d.events) != 1 {
					t.Errorf("verdict %+v", d.verdict)
				}
				in := f.inputs[0]
				if in.TenantID != m.TenantID || in.Agent != (policy.AgentInput{ID: m.AgentID, Name: "decider", RiskTier: "low", Status: "active"}) ||
					in.MutatesState || in.Skill != nil || in.MCP != nil {
					t.Errorf("policy input %+v", in)
				}
			}},
		{name: "rule 9: trusted mutation allowed, not low risk", call: mutation(policy.TrustTrustedInternalSigned),
			want: agentWant{calls: decided("github"), decision: "allow", reason: "trusted_mutation", matched: []string{"default_allow_trusted_mutation"}},
			check: func(t *testing.T, _ *messages.Authorize, d *draft, _ *fakeFacts) {
				if d.verdict.LowRisk || !d.write.Decision.MutatesState {
					t.Errorf("verdict %+v, mutates %v", d.verdict, d.write.Decision.MutatesState)
				}
			}},
		{name: "rule 9: untrusted mutation denied, counting towards escalation", call: mutation(policy.TrustUntrustedExternal),
			want: agentWant{calls: decided("github"), decision: "deny", reason: "untrusted_mutation", matched: []string{"untrusted_mutation"},
				rootTrust: policy.TrustUntrustedExternal},
			check: func(t *testing.T, _ *messages.Authorize, d *draft, _ *fakeFacts) {
				if !d.verdict.Deny || d.verdict.Escalation == nil || *d.verdict.Escalation != (authz.Escalation{Window: time.Hour, Threshold: 5}) {
					t.Errorf("verdict %+v", d.verdict)
				}
			}},
		{name: "rule 9: malicious mutation quarantines once recorded",
			call: func(m *messages.Authorize) {
				m.Request.ToolCall.Action, m.Request.MutatesState, m.Request.SourceTrust = "delete_repo", true, policy.TrustMaliciousSuspected
			},
			want: agentWant{calls: decided("github"), decision: "quarantine", reason: "malicious_mutation",
				matched: []string{"malicious_quarantine", "untrusted_mutation"}, rootTrust: policy.TrustMaliciousSuspected},
			check: func(t *testing.T, _ *messages.Authorize, d *draft, _ *fakeFacts) {
				if !d.verdict.Quarantine || !d.verdict.Deny || d.verdict.Escalation == nil {
					t.Errorf("verdict %+v", d.verdict)
				}
			}},
		{name: "rule 9, part 3: high tier mutation requires approval (an approval is created)",
			call: both(mutation(policy.TrustTrustedInternalSigned), func(m *messages.Authorize) { m.RiskTier = "high" }),
			want: agentWant{calls: decided("github"), decision: "require_approval", reason: "high_risk_tier_mutation",
				matched: []string{"default_allow_trusted_mutation", "high_tier_mutation"}},
			check: func(t *testing.T, _ *messages.Authorize, d *draft, f *fakeFacts) {
				if f.inputs[0].Agent.RiskTier != "high" || d.verdict.Deny || d.write.Approval.Callback != nil {
					t.Errorf("policy saw tier %q; verdict %+v", f.inputs[0].Agent.RiskTier, d.verdict)
				}
			}},
		{name: "rule 9, part 3: high tier read still allowed", call: func(m *messages.Authorize) { m.RiskTier = "high" },
			want: agentWant{calls: decided("github"), decision: "allow", reason: "read_only", matched: []string{"default_allow_read"}}},
		{name: "rule 9: require_approval keeps the SDK's webhook with its approval",
			call: both(mutation(policy.TrustTrustedInternalSigned), func(m *messages.Authorize) {
				m.RiskTier = "high"
				m.Request.Webhook = &messages.WebhookRegistration{URL: "https://sdk.example/cb", Secret: "s3cret"}
			}),
			want: agentWant{calls: decided("github"), decision: "require_approval", reason: "high_risk_tier_mutation",
				matched: []string{"default_allow_trusted_mutation", "high_tier_mutation"}},
			check: func(t *testing.T, _ *messages.Authorize, d *draft, _ *fakeFacts) {
				if cb := d.write.Approval.Callback; cb == nil || cb.URL != "https://sdk.example/cb" || cb.Secret != "s3cret" {
					t.Errorf("approval callback %+v", cb)
				}
			}},
		{name: "rule 9: with approvals off, require_approval creates none",
			call:  both(mutation(policy.TrustTrustedInternalSigned), func(m *messages.Authorize) { m.RiskTier = "high" }),
			facts: func(f *fakeFacts, _ *messages.Authorize) { f.ttl = 0 },
			want: agentWant{calls: decided("github"), decision: "require_approval", reason: "high_risk_tier_mutation",
				matched: []string{"default_allow_trusted_mutation", "high_tier_mutation"}}},
		{name: "rules 8, 9: mutation at unknown trust fails closed", call: mutation(policy.TrustUnknown),
			want: agentWant{calls: decided("github"), decision: "deny", reason: "no_matching_policy", rootTrust: policy.TrustUnknown}},
		{name: "rules 8, 9: a missing source_trust is unknown, and fails closed", call: mutation(""),
			want: agentWant{calls: decided("github"), decision: "deny", reason: "no_matching_policy", rootTrust: policy.TrustUnknown},
			check: func(t *testing.T, _ *messages.Authorize, d *draft, f *fakeFacts) {
				if d.write.Decision.TrustLevel != policy.TrustUnknown || f.inputs[0].TrustLevel != policy.TrustUnknown {
					t.Errorf("recorded trust %q, policy saw %q", d.write.Decision.TrustLevel, f.inputs[0].TrustLevel)
				}
			}},
		{name: "rule 9: policies unavailable: deny policy_unavailable, recorded, the policy not asked",
			facts: func(f *fakeFacts, _ *messages.Authorize) { f.policiesErr = errors.New("store down") },
			want: agentWant{calls: []string{"touch", "limits", "bindings", "skill github", "policies", "risk", "denials"},
				decision: "deny", reason: "policy_unavailable"}},
		{name: "rule 9: policy evaluation error: deny policy_error, recorded",
			facts: func(f *fakeFacts, _ *messages.Authorize) { f.evalErr = errors.New("eval") },
			want:  agentWant{calls: decided("github"), decision: "deny", reason: "policy_error"}},
	})
}

// deploySkills registers deploy's prod (critical) and staging (approval
// required) actions, and "danger zone"'s wipe (critical), under the
// normalized keys the registry stores.
func deploySkills(f *fakeFacts, _ *messages.Authorize) {
	f.skills["deploy"] = persistence.Skill{Key: "deploy", Description: "deployments", Actions: map[string]persistence.SkillAction{
		"prod": {Risk: "critical", MutatesState: true}, "staging": {Risk: "medium", MutatesState: true, ApprovalRequired: true}}}
	f.skills["danger zone"] = persistence.Skill{Key: "danger zone", Actions: map[string]persistence.SkillAction{
		"wipe": {Risk: "critical", MutatesState: true}}}
}

func callOf(tool, action string, mutates bool) func(*messages.Authorize) {
	return func(m *messages.Authorize) {
		m.Request.ToolCall.Tool, m.Request.ToolCall.Action, m.Request.MutatesState = tool, action, mutates
	}
}

// Rule 9 with the skill registry and the MCP registry (CONTRACT §6, §8),
// and rule 7's normalization before both: TestE2EAuthorize/decisions'
// skill registry and unknown mcp server.
func TestAgentActorRegistries(t *testing.T) {
	critical := []string{"critical", "default_allow_trusted_mutation"}
	runAgentCases(t, []agentCase{
		{name: "rule 9: a critical registered action is denied", call: callOf("deploy", "prod", true), facts: deploySkills,
			want: agentWant{calls: decided("deploy"), decision: "deny", reason: "critical_risk_action", matched: critical},
			check: func(t *testing.T, _ *messages.Authorize, _ *draft, f *fakeFacts) {
				if sk := f.inputs[0].Skill; sk == nil || !reflect.DeepEqual(*sk, policy.SkillInput{Key: "deploy", Description: "deployments", Action: "prod",
					Risk: "critical", MutatesState: true}) {
					t.Errorf("policy input skill %+v", sk)
				}
			}},
		{name: "rule 9: a registered approval_required action requires approval", call: callOf("deploy", "staging", true), facts: deploySkills,
			want: agentWant{calls: decided("deploy"), decision: "require_approval", reason: "approval_required",
				matched: []string{"default_allow_trusted_mutation", "registered_approval"}}},
		{name: "rule 9: a registered mutation sent as a read is a mutation (policy, record, score, timing)",
			call: callOf("deploy", "prod", false), facts: deploySkills,
			want: agentWant{calls: decided("deploy"), decision: "deny", reason: "critical_risk_action", matched: critical},
			check: func(t *testing.T, _ *messages.Authorize, d *draft, _ *fakeFacts) {
				if !d.write.Decision.MutatesState || !d.verdict.Mutates || d.verdict.LowRisk {
					t.Errorf("recorded mutates %v, verdict %+v", d.write.Decision.MutatesState, d.verdict)
				}
			}},
		{name: "rules 7, 9: a skill applies to every spelling of its tool and action",
			call: callOf("DANGER%20ZONE", " WIPE ", false), facts: deploySkills,
			want: agentWant{calls: decided("danger zone"), decision: "deny", reason: "critical_risk_action", matched: critical}},
		{name: "rules 7, 9: a skill registered in capitals is found by its normalized key",
			call: callOf("Danger Zone", "Wipe", false), facts: deploySkills,
			want: agentWant{calls: decided("danger zone"), decision: "deny", reason: "critical_risk_action", matched: critical}},
		{name: "rule 9: with the skill deleted the call is a plain read", call: callOf("danger zone", "wipe", false),
			want: agentWant{calls: decided("danger zone"), decision: "allow", reason: "read_only", matched: []string{"default_allow_read"}}},
		{name: "rule 9: an action the skill does not register has no skill facts", call: callOf("deploy", "status", false), facts: deploySkills,
			want: agentWant{calls: decided("deploy"), decision: "allow", reason: "read_only", matched: []string{"default_allow_read"}},
			check: func(t *testing.T, _ *messages.Authorize, _ *draft, f *fakeFacts) {
				if f.inputs[0].Skill != nil {
					t.Errorf("policy input skill %+v for an unregistered action", f.inputs[0].Skill)
				}
			}},
		{name: "rule 9 (CONTRACT §8): unknown mcp server denied", call: callOf("mcp:unknown_server", "read_file", false),
			want: agentWant{calls: []string{"touch", "limits", "bindings", "skill mcp:unknown_server", "mcp unknown_server/read_file",
				"policies", "evaluate", "risk", "denials"}, decision: "deny", reason: "mcp_unknown_server",
				matched: []string{"default_allow_read", "mcp_unknown_tool"}}},
		{name: "rule 9 (CONTRACT §8): every tool of a quarantined server denied", call: callOf("mcp:files", "Read_File", false),
			facts: func(f *fakeFacts, _ *messages.Authorize) {
				f.mcp["files"] = policy.MCPInput{ServerKey: "files", ServerStatus: "quarantined", ToolStatus: "approved"}
			},
			want: agentWant{calls: []string{"touch", "limits", "bindings", "skill mcp:files", "mcp files/read_file", "policies", "evaluate",
				"risk", "denials"}, decision: "deny", reason: "mcp_server_quarantined", matched: []string{"default_allow_read", "mcp_unknown_tool"}}},
		{name: "rule 9 (CONTRACT §8): an approved tool of an active server is the policy's to allow", call: callOf("mcp:files", "read_file", false),
			facts: func(f *fakeFacts, _ *messages.Authorize) {
				f.mcp["files"] = policy.MCPInput{ServerKey: "files", ServerStatus: "active", ToolStatus: "approved", TrustLevel: "semi_trusted_customer"}
			},
			want: agentWant{calls: []string{"touch", "limits", "bindings", "skill mcp:files", "mcp files/read_file", "policies", "evaluate",
				"risk", "denials"}, decision: "allow", reason: "read_only", matched: []string{"default_allow_read"}},
			check: func(t *testing.T, _ *messages.Authorize, _ *draft, f *fakeFacts) {
				if in := f.inputs[0].MCP; in == nil || in.ServerStatus != "active" || in.ToolStatus != "approved" {
					t.Errorf("policy input mcp %+v", in)
				}
			}},
		{name: "rule 7: identifiers normalized for the registry, the policy, the record and the hash",
			call: func(m *messages.Authorize) {
				m.Request.ToolCall = messages.ToolCall{Tool: "\tGit%48ub\n", Action: "LIST%5FISSUES ", Parameters: map[string]any{"state": "open"}}
			},
			want: agentWant{calls: decided("github"), decision: "allow", reason: "read_only", matched: []string{"default_allow_read"}},
			check: func(t *testing.T, _ *messages.Authorize, d *draft, f *fakeFacts) {
				want, err := canonical.ActionHash(canonical.ToolCall{Tool: "github", Action: "list_issues", Parameters: map[string]any{"state": "open"}})
				if err != nil {
					t.Fatal(err)
				}
				rec := d.write.Decision
				if rec.Tool != "github" || rec.Action != "list_issues" || rec.ActionHash != want ||
					f.inputs[0].ToolCall.Tool != "github" || f.inputs[0].ToolCall.Action != "list_issues" {
					t.Errorf("recorded %s/%s hash %s (want %s); policy saw %+v", rec.Tool, rec.Action, rec.ActionHash, want, f.inputs[0].ToolCall)
				}
			}},
	})
}

func traced(root string) func(*messages.Authorize) {
	return func(m *messages.Authorize) { m.Request.Trace = &messages.Trace{RootTrustLevel: strPtr(root)} }
}

// Rule 8: trust propagation (TestE2EAuthorize/trust propagation).
func TestAgentActorTrust(t *testing.T) {
	read := []string{"default_allow_read"}
	tighten := func(root, source, want string) agentCase {
		return agentCase{name: fmt.Sprintf("rule 8: tighten-only: root %s, source %s: %s", root, source, want),
			call: both(traced(root), func(m *messages.Authorize) { m.Request.SourceTrust = source }),
			want: agentWant{calls: decided("github"), decision: "allow", reason: "read_only", matched: read, rootTrust: want},
			check: func(t *testing.T, _ *messages.Authorize, d *draft, f *fakeFacts) {
				if d.write.Decision.TrustLevel != source || f.inputs[0].TrustLevel != want || f.inputs[0].RootTrustLevel != want {
					t.Errorf("recorded source %q; policy saw %q/%q", d.write.Decision.TrustLevel, f.inputs[0].TrustLevel, f.inputs[0].RootTrustLevel)
				}
			}}
	}
	runAgentCases(t, []agentCase{
		{name: "rule 8: the root tightens the answer, the policy input and the record, with the run linkage",
			call: func(m *messages.Authorize) {
				m.Request.Trace = &messages.Trace{RootTrustLevel: strPtr(policy.TrustUntrustedExternal), RunID: strPtr("run-1"),
					ParentRunID: strPtr("parent-1"), TraceID: strPtr("trace-1")}
			},
			want: agentWant{calls: decided("github"), decision: "allow", reason: "read_only", matched: read, rootTrust: policy.TrustUntrustedExternal},
			check: func(t *testing.T, _ *messages.Authorize, d *draft, f *fakeFacts) {
				rec := d.write.Decision
				if rec.TrustLevel != policy.TrustTrustedInternalSigned || rec.RootTrustLevel != policy.TrustUntrustedExternal ||
					rec.RunID == nil || *rec.RunID != "run-1" || rec.ParentRunID == nil || *rec.ParentRunID != "parent-1" ||
					rec.TraceID == nil || *rec.TraceID != "trace-1" {
					t.Errorf("recorded trust %q/%q run %v parent %v trace %v", rec.TrustLevel, rec.RootTrustLevel, rec.RunID, rec.ParentRunID, rec.TraceID)
				}
				if in := f.inputs[0]; in.TrustLevel != policy.TrustUntrustedExternal || in.RootTrustLevel != policy.TrustUntrustedExternal {
					t.Errorf("policy saw trust %q root %q", in.TrustLevel, in.RootTrustLevel)
				}
			}},
		{name: "rule 8: a trusted write under an untrusted root is denied",
			call: both(mutation(policy.TrustTrustedInternalSigned), traced(policy.TrustUntrustedExternal)),
			want: agentWant{calls: decided("github"), decision: "deny", reason: "untrusted_mutation", matched: []string{"untrusted_mutation"},
				rootTrust: policy.TrustUntrustedExternal}},
		{name: "rule 8: a trusted write under a malicious root quarantines",
			call: both(mutation(policy.TrustTrustedInternalSigned), traced(policy.TrustMaliciousSuspected)),
			want: agentWant{calls: decided("github"), decision: "quarantine", reason: "malicious_mutation",
				matched: []string{"malicious_quarantine", "untrusted_mutation"}, rootTrust: policy.TrustMaliciousSuspected}},
		tighten(policy.TrustTrustedInternalSigned, policy.TrustUntrustedExternal, policy.TrustUntrustedExternal),
		tighten(policy.TrustSemiTrustedCustomer, policy.TrustTrustedInternalSigned, policy.TrustSemiTrustedCustomer),
		tighten(policy.TrustUnknown, policy.TrustTrustedInternalUnsigned, policy.TrustUnknown),
		tighten(policy.TrustTrustedInternalSigned, policy.TrustTrustedInternalUnsigned, policy.TrustTrustedInternalUnsigned),
	})
}

// Rules 3, 4, 5, 6 and 7: what is refused before a decision, what is
// denied and recorded without asking the policy, and in which order
// (TestE2EAuthorize/environments and permissions, agent status, rate limit,
// quota).
func TestAgentActorBeforeThePolicy(t *testing.T) {
	prodOnly := func(env *string) func(*messages.Authorize) {
		return func(m *messages.Authorize) { m.AllowedEnvironments, m.Request.Environment = []string{"prod"}, env }
	}
	frozen := func(m *messages.Authorize) { m.AgentStatus = "frozen" }
	fsOnly := func(f *fakeFacts, _ *messages.Authorize) { f.binds = []string{"fs"} }
	forbidden := func(calls ...string) agentWant {
		return agentWant{calls: calls, refused: "FORBIDDEN", refusal: messages.RefusalNotPermitted}
	}
	frozenDeny := agentWant{calls: append(slices.Clone(beforeDecision), scored...), decision: "deny", reason: "agent_frozen"}
	runAgentCases(t, []agentCase{
		{name: "rule 3: no rate token: rate_limited before anything else",
			facts: func(f *fakeFacts, _ *messages.Authorize) { f.lim = authz.Limits{TokenAfter: 2500 * time.Millisecond} },
			want:  agentWant{calls: beforeDecision, refused: "rate_limited", refusal: messages.RefusalThrottled, retry: 3}},
		{name: "rule 3: quota exceeded", facts: func(f *fakeFacts, _ *messages.Authorize) {
			f.lim = authz.Limits{Token: true, Quota: 2, QuotaUsed: 3, QuotaAfter: 10 * time.Second}
		}, want: agentWant{calls: beforeDecision, refused: "quota_exceeded", refusal: messages.RefusalThrottled, retry: 10}},
		{name: "rule 3 before rule 4: a throttled frozen agent is refused, not recorded", call: frozen,
			facts: func(f *fakeFacts, _ *messages.Authorize) { f.lim = authz.Limits{TokenAfter: time.Second} },
			want:  agentWant{calls: beforeDecision, refused: "rate_limited", refusal: messages.RefusalThrottled, retry: 1}},
		{name: "rule 3: shared state unavailable fails closed",
			facts: func(f *fakeFacts, _ *messages.Authorize) { f.limErr = errors.New("valkey down") },
			want:  agentWant{calls: beforeDecision, refused: "shared_state_unavailable", refusal: messages.RefusalUnavailable, retry: 1}},
		{name: "rule 4: a frozen agent is denied agent_frozen and recorded, without bindings or policy", call: frozen,
			want: frozenDeny},
		{name: "rule 4 before rules 5, 6 and 13: frozen outside its environments, unbound, with a nonce",
			call: both(frozen, prodOnly(strPtr("dev")), func(m *messages.Authorize) { m.Request.Nonce = strPtr("nonce-0001") }), facts: fsOnly,
			want: frozenDeny,
			check: func(t *testing.T, _ *messages.Authorize, _ *draft, f *fakeFacts) {
				if len(f.nonces) != 0 {
					t.Errorf("a frozen agent's nonce was taken: %v", f.nonces)
				}
			}},
		{name: "rule 5: no environment while the agent has a list: 403 before any decision", call: prodOnly(nil),
			want: forbidden(beforeDecision...)},
		{name: "rule 5: environment dev outside [prod]: 403 before any decision", call: prodOnly(strPtr("dev")),
			want: forbidden(beforeDecision...)},
		{name: "rule 5 before rule 6: outside its environments and unbound: no bindings read", call: prodOnly(strPtr("dev")), facts: fsOnly,
			want: forbidden(beforeDecision...)},
		{name: "rule 5: environment prod in [prod] is decided, and the policy sees it", call: prodOnly(strPtr("prod")),
			want: agentWant{calls: decided("github"), decision: "allow", reason: "read_only", matched: []string{"default_allow_read"}},
			check: func(t *testing.T, _ *messages.Authorize, d *draft, f *fakeFacts) {
				if f.inputs[0].Environment != "prod" || d.write.Decision.Environment == nil || *d.write.Decision.Environment != "prod" {
					t.Errorf("policy saw environment %q, recorded %v", f.inputs[0].Environment, d.write.Decision.Environment)
				}
			}},
		{name: "rule 6: a tool outside the bindings: 403 before any decision", facts: fsOnly,
			want: forbidden("touch", "limits", "bindings")},
		{name: "rule 6: a bound tool is decided", call: callOf("fs", "read_file", false), facts: fsOnly,
			want: agentWant{calls: decided("fs"), decision: "allow", reason: "read_only", matched: []string{"default_allow_read"}}},
		{name: "rule 6: bindings unreadable fails closed", facts: func(f *fakeFacts, _ *messages.Authorize) { f.bindErr = errors.New("db down") },
			want: agentWant{calls: []string{"touch", "limits", "bindings"}, refused: "database_unavailable",
				refusal: messages.RefusalStoreUnavailable, retry: 1}},
		{name: "rule 7: a tool call that cannot be canonicalized is refused",
			call: func(m *messages.Authorize) { m.Request.ToolCall.Parameters = map[string]any{"x": func() {}} },
			want: agentWant{calls: beforeDecision, refused: "invalid_tool_call", refusal: messages.RefusalInvalid}},
	})
}

func withNonce(n string) func(*messages.Authorize) {
	return func(m *messages.Authorize) { m.Request.Nonce = strPtr(n) }
}

func dryRun(m *messages.Authorize) { m.Request.DryRun = true }

// Rules 13 and 11: replay nonces and dry runs (TestE2EAuthorize/replay
// nonce, idempotency and dry run).
func TestAgentActorReplayAndDryRun(t *testing.T) {
	const nonce = "nonce-12345678"
	used := func(f *fakeFacts, m *messages.Authorize) { f.nonces[m.TenantID+"/"+m.AgentID+"/"+nonce] = true }
	read := []string{"default_allow_read"}
	runAgentCases(t, []agentCase{
		{name: "rule 13: a fresh nonce is taken and the call decided", call: withNonce(nonce),
			want: agentWant{calls: []string{"touch", "limits", "bindings", "nonce", "skill github", "policies", "evaluate", "risk", "denials"},
				decision: "allow", reason: "read_only", matched: read},
			check: func(t *testing.T, m *messages.Authorize, d *draft, f *fakeFacts) {
				if !f.nonces[m.TenantID+"/"+m.AgentID+"/"+nonce] || d.write.Decision.Nonce == nil || *d.write.Decision.Nonce != nonce {
					t.Errorf("nonce taken %v, recorded %v", f.nonces, d.write.Decision.Nonce)
				}
			}},
		{name: "rule 13: a reused nonce is denied replay_nonce_reused, recorded, with a replay_attempt, the policy not asked",
			call: withNonce(nonce), facts: used,
			want: agentWant{calls: []string{"touch", "limits", "bindings", "nonce", "risk", "denials"}, decision: "deny", reason: "replay_nonce_reused"},
			check: func(t *testing.T, _ *messages.Authorize, d *draft, _ *fakeFacts) {
				if len(d.events) != 2 || d.events[1].Kind != messages.KindReplayAttempt || d.events[1].RiskScore != 100 {
					t.Errorf("events %+v, want the decision's and a replay_attempt", d.events)
				}
			}},
		{name: "rule 13: the nonce store unavailable fails closed", call: withNonce(nonce),
			facts: func(f *fakeFacts, _ *messages.Authorize) { f.nonceErr = errors.New("valkey down") },
			want: agentWant{calls: []string{"touch", "limits", "bindings", "nonce"}, refused: "shared_state_unavailable",
				refusal: messages.RefusalUnavailable, retry: 1}},
		{name: "rule 6 before rule 13: a call refused 403 does not take its nonce", call: withNonce(nonce),
			facts: func(f *fakeFacts, _ *messages.Authorize) { f.binds = []string{"fs"} },
			want:  agentWant{calls: []string{"touch", "limits", "bindings"}, refused: "FORBIDDEN", refusal: messages.RefusalNotPermitted}},
		{name: "rules 11, 13: a dry run does not take the nonce (even a used one)", call: both(withNonce(nonce), dryRun), facts: used,
			want: agentWant{calls: decided("github"), decision: "allow", reason: "read_only", matched: read, dryRun: true}},
		{name: "rule 11: a dry-run deny is answered as it would be decided", call: both(mutation(policy.TrustUntrustedExternal), dryRun),
			want: agentWant{calls: decided("github"), decision: "deny", reason: "untrusted_mutation", matched: []string{"untrusted_mutation"},
				rootTrust: policy.TrustUntrustedExternal, dryRun: true}},
		{name: "rule 11: a dry-run quarantine is answered; no quarantine or escalation follows",
			call: both(callOf("github", "delete_repo", true), func(m *messages.Authorize) { m.Request.SourceTrust = policy.TrustMaliciousSuspected }, dryRun),
			want: agentWant{calls: decided("github"), decision: "quarantine", reason: "malicious_mutation",
				matched: []string{"malicious_quarantine", "untrusted_mutation"}, rootTrust: policy.TrustMaliciousSuspected, dryRun: true},
			check: func(t *testing.T, _ *messages.Authorize, d *draft, _ *fakeFacts) {
				if d.verdict.Quarantine || d.verdict.Escalation != nil {
					t.Errorf("a dry run drafted what follows a decision: %+v", d.verdict)
				}
			}},
		{name: "rule 11: a dry-run require_approval creates no approval",
			call: both(mutation(policy.TrustTrustedInternalSigned), func(m *messages.Authorize) { m.RiskTier = "high" }, dryRun),
			want: agentWant{calls: decided("github"), decision: "require_approval", reason: "high_risk_tier_mutation",
				matched: []string{"default_allow_trusted_mutation", "high_tier_mutation"}, dryRun: true}},
		{name: "rule 11: a dry run is refused before the policy alike",
			call: both(dryRun, func(m *messages.Authorize) {
				m.AllowedEnvironments, m.Request.Environment = []string{"prod"}, strPtr("dev")
			}),
			want: agentWant{calls: beforeDecision, refused: "FORBIDDEN", refusal: messages.RefusalNotPermitted}},
	})
}

const pciModule = `package svc.policies.pci

results contains {"decision": "redact", "reason": "card", "redact_fields": ["parameters.card_number"]} if input.tool_call.action == "charge"
`

const blocklistModule = `package svc.policies.blocklist

results contains {"policy": "no_big_charges", "decision": "deny", "reason": "too_big"} if input.tool_call.parameters.amount > 1000
`

func charge(amount float64) func(*messages.Authorize) {
	return func(m *messages.Authorize) {
		m.Request.ToolCall = messages.ToolCall{Tool: "payments", Action: "charge",
			Parameters: map[string]any{"card_number": "4111111111111111", "amount": amount}}
	}
}

// Rule 9 with tenant policies (CONTRACT §6): redact, combination and
// policy ids (TestE2EAuthorize/tenant policies).
func TestAgentActorTenantPolicies(t *testing.T) {
	pci := func(f *fakeFacts, _ *messages.Authorize) { f.modules = []policy.Module{{Name: "pci", Rego: pciModule}} }
	pciAndBlocklist := func(f *fakeFacts, _ *messages.Authorize) {
		f.modules = []policy.Module{{Name: "pci", Rego: pciModule}, {Name: "blocklist", Rego: blocklistModule}}
	}
	runAgentCases(t, []agentCase{
		{name: "rule 9: a tenant redact policy redacts, recorded with its fields", call: charge(10), facts: pci,
			want: agentWant{calls: decided("payments"), decision: "redact", reason: "card", matched: []string{"default_allow_read", "pci"},
				redacted: []string{"parameters.card_number"}},
			check: func(t *testing.T, _ *messages.Authorize, d *draft, _ *fakeFacts) {
				if d.verdict.LowRisk {
					t.Errorf("a redact drafted as a best-effort allow: %+v", d.verdict)
				}
			}},
		{name: "rule 9: a call the tenant policy does not match is not redacted", call: callOf("payments", "refund", false), facts: pci,
			want: agentWant{calls: decided("payments"), decision: "allow", reason: "read_only", matched: []string{"default_allow_read"}}},
		{name: "rule 9: another tenant's policy does not apply", call: charge(10),
			facts: func(f *fakeFacts, _ *messages.Authorize) {
				if err := f.engine.SetTenantPolicies("tenant-with-pci-"+uuid.NewString(), "1", []policy.Module{{Name: "pci", Rego: pciModule}}); err != nil {
					t.Fatal(err)
				}
			},
			want: agentWant{calls: decided("payments"), decision: "allow", reason: "read_only", matched: []string{"default_allow_read"}}},
		{name: "rule 9: deny beats redact, and the policy id (not the module) is matched", call: charge(5000), facts: pciAndBlocklist,
			want: agentWant{calls: decided("payments"), decision: "deny", reason: "too_big",
				matched: []string{"default_allow_read", "no_big_charges", "pci"}}},
		{name: "rule 9: with both modules a small charge is still redacted", call: charge(10), facts: pciAndBlocklist,
			want: agentWant{calls: decided("payments"), decision: "redact", reason: "card", matched: []string{"default_allow_read", "pci"},
				redacted: []string{"parameters.card_number"}}},
	})
}

const approvalID = "3f1c2f8e-0000-4000-8000-000000000001"

// hashOf is the action hash of m's call (rule 7).
func hashOf(m *messages.Authorize) string {
	return authz.Admit(authz.Call{ToolCall: m.Request.ToolCall}).ActionHash
}

// approval puts an APPROVED, unexpired, unconsumed approval of m's agent,
// bound to m's call, then lets change alter it.
func approval(change func(a *persistence.Approval, f *fakeFacts)) func(*fakeFacts, *messages.Authorize) {
	return func(f *fakeFacts, m *messages.Authorize) {
		a := persistence.Approval{ID: approvalID, TenantID: m.TenantID, AgentID: m.AgentID, ActionHash: hashOf(m),
			Status: persistence.ApprovalApproved, CreatedAt: f.now.Add(-time.Minute), ExpiresAt: f.now.Add(time.Hour)}
		if change != nil {
			change(&a, f)
		}
		f.approvals[approvalID] = a
	}
}

// presenting is a high-tier agent's trusted write (require_approval)
// presenting the approval.
func presenting(m *messages.Authorize) {
	mutation(policy.TrustTrustedInternalSigned)(m)
	m.RiskTier = "high"
	m.Request.ApprovalID = strPtr(approvalID)
}

// CONTRACT §4: an approval presented with approval_id (the approvals
// presented on authorize in TestE2EApprovals).
func TestAgentActorPresentedApprovals(t *testing.T) {
	tier := []string{"default_allow_trusted_mutation", "high_tier_mutation"}
	denied := func(reason string) agentWant {
		return agentWant{calls: decided("github", "reserve"), decision: "deny", reason: reason, matched: tier}
	}
	noUse := func(t *testing.T, _ *messages.Authorize, d *draft, _ *fakeFacts) {
		if d.write.Use != nil || d.approvalID != "" {
			t.Errorf("a denied presentation uses the approval: %+v %q", d.write.Use, d.approvalID)
		}
	}
	runAgentCases(t, []agentCase{
		{name: "CONTRACT §4: a granted approval allows with reason approved and is used in the decision's transaction",
			call: presenting, facts: approval(nil),
			want: agentWant{calls: decided("github", "reserve"), decision: "allow", reason: "approved", matched: tier},
			check: func(t *testing.T, m *messages.Authorize, d *draft, f *fakeFacts) {
				rec := d.write.Decision
				if u := d.write.Use; u == nil || *u != (persistence.ApprovalUse{ApprovalID: approvalID, AgentID: m.AgentID, ActionHash: rec.ActionHash,
					At: rec.CreatedAt}) || d.approvalID != approvalID || !f.reserved[approvalID] {
					t.Errorf("use %+v, approval %q, reserved %v", d.write.Use, d.approvalID, f.reserved)
				}
				if d.verdict.LowRisk {
					t.Error("an allow that uses an approval is best effort")
				}
				// Another node consumed it first: the decision is redrafted as
				// the deny of a replay.
				redo := d.denied(authz.ReasonApprovalConsumed)
				if redo.response.Decision != "deny" || redo.response.Reason != "approval_consumed" || redo.write.Use != nil ||
					len(redo.events) != 2 || redo.events[1].Kind != messages.KindReplayAttempt {
					t.Errorf("redrafted %+v events %+v", redo.response, redo.events)
				}
			}},
		{name: "CONTRACT §4: a read allowed by an approval is not best effort (rule 10)",
			call: func(m *messages.Authorize) { m.Request.ApprovalID = strPtr(approvalID) }, facts: approval(nil),
			want: agentWant{calls: decided("github", "reserve"), decision: "allow", reason: "approved", matched: []string{"default_allow_read"}},
			check: func(t *testing.T, _ *messages.Authorize, d *draft, _ *fakeFacts) {
				if d.verdict.LowRisk || d.write.Use == nil {
					t.Errorf("verdict %+v use %+v: a read that uses an approval must be recorded before it is answered", d.verdict, d.write.Use)
				}
			}},
		{name: "CONTRACT §4: an approval keeps the policy's redacted fields",
			call: both(charge(10), func(m *messages.Authorize) { m.Request.ApprovalID = strPtr(approvalID) }),
			facts: func(f *fakeFacts, m *messages.Authorize) {
				f.modules = []policy.Module{{Name: "pci", Rego: pciModule}}
				approval(nil)(f, m)
			},
			want: agentWant{calls: decided("payments", "reserve"), decision: "allow", reason: "approved", matched: []string{"default_allow_read", "pci"},
				redacted: []string{"parameters.card_number"}}},
		{name: "CONTRACT §4: a consumed approval: approval_consumed, with a replay_attempt", call: presenting,
			facts: approval(func(a *persistence.Approval, f *fakeFacts) { at := f.now.Add(-time.Second); a.ConsumedAt = &at }),
			want:  denied("approval_consumed"),
			check: func(t *testing.T, m *messages.Authorize, d *draft, f *fakeFacts) {
				noUse(t, m, d, f)
				if len(d.events) != 2 || d.events[1].Kind != messages.KindReplayAttempt {
					t.Errorf("events %+v, want a replay_attempt", d.events)
				}
			}},
		{name: "CONTRACT §4: an approval reserved by a concurrent presentation: approval_consumed", call: presenting,
			facts: approval(func(_ *persistence.Approval, f *fakeFacts) { f.reserved[approvalID] = true }),
			want:  denied("approval_consumed"), check: noUse},
		{name: "CONTRACT §4: an approval of another call (wrong action hash): approval_mismatch", call: presenting,
			facts: approval(func(a *persistence.Approval, _ *fakeFacts) { a.ActionHash = "0123" }),
			want:  denied("approval_mismatch"), check: noUse},
		{name: "CONTRACT §4: an expired approval: approval_expired", call: presenting,
			facts: approval(func(a *persistence.Approval, f *fakeFacts) { a.ExpiresAt = f.now.Add(-time.Second) }),
			want:  denied("approval_expired"), check: noUse},
		{name: "CONTRACT §4: a pending approval: approval_not_granted", call: presenting,
			facts: approval(func(a *persistence.Approval, _ *fakeFacts) { a.Status = persistence.ApprovalPending }),
			want:  denied("approval_not_granted"), check: noUse},
		{name: "CONTRACT §4: another agent's approval: approval_not_granted", call: presenting,
			facts: approval(func(a *persistence.Approval, _ *fakeFacts) { a.AgentID = "someone-else" }),
			want:  denied("approval_not_granted"), check: noUse},
		{name: "CONTRACT §4: an unknown approval: approval_not_granted", call: presenting,
			want: denied("approval_not_granted"), check: noUse},
		{name: "CONTRACT §4: a policy deny wins over a granted approval (none reserved)",
			call:  both(presenting, func(m *messages.Authorize) { m.Request.SourceTrust = policy.TrustUntrustedExternal }),
			facts: approval(nil),
			want: agentWant{calls: decided("github"), decision: "deny", reason: "untrusted_mutation",
				matched: []string{"high_tier_mutation", "untrusted_mutation"}, rootTrust: policy.TrustUntrustedExternal},
			check: noUse},
		{name: "CONTRACT §4: with approvals off an approval_id is not looked at", call: presenting,
			facts: func(f *fakeFacts, m *messages.Authorize) { approval(nil)(f, m); f.ttl = 0 },
			want:  agentWant{calls: decided("github"), decision: "require_approval", reason: "high_risk_tier_mutation", matched: tier}},
		{name: "CONTRACT §4: the approval store unavailable fails closed", call: presenting,
			facts: func(f *fakeFacts, _ *messages.Authorize) { f.approvalErr = errors.New("db down") },
			want: agentWant{calls: []string{"touch", "limits", "bindings", "skill github", "policies", "evaluate", "reserve"},
				refused: "database_unavailable", refusal: messages.RefusalStoreUnavailable, retry: 1}},
		{name: "rule 11, CONTRACT §4: a dry run checks the approval without reserving it", call: both(presenting, dryRun), facts: approval(nil),
			want: agentWant{calls: decided("github", "check"), decision: "allow", reason: "approved", matched: tier, dryRun: true},
			check: func(t *testing.T, _ *messages.Authorize, _ *draft, f *fakeFacts) {
				if len(f.reserved) != 0 {
					t.Errorf("a dry run reserved %v", f.reserved)
				}
			}},
	})
}

// Part 3 and CONTRACT §6: the tenant's risk settings in the scores and the
// escalation window (TestE2EAuthorize/risk settings and tier escalation).
func TestAgentActorRiskSettings(t *testing.T) {
	weights := func(factor string) map[string]float64 {
		w := map[string]float64{"trust": 0, "mutation": 0, "skill_risk": 0, "risk_tier": 0, "recent_denials": 0}
		w[factor] = 1
		return w
	}
	scores := func(composite, advisory int) func(*testing.T, *messages.Authorize, *draft, *fakeFacts) {
		return func(t *testing.T, _ *messages.Authorize, d *draft, _ *fakeFacts) {
			if d.response.CompositeRiskScore != composite || d.response.RiskScore != advisory {
				t.Errorf("composite %d risk %d, want %d %d", d.response.CompositeRiskScore, d.response.RiskScore, composite, advisory)
			}
		}
	}
	untrusted := agentWant{calls: decided("github"), decision: "deny", reason: "untrusted_mutation", matched: []string{"untrusted_mutation"},
		rootTrust: policy.TrustUntrustedExternal}
	runAgentCases(t, []agentCase{
		{name: "part 3: the default weights score a trusted read low", want: agentWant{calls: decided("github"), decision: "allow",
			reason: "read_only", matched: []string{"default_allow_read"}}, check: scores(8, 30)},
		{name: "CONTRACT §6: the tenant's trust weight alone scores the effective trust", call: mutation(policy.TrustUntrustedExternal),
			facts: func(f *fakeFacts, _ *messages.Authorize) { f.risk.Weights = weights("trust") },
			want:  untrusted, check: scores(80, 80)},
		{name: "CONTRACT §6: recent denials in the window feed the composite score", call: mutation(policy.TrustUntrustedExternal),
			facts: func(f *fakeFacts, _ *messages.Authorize) { f.risk.Weights, f.denials = weights("recent_denials"), 3 },
			want:  untrusted, check: scores(60, 80)},
		{name: "CONTRACT §6: the server's tier feeds the composite score", call: func(m *messages.Authorize) { m.RiskTier = "medium" },
			facts: func(f *fakeFacts, _ *messages.Authorize) { f.risk.Weights = weights("risk_tier") },
			want:  agentWant{calls: decided("github"), decision: "allow", reason: "read_only", matched: []string{"default_allow_read"}},
			check: scores(50, 30)},
		{name: "CONTRACT §6: the registered risk feeds both scores", call: callOf("deploy", "prod", true),
			facts: func(f *fakeFacts, m *messages.Authorize) { deploySkills(f, m); f.risk.Weights = weights("skill_risk") },
			want: agentWant{calls: decided("deploy"), decision: "deny", reason: "critical_risk_action",
				matched: []string{"critical", "default_allow_trusted_mutation"}}, check: scores(100, 100)},
		{name: "part 3: a deny counts in the tenant's escalation window and threshold", call: mutation(policy.TrustUntrustedExternal),
			facts: func(f *fakeFacts, _ *messages.Authorize) { f.risk.DenialThreshold, f.risk.WindowMinutes = 2, 15 },
			want:  untrusted,
			check: func(t *testing.T, _ *messages.Authorize, d *draft, _ *fakeFacts) {
				if e := d.verdict.Escalation; e == nil || *e != (authz.Escalation{Window: 15 * time.Minute, Threshold: 2}) {
					t.Errorf("escalation %+v", e)
				}
			}},
		{name: "part 3: an allow does not count", call: mutation(policy.TrustTrustedInternalSigned),
			facts: func(f *fakeFacts, _ *messages.Authorize) { f.risk.DenialThreshold, f.risk.WindowMinutes = 2, 15 },
			want:  agentWant{calls: decided("github"), decision: "allow", reason: "trusted_mutation", matched: []string{"default_allow_trusted_mutation"}},
			check: func(t *testing.T, _ *messages.Authorize, d *draft, _ *fakeFacts) {
				if d.verdict.Escalation != nil {
					t.Errorf("an allow counts towards escalation: %+v", d.verdict.Escalation)
				}
			}},
	})
}

// The node's fact source keys what rules 3 and 13 count by tenant and
// agent (TestE2EAuthorize/rate limit: the bucket is per agent; replay
// nonce: nonces are per agent).
func TestFactSourceCountsPerAgent(t *testing.T) {
	ctx := context.Background()
	shared := sharedstate.NewMemory()
	t.Cleanup(func() { _ = shared.Close() })
	facts := func(t *testing.T, o AuthorizerOptions) *factSource {
		t.Helper()
		f, err := newFactSource(nil, shared, nil, func(messages.Heartbeat) {}, o, hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	throttled := func(t *testing.T, f *factSource, tenantID, agentID string) *authz.Refused {
		t.Helper()
		lim, err := f.limits(ctx, tenantID, agentID)
		if err != nil {
			t.Fatal(err)
		}
		return authz.Throttle(lim)
	}
	t.Run("rule 3: the rate bucket is per agent and tenant", func(t *testing.T) {
		f, tenantID := facts(t, AuthorizerOptions{RateCapacity: 3, RateRefill: 0.001}), uuid.NewString()
		for i := 0; i < 3; i++ {
			if r := throttled(t, f, tenantID, "busy"); r != nil {
				t.Fatalf("call %d refused: %+v", i+1, r)
			}
		}
		if r := throttled(t, f, tenantID, "busy"); r == nil || r.Code != "rate_limited" || r.RetryAfter < 1 {
			t.Fatalf("fourth call: %+v, want rate_limited with a Retry-After", r)
		}
		if r := throttled(t, f, tenantID, "calm"); r != nil {
			t.Fatalf("another agent refused: %+v", r)
		}
		if r := throttled(t, f, uuid.NewString(), "busy"); r != nil {
			t.Fatalf("the same agent id in another tenant refused: %+v", r)
		}
	})
	t.Run("rule 3: the quota is per agent, and counts only calls given a token", func(t *testing.T) {
		f, tenantID := facts(t, AuthorizerOptions{RateCapacity: 100, RateRefill: 100, QuotaLimit: 2, QuotaWindow: time.Hour}), uuid.NewString()
		for i := 0; i < 2; i++ {
			if r := throttled(t, f, tenantID, "metered"); r != nil {
				t.Fatalf("call %d refused: %+v", i+1, r)
			}
		}
		if r := throttled(t, f, tenantID, "metered"); r == nil || r.Code != "quota_exceeded" || r.RetryAfter < 1 || r.RetryAfter > 3600 {
			t.Fatalf("third call: %+v, want quota_exceeded retrying within the window", r)
		}
		if r := throttled(t, f, tenantID, "other"); r != nil {
			t.Fatalf("another agent refused: %+v", r)
		}
		g := facts(t, AuthorizerOptions{RateCapacity: 1, RateRefill: 0.001, QuotaLimit: 5, QuotaWindow: time.Hour})
		for i, want := range []int64{1, 0} { // the second call has no token: nothing counted
			if lim, err := g.limits(ctx, tenantID, "once"); err != nil || lim.QuotaUsed != want {
				t.Fatalf("call %d: %+v %v, want quota used %d", i+1, lim, err, want)
			}
		}
	})
	t.Run("rule 13: a nonce is taken once per agent and tenant", func(t *testing.T) {
		f, tenantID := facts(t, AuthorizerOptions{ReplayWindow: time.Minute}), uuid.NewString()
		for _, c := range []struct {
			tenantID, agentID string
			fresh             bool
		}{{tenantID, "a", true}, {tenantID, "a", false}, {tenantID, "b", true}, {uuid.NewString(), "a", true}} {
			if fresh, err := f.claimNonce(ctx, c.tenantID, c.agentID, "nonce-12345678"); err != nil || fresh != c.fresh {
				t.Fatalf("agent %s: fresh %v %v, want %v", c.agentID, fresh, err, c.fresh)
			}
		}
	})
}

// authorizeAs calls auth as the agent with its status and tier as stored,
// read for each call as the HTTP layer does.
func authorizeAs(t *testing.T, store persistence.Store, auth *Authorizer, a persistence.Agent, req messages.AuthorizeRequest) messages.AuthorizeOutcome {
	t.Helper()
	cur, err := store.GetAgent(context.Background(), a.TenantID, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	return auth.Authorize(context.Background(), &messages.Authorize{TenantID: cur.TenantID, AgentID: cur.ID, AgentName: cur.Name,
		AgentStatus: cur.Status, RiskTier: cur.RiskTier, AllowedEnvironments: cur.AllowedEnvironments, ReceivedAt: time.Now().UTC(), Request: req})
}

// decideAs is authorizeAs that must be answered with decision.
func decideAs(t *testing.T, store persistence.Store, auth *Authorizer, a persistence.Agent, req messages.AuthorizeRequest,
	decision string) *messages.AuthorizeResponse {
	t.Helper()
	out := authorizeAs(t, store, auth, a, req)
	if out.Response == nil || out.Response.Decision != decision {
		t.Fatalf("answered %+v %+v, want %s", out.Response, out.Failure, decision)
	}
	return out.Response
}

func newAgent(t *testing.T, store persistence.Store, tenantID string) persistence.Agent {
	t.Helper()
	now := time.Now().UTC()
	a := persistence.Agent{ID: uuid.NewString(), TenantID: tenantID, Name: "a-" + uuid.NewString()[:8], Status: persistence.AgentActive,
		RiskTier: "low", CreatedAt: now, UpdatedAt: now}
	if err := store.CreateAgent(context.Background(), a, []byte(a.ID)); err != nil {
		t.Fatal(err)
	}
	return a
}

func request(tool, action string, mutates bool, trust string) messages.AuthorizeRequest {
	return messages.AuthorizeRequest{ToolCall: messages.ToolCall{Tool: tool, Action: action, Parameters: map[string]any{}},
		MutatesState: mutates, SourceTrust: trust}
}

// What the Authorizer does around its agent actors, over the real store,
// writer and in-process shared state: rule 2 before the actor's rule 3,
// and what follows a recorded decision (TestE2EAuthorize/quota,
// idempotency and dry run, risk settings and tier escalation, malicious
// mutation quarantines, tenant policies).
func TestAuthorizerAroundTheActor(t *testing.T) {
	ctx := context.Background()
	read := func() messages.AuthorizeRequest {
		return request("github", "list_issues", false, policy.TrustTrustedInternalSigned)
	}
	untrusted := func() messages.AuthorizeRequest {
		return request("github", "create_issue", true, policy.TrustUntrustedExternal)
	}
	trusted := func() messages.AuthorizeRequest {
		return request("github", "create_issue", true, policy.TrustTrustedInternalSigned)
	}
	with := func(r messages.AuthorizeRequest, f func(*messages.AuthorizeRequest)) messages.AuthorizeRequest {
		f(&r)
		return r
	}

	t.Run("rule 2 before rule 3: a known request_id is answered past the quota", func(t *testing.T) {
		_, _, store, tenantID, auth := authorizerWith(t, AuthorizerOptions{RateCapacity: 1000, RateRefill: 1000, QuotaLimit: 2,
			QuotaWindow: time.Hour, ReplayWindow: time.Minute})
		a := newAgent(t, store, tenantID)
		rid := with(read(), func(r *messages.AuthorizeRequest) { r.RequestID = strPtr("quota-1") })
		first := decideAs(t, store, auth, a, rid, "allow")
		decideAs(t, store, auth, a, read(), "allow")
		if out := authorizeAs(t, store, auth, a, read()); out.Failure == nil || out.Failure.Code != "quota_exceeded" {
			t.Fatalf("third call %+v %+v, want quota_exceeded", out.Response, out.Failure)
		}
		if again := decideAs(t, store, auth, a, rid, "allow"); again.DecisionID != first.DecisionID {
			t.Errorf("replayed request_id: decision %s, want %s", again.DecisionID, first.DecisionID)
		}
	})

	_, _, store, tenantID, auth := authorizerWith(t, AuthorizerOptions{RateCapacity: 1000, RateRefill: 1000, ReplayWindow: time.Minute})
	t.Run("rule 2: a request_id answers its first decision, even for another call", func(t *testing.T) {
		a := newAgent(t, store, tenantID)
		rid := func(r messages.AuthorizeRequest) messages.AuthorizeRequest {
			return with(r, func(r *messages.AuthorizeRequest) { r.RequestID = strPtr("req-1") })
		}
		first := decideAs(t, store, auth, a, rid(trusted()), "allow")
		if first.DecisionID == "" || first.RequestID == nil || *first.RequestID != "req-1" {
			t.Fatalf("first answer %+v: want a decision and the request_id echoed", first)
		}
		for _, r := range []messages.AuthorizeRequest{rid(trusted()), rid(untrusted())} {
			if again := decideAs(t, store, auth, a, r, "allow"); again.DecisionID != first.DecisionID || again.ReceiptID != first.ReceiptID {
				t.Errorf("retry answered decision %s receipt %s, want %s %s", again.DecisionID, again.ReceiptID, first.DecisionID, first.ReceiptID)
			}
		}
	})
	t.Run("rules 2, 11: a dry run with a request_id neither claims nor reads it", func(t *testing.T) {
		a := newAgent(t, store, tenantID)
		rid := with(read(), func(r *messages.AuthorizeRequest) { r.RequestID = strPtr("dry-1") })
		dry := with(rid, func(r *messages.AuthorizeRequest) { r.DryRun = true })
		if d := decideAs(t, store, auth, a, dry, "allow"); !d.DryRun || d.DecisionID != "" {
			t.Fatalf("dry run %+v", d)
		}
		if d := decideAs(t, store, auth, a, rid, "allow"); d.DryRun || d.DecisionID == "" {
			t.Fatalf("the first real call after a dry run with its request_id: %+v", d)
		}
		if d := decideAs(t, store, auth, a, dry, "allow"); !d.DryRun || d.DecisionID != "" {
			t.Fatalf("a dry run after the real call: %+v", d)
		}
	})
	t.Run("part 3: more than denial_threshold recorded denies move the tier one step; dry runs do not count", func(t *testing.T) {
		if err := store.PutRiskEscalation(ctx, tenantID, 2, 60); err != nil {
			t.Fatal(err)
		}
		auth.facts.drop(messages.Invalidation{Kind: messages.CacheRisk, TenantID: tenantID}) // as the PUT does
		a := newAgent(t, store, tenantID)
		tier := func() string {
			cur, err := store.GetAgent(ctx, tenantID, a.ID)
			if err != nil {
				t.Fatal(err)
			}
			return cur.RiskTier
		}
		for i := 0; i < 3; i++ {
			decideAs(t, store, auth, a, with(untrusted(), func(r *messages.AuthorizeRequest) { r.DryRun = true }), "deny")
		}
		for i := 0; i < 2; i++ {
			decideAs(t, store, auth, a, untrusted(), "deny")
		}
		if got := tier(); got != "low" {
			t.Fatalf("tier %s after 3 dry-run and 2 recorded denies (threshold 2), want low", got)
		}
		decideAs(t, store, auth, a, untrusted(), "deny")
		if got := tier(); got != "medium" {
			t.Fatalf("tier %s after 3 recorded denies, want medium", got)
		}
		for i := 0; i < 3; i++ {
			decideAs(t, store, auth, a, untrusted(), "deny")
		}
		if got := tier(); got != "high" {
			t.Fatalf("tier %s after 3 more denies, want high", got)
		}
		if r := decideAs(t, store, auth, a, trusted(), "require_approval"); r.Reason != "high_risk_tier_mutation" {
			t.Errorf("a high-tier agent's trusted write: reason %s", r.Reason)
		}
	})
	t.Run("rule 9: a quarantine decision quarantines the agent once recorded; a dry run does not", func(t *testing.T) {
		a := newAgent(t, store, tenantID)
		malicious := request("github", "delete_repo", true, policy.TrustMaliciousSuspected)
		status := func() string {
			cur, err := store.GetAgent(ctx, tenantID, a.ID)
			if err != nil {
				t.Fatal(err)
			}
			return cur.Status
		}
		decideAs(t, store, auth, a, with(malicious, func(r *messages.AuthorizeRequest) { r.DryRun = true }), "quarantine")
		if got := status(); got != persistence.AgentActive {
			t.Fatalf("a dry-run quarantine moved the agent to %s", got)
		}
		if d := decideAs(t, store, auth, a, malicious, "quarantine"); d.DecisionID == "" {
			t.Fatalf("quarantine not recorded: %+v", d)
		}
		if got := status(); got != persistence.AgentQuarantined {
			t.Fatalf("agent %s after a quarantine decision, want quarantined", got)
		}
	})
	t.Run("CONTRACT §6: only enabled tenant policies apply, from the next call on", func(t *testing.T) {
		a := newAgent(t, store, tenantID)
		chargeCall := messages.AuthorizeRequest{ToolCall: messages.ToolCall{Tool: "payments", Action: "charge",
			Parameters: map[string]any{"card_number": "4111111111111111"}}, SourceTrust: policy.TrustTrustedInternalSigned}
		prepared := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			if err := auth.PreparePolicies(ctx, tenantID); err != nil { // as a policy write does
				t.Fatal(err)
			}
		}
		pol := persistence.Policy{TenantID: tenantID, Name: "pci", Rego: pciModule, Enabled: true}
		_, err := store.CreatePolicy(ctx, pol)
		prepared(err)
		if d := decideAs(t, store, auth, a, chargeCall, "redact"); !slices.Equal(d.RedactedFields, []string{"parameters.card_number"}) {
			t.Errorf("redacted_fields %q", d.RedactedFields)
		}
		pol.Enabled = false
		_, err = store.UpdatePolicy(ctx, pol)
		prepared(err)
		decideAs(t, store, auth, a, chargeCall, "allow")
		pol.Enabled = true
		_, err = store.UpdatePolicy(ctx, pol)
		prepared(err)
		decideAs(t, store, auth, a, chargeCall, "redact")
		prepared(store.DeletePolicy(ctx, tenantID, "pci"))
		decideAs(t, store, auth, a, chargeCall, "allow")
	})
}
