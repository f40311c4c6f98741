package actors

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"svc/broadcast"
	"svc/messages"
	"svc/persistence"
	"svc/testkit"
)

// stopWithQueued makes ref's actor stop for idleness with a request queued
// behind the stop: the mailbox is suspended, the idle timeout is queued,
// then ask runs (its request queues behind the timeout), and the mailbox is
// resumed. protoactor drops that request without a dead letter; ask must
// still get its answer well before its 5 s deadline. It returns how long
// ask took.
func stopWithQueued(t *testing.T, sys *actor.ActorSystem, ref *actorRef, ask func()) time.Duration {
	t.Helper()
	proc, ok := sys.ProcessRegistry.Get(ref.pid)
	if !ok {
		t.Fatal("actor not registered")
	}
	proc.SendSystemMessage(ref.pid, &actor.SuspendMailbox{})
	sys.Root.Send(ref.pid, &actor.ReceiveTimeout{})
	took := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		ask()
		took <- time.Since(start)
	}()
	time.Sleep(200 * time.Millisecond) // the request is queued behind the timeout
	proc.SendSystemMessage(ref.pid, &actor.ResumeMailbox{})
	d := <-took
	select {
	case <-ref.stopped:
	default:
		t.Fatal("the idle actor did not stop")
	}
	if d > 4*time.Second {
		t.Fatalf("the request queued as its actor stopped took %v: it waited out its deadline", d)
	}
	return d
}

// A call queued in an agent actor's mailbox just as the actor stops for
// idleness goes to a fresh actor.
func TestCallQueuedAsAgentActorStopsIsRetried(t *testing.T) {
	sys, _, store, tenant, auth := authorizerFixture(t, 0)
	a, read := readCaller(t, store, tenant, auth)
	call := func() messages.AuthorizeOutcome {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return read(ctx)
	}
	key := tenant + "/" + a.ID
	ref := firstCall(t, auth, key, read)
	var out messages.AuthorizeOutcome
	stopWithQueued(t, sys, ref, func() { out = call() })
	if out.Response == nil || out.Response.Decision != "allow" {
		t.Fatalf("call queued as the actor stopped = %+v %+v", out.Response, out.Failure)
	}
	if fresh, _ := auth.agents.load(key); fresh == ref {
		t.Fatal("the stopped agent actor is still in the table")
	}
}

// The same for an approval's actor: the request gets the actor's answer
// (here: an unknown approval is not granted), not ErrUnavailable after its
// deadline.
func TestRequestQueuedAsApprovalActorStopsIsRetried(t *testing.T) {
	sys, _, store, tenant := writerFixture(t, WriterOptions{})
	ap := NewApprovals(sys, store, broadcast.NewEventBus(sys.Root, 16), ApprovalOptions{}, hclog.NewNullLogger())
	id := uuid.NewString()
	reserve := func() (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		reason, _, err := ap.Reserve(ctx, tenant, id, "agent", "hash")
		return reason, err
	}
	if reason, err := reserve(); reason != ApprovalNotGranted || err != nil {
		t.Fatalf("reserve of an unknown approval: %q %v, want %q", reason, err, ApprovalNotGranted)
	}
	ref, ok := ap.actors.load(tenant + "/" + id)
	if !ok {
		t.Fatal("no approval actor after a request")
	}
	var reason string
	var err error
	stopWithQueued(t, sys, ref, func() { reason, err = reserve() })
	if reason != ApprovalNotGranted || err != nil {
		t.Fatalf("request queued as the actor stopped: %q %v, want %q", reason, err, ApprovalNotGranted)
	}
}

// An approval's actor that is reserved when its idle timeout fires waits
// another idle period (protoactor disarms the timeout on firing), and stops
// once the reservation is settled.
func TestReservedApprovalActorStopsAfterSettle(t *testing.T) {
	sys, _, store, tenant := writerFixture(t, WriterOptions{})
	ctx := context.Background()
	w := write(tenant)
	now := time.Now().UTC().Truncate(time.Microsecond)
	w.Decision.Decision, w.Receipt.Decision = "require_approval", "require_approval"
	w.Approval = &persistence.Approval{ID: uuid.NewString(), TenantID: tenant, DecisionID: w.Decision.ID, AgentID: w.Decision.AgentID,
		ToolCall: w.Decision.ToolCall, ActionHash: w.Decision.ActionHash, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if err := store.CommitDecisions(ctx, []persistence.DecisionWrite{w}, NewSealer(nil, nil)); err != nil {
		t.Fatal(err)
	}
	ap := NewApprovals(sys, store, broadcast.NewEventBus(sys.Root, 16), ApprovalOptions{Idle: 50 * time.Millisecond}, hclog.NewNullLogger())
	id := w.Approval.ID
	if _, err := ap.Decide(ctx, persistence.ApprovalDecision{TenantID: tenant, ID: id, Status: persistence.ApprovalApproved,
		ApproverUserID: "alice"}, nil, "operator:test"); err != nil {
		t.Fatal(err)
	}
	if reason, _, err := ap.Reserve(ctx, tenant, id, w.Decision.AgentID, w.Decision.ActionHash); reason != "" || err != nil {
		t.Fatalf("reserve: %q %v", reason, err)
	}
	time.Sleep(300 * time.Millisecond) // several idle periods, reserved throughout
	if ap.actors.len() != 1 {
		t.Fatal("the approval's actor stopped while reserved")
	}
	ap.Settle(tenant, id, false)
	testkit.Eventually(t, 3*time.Second, "the approval's actor to stop after the settle", func() bool { return ap.actors.len() == 0 })
}

// A request sent to an incarnation that has stopped is dead-lettered, never
// delivered to its successor: the caller, seeing the stop, asks the
// successor itself, so a delivery as well would decide one call twice
// (a nonce then reads as replayed, a rate-limit token is taken twice).
func TestRequestToAStoppedIncarnationDoesNotReachItsSuccessor(t *testing.T) {
	sys, _, store, tenant, auth := authorizerFixture(t, 0)
	a, read := readCaller(t, store, tenant, auth)
	key := tenant + "/" + a.ID
	old := firstCall(t, auth, key, read)
	sys.Root.Send(old.pid, &actor.ReceiveTimeout{}) // stops as when idle
	select {
	case <-old.stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the agent actor did not stop")
	}
	if out := read(context.Background()); out.Response == nil || out.Response.Decision != "allow" {
		t.Fatalf("call after the stop = %+v %+v", out.Response, out.Failure)
	}
	successor, ok := auth.agents.load(key)
	if !ok || successor == old {
		t.Fatal("no new incarnation after the stop")
	}
	q := &agentAsk{m: &messages.Authorize{TenantID: tenant, AgentID: a.ID, AgentName: a.Name, AgentStatus: a.Status,
		RiskTier: a.RiskTier, ReceivedAt: time.Now().UTC(), Request: messages.AuthorizeRequest{
			ToolCall: messages.ToolCall{Tool: "fs", Action: "read"}, SourceTrust: "trusted_internal_signed"}},
		reply: make(chan agentAnswer, 1)}
	sys.Root.Send(old.pid, q) // a caller that loaded the old incarnation before it stopped
	ans, err := await(q.reply, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(ans.err, actor.ErrDeadLetter) {
		t.Fatalf("the request to the stopped incarnation was answered %+v, want a dead letter", ans)
	}
}

// registered counts the actor system's processes.
func registered(sys *actor.ActorSystem) int {
	n := 0
	for _, m := range sys.ProcessRegistry.LocalPIDs.LocalPIDs {
		n += m.Count()
	}
	return n
}

// An agent actor that stops leaves nothing registered behind: its
// incarnations share one guardian (protoactor keeps a guardian per
// distinct supervisor strategy for the life of the system).
func TestAgentIncarnationsLeaveNoProcessBehind(t *testing.T) {
	sys, _, store, tenant, auth := authorizerFixture(t, 0)
	a, read := readCaller(t, store, tenant, auth)
	key := tenant + "/" + a.ID
	cycle := func() {
		t.Helper()
		ref := firstCall(t, auth, key, read)
		sys.Root.Send(ref.pid, &actor.ReceiveTimeout{})
		select {
		case <-ref.stopped:
		case <-time.After(5 * time.Second):
			t.Fatal("the idle agent actor did not stop")
		}
	}
	cycle()
	before := registered(sys)
	for range 20 {
		cycle()
	}
	if after := registered(sys); after != before {
		t.Fatalf("20 agent incarnations later the system has %d processes, %d before", after, before)
	}
}
