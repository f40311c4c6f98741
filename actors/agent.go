package actors

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"svc/canonical"
	"svc/messages"
	"svc/persistence"
	"svc/rules/authz"
	"svc/rules/policy"
	"svc/rules/risk"
)

// The agent actor (SPEC 4.2 rules 3 to 9 and 13): it serializes one
// agent's calls on this node, gathers the facts the rules need and asks
// rules/authz at each step.

// AgentActor serializes one agent's calls on this node. It blocks its own
// mailbox on the shared-state and registry reads of a call (that is the
// per-agent serialization) but never on the database commit, which the
// caller awaits. It stops itself after AgentIdle without calls.
type AgentActor struct {
	auth *Authorizer
	key  string
	ref  *actorRef // the incarnation; a restart after a panic keeps it
}

// Receive implements actor.Actor.
func (g *AgentActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		ctx.SetReceiveTimeout(g.auth.opt.AgentIdle)
	case *actor.ReceiveTimeout:
		ctx.Stop(ctx.Self())
	case *actor.Stopped:
		// Calls still queued in the mailbox are dropped; their callers
		// retry on seeing the stop.
		g.auth.agents.stopped(g.key, g.ref)
	case *agentAsk:
		// The caller waits until the request's deadline: a call still
		// queued past it is not decided (no rate token, nonce or approval
		// is taken for an answer nobody awaits), and a decision is bounded
		// by it.
		deadline := m.m.Deadline
		if deadline.IsZero() {
			deadline = time.Now().Add(10 * time.Second)
		}
		if !time.Now().Before(deadline) {
			offer(m.reply, agentAnswer{err: context.DeadlineExceeded})
			return
		}
		c, cancel := context.WithDeadline(context.Background(), deadline)
		d := g.auth.decide(c, m.m)
		cancel()
		offer(m.reply, agentAnswer{d: d})
	}
}

// agentAsk carries one call to its agent's actor, with the channel its
// draft is answered on (reply.go).
type agentAsk struct {
	m     *messages.Authorize
	reply chan agentAnswer
}

type agentAnswer struct {
	d   *draft
	err error
}

func (q *agentAsk) deadLetter() { offer(q.reply, agentAnswer{err: actor.ErrDeadLetter}) }

// IgnoreDeadLetterLogging: a dead-lettered ask is answered and retried.
func (q *agentAsk) IgnoreDeadLetterLogging() {}

// decide gathers the facts of SPEC 4.2 rules 3 to 9 and 13, in the order
// the rules need them, asks rules/authz at each step, and returns a draft.
func (a *Authorizer) decide(ctx context.Context, m *messages.Authorize) *draft {
	req := &m.Request
	refuse := func(r *authz.Refused) *draft {
		return &draft{outcome: &messages.AuthorizeOutcome{Failure: r.Failure()}}
	}

	// Rule 3: last seen (best effort), rate limit, quota.
	a.heartbeat(messages.Heartbeat{TenantID: m.TenantID, AgentID: m.AgentID, At: m.ReceivedAt})
	lim := authz.Limits{Quota: a.opt.QuotaLimit}
	var err error
	lim.Token, lim.TokenAfter, err = a.shared.TakeToken(ctx, "rl:"+m.TenantID+":"+m.AgentID, a.opt.RateCapacity, a.opt.RateRefill, 1)
	if err != nil {
		return &draft{outcome: a.sharedFailure(err)}
	}
	if lim.Token && a.opt.QuotaLimit > 0 {
		lim.QuotaUsed, lim.QuotaAfter, err = a.shared.Incr(ctx, "quota:"+m.TenantID+":"+m.AgentID, a.opt.QuotaWindow)
		if err != nil {
			return &draft{outcome: a.sharedFailure(err)}
		}
	}
	if r := authz.Throttle(lim); r != nil {
		return refuse(r)
	}

	// Rules 7 and 8 (every record needs them), 4 and 5.
	ad := authz.Admit(authz.Call{AgentStatus: m.AgentStatus, AllowedEnvironments: m.AllowedEnvironments, Environment: req.Environment,
		ToolCall: req.ToolCall, SourceTrust: req.SourceTrust, RootTrust: rootTrust(req)})
	if ad.Refused != nil {
		return refuse(ad.Refused)
	}
	tc, hash, source, effective := ad.ToolCall, ad.ActionHash, ad.SourceTrust, ad.EffectiveTrust
	if ad.Frozen != nil {
		return a.draftDecision(ctx, m, tc, hash, source, effective, *ad.Frozen, authz.Skill{})
	}
	// Rule 6: tool permission bindings.
	perms, err := a.store.ListPermissions(ctx, m.TenantID, m.AgentID)
	if err != nil {
		return refuse(&authz.Refused{Refusal: messages.RefusalStoreUnavailable, Code: "database_unavailable", Message: "the database is unavailable", RetryAfter: 1})
	}
	bindings := make([]string, len(perms))
	for i, p := range perms {
		bindings[i] = p.ToolKey
	}
	if r := authz.Bound(bindings, tc.Tool); r != nil {
		return refuse(r)
	}
	// Rule 13: replay nonce (not consumed by a dry run).
	if req.Nonce != nil && !req.DryRun {
		fresh, err := a.shared.SetNX(ctx, nonceKey(m.TenantID, m.AgentID, *req.Nonce), "1", a.opt.ReplayWindow)
		if err != nil {
			return &draft{outcome: a.sharedFailure(err)}
		}
		if !fresh {
			d := a.draftDecision(ctx, m, tc, hash, source, effective, authz.Replayed(), authz.Skill{})
			if d.write != nil {
				ev := a.event(m, &d.write.Decision, messages.KindReplayAttempt, "replay nonce reused")
				ev.Tool, ev.Action, ev.RiskScore, ev.Decision = authz.ReasonReplay, authz.ReasonReplay, 100, authz.DecisionDeny
				ev.MatchedPolicies = []string{}
				d.events = append(d.events, ev)
			}
			return d
		}
	}
	// Rule 9: policy.
	skill := a.skill(ctx, m.TenantID, tc.Tool)
	in := policy.Input{TenantID: m.TenantID, Agent: policy.AgentInput{ID: m.AgentID, Name: m.AgentName, RiskTier: m.RiskTier, Status: m.AgentStatus},
		ToolCall:     policy.ToolCall{Tool: tc.Tool, Action: tc.Action, Resource: tc.Resource, Parameters: tc.Parameters},
		MutatesState: req.MutatesState, TrustLevel: effective, RootTrustLevel: effective}
	if req.Environment != nil {
		in.Environment = *req.Environment
	}
	var facts authz.Skill
	if skill.found {
		if act, ok := skill.skill.Actions[tc.Action]; ok {
			facts = authz.Skill{Risk: act.Risk, Mutates: act.MutatesState}
			in.Skill = &policy.SkillInput{Key: skill.skill.Key, Description: skill.skill.Description, Action: tc.Action,
				Risk: act.Risk, MutatesState: act.MutatesState, ApprovalRequired: act.ApprovalRequired}
		}
	}
	if server, ok := strings.CutPrefix(tc.Tool, "mcp:"); ok {
		// The MCP registry arrives with its own issue; until then every MCP
		// server is unknown and the base policy denies (fail closed).
		in.MCP = &policy.MCPInput{ServerKey: server}
	}
	if err := a.ensurePolicies(ctx, m.TenantID); err != nil {
		a.log.Error("tenant policies unavailable; failing closed", "tenant_id", m.TenantID, "error", err)
		return a.draftDecision(ctx, m, tc, hash, source, effective, policy.Result{Decision: "deny", Reason: "policy_unavailable"}, authz.Skill{})
	}
	res, err := a.engine.Evaluate(ctx, m.TenantID, in)
	if err != nil {
		a.log.Error("policy evaluation failed; failing closed", "tenant_id", m.TenantID, "error", err)
		res = policy.Result{Decision: "deny", Reason: "policy_error"}
	}
	if req.ApprovalID != nil && *req.ApprovalID != "" && res.Decision != "deny" && !res.Quarantine && a.opt.Approvals != nil {
		return a.presentApproval(ctx, m, tc, hash, source, effective, res, facts)
	}
	return a.draftDecision(ctx, m, tc, hash, source, effective, res, facts)
}

// rootTrust is the request's trace.root_trust_level, if any.
func rootTrust(req *messages.AuthorizeRequest) *string {
	if req.Trace == nil {
		return nil
	}
	return req.Trace.RootTrustLevel
}

// presentApproval decides a call that presents approval_id (CONTRACT §4):
// allow with reason approved when the approval is this agent's, APPROVED,
// unexpired, unconsumed and bound to this action hash, the approval then
// being consumed in the decision's transaction; otherwise deny with the
// reason that applies. A deny or quarantine from the policy wins over any
// approval (the caller checks that first).
func (a *Authorizer) presentApproval(ctx context.Context, m *messages.Authorize, tc canonical.ToolCall, hash, source, effective string,
	res policy.Result, skill authz.Skill) *draft {
	id := *m.Request.ApprovalID
	deny := func(reason string) *draft {
		d := a.draftDecision(ctx, m, tc, hash, source, effective,
			policy.Result{Decision: "deny", Reason: reason, MatchedPolicies: res.MatchedPolicies}, skill)
		if reason == ApprovalConsumedR && d.write != nil {
			ev := a.event(m, &d.write.Decision, messages.KindReplayAttempt, "approval presented again after use")
			ev.RiskScore, ev.Decision = 100, "deny"
			d.events = append(d.events, ev)
		}
		return d
	}
	var reason string
	var err error
	if m.Request.DryRun {
		// Nothing is reserved or consumed by a dry run: only the check.
		var ap persistence.Approval
		ap, err = a.store.GetApproval(ctx, m.TenantID, id)
		if errors.Is(err, persistence.ErrNotFound) {
			ap, err = persistence.Approval{}, nil
		}
		reason = ClassifyApproval(ap, m.AgentID, hash, a.opt.Approvals.Now(), false)
	} else {
		reason, _, err = a.opt.Approvals.Reserve(ctx, m.TenantID, id, m.AgentID, hash)
	}
	if err != nil {
		a.log.Error("approval check failed; failing closed", "approval_id", id, "error", err)
		return &draft{outcome: ptr(failure(messages.RefusalStoreUnavailable, "database_unavailable", "the database is unavailable", 1))}
	}
	if reason != "" {
		return deny(reason)
	}
	d := a.draftDecision(ctx, m, tc, hash, source, effective,
		policy.Result{Decision: "allow", Reason: ApprovalGranted, MatchedPolicies: res.MatchedPolicies, RedactedFields: res.RedactedFields}, skill)
	if d.write != nil {
		d.write.Use = &persistence.ApprovalUse{ApprovalID: id, AgentID: m.AgentID, ActionHash: hash, At: d.write.Decision.CreatedAt}
		d.approvalID, d.denied, d.lowRisk = id, deny, false
	}
	return d
}

func ptr[T any](v T) *T { return &v }

// draftDecision scores the outcome and builds the response and the rows.
func (a *Authorizer) draftDecision(ctx context.Context, m *messages.Authorize, tc canonical.ToolCall, hash, source, effective string,
	res policy.Result, skill authz.Skill) *draft {
	req := &m.Request
	v := authz.Decide(res, req.MutatesState, skill)
	sr, mutates, decision := skill.Risk, v.Mutates, v.Decision
	settings := a.riskSettings(ctx, m.TenantID)
	denials := 0
	if v, ok, err := a.shared.Get(ctx, "denycount:"+m.TenantID+":"+m.AgentID); err == nil && ok {
		denials, _ = strconv.Atoi(v)
	}
	inputs := risk.Inputs{TrustLevel: effective, MutatesState: mutates, SkillRisk: sr, RiskTier: m.RiskTier, RecentDenials: denials}
	composite := risk.Composite(inputs, settings.Weights)
	advisory := risk.Advisory(inputs)
	resp := &messages.AuthorizeResponse{Decision: decision, Reason: res.Reason, CompositeRiskScore: composite, RootTrustLevel: effective,
		RedactedFields: nonNil(res.RedactedFields), DryRun: req.DryRun, ActionHash: hash, RiskScore: advisory,
		MatchedPolicies: nonNil(res.MatchedPolicies), RequestID: req.RequestID}
	if req.DryRun {
		return &draft{outcome: &messages.AuthorizeOutcome{Response: resp}}
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	decisionID, receiptID := uuid.NewString(), uuid.NewString()
	resp.DecisionID, resp.ReceiptID = decisionID, receiptID
	toolCall, _ := json.Marshal(tc)
	rec := persistence.Decision{ID: decisionID, TenantID: m.TenantID, AgentID: m.AgentID, RequestID: req.RequestID, Tool: tc.Tool,
		Action: tc.Action, Resource: tc.Resource, ActionHash: hash, Decision: decision, Reason: res.Reason, RiskScore: advisory,
		CompositeRiskScore: composite, MatchedPolicyIDs: nonNil(res.MatchedPolicies), RedactedFields: nonNil(res.RedactedFields),
		MutatesState: mutates, TrustLevel: source, RootTrustLevel: effective, Environment: req.Environment,
		ToolCall: toolCall, CreatedAt: now, ReceiptID: receiptID, Nonce: req.Nonce}
	if req.Trace != nil {
		rec.RunID, rec.ParentRunID, rec.TraceID = req.Trace.RunID, req.Trace.ParentRunID, req.Trace.TraceID
	}
	audit := persistence.AuditEvent{ID: uuid.NewString(), TenantID: m.TenantID, EventType: "authorize_decision", Action: decision,
		Actor: "agent:" + m.AgentID, AgentID: m.AgentID, DecisionID: decisionID, CreatedAt: now,
		Details: map[string]any{"action": decision, "tool": tc.Tool, "tool_action": tc.Action, "reason": res.Reason,
			"matched_policies": rec.MatchedPolicyIDs, "action_hash": hash, "receipt_id": receiptID}}
	receipt := &persistence.Receipt{ID: receiptID, TenantID: m.TenantID, DecisionID: decisionID, ActionHash: hash, Decision: decision, CreatedAt: now}
	w := &persistence.DecisionWrite{Decision: rec, Audit: []persistence.AuditEvent{audit}, Receipt: receipt}
	if decision == "require_approval" && a.opt.Approvals != nil {
		// The approval is created in the decision's transaction.
		expires := now.Add(a.opt.Approvals.TTL())
		w.Approval = &persistence.Approval{ID: uuid.NewString(), TenantID: m.TenantID, DecisionID: decisionID, AgentID: m.AgentID,
			ToolCall: toolCall, ActionHash: hash, Status: persistence.ApprovalPending, CreatedAt: now, ExpiresAt: expires}
		resp.ApprovalID, resp.ApprovalExpiresAt = w.Approval.ID, &expires
		audit.Details["approval_id"] = w.Approval.ID
	}
	d := &draft{write: w, response: resp, lowRisk: v.LowRisk, quarantine: v.Quarantine, deny: v.Deny}
	d.events = append(d.events, a.event(m, &rec, messages.KindAuthorizeDecision, res.Reason))
	return d
}

// skill reads the registry through the bounded cache.
func (a *Authorizer) skill(ctx context.Context, tenantID, key string) skillEntry {
	ck := tenantID + "\x00" + key
	if a.skills != nil {
		if e, ok := a.skills.Get(ck); ok {
			return e
		}
	}
	sk, err := a.store.GetSkill(ctx, tenantID, key)
	e := skillEntry{skill: sk, found: err == nil}
	if err != nil && !errors.Is(err, persistence.ErrNotFound) {
		return e // not cached: a transient failure must not stick
	}
	if a.skills != nil {
		a.skills.Add(ck, e)
	}
	return e
}

func (a *Authorizer) tenant(tenantID string) *tenantEntry {
	e, _ := a.tenants.LoadOrStore(tenantID, &tenantEntry{})
	return e.(*tenantEntry) //nolint:errcheck // only *tenantEntry is stored
}

// riskSettings returns the tenant's risk settings, cached for
// SVC_RISK_WEIGHTS_CACHE_TTL_SECS (a PUT invalidates at once).
func (a *Authorizer) riskSettings(ctx context.Context, tenantID string) persistence.RiskSettings {
	e := a.tenant(tenantID)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.riskLoaded && time.Since(e.riskAt) < a.opt.RiskWeightsTTL {
		return e.risk
	}
	rs, err := a.store.GetRiskSettings(ctx, tenantID)
	if err != nil {
		if e.riskLoaded {
			return e.risk
		}
		return persistence.RiskSettings{DenialThreshold: 5, WindowMinutes: 60}
	}
	e.risk, e.riskAt, e.riskLoaded = rs, time.Now(), true
	return rs
}

// ensurePolicies makes sure the engine holds the tenant's current policy
// version. Policy writes prepare the new version themselves (PreparePolicies)
// and other nodes learn of it by invalidation; this check, at most once a
// second per tenant, is the safety net.
func (a *Authorizer) ensurePolicies(ctx context.Context, tenantID string) error {
	e := a.tenant(tenantID)
	e.mu.Lock()
	fresh := e.policyReady && time.Since(e.policyAt) < policyCheckEvery
	e.mu.Unlock()
	if fresh {
		return nil
	}
	v, err := a.store.PolicyVersion(ctx, tenantID)
	if err != nil {
		return err
	}
	if !a.engine.HasTenant(tenantID, strconv.FormatInt(v, 10)) {
		if err := a.PreparePolicies(ctx, tenantID); err != nil {
			return err
		}
	}
	e.mu.Lock()
	e.policyVer, e.policyAt, e.policyReady = v, time.Now(), true
	e.mu.Unlock()
	return nil
}

// PreparePolicies loads the tenant's enabled policies and prepares their
// query (off the hot path: called by policy writes and invalidations).
func (a *Authorizer) PreparePolicies(ctx context.Context, tenantID string) error {
	v, err := a.store.PolicyVersion(ctx, tenantID)
	if err != nil {
		return err
	}
	ps, err := a.store.ListPolicies(ctx, tenantID)
	if err != nil {
		return err
	}
	mods := make([]policy.Module, 0, len(ps))
	for _, p := range ps {
		if p.Enabled {
			mods = append(mods, policy.Module{Name: p.Name, Rego: p.Rego})
		}
	}
	return a.engine.SetTenantPolicies(tenantID, strconv.FormatInt(v, 10), mods)
}
