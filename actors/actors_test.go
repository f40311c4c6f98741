package actors

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"svc/messages"
	"svc/persistence"
	"svc/persistence/sqlite"
	"svc/testkit"
)

type countingActor struct{ starts *atomic.Int32 }

func (c *countingActor) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); ok {
		c.starts.Add(1)
	}
}

func TestSupervisorRestartBudget(t *testing.T) {
	tests := []struct {
		name        string
		maxRestarts int
		faults      int
		wantDead    bool
		wantStarts  int32
		backoff     time.Duration
	}{
		{name: "within budget restarts and recovers", maxRestarts: 3, faults: 3, wantDead: false, wantStarts: 4},
		{name: "past budget is dead", maxRestarts: 2, faults: 3, wantDead: true, wantStarts: 3},
		{name: "backoff still restarts", maxRestarts: 3, faults: 2, wantDead: false, wantStarts: 3, backoff: 10 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sys := NewSystem(hclog.NewNullLogger())
			reg := NewRegistry()
			var starts atomic.Int32
			sup, err := StartSupervisor(sys, reg, hclog.NewNullLogger(), []ChildSpec{
				{Name: "flaky", Producer: func() actor.Actor { return &countingActor{&starts} },
					MaxRestarts: tc.maxRestarts, Within: time.Minute, Backoff: tc.backoff},
				{Name: "steady", Producer: func() actor.Actor { return &countingActor{new(atomic.Int32)} }, MaxRestarts: 1, Within: time.Minute},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = sup.Stop(time.Second) }()
			testkit.Eventually(t, 2*time.Second, "first start", func() bool { return starts.Load() == 1 })
			for i := 0; i < tc.faults; i++ {
				before := starts.Load()
				if err := sup.InjectFault("flaky", "test"); err != nil {
					t.Fatal(err)
				}
				if tc.wantDead && i == tc.faults-1 {
					break
				}
				testkit.Eventually(t, 2*time.Second, "restart", func() bool { return starts.Load() == before+1 })
			}
			if tc.wantDead {
				testkit.Eventually(t, 2*time.Second, "dead", func() bool { return len(reg.DeadTasks()) == 1 })
				if got := reg.DeadTasks(); got[0] != "flaky" {
					t.Fatalf("dead tasks = %v", got)
				}
			} else {
				testkit.Eventually(t, 2*time.Second, "ok", func() bool { c, _ := reg.Get("flaky"); return c.State == StateOK })
				if d := reg.DeadTasks(); len(d) != 0 {
					t.Fatalf("dead tasks = %v", d)
				}
			}
			if got := starts.Load(); got != tc.wantStarts {
				t.Fatalf("starts = %d, want %d", got, tc.wantStarts)
			}
			if c, _ := reg.Get("steady"); c.State != StateOK {
				t.Fatalf("a sibling was affected: %+v", c)
			}
			if err := sup.InjectFault("nope", "x"); !errors.Is(err, ErrUnknownTask) {
				t.Fatalf("unknown task: %v", err)
			}
		})
	}
}

func TestHeartbeatBufferFlushesLatestAndOnStop(t *testing.T) {
	store, err := sqlite.Open(context.Background(), sqlite.Options{Path: ":memory:"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Close() }()
	now := time.Now().UTC()
	tn := persistence.Tenant{ID: uuid.NewString(), Name: "t", CreatedAt: now}
	op := persistence.OperatorToken{ID: uuid.NewString(), TenantID: tn.ID, Name: "a", Role: "admin", CreatedAt: now}
	if err := store.CreateTenant(context.Background(), tn, op, []byte("h")); err != nil {
		t.Fatal(err)
	}
	ag := persistence.Agent{ID: uuid.NewString(), TenantID: tn.ID, Name: "bot", Status: "active", RiskTier: "low", CreatedAt: now, UpdatedAt: now}
	if err := store.CreateAgent(context.Background(), ag, []byte("tok")); err != nil {
		t.Fatal(err)
	}
	sys := NewSystem(hclog.NewNullLogger())
	// A flush interval far longer than the test: only the stop flush can write.
	pid := sys.Root.Spawn(actor.PropsFromProducer(NewHeartbeatBuffer(store, time.Hour, hclog.NewNullLogger())))
	t1 := now.Add(-time.Second).Truncate(time.Microsecond)
	sys.Root.Send(pid, &messages.Heartbeat{TenantID: tn.ID, AgentID: ag.ID, At: t1})
	sys.Root.Send(pid, &messages.Heartbeat{TenantID: tn.ID, AgentID: ag.ID, At: t1.Add(-time.Minute)})
	got, _ := store.GetAgent(context.Background(), tn.ID, ag.ID)
	if got.LastSeenAt != nil {
		t.Fatal("heartbeat written before the flush")
	}
	if err := sys.Root.PoisonFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	got, _ = store.GetAgent(context.Background(), tn.ID, ag.ID)
	if got.LastSeenAt == nil || !got.LastSeenAt.Equal(t1) {
		t.Fatalf("last_seen_at = %v, want %v", got.LastSeenAt, t1)
	}
}

// SVC_POOL_HEALTH_SAMPLE_INTERVAL_SECS: the sampler acquires a connection
// once per interval, so 20 ms gives many samples in half a second and an
// hour none.
func TestPoolSamplerInterval(t *testing.T) {
	store, _ := storeWithTenant(t)
	for _, c := range []struct {
		every time.Duration
		least uint64
		most  uint64
	}{{20 * time.Millisecond, 5, 40}, {time.Hour, 0, 0}} {
		sys := NewSystem(hclog.NewNullLogger())
		var sample PoolSample
		pid := sys.Root.Spawn(actor.PropsFromProducer(NewPoolSampler(store, c.every, &sample, hclog.NewNullLogger())))
		time.Sleep(500 * time.Millisecond)
		_ = sys.Root.PoisonFuture(pid).Wait()
		if n := sample.Samples(); n < c.least || n > c.most {
			t.Errorf("every %v: %d samples in 500 ms, want %d to %d", c.every, n, c.least, c.most)
		}
	}
}

// stoppingActor counts its Stopping messages (where children flush).
type stoppingActor struct{ starts, stops *atomic.Int32 }

func (c *stoppingActor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		c.starts.Add(1)
	case *actor.Stopping:
		c.stops.Add(1)
	}
}

// A child waiting out a long restart backoff does not hold up Stop: it is
// stopped at once (and still sees Stopping), and it is not restarted.
func TestSupervisorStopDoesNotWaitForABackoff(t *testing.T) {
	sys := NewSystem(hclog.NewNullLogger())
	reg := NewRegistry()
	var starts, stops atomic.Int32
	sup, err := StartSupervisor(sys, reg, hclog.NewNullLogger(), []ChildSpec{
		{Name: "flaky", Producer: func() actor.Actor { return &stoppingActor{&starts, &stops} },
			MaxRestarts: 3, Within: time.Minute, Backoff: time.Minute, MaxBackoff: time.Minute},
		{Name: "steady", Producer: func() actor.Actor { return &stoppingActor{new(atomic.Int32), new(atomic.Int32)} },
			MaxRestarts: 1, Within: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 2*time.Second, "first start", func() bool { return starts.Load() == 1 })
	if err := sup.InjectFault("flaky", "test"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 2*time.Second, "the restart backoff", func() bool { c, _ := reg.Get("flaky"); return c.State == StateDegraded })
	if err := sup.Stop(5 * time.Second); err != nil {
		t.Fatalf("Stop with a child in its backoff: %v", err)
	}
	if n := stops.Load(); n != 1 {
		t.Fatalf("the child in its backoff saw Stopping %d times, want 1", n)
	}
	if n := starts.Load(); n != 1 {
		t.Fatalf("the child started %d times, want 1 (no restart once stopping)", n)
	}
}
