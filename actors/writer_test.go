package actors

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"svc/persistence"
	"svc/persistence/sqlite"
	"svc/testkit"
)

// tenantStore is a SQLite store in a temp dir with one tenant.
func tenantStore(t *testing.T) (persistence.Store, string) {
	t.Helper()
	store, err := sqlite.Open(context.Background(), sqlite.Options{Path: t.TempDir() + "/svc.db"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	now := time.Now().UTC()
	tn := persistence.Tenant{ID: uuid.NewString(), Name: "t", CreatedAt: now}
	if err := store.CreateTenant(context.Background(), tn, persistence.OperatorToken{ID: uuid.NewString(), TenantID: tn.ID,
		Name: "a", Role: "admin", CreatedAt: now}, []byte("h")); err != nil {
		t.Fatal(err)
	}
	return store, tn.ID
}

func writerFixture(t *testing.T, o WriterOptions) (*actor.ActorSystem, *actor.PID, persistence.Store, string) {
	t.Helper()
	store, tenant := tenantStore(t)
	sys := NewSystem(hclog.NewNullLogger())
	pid := sys.Root.Spawn(actor.PropsFromProducer(NewGroupWriter(store, NewSealer(nil, nil), nil, o, hclog.NewNullLogger())))
	return sys, pid, store, tenant
}

func write(tenantID string) persistence.DecisionWrite {
	now := time.Now().UTC().Truncate(time.Microsecond)
	id := uuid.NewString()
	return persistence.DecisionWrite{
		Decision: persistence.Decision{ID: id, TenantID: tenantID, AgentID: "a", Tool: "t", Action: "x", ActionHash: "h",
			Decision: "allow", Reason: "r", TrustLevel: "unknown", RootTrustLevel: "unknown", ToolCall: json.RawMessage(`{}`), CreatedAt: now},
		Receipt: &persistence.Receipt{ID: uuid.NewString(), TenantID: tenantID, DecisionID: id, ActionHash: "h", Decision: "allow", CreatedAt: now},
	}
}

func TestGroupWriterAnswersEachWriteAndIsolatesABadOne(t *testing.T) {
	sys, pid, store, tenant := writerFixture(t, WriterOptions{})
	good1, bad, good2 := write(tenant), write("no-such-tenant"), write(tenant)
	futures := []*actor.Future{}
	for _, w := range []persistence.DecisionWrite{good1, bad, good2} {
		futures = append(futures, sys.Root.RequestFuture(pid, &CommitDecision{Write: w}, 5*time.Second))
	}
	want := []bool{true, false, true}
	for i, f := range futures {
		res, err := f.Result()
		if err != nil {
			t.Fatalf("write %d: no answer: %v", i, err)
		}
		c, ok := res.(*Committed)
		if !ok || (c.Err == nil) != want[i] {
			t.Fatalf("write %d: %+v, want success=%v", i, res, want[i])
		}
	}
	for _, w := range []persistence.DecisionWrite{good1, good2} {
		if _, err := store.GetDecision(context.Background(), tenant, w.Decision.ID); err != nil {
			t.Fatalf("a good write next to a bad one was lost: %v", err)
		}
	}
	if h, _ := store.ChainHead(context.Background(), tenant); h.Seq != 2 {
		t.Fatalf("chain head = %+v", h)
	}
}

func TestGroupWriterBuffersAuditBySizeAndTimer(t *testing.T) {
	tests := []struct {
		name  string
		o     WriterOptions
		count int
	}{
		{name: "size flush", o: WriterOptions{AuditBatchSize: 3, AuditBatchFlush: time.Hour}, count: 3},
		{name: "timer flush", o: WriterOptions{AuditBatchSize: 1000, AuditBatchFlush: 20 * time.Millisecond}, count: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sys, pid, store, tenant := writerFixture(t, tc.o)
			for i := 0; i < tc.count; i++ {
				sys.Root.Send(pid, &bufferAudit{Events: []persistence.AuditEvent{{ID: uuid.NewString(), TenantID: tenant,
					EventType: "authorize_refused", Action: "rate_limited", CreatedAt: time.Now().UTC()}}})
			}
			testkit.Eventually(t, 3*time.Second, "buffered audit events flushed", func() bool {
				ev, _ := store.ListAudit(context.Background(), tenant, persistence.AuditFilter{EventType: "authorize_refused"}, persistence.Page{Limit: 10})
				return len(ev) == tc.count
			})
		})
	}
}

func TestGroupWriterFlushesOnStop(t *testing.T) {
	sys, pid, store, tenant := writerFixture(t, WriterOptions{AuditBatchSize: 1000, AuditBatchFlush: time.Hour})
	sys.Root.Send(pid, &bufferAudit{Events: []persistence.AuditEvent{{ID: uuid.NewString(), TenantID: tenant,
		EventType: "authorize_refused", Action: "x", CreatedAt: time.Now().UTC()}}})
	w := write(tenant)
	sys.Root.Send(pid, &CommitDecision{Write: w})
	if err := sys.Root.PoisonFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := store.GetDecision(context.Background(), tenant, w.Decision.ID); err != nil {
		t.Fatalf("a queued write was lost on stop: %v", err)
	}
	ev, _ := store.ListAudit(context.Background(), tenant, persistence.AuditFilter{EventType: "authorize_refused"}, persistence.Page{Limit: 10})
	if len(ev) != 1 {
		t.Fatalf("buffered audit lost on stop: %d", len(ev))
	}
}

// A lone node's writer answers Early requests once sealed; when such a
// write then fails, it is counted, and the receipts sealed on top of it are
// resealed inside their transaction so the stored chain stays contiguous.
func TestGroupWriterEarlyAnswersAndReseals(t *testing.T) {
	store, tenant := tenantStore(t)
	var lost, resealed atomic.Int64
	var lostID atomic.Value
	sys := NewSystem(hclog.NewNullLogger())
	pid := sys.Root.Spawn(actor.PropsFromProducer(NewGroupWriter(store, NewSealer(nil, func(n int) { resealed.Add(int64(n)) }), nil,
		WriterOptions{EarlySeal: true, EarlyLost: func(w *persistence.DecisionWrite, err error) {
			if err != nil {
				lostID.Store(w.Decision.ID)
			}
			lost.Add(1)
		}}, hclog.NewNullLogger())))

	req := "dup"
	w1, w3 := write(tenant), write(tenant)
	w1.Decision.RequestID = &req
	w2 := write(tenant)
	w2.Decision.RequestID = &req // violates the request_id uniqueness: this write fails
	// Sent together, so that w2 and w3 normally queue behind w1's commit
	// and w3 is sealed on top of w2, which then fails.
	var futures []*actor.Future
	for _, w := range []persistence.DecisionWrite{w1, w2, w3} {
		futures = append(futures, sys.Root.RequestFuture(pid, &CommitDecision{Write: w, Early: true}, 5*time.Second))
	}
	var answers []*Committed
	for _, f := range futures {
		res, err := f.Result()
		if err != nil {
			t.Fatal(err)
		}
		c, _ := res.(*Committed)
		if c == nil || !c.Early || len(c.ReceiptHash) != 64 || c.Err != nil {
			t.Fatalf("early answer = %+v", res)
		}
		answers = append(answers, c)
	}
	testkit.Eventually(t, 5*time.Second, "the failed early write counted", func() bool { return lost.Load() == 1 })
	if got, _ := lostID.Load().(string); got != w2.Decision.ID {
		t.Fatalf("lost write reported as %q, want w2 %s with its error", got, w2.Decision.ID)
	}
	testkit.Eventually(t, 5*time.Second, "w3 committed", func() bool {
		_, err := store.GetDecision(context.Background(), tenant, w3.Decision.ID)
		return err == nil
	})
	rs, _ := store.ReceiptRange(context.Background(), tenant, 1, 0, 10)
	if len(rs) != 2 || rs[0].Seq != 1 || rs[1].Seq != 2 || rs[1].PrevHash != rs[0].Hash || rs[0].Hash != answers[0].ReceiptHash {
		t.Fatalf("stored chain = %+v", rs)
	}
	// Whichever way the timing went, the stored chain is contiguous; w3's
	// early answer matches its stored receipt unless it was resealed.
	if resealed.Load() == 0 && rs[1].Hash != answers[2].ReceiptHash {
		t.Fatalf("w3 was not resealed but its stored hash differs from its answer")
	}
	if resealed.Load() > 0 && rs[1].Hash == answers[2].ReceiptHash {
		t.Fatalf("w3 was resealed onto another head but kept its hash")
	}
}

// Early-answered writes wait (up to EarlyCommitWait) for a transaction to
// share: a write whose caller waits, a barrier, EarlyCommitMax of them, the
// timer, or the writer's stop takes them along. Their answers never wait.
func TestGroupWriterEarlyWritesShareTransactions(t *testing.T) {
	type fixture struct {
		sys     *actor.ActorSystem
		pid     *actor.PID
		store   persistence.Store
		tenant  string
		commits func() []int
	}
	start := func(t *testing.T, wait time.Duration, most int) fixture {
		var mu sync.Mutex
		var sizes []int
		sys, pid, store, tenant := writerFixture(t, WriterOptions{EarlySeal: true, EarlyCommitWait: wait, EarlyCommitMax: most,
			Observe: func(n int, _ time.Duration, failed bool) {
				if failed {
					t.Errorf("a commit failed")
				}
				mu.Lock()
				sizes = append(sizes, n)
				mu.Unlock()
			}})
		return fixture{sys, pid, store, tenant, func() []int {
			mu.Lock()
			defer mu.Unlock()
			return append([]int(nil), sizes...)
		}}
	}
	// early sends n early writes and waits for their (early) answers.
	early := func(t *testing.T, f fixture, n int) {
		t.Helper()
		for range n {
			res, err := f.sys.Root.RequestFuture(f.pid, &CommitDecision{Write: write(f.tenant), Early: true}, 5*time.Second).Result()
			if c, _ := res.(*Committed); err != nil || c == nil || !c.Early || c.Err != nil {
				t.Fatalf("early answer = %+v, %v", res, err)
			}
		}
	}
	head := func(f fixture) int64 {
		h, _ := f.store.ChainHead(context.Background(), f.tenant)
		return h.Seq
	}

	t.Run("a write whose caller waits takes them along", func(t *testing.T) {
		f := start(t, time.Hour, 64)
		early(t, f, 3)
		res, err := f.sys.Root.RequestFuture(f.pid, &CommitDecision{Write: write(f.tenant)}, 5*time.Second).Result()
		if c, _ := res.(*Committed); err != nil || c == nil || c.Early || c.Err != nil {
			t.Fatalf("answer after commit = %+v, %v", res, err)
		}
		if got := f.commits(); !slices.Equal(got, []int{4}) || head(f) != 4 {
			t.Fatalf("commits %v, chain head %d; want one transaction of 4", got, head(f))
		}
	})
	t.Run("a barrier takes them along", func(t *testing.T) {
		f := start(t, time.Hour, 64)
		early(t, f, 2)
		if res, err := f.sys.Root.RequestFuture(f.pid, &barrier{}, 5*time.Second).Result(); err != nil {
			t.Fatalf("barrier: %v %v", res, err)
		}
		if got := f.commits(); !slices.Equal(got, []int{2}) || head(f) != 2 {
			t.Fatalf("commits %v, chain head %d; want one transaction of 2", got, head(f))
		}
	})
	t.Run("EarlyCommitMax of them go at once", func(t *testing.T) {
		f := start(t, time.Hour, 5)
		early(t, f, 5)
		// Observe hears of a commit just after it is stored: wait for both.
		testkit.Eventually(t, 5*time.Second, "five early writes committed without a timer", func() bool {
			return head(f) == 5 && len(f.commits()) > 0
		})
		if got := f.commits(); !slices.Equal(got, []int{5}) {
			t.Fatalf("commits %v; want one transaction of 5", got)
		}
	})
	t.Run("the timer commits them", func(t *testing.T) {
		f := start(t, 20*time.Millisecond, 64)
		early(t, f, 2)
		testkit.Eventually(t, 5*time.Second, "early writes committed by the timer", func() bool { return head(f) == 2 })
	})
	t.Run("stopping commits them", func(t *testing.T) {
		f := start(t, time.Hour, 64)
		early(t, f, 2)
		if err := f.sys.Root.PoisonFuture(f.pid).Wait(); err != nil {
			t.Fatal(err)
		}
		if head(f) != 2 {
			t.Fatalf("chain head %d after stop; want 2", head(f))
		}
	})
	t.Run("without a wait each goes at once", func(t *testing.T) {
		f := start(t, 0, 64)
		early(t, f, 1)
		testkit.Eventually(t, 5*time.Second, "an early write committed at once", func() bool { return head(f) == 1 })
	})
}

// A buffered audit event that can never be written (its tenant is gone)
// is dropped alone: the events beside it and after it are written, instead
// of the whole buffer being kept and failing at every flush.
func TestGroupWriterDropsAnUnwritableAuditEventAlone(t *testing.T) {
	sys, pid, store, tenant := writerFixture(t, WriterOptions{AuditBatchSize: 2, AuditBatchFlush: 20 * time.Millisecond})
	event := func(tenantID, action string) persistence.AuditEvent {
		return persistence.AuditEvent{ID: uuid.NewString(), TenantID: tenantID, EventType: "agent_quarantined", Action: action,
			CreatedAt: time.Now().UTC()}
	}
	sys.Root.Send(pid, &bufferAudit{Events: []persistence.AuditEvent{event("no-such-tenant", "orphan"), event(tenant, "first")}})
	sys.Root.Send(pid, &bufferAudit{Events: []persistence.AuditEvent{event(tenant, "second")}})
	testkit.Eventually(t, 5*time.Second, "the writable events stored", func() bool {
		ev, _ := store.ListAudit(context.Background(), tenant, persistence.AuditFilter{EventType: "agent_quarantined"}, persistence.Page{Limit: 10})
		return len(ev) == 2
	})
}

// gatedStore holds chosen group commits (by call number) until their gate
// is closed, and reports each call as it enters.
type gatedStore struct {
	persistence.Store
	calls   atomic.Int32
	entered chan int
	gates   map[int]chan struct{}
}

func (g *gatedStore) CommitDecisions(ctx context.Context, ws []persistence.DecisionWrite, seal persistence.Sealer) error {
	n := int(g.calls.Add(1))
	g.entered <- n
	if gate := g.gates[n]; gate != nil {
		<-gate
	}
	return g.Store.CommitDecisions(ctx, ws, seal)
}

// After a failed write, the receipts sealed on arrival on top of it are
// sealed again against the stored head before their transaction, and the
// receipts that arrive meanwhile continue them: an early answer given after
// that is the stored receipt (without the resync it would be sealed on the
// stored head, which the queued writes then take, and be resealed).
func TestGroupWriterResyncsTheChainAfterAFailedWrite(t *testing.T) {
	store, tenant := tenantStore(t)
	gate1, gate3 := make(chan struct{}), make(chan struct{})
	g := &gatedStore{Store: store, entered: make(chan int, 16), gates: map[int]chan struct{}{2: gate1, 3: gate3}}
	var resealed atomic.Int64
	sys := NewSystem(hclog.NewNullLogger())
	pid := sys.Root.Spawn(actor.PropsFromProducer(NewGroupWriter(g, NewSealer(nil, func(n int) { resealed.Add(int64(n)) }), nil,
		WriterOptions{EarlySeal: true}, hclog.NewNullLogger())))
	defer func() { _ = sys.Root.PoisonFuture(pid).Wait() }()
	entered := func(want int) {
		t.Helper()
		select {
		case n := <-g.entered:
			if n != want {
				t.Fatalf("group commit %d entered, want %d", n, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("group commit %d did not start", want)
		}
	}
	answer := func(f *actor.Future) *Committed {
		t.Helper()
		res, err := f.Result()
		c, _ := res.(*Committed)
		if err != nil || c == nil {
			t.Fatalf("answer = %+v, %v", res, err)
		}
		return c
	}
	send := func(w persistence.DecisionWrite, early bool) *actor.Future {
		return sys.Root.RequestFuture(pid, &CommitDecision{Write: w, Early: early}, 5*time.Second)
	}

	req := "dup"
	w0, w1 := write(tenant), write(tenant)
	w0.Decision.RequestID, w1.Decision.RequestID = &req, &req // w1 fails
	if c := answer(send(w0, false)); c.Err != nil {
		t.Fatal(c.Err)
	}
	entered(1)
	f1 := send(w1, false)
	entered(2) // w1's transaction, held
	w2, w3, w4 := write(tenant), write(tenant), write(tenant)
	a2, a3 := send(w2, true), send(w3, true) // sealed on top of w1, queued
	answer(a2)
	answer(a3)
	close(gate1)
	if c := answer(f1); c.Err == nil {
		t.Fatal("a duplicate request_id committed")
	}
	entered(3) // w2 and w3, held
	a4 := answer(send(w4, true))
	close(gate3)
	testkit.Eventually(t, 5*time.Second, "w4 committed", func() bool {
		_, err := store.GetDecision(context.Background(), tenant, w4.Decision.ID)
		return err == nil
	})
	rs, _ := store.ReceiptRange(context.Background(), tenant, 1, 0, 10)
	if len(rs) != 4 || rs[1].ID != w2.Receipt.ID || rs[2].ID != w3.Receipt.ID || rs[3].ID != w4.Receipt.ID {
		t.Fatalf("stored chain = %+v", rs)
	}
	for i := 1; i < len(rs); i++ {
		if rs[i].Seq != int64(i+1) || rs[i].PrevHash != rs[i-1].Hash {
			t.Fatalf("chain broken at %d: %+v", i, rs[i])
		}
	}
	if !a4.Early || a4.ReceiptHash != rs[3].Hash {
		t.Fatalf("w4 answered %+v, stored as %s", a4, rs[3].Hash)
	}
	if n := resealed.Load(); n != 2 {
		t.Fatalf("resealed %d receipts, want 2 (w2 and w3, sealed on the failed w1)", n)
	}
}

// SVC_AUDIT_BATCH_FLUSH_MS decides when a buffered event short of a batch
// is written: with an hour, it is still buffered 300 ms later (the timer
// flush above writes it within 20 ms).
func TestGroupWriterFlushTimerHolds(t *testing.T) {
	sys, pid, store, tenant := writerFixture(t, WriterOptions{AuditBatchSize: 1000, AuditBatchFlush: time.Hour})
	sys.Root.Send(pid, &bufferAudit{Events: []persistence.AuditEvent{{ID: uuid.NewString(), TenantID: tenant,
		EventType: "authorize_refused", Action: "held", CreatedAt: time.Now().UTC()}}})
	time.Sleep(300 * time.Millisecond)
	ev, err := store.ListAudit(context.Background(), tenant, persistence.AuditFilter{EventType: "authorize_refused"}, persistence.Page{Limit: 10})
	if err != nil || len(ev) != 0 {
		t.Errorf("with an hour's flush timer the event was written within 300 ms: %v, %v", ev, err)
	}
}
