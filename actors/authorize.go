package actors

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/go-hclog"

	"svc/broadcast"
	"svc/canonical"
	"svc/messages"
	"svc/persistence"
	"svc/persistence/sharedstate"
	"svc/rules/authz"
	"svc/rules/policy"
	"svc/runstate"
)

// AuthorizerOptions are the authorize path's settings (SPEC part 8).
type AuthorizerOptions struct {
	RateCapacity       float64
	RateRefill         float64
	QuotaLimit         int
	QuotaWindow        time.Duration
	ReplayWindow       time.Duration
	SkillCacheCapacity int
	// MCPServerCacheCapacity and MCPToolCacheCapacity bound the MCP
	// registry's caches (0 disables one).
	MCPServerCacheCapacity int
	MCPToolCacheCapacity   int
	RiskWeightsTTL         time.Duration
	// IdempotencyTTL is how long a request_id's answer is kept in shared
	// state (the decision row stays the durable record).
	IdempotencyTTL time.Duration
	// AgentIdle stops an agent actor after this long without a call.
	AgentIdle time.Duration
	// CommitTimeout bounds the wait for the group commit.
	CommitTimeout time.Duration
	// EarlyAnswer answers low-risk read-only allows once their receipt is
	// sealed, before the commit (a lone node; the writer must have
	// EarlySeal).
	EarlyAnswer bool
	// Lost counts early-answered decisions whose write failed afterwards;
	// the GroupWriter increments it (shared so /metrics reports it).
	Lost *atomic.Uint64
	// Pending is the GroupWriter's count of early-answered writes not yet
	// committed (see Consistent).
	Pending *EarlyPending
	// OnLost hears of each low-risk read allow answered although its
	// record failed (best effort, SPEC 4.2 rule 10), as the writer's
	// EarlyLost does of early-answered ones.
	OnLost func(*persistence.DecisionWrite, error)
	// Approvals, when set, creates an approval for every require_approval
	// decision and checks the approvals presented with approval_id.
	Approvals *Approvals
	// RefusalStatus is the HTTP status the API answers a refusal with,
	// recorded in its authorize_refused audit event (the HTTP layer's
	// mapping; actors know no status).
	RefusalStatus func(messages.Refusal) int
	// Runs keeps the run context of CONTRACT §16; nil builds none.
	Runs sharedstate.Runs
	// RunMaxAge is how far back the durable taint floors are loaded (the
	// runs' maximum age).
	RunMaxAge time.Duration
	// Invalidations, when set, is the hub that drops the Authorizer's
	// cached skills, tenant policy and risk settings and reloads the base
	// policy set.
	Invalidations *broadcast.Invalidations
}

// Authorizer runs POST /v1/authorize: per-agent actors decide (SPEC 4.2
// rules 2 to 9), the GroupWriter makes the decision durable, and then the
// side effects run (events, quarantine, tier escalation). It is shared by
// every request; its caches are safe for concurrent use.
type Authorizer struct {
	system *actor.ActorSystem
	store  persistence.Store
	shared sharedstate.State
	writer *actor.PID
	events *broadcast.EventBus
	log    hclog.Logger
	opt    AuthorizerOptions

	agents actorTable  // tenant/agent → its actor (incarnation.go)
	facts  *factSource // what the agent actors read, and its caches (facts.go)
	// agentProps are every agent actor's props; an actor finds its key and
	// incarnation from its name on Started.
	agentProps *actor.Props

	bestEffortFailures atomic.Uint64
	decisions          atomic.Uint64
	earlyAnswers       atomic.Uint64
	refusals           atomic.Uint64
}

// NewAuthorizer builds the authorize service; writer is the GroupWriter.
func NewAuthorizer(system *actor.ActorSystem, store persistence.Store, shared sharedstate.State, engine *policy.Engine,
	writer *actor.PID, events *broadcast.EventBus, heartbeat func(messages.Heartbeat), o AuthorizerOptions, log hclog.Logger) (*Authorizer, error) {
	if o.IdempotencyTTL <= 0 {
		o.IdempotencyTTL = 24 * time.Hour
	}
	if o.AgentIdle <= 0 {
		o.AgentIdle = 2 * time.Minute
	}
	if o.CommitTimeout <= 0 {
		o.CommitTimeout = 15 * time.Second
	}
	if o.RunMaxAge <= 0 {
		o.RunMaxAge = runstate.DefaultMaxAge
	}
	if o.RefusalStatus == nil {
		o.RefusalStatus = func(messages.Refusal) int { return 0 }
	}
	f, err := newFactSource(store, shared, engine, heartbeat, o, log)
	if err != nil {
		return nil, err
	}
	a := &Authorizer{system: system, store: store, shared: shared, writer: writer, events: events, log: log, opt: o, facts: f}
	a.agentProps = actor.PropsFromProducer(func() actor.Actor {
		return &agentActor{facts: a.facts, table: &a.agents, idle: a.opt.AgentIdle}
	}, actor.WithDispatcher(dispatcherOf(a.system)), actor.WithMailbox(entityMailbox), actor.WithGuardian(onDemandGuardian))
	if o.Invalidations != nil {
		o.Invalidations.Subscribe(f.drop, messages.CacheSkill, messages.CachePolicy, messages.CacheRisk, messages.CacheBasePolicy)
		o.Invalidations.Subscribe(f.mcp.drop, messages.CacheMCP)
	}
	return a, nil
}

// MCPServer reads the tenant's MCP server through the authorize path's
// cache (dropped on every node at each change): found false when there
// is none, an error when the store cannot be read.
func (a *Authorizer) MCPServer(ctx context.Context, tenantID, key string) (persistence.MCPServer, bool, error) {
	return a.facts.mcp.server(ctx, tenantID, key)
}

// MCPToolReadOnly reports whether the server's tool toolKey (normalized)
// was discovered with annotations.readOnlyHint true, through the same
// cache; false for an unknown tool.
func (a *Authorizer) MCPToolReadOnly(ctx context.Context, tenantID, serverKey, toolKey string) (bool, error) {
	t, err := a.facts.mcp.tool(ctx, tenantID, serverKey, toolKey)
	return t.readOnly, err
}

// PreparePolicies loads the tenant's enabled policies and prepares their
// query (off the hot path: called by policy writes).
func (a *Authorizer) PreparePolicies(ctx context.Context, tenantID string) error {
	return a.facts.preparePolicies(ctx, tenantID)
}

// Consistent returns once every decision answered so far on this node is
// committed, so that a read that follows sees it (read-your-writes after
// early answers). It costs nothing while no early answer is pending.
func (a *Authorizer) Consistent(ctx context.Context) error {
	if a == nil || a.opt.Pending == nil || a.opt.Pending.Pending() == 0 {
		return nil
	}
	timeout := a.opt.CommitTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	reply := make(chan *barrierPassed, 1)
	a.system.Root.Send(a.writer, &barrier{Reply: reply})
	_, err := await(reply, timeout)
	return err
}

// Stats are counters for /metrics.
func (a *Authorizer) Stats() (decisions, bestEffortFailures, refusals uint64) {
	lost := a.bestEffortFailures.Load()
	if a.opt.Lost != nil {
		lost += a.opt.Lost.Load()
	}
	return a.decisions.Load(), lost, a.refusals.Load()
}

// EarlyAnswers counts the decisions answered before their commit (low-risk
// read-only allows on a lone node, SPEC 4.2 rule 10), for /metrics.
func (a *Authorizer) EarlyAnswers() uint64 { return a.earlyAnswers.Load() }

// ---- the request path ----

// draft is what an agent actor hands back: either a finished outcome (a
// refusal, a dry run) or a decision to make durable, with the verdict that
// says what follows it.
type draft struct {
	outcome  *messages.AuthorizeOutcome
	write    *persistence.DecisionWrite
	response *messages.AuthorizeResponse
	verdict  authz.Verdict
	// events are the verdict's SOC events, built with the decision.
	events  []messages.AseEvent
	idemKey string
	// approvalID is the approval this decision uses (write.Use is set); it
	// is reserved in its actor until the commit settles it. denied redrafts
	// the decision as a deny when another node consumed it first.
	approvalID string
	denied     func(reason string) *draft
	// run is the call's place in its run (CONTRACT §16), settled once the
	// decision is committed; nil without run context.
	run *runTicket
}

// Authorize decides one call; it blocks the calling (HTTP) goroutine, never
// an actor.
func (a *Authorizer) Authorize(ctx context.Context, m *messages.Authorize) messages.AuthorizeOutcome {
	m.Deadline = askDeadline(ctx)
	req := &m.Request
	var idemKey string
	if req.RequestID != nil && *req.RequestID != "" && !req.DryRun {
		idemKey = "idem:" + m.TenantID + ":" + m.AgentID + ":" + *req.RequestID
		if out, done := a.claimRequest(ctx, m, idemKey); done {
			return out
		}
	}
	d, err := a.askAgent(ctx, m)
	if err != nil {
		a.releaseRequest(idemKey)
		return failure(messages.RefusalUnavailable, "agent_unavailable", "the agent's actor did not answer: "+err.Error(), 1)
	}
	if d.outcome != nil {
		a.releaseRequest(idemKey)
		a.auditRefusal(m, d.outcome)
		return *d.outcome
	}
	d.idemKey = idemKey
	return a.commit(ctx, m, d)
}

// auditRefusal records a refusal that ended before a decision (403 before
// policy, 429) as a best-effort authorize_refused audit event, buffered by
// the writer (SVC_AUDIT_BATCH_SIZE, SVC_AUDIT_BATCH_FLUSH_MS).
func (a *Authorizer) auditRefusal(m *messages.Authorize, o *messages.AuthorizeOutcome) {
	f := o.Failure
	if f == nil || !f.Refusal.Audited() {
		return
	}
	a.refusals.Add(1)
	if m.Request.DryRun {
		return // SPEC 4.2 rule 11: a dry run writes no audit row, refused or not
	}
	tool := canonical.NormalizeIdentifier(m.Request.ToolCall.Tool)
	a.system.Root.Send(a.writer, &bufferAudit{Events: []persistence.AuditEvent{{ID: persistence.NewRecordID(), TenantID: m.TenantID,
		EventType: "authorize_refused", Action: f.Code, Actor: "agent:" + m.AgentID, AgentID: m.AgentID, CreatedAt: time.Now().UTC(),
		Details: map[string]any{"action": f.Code, "status": a.opt.RefusalStatus(f.Refusal), "tool": tool, "message": f.Message}}}})
}

func failure(r messages.Refusal, code, msg string, retryAfter int) messages.AuthorizeOutcome {
	return messages.AuthorizeOutcome{Failure: &messages.AuthorizeFailure{Refusal: r, Code: code, Message: msg, RetryAfter: retryAfter}}
}

func sharedFailure(log hclog.Logger, err error) *messages.AuthorizeOutcome {
	log.Warn("shared state unavailable; refusing the call (fail closed)", "error", err)
	o := failure(messages.RefusalUnavailable, "shared_state_unavailable",
		"shared state is unavailable; the call is refused (fail closed)", 1)
	return &o
}

// LiveAgents is the number of agent actors on this node.
func (a *Authorizer) LiveAgents() int { return a.agents.len() }

// askAgent sends the call to the agent's actor, spawning it when needed.
// A call that reaches an actor stopping for idleness is dead-lettered or
// dropped (incarnation.go); either way it goes to a fresh actor.
func (a *Authorizer) askAgent(ctx context.Context, m *messages.Authorize) (*draft, error) {
	key := m.TenantID + "/" + m.AgentID
	res, err := askIncarnation(&a.agents, key,
		func() (*actorRef, error) {
			return a.agents.get(a.system, key, agentPrefix+key, func(*actorRef) *actor.Props { return a.agentProps })
		},
		askDeadline(ctx),
		func(pid *actor.PID) chan agentAnswer {
			q := &agentAsk{m: m, reply: make(chan agentAnswer, 1)}
			a.system.Root.Send(pid, q)
			return q.reply
		},
		func(r agentAnswer) bool { return errors.Is(r.err, actor.ErrDeadLetter) })
	if err == nil {
		err = res.err
	}
	return res.d, err
}

// agentPrefix begins every agent actor's name: agentPrefix, its key, "#"
// and the incarnation's number.
const agentPrefix = "agent/"

// settle applies a committed decision to its run: at once in this
// process's state, or on a goroutine of its own when the state is shared
// (Valkey), whose channel closes when it is done (nil: nothing to wait for).
func (a *Authorizer) settle(d *draft) <-chan struct{} {
	if d.run == nil {
		return nil
	}
	rec := &d.write.Decision
	if sharedstate.InProcess(a.opt.Runs) {
		a.facts.settleRun(d.run, rec.Tool, rec.Action, rec.Decision, rec.Reason, rec.CreatedAt)
		return nil
	}
	done := make(chan struct{})
	tool, action, decision, reason, at := rec.Tool, rec.Action, rec.Decision, rec.Reason, rec.CreatedAt
	go func() {
		defer close(done)
		a.facts.settleRun(d.run, tool, action, decision, reason, at)
	}()
	return done
}

// commit makes the decision durable through the GroupWriter and answers.
func (a *Authorizer) commit(ctx context.Context, m *messages.Authorize, d *draft) messages.AuthorizeOutcome {
	early := d.verdict.LowRisk && a.opt.EarlyAnswer
	if early {
		// An early answer only for a record every backend can write; the
		// HTTP layer refuses such text, so a miss here is a gap to log.
		// Checked here, on the caller's goroutine, not on the writer's.
		if err := persistence.Storable(d.write); err != nil {
			a.log.Warn("decision answered after its commit: it holds text a backend may refuse", "decision_id", d.write.Decision.ID, "error", err)
			early = false
		}
	}
	reply := make(chan *Committed, 1)
	a.system.Root.Send(a.writer, &CommitDecision{Write: *d.write, Early: early, Reply: reply})
	var commitErr error
	var receiptHash string
	if c, err := await(reply, a.opt.CommitTimeout); err != nil {
		commitErr = err
	} else {
		commitErr, receiptHash = c.Err, c.ReceiptHash
		if c.Early && c.Err == nil {
			a.earlyAnswers.Add(1)
		}
	}
	a.decisions.Add(1)
	if d.approvalID != "" {
		a.opt.Approvals.Settle(m.TenantID, d.approvalID, commitErr == nil)
		if errors.Is(commitErr, persistence.ErrStateConflict) && d.denied != nil {
			// Another node consumed the approval between our check and our
			// transaction (the database arbitrated): record a deny instead.
			a.log.Info("approval used on another node first; recording a deny", "approval_id", d.approvalID)
			redo := d.denied(authz.ReasonApprovalConsumed)
			redo.idemKey = d.idemKey
			return a.commit(ctx, m, redo)
		}
	}
	if commitErr != nil {
		a.releaseRequest(d.idemKey)
		// A record no backend can hold is never allowed unrecorded: that
		// would be an audit evasion, not a database outage.
		if d.verdict.LowRisk && !errors.Is(commitErr, persistence.ErrInvalidInput) {
			// SPEC 4.2 rule 10: best effort for low-risk non-mutating allows.
			// The hole in the audit is counted, logged and alerted.
			a.bestEffortFailures.Add(1)
			a.log.Warn("decision not recorded (best effort allow)", "decision_id", d.response.DecisionID, "error", commitErr)
			if a.opt.OnLost != nil {
				a.opt.OnLost(d.write, commitErr)
			}
			resp := *d.response
			resp.DecisionID, resp.ReceiptID, resp.ReceiptHash = "", "", ""
			return messages.AuthorizeOutcome{Response: &resp}
		}
		a.log.Error("decision not recorded; denying (fail closed)", "decision_id", d.response.DecisionID, "error", commitErr)
		return messages.AuthorizeOutcome{FailClosed: true}
	}
	// The run's settlement lands before the answer, so that the caller's
	// next call sees this decision on any node. In Valkey it is a round
	// trip of its own: it runs beside the other work after the commit
	// (the idempotent answer's record, events) rather than after it.
	settled := a.settle(d)
	resp := d.response
	resp.ReceiptHash = receiptHash
	d.write.Decision.ReceiptHash = receiptHash // for the events' evidence
	a.rememberResponse(d.idemKey, resp)
	a.afterCommit(m, d)
	if settled != nil {
		<-settled
	}
	return messages.AuthorizeOutcome{Response: resp}
}
