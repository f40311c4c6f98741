package actors_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"svc/actors"
	"svc/broadcast"
	"svc/leader"
	"svc/messages"
	"svc/persistence"
)

// approvalWrite is a require_approval decision carrying an approval that
// expires at exp.
func approvalWrite(f *benchFixture, i int, exp time.Time) persistence.DecisionWrite {
	w := decisionWrite(f.tenantID, f.agents[0].ID, i)
	w.Decision.Decision, w.Receipt.Decision = "require_approval", "require_approval"
	w.Approval = &persistence.Approval{ID: uuid.NewString(), TenantID: f.tenantID, DecisionID: w.Decision.ID, AgentID: f.agents[0].ID,
		ToolCall: w.Decision.ToolCall, ActionHash: w.Decision.ActionHash, CreatedAt: exp.Add(-30 * time.Minute), ExpiresAt: exp}
	return w
}

// TestApprovalCleaner runs the cleanup job's actor on a SQLite store: on a
// standby node it deletes nothing; on the leader it deletes the approvals
// expired before the retention and keeps the others.
func TestApprovalCleaner(t *testing.T) {
	f := newBenchFixture(t, 1)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	// A retention of 2 days (SVC_APPROVAL_RETENTION_DAYS=2): the default 30
	// would keep the approval expired 3 days ago.
	old := approvalWrite(f, 1, now.Add(-3*24*time.Hour))
	fresh := approvalWrite(f, 2, now.Add(time.Hour))
	recent := approvalWrite(f, 3, now.Add(-24*time.Hour)) // expired, but within the retention
	if err := f.store.CommitDecisions(ctx, []persistence.DecisionWrite{old, fresh, recent}, actors.NewSealer(nil, nil)); err != nil {
		t.Fatal(err)
	}
	var leading atomic.Bool
	var deleted atomic.Uint64
	var jobs leader.JobStats
	sys := actors.NewSystem(hclog.NewNullLogger())
	pid := sys.Root.Spawn(actor.PropsFromProducer(actors.NewApprovalCleaner(f.store, 20*time.Millisecond, 2*24*time.Hour,
		leading.Load, &deleted, &jobs, hclog.NewNullLogger())))
	t.Cleanup(func() { _ = sys.Root.PoisonFuture(pid).Wait() })

	time.Sleep(200 * time.Millisecond) // about ten ticks as a standby
	if _, err := f.store.GetApproval(ctx, f.tenantID, old.Approval.ID); err != nil || deleted.Load() != 0 {
		t.Fatalf("a standby node cleaned up: err %v, deleted %d", err, deleted.Load())
	}
	leading.Store(true)
	deadline := time.Now().Add(5 * time.Second)
	for deleted.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the leader never deleted the stale approval")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := f.store.GetApproval(ctx, f.tenantID, old.Approval.ID); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("stale approval still there: %v", err)
	}
	for _, keep := range []persistence.DecisionWrite{fresh, recent} {
		if _, err := f.store.GetApproval(ctx, f.tenantID, keep.Approval.ID); err != nil {
			t.Errorf("approval %s within retention deleted: %v", keep.Approval.ID, err)
		}
	}
	if n := deleted.Load(); n != 1 {
		t.Errorf("deleted %d approvals, want 1", n)
	}
	// Every run is recorded for /metrics and the status page (just after
	// the run's deletions are counted).
	deadline = time.Now().Add(5 * time.Second)
	for jobs.Snapshot()[0].Runs == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	runs := jobs.Snapshot()
	if len(runs) != 1 || runs[0].Name != actors.JobApprovalCleanup || runs[0].Runs == 0 || runs[0].LastOutcome != "ok" ||
		runs[0].LastStart.IsZero() || runs[0].Every != 20*time.Millisecond || !strings.Contains(runs[0].LastSummary, "deleted") {
		t.Errorf("job stats: %+v", runs)
	}
}

// eventSink collects the events the bus delivers.
type eventSink struct{ ch chan messages.AseEvent }

func (s *eventSink) Receive(ctx actor.Context) {
	if ev, ok := ctx.Message().(*messages.AseEvent); ok {
		s.ch <- *ev
	}
}

// TestApprovalActor drives one approval through its actor: decide once,
// the reservation of a presentation, consumption once with replay_attempt
// on the second, and another agent seeing nothing.
func TestApprovalActor(t *testing.T) {
	f := newBenchFixture(t, 2)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	w := approvalWrite(f, 1, now.Add(time.Hour))
	if err := f.store.CommitDecisions(ctx, []persistence.DecisionWrite{w}, actors.NewSealer(nil, nil)); err != nil {
		t.Fatal(err)
	}
	id, agent, hash := w.Approval.ID, f.agents[0].ID, w.Approval.ActionHash
	sys := actors.NewSystem(hclog.NewNullLogger())
	bus := broadcast.NewEventBus(sys.Root, 16)
	sink := &eventSink{ch: make(chan messages.AseEvent, 16)}
	bus.Subscribe(sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return sink })))
	stop := make(chan struct{})
	go bus.Run(stop)
	t.Cleanup(func() { close(stop) })
	ap := actors.NewApprovals(sys, f.store, bus, actors.ApprovalOptions{TTL: time.Hour}, hclog.NewNullLogger())

	if r, _, err := ap.Reserve(ctx, f.tenantID, id, agent, hash); err != nil || r != actors.ApprovalNotGranted {
		t.Fatalf("pending approval presented: %q %v", r, err)
	}
	reason := "ok"
	a, err := ap.Decide(ctx, persistence.ApprovalDecision{TenantID: f.tenantID, ID: id, Status: persistence.ApprovalApproved,
		ApproverUserID: "alice", Reason: &reason}, nil, "operator:test")
	if err != nil || a.Status != persistence.ApprovalApproved || a.ApproverUserID == nil || *a.ApproverUserID != "alice" {
		t.Fatalf("approve: %+v %v", a, err)
	}
	if _, err := ap.Decide(ctx, persistence.ApprovalDecision{TenantID: f.tenantID, ID: id, Status: persistence.ApprovalRejected,
		ApproverUserID: "bob"}, nil, "operator:test"); !errors.Is(err, persistence.ErrStateConflict) {
		t.Fatalf("second decision: %v, want ErrStateConflict", err)
	}
	if r, _, _ := ap.Reserve(ctx, f.tenantID, id, f.agents[1].ID, hash); r != actors.ApprovalNotGranted {
		t.Errorf("another agent's presentation: %q", r)
	}
	if r, _, _ := ap.Reserve(ctx, f.tenantID, id, agent, "ff"+hash[2:]); r != actors.ApprovalMismatch {
		t.Errorf("other action hash: %q", r)
	}
	if r, _, err := ap.Reserve(ctx, f.tenantID, id, agent, hash); r != "" || err != nil {
		t.Fatalf("reserve: %q %v", r, err)
	}
	if r, _, _ := ap.Reserve(ctx, f.tenantID, id, agent, hash); r != actors.ApprovalConsumedR {
		t.Errorf("second presentation while reserved: %q", r)
	}
	if _, err := ap.Consume(ctx, f.tenantID, id, agent, "agent:test"); !errors.Is(err, persistence.ErrStateConflict) {
		t.Errorf("consume while reserved: %v", err)
	}
	ev := <-sink.ch
	if ev.Kind != messages.KindReplayAttempt || ev.AgentID != agent || ev.Evidence == nil || ev.Evidence.DecisionID == nil ||
		*ev.Evidence.DecisionID != w.Decision.ID {
		t.Errorf("replay event: %+v", ev)
	}
	ap.Settle(f.tenantID, id, false) // the presenting decision failed: free again
	if _, err := ap.Consume(ctx, f.tenantID, id, f.agents[1].ID, "agent:other"); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("another agent's consume: %v, want ErrNotFound", err)
	}
	got, err := ap.Consume(ctx, f.tenantID, id, agent, "agent:test")
	if err != nil || got.ConsumedAt == nil {
		t.Fatalf("consume: %+v %v", got, err)
	}
	if _, err := ap.Consume(ctx, f.tenantID, id, agent, "agent:test"); !errors.Is(err, persistence.ErrStateConflict) {
		t.Errorf("second consume: %v", err)
	}
	if ev := <-sink.ch; ev.Kind != messages.KindReplayAttempt {
		t.Errorf("second consume event %q", ev.Kind)
	}
	if r, _, _ := ap.Reserve(ctx, f.tenantID, id, agent, hash); r != actors.ApprovalConsumedR {
		t.Errorf("presentation after consumption: %q", r)
	}
}
