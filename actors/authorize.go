package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	lru "github.com/hashicorp/golang-lru/v2"

	"svc/canonical"
	"svc/messages"
	"svc/persistence"
	"svc/persistence/sharedstate"
	"svc/rules/policy"
	"svc/rules/risk"
)

// AuthorizerOptions are the authorize path's settings (SPEC part 8).
type AuthorizerOptions struct {
	RateCapacity       float64
	RateRefill         float64
	QuotaLimit         int
	QuotaWindow        time.Duration
	ReplayWindow       time.Duration
	SkillCacheCapacity int
	RiskWeightsTTL     time.Duration
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
	// Invalidations, when set, is the hub that drops the Authorizer's
	// cached skills, tenant policy and risk settings and reloads the base
	// policy set.
	Invalidations *Invalidations
}

// Authorizer runs POST /v1/authorize: per-agent actors decide (SPEC 4.2
// rules 2 to 9), the GroupWriter makes the decision durable, and then the
// side effects run (events, quarantine, tier escalation). It is shared by
// every request; its caches are safe for concurrent use.
type Authorizer struct {
	system    *actor.ActorSystem
	store     persistence.Store
	shared    sharedstate.State
	engine    *policy.Engine
	writer    *actor.PID
	events    *EventBus
	heartbeat func(messages.Heartbeat)
	log       hclog.Logger
	opt       AuthorizerOptions

	agents actorTable // tenant/agent → its actor (incarnation.go)

	skills  *lru.Cache[string, skillEntry] // nil when the capacity is 0
	tenants sync.Map                       // tenant → *tenantEntry

	bestEffortFailures atomic.Uint64
	decisions          atomic.Uint64
	earlyAnswers       atomic.Uint64
	refusals           atomic.Uint64
}

type skillEntry struct {
	skill persistence.Skill
	found bool
}

// tenantEntry caches a tenant's policy version and risk settings.
type tenantEntry struct {
	mu          sync.Mutex
	policyVer   int64
	policyAt    time.Time
	risk        persistence.RiskSettings
	riskAt      time.Time
	riskLoaded  bool
	policyReady bool
}

// policyCheckEvery bounds how stale a node's view of a tenant's policy
// version may be when an invalidation message from another node is lost.
const policyCheckEvery = time.Second

// NewAuthorizer builds the authorize service; writer is the GroupWriter.
func NewAuthorizer(system *actor.ActorSystem, store persistence.Store, shared sharedstate.State, engine *policy.Engine,
	writer *actor.PID, events *EventBus, heartbeat func(messages.Heartbeat), o AuthorizerOptions, log hclog.Logger) (*Authorizer, error) {
	a := &Authorizer{system: system, store: store, shared: shared, engine: engine, writer: writer, events: events,
		heartbeat: heartbeat, log: log, opt: o}
	if o.SkillCacheCapacity > 0 {
		c, err := lru.New[string, skillEntry](o.SkillCacheCapacity)
		if err != nil {
			return nil, fmt.Errorf("actors: skill cache: %w", err)
		}
		a.skills = c
	}
	if a.opt.IdempotencyTTL <= 0 {
		a.opt.IdempotencyTTL = 24 * time.Hour
	}
	if a.opt.AgentIdle <= 0 {
		a.opt.AgentIdle = 2 * time.Minute
	}
	if a.opt.CommitTimeout <= 0 {
		a.opt.CommitTimeout = 15 * time.Second
	}
	if a.opt.RefusalStatus == nil {
		a.opt.RefusalStatus = func(messages.Refusal) int { return 0 }
	}
	if o.Invalidations != nil {
		o.Invalidations.Subscribe(a.drop, messages.CacheSkill, messages.CachePolicy, messages.CacheRisk, messages.CacheBasePolicy)
	}
	return a, nil
}

// drop applies an invalidation to the Authorizer's caches.
func (a *Authorizer) drop(inv messages.Invalidation) {
	switch inv.Kind {
	case messages.CacheSkill:
		if a.skills != nil {
			a.skills.Remove(inv.TenantID + "\x00" + inv.Key)
		}
	case messages.CachePolicy, messages.CacheRisk:
		a.tenants.Delete(inv.TenantID)
	case messages.CacheBasePolicy:
		if err := a.engine.ReloadBase(); err != nil {
			a.log.Error("base policy reload from another node failed; keeping the current set", "error", err)
		}
	case messages.CacheAll:
		if a.skills != nil {
			a.skills.Purge()
		}
		a.tenants.Range(func(k, _ any) bool { a.tenants.Delete(k); return true })
	}
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
	reply := make(chan *BarrierPassed, 1)
	a.system.Root.Send(a.writer, &Barrier{Reply: reply})
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
// refusal, a dry run, an idempotent replay) or a decision to make durable.
type draft struct {
	outcome  *messages.AuthorizeOutcome
	write    *persistence.DecisionWrite
	response *messages.AuthorizeResponse
	// lowRisk marks a non-mutating, low-risk allow: when its write fails it
	// is still answered (best effort), without receipt fields.
	lowRisk    bool
	quarantine bool
	deny       bool
	idemKey    string
	events     []messages.AseEvent
	// approvalID is the approval this decision uses (write.Use is set); it
	// is reserved in its actor until the commit settles it. denied redrafts
	// the decision as a deny when another node consumed it first.
	approvalID string
	denied     func(reason string) *draft
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
	a.system.Root.Send(a.writer, &BufferAudit{Events: []persistence.AuditEvent{{ID: uuid.NewString(), TenantID: m.TenantID,
		EventType: "authorize_refused", Action: f.Code, Actor: "agent:" + m.AgentID, AgentID: m.AgentID, CreatedAt: time.Now().UTC(),
		Details: map[string]any{"action": f.Code, "status": a.opt.RefusalStatus(f.Refusal), "tool": tool, "message": f.Message}}}})
}

func failure(r messages.Refusal, code, msg string, retryAfter int) messages.AuthorizeOutcome {
	return messages.AuthorizeOutcome{Failure: &messages.AuthorizeFailure{Refusal: r, Code: code, Message: msg, RetryAfter: retryAfter}}
}

func (a *Authorizer) sharedFailure(err error) *messages.AuthorizeOutcome {
	a.log.Warn("shared state unavailable; refusing the call (fail closed)", "error", err)
	o := failure(messages.RefusalUnavailable, "shared_state_unavailable",
		"shared state is unavailable; the call is refused (fail closed)", 1)
	return &o
}

// claimRequest implements rule 2 (idempotency): the first call with a
// request_id claims it atomically (SET NX) and evaluates; later ones get
// its answer, waiting while it is in flight.
func (a *Authorizer) claimRequest(ctx context.Context, m *messages.Authorize, key string) (messages.AuthorizeOutcome, bool) {
	ok, err := a.shared.SetNX(ctx, key, "pending", a.opt.IdempotencyTTL)
	if err != nil {
		return *a.sharedFailure(err), true
	}
	if ok {
		// The claim is ours. A decision committed before the shared state
		// was lost is still the answer.
		d, err := a.store.FindDecisionByRequest(ctx, m.TenantID, m.AgentID, *m.Request.RequestID)
		if err == nil {
			resp := responseFromDecision(d, m.Request.RequestID)
			if d.Decision == "require_approval" {
				// The approval to present goes with the answer (CONTRACT §4);
				// one deleted since (SVC_APPROVAL_RETENTION_DAYS) is left out.
				if ap, err := a.store.ApprovalForDecision(ctx, m.TenantID, d.ID); err == nil {
					expires := ap.ExpiresAt
					resp.ApprovalID, resp.ApprovalExpiresAt = ap.ID, &expires
				} else if !errors.Is(err, persistence.ErrNotFound) {
					a.releaseRequest(key)
					return failure(messages.RefusalStoreUnavailable, "database_unavailable", "the database is unavailable", 1), true
				}
			}
			a.rememberResponse(key, resp)
			return messages.AuthorizeOutcome{Response: resp}, true
		}
		if !errors.Is(err, persistence.ErrNotFound) {
			a.releaseRequest(key)
			return failure(messages.RefusalStoreUnavailable, "database_unavailable", "the database is unavailable", 1), true
		}
		return messages.AuthorizeOutcome{}, false
	}
	for {
		v, found, err := a.shared.Get(ctx, key)
		if err != nil {
			return *a.sharedFailure(err), true
		}
		if found && v != "pending" {
			var resp messages.AuthorizeResponse
			if json.Unmarshal([]byte(v), &resp) == nil {
				return messages.AuthorizeOutcome{Response: &resp}, true
			}
		}
		if !found {
			// The first call failed and released its claim: try again.
			return a.claimRequest(ctx, m, key)
		}
		select {
		case <-ctx.Done():
			return failure(messages.RefusalInFlight, "request_in_flight", "a call with this request_id is still being decided", 0), true
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func (a *Authorizer) rememberResponse(key string, resp *messages.AuthorizeResponse) {
	if key == "" {
		return
	}
	raw, err := json.Marshal(resp)
	if err != nil {
		return
	}
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.shared.Set(c, key, string(raw), a.opt.IdempotencyTTL); err != nil {
		a.log.Warn("idempotent answer not recorded; the decision row still answers a retry", "error", err)
	}
}

func (a *Authorizer) releaseRequest(key string) {
	if key == "" {
		return
	}
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = a.shared.Del(c, key)
}

func responseFromDecision(d persistence.Decision, requestID *string) *messages.AuthorizeResponse {
	return &messages.AuthorizeResponse{Decision: d.Decision, Reason: d.Reason, CompositeRiskScore: d.CompositeRiskScore,
		RootTrustLevel: d.RootTrustLevel, RedactedFields: nonNil(d.RedactedFields), DecisionID: d.ID, ActionHash: d.ActionHash,
		RiskScore: d.RiskScore, MatchedPolicies: nonNil(d.MatchedPolicyIDs), ReceiptID: d.ReceiptID, ReceiptHash: d.ReceiptHash,
		RequestID: requestID}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// LiveAgents is the number of agent actors on this node.
func (a *Authorizer) LiveAgents() int { return a.agents.len() }

// askAgent sends the call to the agent's actor, spawning it when needed.
// A call that reaches an actor stopping for idleness is dead-lettered or
// dropped (incarnation.go); either way it goes to a fresh actor.
func (a *Authorizer) askAgent(ctx context.Context, m *messages.Authorize) (*draft, error) {
	key := m.TenantID + "/" + m.AgentID
	res, err := askIncarnation(&a.agents, key,
		func() (*actorRef, error) { return a.agents.get(a.system, key, "agent/"+key, a.agentProps(key)) },
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

func (a *Authorizer) agentProps(key string) func(*actorRef) *actor.Props {
	return func(ref *actorRef) *actor.Props {
		return actor.PropsFromProducer(func() actor.Actor { return &AgentActor{auth: a, key: key, ref: ref} },
			actor.WithDispatcher(dispatcher),
			actor.WithGuardian(actor.NewOneForOneStrategy(10, 10*time.Second, actor.DefaultDecider)))
	}
}

// commit makes the decision durable through the GroupWriter and answers.
func (a *Authorizer) commit(ctx context.Context, m *messages.Authorize, d *draft) messages.AuthorizeOutcome {
	early := d.lowRisk && a.opt.EarlyAnswer
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
			redo := d.denied(ApprovalConsumedR)
			redo.idemKey = d.idemKey
			return a.commit(ctx, m, redo)
		}
	}
	if commitErr != nil {
		a.releaseRequest(d.idemKey)
		// A record no backend can hold is never allowed unrecorded: that
		// would be an audit evasion, not a database outage.
		if d.lowRisk && !errors.Is(commitErr, persistence.ErrInvalidInput) {
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
	resp := d.response
	resp.ReceiptHash = receiptHash
	d.write.Decision.ReceiptHash = receiptHash // for the events' evidence
	a.rememberResponse(d.idemKey, resp)
	a.afterCommit(m, d)
	return messages.AuthorizeOutcome{Response: resp}
}

// afterCommit runs the side effects of a recorded decision (rules 9 and 12,
// SPEC part 3): the quarantine transition, the tier escalation, and the SOC
// events. None of it changes the answer.
func (a *Authorizer) afterCommit(m *messages.Authorize, d *draft) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dec := &d.write.Decision
	for _, ev := range d.events {
		// Built before the receipt was sealed: its hash joins the evidence now.
		if ev.Evidence != nil && ev.Evidence.ReceiptID != nil && dec.ReceiptHash != "" {
			h := dec.ReceiptHash
			ev.Evidence.ReceiptHash = &h
		}
		a.events.Publish(ev)
	}
	if d.quarantine {
		_, err := a.store.TransitionAgent(ctx, m.TenantID, m.AgentID, []string{persistence.AgentActive}, persistence.AgentQuarantined,
			persistence.AuditEvent{ID: uuid.NewString(), TenantID: m.TenantID, EventType: "agent_quarantined", Action: "agent_quarantined",
				Actor: "policy", AgentID: m.AgentID, DecisionID: dec.ID,
				Details: map[string]any{"action": "agent_quarantined", "decision_id": dec.ID}, CreatedAt: time.Now().UTC()})
		if err == nil {
			a.events.Publish(a.event(m, dec, messages.KindAgentQuarantined, "agent quarantined by policy"))
		} else if !errors.Is(err, persistence.ErrStateConflict) {
			a.log.Error("quarantine failed", "agent_id", m.AgentID, "error", err)
		}
	}
	if d.deny {
		a.escalate(ctx, m, dec)
	}
}

// escalate applies the tier escalation (SPEC part 3): more than
// denial_threshold denies within window_minutes move the tier one step.
func (a *Authorizer) escalate(ctx context.Context, m *messages.Authorize, dec *persistence.Decision) {
	settings := a.riskSettings(ctx, m.TenantID)
	window := time.Duration(settings.WindowMinutes) * time.Minute
	key := "denials:" + m.TenantID + ":" + m.AgentID
	n, err := a.shared.WindowAdd(ctx, key, dec.ID, dec.CreatedAt, window)
	if err != nil {
		a.log.Warn("denial window not updated", "agent_id", m.AgentID, "error", err)
		return
	}
	_ = a.shared.Set(ctx, "denycount:"+m.TenantID+":"+m.AgentID, strconv.FormatInt(n, 10), window)
	if n <= int64(settings.DenialThreshold) {
		return
	}
	next, ok := risk.NextTier(m.RiskTier)
	if !ok {
		return
	}
	moved, err := a.store.EscalateTier(ctx, m.TenantID, m.AgentID, m.RiskTier, next,
		persistence.AuditEvent{ID: uuid.NewString(), TenantID: m.TenantID, EventType: "agent_risk_escalated", Action: "agent_risk_escalated",
			Actor: "risk", AgentID: m.AgentID, DecisionID: dec.ID, CreatedAt: time.Now().UTC(),
			Details: map[string]any{"action": "agent_risk_escalated", "from": m.RiskTier, "to": next, "denials": n,
				"window_minutes": settings.WindowMinutes, "denial_threshold": settings.DenialThreshold}})
	if err != nil {
		a.log.Error("tier escalation failed", "agent_id", m.AgentID, "error", err)
		return
	}
	if moved {
		_ = a.shared.Del(ctx, key)
		a.events.Publish(a.event(m, dec, messages.KindAgentRiskEscalated, fmt.Sprintf("risk tier %s -> %s after %d denials", m.RiskTier, next, n)))
	}
}

func (a *Authorizer) event(m *messages.Authorize, dec *persistence.Decision, kind, reason string) messages.AseEvent {
	id, hash, rid := dec.ID, dec.ActionHash, dec.ReceiptID
	trust, mutates := dec.RootTrustLevel, dec.MutatesState
	ev := messages.AseEvent{EventID: uuid.NewString(), OccurredAt: time.Now().UTC(), TenantID: m.TenantID, Kind: kind,
		AgentID: m.AgentID, Decision: dec.Decision, Tool: dec.Tool, Action: dec.Action, Resource: dec.Resource,
		RiskScore: dec.RiskScore, Reason: reason, RunID: dec.RunID, TraceID: dec.TraceID,
		MatchedPolicies: nonNil(dec.MatchedPolicyIDs), RedactedFields: nonNil(dec.RedactedFields), SchemaVersion: messages.SchemaVersion,
		Evidence: &messages.Evidence{DecisionID: &id, ActionHash: &hash, SourceTrust: &trust}}
	if kind == messages.KindAuthorizeDecision {
		ev.MutatesState = &mutates // only the decision's own event is about the call
	}
	if rid != "" {
		ev.Evidence.ReceiptID = &rid
		if dec.ReceiptHash != "" {
			h := dec.ReceiptHash
			ev.Evidence.ReceiptHash = &h
		}
	}
	return ev
}

// nonceKey is the shared-state key of an agent's replay nonce.
func nonceKey(tenantID, agentID, nonce string) string {
	return "nonce:" + tenantID + ":" + agentID + ":" + nonce
}

// RestoreNonces puts the replay nonces recorded within the last window back
// into the shared state, each for what remains of its window from its first
// use (SET NX: a nonce already there keeps its own expiry), so that a
// restart (a lone node keeps them in process) or a wiped Valkey does not
// reopen the window (SPEC 4.2 rule 13). It returns how many it restored.
func RestoreNonces(ctx context.Context, store persistence.DecisionStore, shared sharedstate.State, window time.Duration) (int, error) {
	now := time.Now()
	uses, err := store.RecentNonces(ctx, now.Add(-window))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, u := range uses { // oldest first: the first use sets the expiry
		left := u.At.Add(window).Sub(now)
		if left <= 0 {
			continue
		}
		fresh, err := shared.SetNX(ctx, nonceKey(u.TenantID, u.AgentID, u.Nonce), "1", left)
		if err != nil {
			return n, err
		}
		if fresh {
			n++
		}
	}
	return n, nil
}

// ---- the agent actor ----

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

// decide runs SPEC 4.2 rules 3 to 9 and 13 and returns a draft.
func (a *Authorizer) decide(ctx context.Context, m *messages.Authorize) *draft {
	req := &m.Request
	refuse := func(o messages.AuthorizeOutcome) *draft { return &draft{outcome: &o} }

	// Rule 3: last seen (best effort), rate limit, quota.
	a.heartbeat(messages.Heartbeat{TenantID: m.TenantID, AgentID: m.AgentID, At: m.ReceivedAt})
	okTok, retry, err := a.shared.TakeToken(ctx, "rl:"+m.TenantID+":"+m.AgentID, a.opt.RateCapacity, a.opt.RateRefill, 1)
	if err != nil {
		return &draft{outcome: a.sharedFailure(err)}
	}
	if !okTok {
		return refuse(failure(messages.RefusalThrottled, "rate_limited", "rate limit exceeded", retrySeconds(retry)))
	}
	if a.opt.QuotaLimit > 0 {
		n, ttl, err := a.shared.Incr(ctx, "quota:"+m.TenantID+":"+m.AgentID, a.opt.QuotaWindow)
		if err != nil {
			return &draft{outcome: a.sharedFailure(err)}
		}
		if n > int64(a.opt.QuotaLimit) {
			return refuse(failure(messages.RefusalThrottled, "quota_exceeded", "quota exhausted for this window", retrySeconds(ttl)))
		}
	}

	// Rules 7 and 8: normalize and combine trust (needed by every record).
	tc := canonical.ToolCall{Tool: canonical.NormalizeIdentifier(req.ToolCall.Tool), Action: canonical.NormalizeIdentifier(req.ToolCall.Action),
		Resource: req.ToolCall.Resource, Parameters: req.ToolCall.Parameters}
	if tc.Parameters == nil {
		tc.Parameters = map[string]any{}
	}
	hash, err := canonical.NormalizedActionHash(tc)
	if err != nil {
		return refuse(failure(messages.RefusalInvalid, "invalid_tool_call", "tool_call cannot be canonicalized: "+err.Error(), 0))
	}
	source, _ := policy.ParseTrust(req.SourceTrust)
	effective := source
	if req.Trace != nil && req.Trace.RootTrustLevel != nil && *req.Trace.RootTrustLevel != "" {
		// An empty root means no upstream hop, not "unknown".
		root, _ := policy.ParseTrust(*req.Trace.RootTrustLevel)
		effective = policy.Tighten(root, source)
	}

	// Rule 4: status. Only active and frozen agents authenticate; a frozen
	// one is denied and the attempt recorded.
	if m.AgentStatus == persistence.AgentFrozen {
		return a.draftDecision(ctx, m, tc, hash, source, effective, policy.Result{Decision: "deny", Reason: "agent_frozen"}, nil)
	}
	// Rule 5: environments.
	if len(m.AllowedEnvironments) > 0 {
		env := ""
		if req.Environment != nil {
			env = *req.Environment
		}
		allowed := false
		for _, e := range m.AllowedEnvironments {
			if e == env {
				allowed = true
				break
			}
		}
		if !allowed {
			return refuse(failure(messages.RefusalNotPermitted, "FORBIDDEN", "environment not allowed for this agent", 0))
		}
	}
	// Rule 6: tool permission bindings.
	perms, err := a.store.ListPermissions(ctx, m.TenantID, m.AgentID)
	if err != nil {
		return refuse(failure(messages.RefusalStoreUnavailable, "database_unavailable", "the database is unavailable", 1))
	}
	if len(perms) > 0 {
		bound := false
		for _, p := range perms {
			if canonical.NormalizeIdentifier(p.ToolKey) == tc.Tool {
				bound = true
				break
			}
		}
		if !bound {
			return refuse(failure(messages.RefusalNotPermitted, "FORBIDDEN", "tool not in the agent's permission bindings", 0))
		}
	}
	// Rule 13: replay nonce (not consumed by a dry run).
	if req.Nonce != nil && !req.DryRun {
		fresh, err := a.shared.SetNX(ctx, nonceKey(m.TenantID, m.AgentID, *req.Nonce), "1", a.opt.ReplayWindow)
		if err != nil {
			return &draft{outcome: a.sharedFailure(err)}
		}
		if !fresh {
			r := policy.Result{Decision: "deny", Reason: "replay_nonce_reused"}
			d := a.draftDecision(ctx, m, tc, hash, source, effective, r, nil)
			if d.write != nil {
				ev := a.event(m, &d.write.Decision, messages.KindReplayAttempt, "replay nonce reused")
				ev.Tool, ev.Action, ev.RiskScore, ev.Decision = "replay_nonce_reused", "replay_nonce_reused", 100, "deny"
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
	var facts skillFacts
	if skill.found {
		if act, ok := skill.skill.Actions[tc.Action]; ok {
			facts = skillFacts{risk: act.Risk, mutates: act.MutatesState}
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
		return a.draftDecision(ctx, m, tc, hash, source, effective, policy.Result{Decision: "deny", Reason: "policy_unavailable"}, nil)
	}
	res, err := a.engine.Evaluate(ctx, m.TenantID, in)
	if err != nil {
		a.log.Error("policy evaluation failed; failing closed", "tenant_id", m.TenantID, "error", err)
		res = policy.Result{Decision: "deny", Reason: "policy_error"}
	}
	if req.ApprovalID != nil && *req.ApprovalID != "" && res.Decision != "deny" && !res.Quarantine && a.opt.Approvals != nil {
		return a.presentApproval(ctx, m, tc, hash, source, effective, res, &facts)
	}
	return a.draftDecision(ctx, m, tc, hash, source, effective, res, &facts)
}

// presentApproval decides a call that presents approval_id (CONTRACT §4):
// allow with reason approved when the approval is this agent's, APPROVED,
// unexpired, unconsumed and bound to this action hash, the approval then
// being consumed in the decision's transaction; otherwise deny with the
// reason that applies. A deny or quarantine from the policy wins over any
// approval (the caller checks that first).
func (a *Authorizer) presentApproval(ctx context.Context, m *messages.Authorize, tc canonical.ToolCall, hash, source, effective string,
	res policy.Result, skill *skillFacts) *draft {
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

func retrySeconds(d time.Duration) int { return max(1, int(math.Ceil(d.Seconds()))) }

// skillFacts is what the skill registry says of the call's action.
type skillFacts struct {
	risk    string
	mutates bool
}

// draftDecision scores the outcome and builds the response and the rows.
func (a *Authorizer) draftDecision(ctx context.Context, m *messages.Authorize, tc canonical.ToolCall, hash, source, effective string,
	res policy.Result, skill *skillFacts) *draft {
	req := &m.Request
	// A call mutates state when the request or the skill registry says so:
	// the policy sees both (base.rego's mutating), and the record, the risk
	// score, the SOC event and the early answer go by the same fact, or an
	// agent could send mutates_state false for a registered mutation and
	// have it scored, detected and answered as a read.
	sr, mutates := "", req.MutatesState
	if skill != nil {
		sr, mutates = skill.risk, mutates || skill.mutates
	}
	settings := a.riskSettings(ctx, m.TenantID)
	denials := 0
	if v, ok, err := a.shared.Get(ctx, "denycount:"+m.TenantID+":"+m.AgentID); err == nil && ok {
		denials, _ = strconv.Atoi(v)
	}
	inputs := risk.Inputs{TrustLevel: effective, MutatesState: mutates, SkillRisk: sr, RiskTier: m.RiskTier, RecentDenials: denials}
	composite := risk.Composite(inputs, settings.Weights)
	advisory := risk.Advisory(inputs)
	decision := res.Decision
	if res.Quarantine {
		decision = "quarantine"
	}
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
	d := &draft{write: w,
		response:   resp,
		lowRisk:    decision == "allow" && !mutates && sr != "high" && sr != "critical",
		quarantine: decision == "quarantine", deny: decision == "deny" || decision == "quarantine"}
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
