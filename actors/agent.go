package actors

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"svc/messages"
	"svc/persistence"
	"svc/rules/authz"
	"svc/rules/policy"
	"svc/rules/risk"
)

// The agent actor (SPEC 4.2 rules 3 to 9 and 13): it serializes one
// agent's calls on this node, gathers the facts the rules need and asks
// rules/authz at each step.

// agentActor serializes one agent's calls on this node. It blocks its own
// mailbox on the shared-state and registry reads of a call (that is the
// per-agent serialization) but never on the database commit, which the
// caller awaits. It stops itself after AgentIdle without calls.
type agentActor struct {
	facts agentFacts  // the node's *factSource; a fake in the unit tests
	table *actorTable // where its incarnation is registered
	idle  time.Duration
	idleT idleTimer
	// key and ref are the actor's key and incarnation, found on Started
	// from its name (every agent actor is built from the same props: one
	// Props per agent was about 300 bytes of every live agent).
	key string
	ref *actorRef
	// run is the current call's place in its run, set by evaluate when
	// the tenant's policies read the run context and recorded by
	// draftDecision (the actor handles one call at a time).
	run *runTicket
}

// Receive implements actor.Actor.
func (g *agentActor) Receive(ctx actor.Context) {
	g.idleT.seen(ctx.Message())
	switch m := ctx.Message().(type) {
	case *actor.Started:
		g.key = incarnationKey(ctx.Self().Id, agentPrefix)
		g.ref = g.table.self(g.key, ctx.Self())
		g.idleT.start(ctx, g.idle)
	case idleTick:
		if g.idleT.idle() {
			ctx.Stop(ctx.Self())
		}
	case *actor.ReceiveTimeout:
		// Idle now: protoactor's own timeout is no longer armed (idle.go),
		// but a sender may still stop the actor as when idle.
		ctx.Stop(ctx.Self())
	case *actor.Stopping:
		g.idleT.stop()
	case *actor.Stopped:
		// Calls still queued in the mailbox are dropped; their callers
		// retry on seeing the stop.
		if g.ref != nil {
			g.table.stopped(g.key, g.ref)
		}
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
		d := g.decide(c, m.m)
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
func (g *agentActor) decide(ctx context.Context, m *messages.Authorize) *draft {
	f := g.facts
	req := &m.Request
	g.run = nil
	refuse := func(r *authz.Refused) *draft {
		return &draft{outcome: &messages.AuthorizeOutcome{Failure: r.Failure()}}
	}

	// Rule 3: last seen (best effort), rate limit, quota.
	f.touch(messages.Heartbeat{TenantID: m.TenantID, AgentID: m.AgentID, At: m.ReceivedAt})
	lim, err := f.limits(ctx, m.TenantID, m.AgentID)
	if err != nil {
		return &draft{outcome: sharedFailure(f.logger(), err)}
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
	facts := authz.Facts{RequestMutates: req.MutatesState}
	if ad.Frozen != nil {
		return g.draftDecision(ctx, m, ad, *ad.Frozen, facts)
	}
	// Rule 6: tool permission bindings.
	bindings, err := f.bindings(ctx, m.TenantID, m.AgentID)
	if err != nil {
		return refuse(&authz.Refused{Refusal: messages.RefusalStoreUnavailable, Code: "database_unavailable", Message: "the database is unavailable", RetryAfter: 1})
	}
	if r := authz.Bound(bindings, ad.ToolCall.Tool); r != nil {
		return refuse(r)
	}
	// Rule 13: replay nonce (not consumed by a dry run).
	if req.Nonce != nil && !req.DryRun {
		fresh, err := f.claimNonce(ctx, m.TenantID, m.AgentID, *req.Nonce)
		if err != nil {
			return &draft{outcome: sharedFailure(f.logger(), err)}
		}
		if !fresh {
			facts.Replay = authz.NonceReplay
			return g.draftDecision(ctx, m, ad, authz.Replayed(), facts)
		}
	}
	// Rule 9: policy.
	res, facts, failed := g.evaluate(ctx, m, ad, facts)
	if failed != nil {
		return failed
	}
	if _, on := f.approvalTTL(); req.ApprovalID != nil && *req.ApprovalID != "" && res.Decision != authz.DecisionDeny && !res.Quarantine && on {
		return g.presentApproval(ctx, m, ad, res, facts)
	}
	return g.draftDecision(ctx, m, ad, res, facts)
}

// evaluate is rule 9's policy evaluation, with the skill registry's facts
// of the call and, when the tenant's policies read it, the run context; an
// unavailable or failing policy denies (fail closed), and run context that
// cannot be reached refuses the call (failed).
func (g *agentActor) evaluate(ctx context.Context, m *messages.Authorize, ad authz.Admission, facts authz.Facts) (policy.Result, authz.Facts, *draft) {
	f, req, tc := g.facts, &m.Request, ad.ToolCall
	in := policy.Input{TenantID: m.TenantID, Agent: policy.AgentInput{ID: m.AgentID, Name: m.AgentName, RiskTier: m.RiskTier, Status: m.AgentStatus},
		ToolCall:     policy.ToolCall{Tool: tc.Tool, Action: tc.Action, Resource: tc.Resource, Parameters: tc.Parameters},
		MutatesState: req.MutatesState, TrustLevel: ad.EffectiveTrust, RootTrustLevel: ad.EffectiveTrust}
	if req.Environment != nil {
		in.Environment = *req.Environment
	}
	sk := f.skill(ctx, m.TenantID, tc.Tool)
	act, registered := sk.skill.Actions[tc.Action]
	registered = registered && sk.found
	if registered {
		in.Skill, facts.Skill = SkillFacts(sk.skill, tc.Action, act)
	}
	if server, ok := strings.CutPrefix(tc.Tool, "mcp:"); ok {
		// The registry's server and tool (CONTRACT §8); the base policy
		// denies an unknown or quarantined server and a tool not approved.
		in.MCP = f.mcpInput(ctx, m.TenantID, server, tc.Action)
	}
	if err := f.ensurePolicies(ctx, m.TenantID); err != nil {
		f.logger().Error("tenant policies unavailable; failing closed", "tenant_id", m.TenantID, "error", err)
		return policy.Result{Decision: authz.DecisionDeny, Reason: "policy_unavailable"}, authz.Facts{RequestMutates: req.MutatesState}, nil
	}
	if fields := f.runFields(m.TenantID); fields.Any() {
		a := runAttempt(m, ad, act, sk.skill.OutputTrust, registered, in.MCP)
		tk, err := f.runContext(ctx, m, &a, fields)
		if errors.Is(err, errRunStore) {
			f.logger().Error("durable run taint unreadable; refusing the call (fail closed)", "error", err)
			return policy.Result{}, facts, &draft{outcome: ptr(failure(messages.RefusalStoreUnavailable, "database_unavailable", "the database is unavailable", 1))}
		}
		if err != nil {
			return policy.Result{}, facts, &draft{outcome: sharedFailure(f.logger(), err)}
		}
		g.run = tk
		in.Run, in.AgentHistory, in.RunKey = tk.ctx.Run, tk.ctx.AgentHistory, tk.ctx.Canonical
	}
	res, err := f.evaluatePolicy(ctx, m.TenantID, in)
	if err != nil {
		f.logger().Error("policy evaluation failed; failing closed", "tenant_id", m.TenantID, "error", err)
		res = policy.Result{Decision: authz.DecisionDeny, Reason: "policy_error"}
	}
	res.Shadow = f.shadowOutcomes(ctx, m.TenantID, in)
	return res, facts, nil
}

// SkillFacts are the policy input's skill object and rule 9's skill facts
// of action, registered in sk as act: what a live call's policy sees, and
// what a simulation rebuilds.
func SkillFacts(sk persistence.Skill, action string, act persistence.SkillAction) (*policy.SkillInput, authz.Skill) {
	out := act.OutputTrust
	if out == "" {
		out = sk.OutputTrust
	}
	return &policy.SkillInput{Key: sk.Key, Description: sk.Description, Action: action, Risk: act.Risk, MutatesState: act.MutatesState,
		ApprovalRequired: act.ApprovalRequired, OutputTrust: out, Labels: act.Labels}, authz.Skill{Risk: act.Risk, Mutates: act.MutatesState}
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
func (g *agentActor) presentApproval(ctx context.Context, m *messages.Authorize, ad authz.Admission, res policy.Result, facts authz.Facts) *draft {
	f, id, hash, run := g.facts, *m.Request.ApprovalID, ad.ActionHash, g.run
	// deny may run after the commit, off the actor (Authorizer.commit's
	// redraft): it uses the run ticket captured here.
	deny := func(reason string) *draft {
		df := facts
		if reason == authz.ReasonApprovalConsumed {
			df.Replay = authz.ApprovalReplay
		}
		return g.draftIn(ctx, m, ad, policy.Result{Decision: authz.DecisionDeny, Reason: reason, MatchedPolicies: res.MatchedPolicies,
			Shadow: res.Shadow}, df, run)
	}
	var reason string
	var err error
	if m.Request.DryRun {
		// Nothing is reserved or consumed by a dry run: only the check.
		reason, err = f.checkApproval(ctx, m.TenantID, id, m.AgentID, hash)
	} else {
		reason, err = f.reserveApproval(ctx, m.TenantID, id, m.AgentID, hash)
	}
	if err != nil {
		f.logger().Error("approval check failed; failing closed", "approval_id", id, "error", err)
		return &draft{outcome: ptr(failure(messages.RefusalStoreUnavailable, "database_unavailable", "the database is unavailable", 1))}
	}
	if reason != "" {
		return deny(reason)
	}
	facts.ApprovalUsed = true
	d := g.draftDecision(ctx, m, ad,
		policy.Result{Decision: authz.DecisionAllow, Reason: authz.ReasonApproved, MatchedPolicies: res.MatchedPolicies, RedactedFields: res.RedactedFields,
			Shadow: res.Shadow}, facts)
	if d.write != nil {
		d.write.Use = &persistence.ApprovalUse{ApprovalID: id, AgentID: m.AgentID, ActionHash: hash, At: d.write.Decision.CreatedAt}
		d.approvalID, d.denied = id, deny
	}
	return d
}

func ptr[T any](v T) *T { return &v }

// draftDecision asks rule 9 for the verdict, scores it, and builds the
// response, the rows and the verdict's SOC events.
func (g *agentActor) draftDecision(ctx context.Context, m *messages.Authorize, ad authz.Admission, res policy.Result, facts authz.Facts) *draft {
	return g.draftIn(ctx, m, ad, res, facts, g.run)
}

// draftIn is draftDecision with the call's place in its run given: a
// redraft after the commit (presentApproval's deny) runs off the actor's
// goroutine and must not read g.run, which the actor's next call rewrites.
func (g *agentActor) draftIn(ctx context.Context, m *messages.Authorize, ad authz.Admission, res policy.Result, facts authz.Facts, run *runTicket) *draft {
	f, req, tc, hash := g.facts, &m.Request, ad.ToolCall, ad.ActionHash
	settings := f.riskSettings(ctx, m.TenantID)
	facts.Escalation = authz.Escalation{Window: time.Duration(settings.WindowMinutes) * time.Minute, Threshold: settings.DenialThreshold}
	v := authz.Decide(res, facts)
	inputs := risk.Inputs{TrustLevel: ad.EffectiveTrust, MutatesState: v.Mutates, SkillRisk: facts.Skill.Risk, RiskTier: m.RiskTier,
		RecentDenials: f.recentDenials(ctx, m.TenantID, m.AgentID)}
	composite := risk.Composite(inputs, settings.Weights)
	advisory := risk.Advisory(inputs)
	resp := &messages.AuthorizeResponse{Decision: v.Decision, Reason: res.Reason, CompositeRiskScore: composite, RootTrustLevel: ad.EffectiveTrust,
		RedactedFields: nonNil(res.RedactedFields), DryRun: req.DryRun, ActionHash: hash, RiskScore: advisory,
		MatchedPolicies: nonNil(res.MatchedPolicies), RequestID: req.RequestID}
	if req.DryRun {
		return &draft{outcome: &messages.AuthorizeOutcome{Response: resp}}
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	decisionID, receiptID := persistence.NewRecordID(), persistence.NewRecordID()
	resp.DecisionID, resp.ReceiptID = decisionID, receiptID
	toolCall, _ := json.Marshal(tc)
	rec := persistence.Decision{ID: decisionID, TenantID: m.TenantID, AgentID: m.AgentID, RequestID: req.RequestID, Tool: tc.Tool,
		Action: tc.Action, Resource: tc.Resource, ActionHash: hash, Decision: v.Decision, Reason: res.Reason, RiskScore: advisory,
		CompositeRiskScore: composite, MatchedPolicyIDs: nonNil(res.MatchedPolicies), RedactedFields: nonNil(res.RedactedFields),
		MutatesState: v.Mutates, TrustLevel: ad.SourceTrust, RootTrustLevel: ad.EffectiveTrust, Environment: req.Environment,
		ToolCall: toolCall, CreatedAt: now, ReceiptID: receiptID, Nonce: req.Nonce, AuditID: persistence.NewRecordID(),
		EventID: uuid.NewString(), // the authorize_decision event's id (a security event: v4)
		Shadow:  g.facts.recordShadow(res.Shadow)}
	if req.Trace != nil {
		rec.RunID, rec.ParentRunID, rec.TraceID = req.Trace.RunID, req.Trace.ParentRunID, req.Trace.TraceID
	}
	if tk := run; tk != nil {
		// What the policy saw: kept with the decision (CONTRACT §16).
		rec.RunContext, rec.ContextHash = tk.ctx.Canonical, tk.ctx.Hash
	}
	receipt := &persistence.Receipt{ID: receiptID, TenantID: m.TenantID, DecisionID: decisionID, ActionHash: hash, Decision: v.Decision,
		CreatedAt: now, ContextHash: rec.ContextHash}
	// One record: the decision, its receipt and its authorize_decision
	// audit event (rec.AuditID; persistence.Decision.AuditEvent).
	w := &persistence.DecisionWrite{Decision: rec, Receipt: receipt}
	if ttl, on := f.approvalTTL(); v.Decision == "require_approval" && on {
		// The approval is created in the decision's transaction.
		expires := now.Add(ttl)
		w.Approval = &persistence.Approval{ID: uuid.NewString(), TenantID: m.TenantID, DecisionID: decisionID, AgentID: m.AgentID,
			ToolCall: toolCall, ActionHash: hash, Status: persistence.ApprovalPending, CreatedAt: now, ExpiresAt: expires}
		if wh := req.Webhook; wh != nil && wh.URL != "" {
			w.Approval.Callback = &persistence.ApprovalCallback{URL: wh.URL, Secret: wh.Secret}
		}
		resp.ApprovalID, resp.ApprovalExpiresAt = w.Approval.ID, &expires
	}
	if run != nil {
		w.Taint = run.taint
	}
	d := &draft{write: w, response: resp, verdict: v, run: run}
	for _, e := range v.Events {
		d.events = append(d.events, verdictEvent(m, &rec, e))
	}
	return d
}
