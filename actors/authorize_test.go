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
	"svc/persistence/sharedstate"
	"svc/rules/policy"
	"svc/testkit"
)

// authorizerFixture is an Authorizer over writerFixture's writer and store,
// with in-process shared state and the base policies; agentIdle 0 keeps
// the default.
func authorizerFixture(t *testing.T, agentIdle time.Duration) (*actor.ActorSystem, *actor.PID, persistence.Store, string, *Authorizer) {
	t.Helper()
	return authorizerWith(t, AuthorizerOptions{RateCapacity: 1000, RateRefill: 1000, ReplayWindow: time.Minute, RiskWeightsTTL: time.Minute,
		AgentIdle: agentIdle})
}

// authorizerWith is authorizerFixture with the given options.
func authorizerWith(t *testing.T, o AuthorizerOptions) (*actor.ActorSystem, *actor.PID, persistence.Store, string, *Authorizer) {
	t.Helper()
	sys, writer, store, tenant := writerFixture(t, WriterOptions{})
	engine, err := policy.NewEngine(policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	shared := sharedstate.NewMemory()
	t.Cleanup(func() { _ = shared.Close() })
	auth, err := NewAuthorizer(sys, store, shared, engine, writer, broadcast.NewEventBus(sys.Root, 64), func(messages.Heartbeat) {}, o, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	return sys, writer, store, tenant, auth
}

// readCaller registers an active agent and returns it with a read-only call
// of it through auth.
func readCaller(t *testing.T, store persistence.Store, tenant string, auth *Authorizer) (persistence.Agent, func(context.Context) messages.AuthorizeOutcome) {
	t.Helper()
	now := time.Now().UTC()
	a := persistence.Agent{ID: uuid.NewString(), TenantID: tenant, Name: "a", Status: "active", RiskTier: "low", CreatedAt: now, UpdatedAt: now}
	if err := store.CreateAgent(context.Background(), a, []byte(a.ID)); err != nil {
		t.Fatal(err)
	}
	return a, func(ctx context.Context) messages.AuthorizeOutcome {
		return auth.Authorize(ctx, &messages.Authorize{TenantID: tenant, AgentID: a.ID, AgentName: a.Name,
			AgentStatus: a.Status, RiskTier: a.RiskTier, ReceivedAt: time.Now().UTC(), Request: messages.AuthorizeRequest{
				ToolCall: messages.ToolCall{Tool: "fs", Action: "read"}, SourceTrust: "trusted_internal_signed"}})
	}
}

// firstCall makes an agent's first call, which must be allowed, and returns
// the actor it spawned (key is tenant/agent).
func firstCall(t *testing.T, auth *Authorizer, key string, call func(context.Context) messages.AuthorizeOutcome) *actorRef {
	t.Helper()
	if out := call(context.Background()); out.Response == nil || out.Response.Decision != "allow" {
		t.Fatalf("first call = %+v %+v", out.Response, out.Failure)
	}
	ref, ok := auth.agents.load(key)
	if !ok {
		t.Fatal("no agent actor after a call")
	}
	return ref
}

// Agent actors stop after AgentIdle without calls, so memory follows the
// active agents, and a call after that spawns the actor again.
func TestAgentActorsStopWhenIdle(t *testing.T) {
	// Long enough that the three calls finish before the first actor
	// idles out on a loaded 2-core machine under -race (50 ms did not,
	// once in CI), short enough for the test.
	_, _, store, tenant, auth := authorizerFixture(t, 500*time.Millisecond)
	now := time.Now().UTC()
	var agents []persistence.Agent
	for i := 0; i < 3; i++ {
		a := persistence.Agent{ID: uuid.NewString(), TenantID: tenant, Name: uuid.NewString(), Status: "active", RiskTier: "low",
			CreatedAt: now, UpdatedAt: now}
		if err := store.CreateAgent(context.Background(), a, []byte(a.ID)); err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
	}
	call := func(a persistence.Agent) {
		t.Helper()
		out := auth.Authorize(context.Background(), &messages.Authorize{TenantID: tenant, AgentID: a.ID, AgentName: a.Name,
			AgentStatus: a.Status, RiskTier: a.RiskTier, ReceivedAt: time.Now().UTC(), Request: messages.AuthorizeRequest{
				ToolCall: messages.ToolCall{Tool: "fs", Action: "read"}, SourceTrust: "trusted_internal_signed"}})
		if out.Response == nil || out.Response.Decision != "allow" {
			t.Fatalf("authorize = %+v %+v", out.Response, out.Failure)
		}
	}
	live := auth.agents.len
	for _, a := range agents {
		call(a)
	}
	if n := live(); n != 3 {
		t.Fatalf("%d agent actors after three agents called, want 3", n)
	}
	testkit.Eventually(t, 3*time.Second, "idle agent actors to stop", func() bool { return live() == 0 })
	call(agents[0]) // spawns it again
	if n := live(); n != 1 {
		t.Fatalf("%d agent actors after one more call, want 1", n)
	}
}

// A call sent to an agent actor that has stopped (a stale entry in the
// table) is dead-lettered; the dead letter answers the ask at once and the
// call goes to a fresh actor, instead of waiting out its timeout and
// failing. Likewise a commit sent to a writer that is gone fails at once.
func TestDeadLetteredAsksAreAnswered(t *testing.T) {
	sys, writer, store, tenant, auth := authorizerFixture(t, 0)
	a, call := readCaller(t, store, tenant, auth)
	key := tenant + "/" + a.ID
	live := firstCall(t, auth, key, call)
	if err := sys.Root.StopFuture(live.pid).Wait(); err != nil {
		t.Fatal(err)
	}
	// A stale entry for the stopped actor, its stop unseen (the stopped
	// channel open): the call must not wait for its 5 s deadline.
	stale := &actorRef{pid: live.pid, stopped: make(chan struct{})}
	auth.agents.m.Store(key, stale)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	out := call(ctx)
	if out.Response == nil || out.Response.Decision != "allow" {
		t.Fatalf("call to a stopped agent actor = %+v %+v", out.Response, out.Failure)
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Fatalf("call to a stopped agent actor took %v: its dead letter went unanswered", took)
	}
	if fresh, _ := auth.agents.load(key); fresh == stale {
		t.Fatal("the stale agent actor was not replaced")
	}

	if err := sys.Root.StopFuture(writer).Wait(); err != nil {
		t.Fatal(err)
	}
	reply := make(chan *Committed, 1)
	sys.Root.Send(writer, &CommitDecision{Write: write(tenant), Reply: reply})
	c, err := await(reply, 4*time.Second)
	if err != nil {
		t.Fatalf("commit sent to a stopped writer: %v", err)
	}
	if !errors.Is(c.Err, actor.ErrDeadLetter) {
		t.Fatalf("commit sent to a stopped writer answered %+v, want ErrDeadLetter", c)
	}
	passed := make(chan *barrierPassed, 1)
	sys.Root.Send(writer, &barrier{Reply: passed})
	if _, err := await(passed, 4*time.Second); err != nil {
		t.Fatalf("barrier sent to a stopped writer: %v", err)
	}
}

// The request's deadline travels to the agent actor: a call whose deadline
// has passed is not decided (it takes no rate token), and one in time is.
func TestAuthorizeDeadlineReachesTheActor(t *testing.T) {
	// One token, refilled once a minute.
	_, _, store, tenant, auth := authorizerWith(t, AuthorizerOptions{RateCapacity: 1, RateRefill: 1.0 / 60, ReplayWindow: time.Minute,
		RiskWeightsTTL: time.Minute})
	_, call := readCaller(t, store, tenant, auth)
	past, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if out := call(past); out.Failure == nil || out.Failure.Refusal != messages.RefusalUnavailable {
		t.Fatalf("a call past its deadline = %+v %+v, want refused as unavailable", out.Response, out.Failure)
	}
	if out := call(context.Background()); out.Response == nil || out.Response.Decision != "allow" {
		t.Fatalf("the next call = %+v %+v: the late call took the only token", out.Response, out.Failure)
	}
	if out := call(context.Background()); out.Failure == nil || out.Failure.Refusal != messages.RefusalThrottled {
		t.Fatalf("a third call = %+v %+v, want throttled (the limit holds)", out.Response, out.Failure)
	}
}
