package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"svc/broadcast"
	"svc/canonical"
	"svc/leader"
	"svc/messages"
	"svc/persistence"
)

// Reasons of a presented approval that does not grant the call (CONTRACT §4).
const (
	ApprovalGranted     = "approved"
	ApprovalNotGranted  = "approval_not_granted"
	ApprovalMismatch    = "approval_mismatch"
	ApprovalExpiredR    = "approval_expired"
	ApprovalConsumedR   = "approval_consumed"
	approvalActorPrefix = "approval/"
)

// ApprovalOptions configure the approval actors.
type ApprovalOptions struct {
	// TTL is how long a new approval stays grantable (SVC_APPROVAL_TTL_SECS).
	TTL time.Duration
	// Idle stops an approval's actor after this long without a message.
	Idle time.Duration
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
}

// Approvals runs one supervised actor per approval in use on this node
// (SPEC 3 Approval): the actor serializes the approval's operations here,
// and every transition is a conditional update in the database, which
// arbitrates between nodes. The actor also holds the reservation of an
// approval presented on authorize while its decision is being committed,
// so that concurrent presentations on this node are refused at once
// instead of failing the group commit.
type Approvals struct {
	system *actor.ActorSystem
	store  persistence.Store
	events *broadcast.EventBus
	log    hclog.Logger
	opt    ApprovalOptions
	actors actorTable // tenant/id → its actor (incarnation.go)
	// decided run, in order, after an approval is approved, rejected or
	// edited on this node (OnDecided).
	decided []func(persistence.Approval)
}

// OnDecided registers fn to run after each approve, reject or edit made on
// this node, with the approval as decided: the waiters' wake-up and the
// agent's callback. Register before serving; fn must not block.
func (a *Approvals) OnDecided(fn func(persistence.Approval)) { a.decided = append(a.decided, fn) }

// NewApprovals returns the approval actors' front.
func NewApprovals(system *actor.ActorSystem, store persistence.Store, events *broadcast.EventBus, o ApprovalOptions, log hclog.Logger) *Approvals {
	if o.TTL <= 0 {
		o.TTL = 30 * time.Minute
	}
	if o.Idle <= 0 {
		o.Idle = 2 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Approvals{system: system, store: store, events: events, log: log, opt: o}
}

// TTL is the lifetime of a new approval.
func (a *Approvals) TTL() time.Duration { return a.opt.TTL }

// Now is the approvals' clock.
func (a *Approvals) Now() time.Time { return a.opt.Now().UTC() }

type approvalOp int

const (
	opDecide approvalOp = iota
	opConsume
	opReserve
	opSettle
)

// approvalReq is one operation on one approval.
type approvalReq struct {
	op       approvalOp
	decision persistence.ApprovalDecision
	params   map[string]any   // edit: the new parameters
	agentID  string           // consume and reserve: the caller's agent ("" for an operator)
	hash     string           // reserve: the presented call's action hash
	actor    string           // who, for the audit event
	consumed bool             // settle: the reserved use was committed
	reply    chan approvalRes // nil for settle, which is not answered
}

func (q *approvalReq) deadLetter() {
	if q.reply != nil {
		offer(q.reply, approvalRes{err: actor.ErrDeadLetter})
	}
}

// IgnoreDeadLetterLogging: a dead-lettered request is answered and retried
// (a settle reached an actor that no longer holds the reservation).
func (q *approvalReq) IgnoreDeadLetterLogging() {}

type approvalRes struct {
	approval persistence.Approval
	reason   string // reserve: "" when reserved, else the deny reason
	err      error
}

// Decide approves, rejects or (with params) edits a pending approval:
// ErrNotFound, or ErrStateConflict when it is decided or expired.
func (a *Approvals) Decide(ctx context.Context, d persistence.ApprovalDecision, params map[string]any, actorName string) (persistence.Approval, error) {
	r, err := a.ask(ctx, d.TenantID, d.ID, &approvalReq{op: opDecide, decision: d, params: params, actor: actorName})
	if err == nil {
		for _, fn := range a.decided {
			fn(r.approval)
		}
	}
	return r.approval, err
}

// Consume uses an approved approval once (agentID "" for an operator):
// ErrNotFound, or ErrStateConflict when it is not approved, expired or
// already consumed; the last emits a replay_attempt event.
func (a *Approvals) Consume(ctx context.Context, tenantID, id, agentID, actorName string) (persistence.Approval, error) {
	r, err := a.ask(ctx, tenantID, id, &approvalReq{op: opConsume, agentID: agentID, actor: actorName})
	return r.approval, err
}

// Reserve checks an approval presented on authorize and, when it grants
// the call, reserves it until Settle. It returns "" when reserved, or the
// deny reason of CONTRACT §4, with the approval when one was read.
func (a *Approvals) Reserve(ctx context.Context, tenantID, id, agentID, hash string) (string, persistence.Approval, error) {
	r, err := a.ask(ctx, tenantID, id, &approvalReq{op: opReserve, agentID: agentID, hash: hash})
	return r.reason, r.approval, err
}

// Settle ends a reservation: consumed when the decision that used the
// approval was committed. The reservation lives in the approval's live
// incarnation; with none there is nothing to end (a fresh one holds no
// reservation), so none is spawned.
func (a *Approvals) Settle(tenantID, id string, consumed bool) {
	if ref, ok := a.actors.load(tenantID + "/" + id); ok {
		a.system.Root.Send(ref.pid, &approvalReq{op: opSettle, consumed: consumed})
	}
}

// ask runs one operation on the approval's actor, on a fresh actor when it
// reaches one stopping for idleness (incarnation.go).
func (a *Approvals) ask(ctx context.Context, tenantID, id string, req *approvalReq) (approvalRes, error) {
	key := tenantID + "/" + id
	r, err := askIncarnation(&a.actors, key,
		func() (*actorRef, error) {
			return a.actors.get(a.system, key, approvalActorPrefix+key, a.props(tenantID, id))
		},
		askDeadline(ctx),
		func(pid *actor.PID) chan approvalRes {
			q := *req
			q.reply = make(chan approvalRes, 1)
			a.system.Root.Send(pid, &q)
			return q.reply
		},
		func(r approvalRes) bool { return errors.Is(r.err, actor.ErrDeadLetter) })
	if err != nil {
		return approvalRes{}, fmt.Errorf("%w: approval actor: %w", persistence.ErrUnavailable, err)
	}
	return r, r.err
}

// onDemandGuardian supervises the actors spawned on demand (agents,
// approvals): each may restart 10 times in 10 seconds. It is one value for
// all of them because protoactor keeps a guardian process, for the life of
// the actor system, per distinct strategy value: a strategy made per spawn
// left one guardian behind per incarnation (about 1 KB each; 100,000
// agents called once kept some 100 MB after their actors had stopped).
var onDemandGuardian = actor.NewOneForOneStrategy(10, 10*time.Second, actor.DefaultDecider)

func (a *Approvals) props(tenantID, id string) func(*actorRef) *actor.Props {
	key := tenantID + "/" + id
	return func(ref *actorRef) *actor.Props {
		return actor.PropsFromProducer(func() actor.Actor {
			return &approvalActor{front: a, key: key, ref: ref, tenantID: tenantID, id: id}
		}, actor.WithDispatcher(dispatcherOf(a.system)), actor.WithMailbox(entityMailbox), actor.WithGuardian(onDemandGuardian))
	}
}

// approvalActor is one approval's state machine on this node (SPEC 3):
// PENDING to APPROVED or REJECTED once, APPROVED consumed once, EXPIRED
// past expires_at. The database row is the truth; the actor adds the
// serialization of this node's requests and the in-flight reservation.
type approvalActor struct {
	front    *Approvals
	key      string
	ref      *actorRef // the incarnation; a restart after a panic keeps it
	tenantID string
	id       string
	reserved bool
	// reservedAt is when the reservation was taken.
	reservedAt time.Time
	idle       idleTimer
}

// Receive implements actor.Actor.
func (p *approvalActor) Receive(ctx actor.Context) {
	p.idle.seen(ctx.Message())
	switch m := ctx.Message().(type) {
	case *actor.Started:
		p.idle.start(ctx, p.front.opt.Idle)
	case idleTick, *actor.ReceiveTimeout:
		// A ReceiveTimeout is idle now: protoactor's own timeout is no
		// longer armed (idle.go), but a sender may still stop the actor as
		// when idle.
		if _, tick := m.(idleTick); tick && !p.idle.idle() {
			return
		}
		if p.reserved && time.Since(p.reservedAt) < reservationLimit {
			// A decision using this approval is still being committed; wait
			// another idle period.
			p.idle.rearm()
			return
		}
		ctx.Stop(ctx.Self())
	case *actor.Stopping:
		p.idle.stop()
	case *actor.Stopped:
		p.front.actors.stopped(p.key, p.ref) // requests still queued are retried
	case *approvalReq:
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var res approvalRes
		switch m.op {
		case opDecide:
			res = p.decide(c, m)
		case opConsume:
			res = p.consume(c, m)
		case opReserve:
			res = p.reserve(c, m)
		case opSettle:
			p.reserved = false
			return
		}
		offer(m.reply, res)
	}
}

func (p *approvalActor) decide(ctx context.Context, m *approvalReq) approvalRes {
	d := m.decision
	d.TenantID, d.ID, d.At = p.tenantID, p.id, p.front.Now()
	event := "approval_rejected"
	if d.Status == persistence.ApprovalApproved {
		event = "approval_approved"
	}
	cur, err := p.front.store.GetApproval(ctx, p.tenantID, p.id)
	if err != nil {
		return approvalRes{err: err}
	}
	if m.params != nil {
		var tc canonical.ToolCall
		if err := json.Unmarshal(cur.ToolCall, &tc); err != nil {
			return approvalRes{err: fmt.Errorf("actors: stored tool_call of approval %s: %w", p.id, err)}
		}
		tc.Parameters = m.params
		hash, err := canonical.NormalizedActionHash(tc)
		if err != nil {
			return approvalRes{err: fmt.Errorf("%w: parameters cannot be canonicalized: %w", errInvalidParameters, err)}
		}
		raw, err := json.Marshal(tc)
		if err != nil {
			return approvalRes{err: err}
		}
		d.ToolCall, d.ActionHash, d.Status, event = raw, hash, persistence.ApprovalApproved, "approval_edited"
	}
	details := map[string]any{"action": event, "approval_id": p.id, "status": d.Status, "approver_user_id": d.ApproverUserID}
	if d.Reason != nil {
		details["reason"] = *d.Reason
	}
	if d.ActionHash != "" {
		details["action_hash"] = d.ActionHash
	}
	a, err := p.front.store.DecideApproval(ctx, d, persistence.AuditEvent{ID: persistence.NewRecordID(), TenantID: p.tenantID, EventType: event,
		Action: event, Actor: m.actor, AgentID: cur.AgentID, DecisionID: cur.DecisionID, CreatedAt: d.At, Details: details})
	return approvalRes{approval: a, err: err}
}

// errInvalidParameters marks edit parameters that cannot be hashed.
var errInvalidParameters = errors.New("invalid parameters")

// IsInvalidParameters reports an edit whose parameters cannot be hashed.
func IsInvalidParameters(err error) bool { return errors.Is(err, errInvalidParameters) }

func (p *approvalActor) consume(ctx context.Context, m *approvalReq) approvalRes {
	now := p.front.Now()
	if p.reserved {
		// A decision presenting this approval is being committed: this
		// consumption is the second one.
		a, err := p.front.store.GetApproval(ctx, p.tenantID, p.id)
		if err == nil && m.agentID != "" && a.AgentID != m.agentID {
			return approvalRes{err: persistence.ErrNotFound}
		}
		if err == nil {
			p.replay(a, "approval consumed twice")
		}
		return approvalRes{approval: a, err: errors.Join(persistence.ErrStateConflict, err)}
	}
	a, err := p.front.store.ConsumeApproval(ctx, p.tenantID, p.id, m.agentID, now, persistence.AuditEvent{ID: persistence.NewRecordID(),
		TenantID: p.tenantID, EventType: "approval_consumed", Action: "approval_consumed", Actor: m.actor, AgentID: m.agentID,
		CreatedAt: now, Details: map[string]any{"action": "approval_consumed", "approval_id": p.id}})
	if errors.Is(err, persistence.ErrStateConflict) {
		if cur, gerr := p.front.store.GetApproval(ctx, p.tenantID, p.id); gerr == nil {
			a = cur
			if cur.ConsumedAt != nil {
				p.replay(cur, "approval consumed twice")
			}
		}
	}
	return approvalRes{approval: a, err: err}
}

func (p *approvalActor) reserve(ctx context.Context, m *approvalReq) approvalRes {
	if p.reserved && time.Since(p.reservedAt) > reservationLimit {
		p.reserved = false // its decision never settled (the caller gave up)
	}
	a, err := p.front.store.GetApproval(ctx, p.tenantID, p.id)
	if errors.Is(err, persistence.ErrNotFound) {
		return approvalRes{reason: ApprovalNotGranted}
	}
	if err != nil {
		return approvalRes{err: err}
	}
	reason := classifyApproval(a, m.agentID, m.hash, p.front.Now(), p.reserved)
	if reason == "" {
		p.reserved, p.reservedAt = true, time.Now()
	}
	return approvalRes{approval: a, reason: reason}
}

// reservationLimit bounds a reservation whose decision never settles.
const reservationLimit = time.Minute

// classifyApproval is the check of an approval presented on authorize
// (CONTRACT §4): "" when it grants the call, else the deny reason. A zero
// approval (none found) and another agent's approval are not granted.
func classifyApproval(a persistence.Approval, agentID, hash string, now time.Time, reserved bool) string {
	switch {
	case a.ID == "" || a.AgentID != agentID:
		return ApprovalNotGranted
	case a.ConsumedAt != nil || reserved:
		return ApprovalConsumedR
	case a.EffectiveStatus(now) == persistence.ApprovalExpired:
		return ApprovalExpiredR
	case a.Status != persistence.ApprovalApproved:
		return ApprovalNotGranted
	case a.ActionHash != hash:
		return ApprovalMismatch
	}
	return ""
}

// replay emits the replay_attempt SOC event of a second consumption.
func (p *approvalActor) replay(a persistence.Approval, reason string) {
	if p.front.events == nil {
		return
	}
	p.front.events.Publish(approvalEvent(a, messages.KindReplayAttempt, reason))
}

// approvalEvent is a SOC event about an approval: ids and hashes only.
func approvalEvent(a persistence.Approval, kind, reason string) messages.AseEvent {
	var tc canonical.ToolCall
	_ = json.Unmarshal(a.ToolCall, &tc)
	decisionID, hash := a.DecisionID, a.ActionHash
	return messages.AseEvent{EventID: uuid.NewString(), OccurredAt: time.Now().UTC(), TenantID: a.TenantID, Kind: kind,
		AgentID: a.AgentID, Decision: "deny", Tool: tc.Tool, Action: tc.Action, Resource: tc.Resource, RiskScore: 100,
		Reason: reason, MatchedPolicies: []string{}, RedactedFields: []string{}, SchemaVersion: messages.SchemaVersion,
		Evidence: &messages.Evidence{DecisionID: &decisionID, ActionHash: &hash}}
}

// NewApprovalCleaner returns the producer of the job that deletes decided
// or expired approvals older than the retention
// (SVC_APPROVAL_RETENTION_DAYS) every interval, on the leader only (SPEC
// part 3, background leadership); deleted counts them. isLeader nil runs
// it on every node.
func NewApprovalCleaner(store persistence.ApprovalStore, every, retention time.Duration, isLeader func() bool, deleted *atomic.Uint64,
	jobs *leader.JobStats, log hclog.Logger) actor.Producer {
	return newLeaderJob(jobSpec{name: JobApprovalCleanup, every: every, isLeader: isLeader, stats: jobs, log: log,
		run: func() (string, error) {
			ctx, cancel := ioContext(time.Minute)
			defer cancel()
			n, err := store.DeleteStaleApprovals(ctx, time.Now().UTC().Add(-retention))
			if err != nil {
				return "", err
			}
			if deleted != nil {
				deleted.Add(uint64(max(n, 0)))
			}
			return fmt.Sprintf("%d stale approvals deleted", n), nil
		}})
}
