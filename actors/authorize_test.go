package actors

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"svc/messages"
	"svc/persistence"
	"svc/persistence/sharedstate"
	"svc/rules/policy"
)

// Agent actors stop after AgentIdle without calls, so memory follows the
// active agents, and a call after that spawns the actor again.
func TestAgentActorsStopWhenIdle(t *testing.T) {
	sys, writer, store, tenant := writerFixture(t, WriterOptions{})
	engine, err := policy.NewEngine(policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	shared := sharedstate.NewMemory()
	defer func() { _ = shared.Close() }()
	auth, err := NewAuthorizer(sys, store, shared, engine, writer, NewEventBus(sys.Root, 64), func(messages.Heartbeat) {},
		AuthorizerOptions{RateCapacity: 1000, RateRefill: 1000, ReplayWindow: time.Minute, RiskWeightsTTL: time.Minute,
			AgentIdle: 50 * time.Millisecond}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
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
	live := func() int {
		n := 0
		auth.agents.Range(func(_, _ any) bool { n++; return true })
		return n
	}
	for _, a := range agents {
		call(a)
	}
	if n := live(); n != 3 {
		t.Fatalf("%d agent actors after three agents called, want 3", n)
	}
	checkFor(t, 3*time.Second, "idle agent actors to stop", func() bool { return live() == 0 })
	call(agents[0]) // spawns it again
	if n := live(); n != 1 {
		t.Fatalf("%d agent actors after one more call, want 1", n)
	}
}
