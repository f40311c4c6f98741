package actors_test

// Benchmarks of the durable half of the authorize path (DESIGN §2): sealing
// a receipt onto the chain, committing decisions on SQLite, the GroupWriter
// actor, and the whole Authorizer in process. They run on SQLite in a temp
// dir (no services needed); scripts/bench.sh runs them after the load test.

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"svc/actors"
	"svc/broadcast"
	"svc/messages"
	"svc/persistence"
	"svc/persistence/sharedstate"
	"svc/persistence/sqlite"
	"svc/receipt"
	"svc/rules/policy"
)

// benchSigner is a fixed Ed25519 receipt signer.
func benchSigner(b *testing.B) *receipt.Signer {
	b.Helper()
	seed := make([]byte, 32)
	for i := range seed {
		seed[i] = byte(i + 1)
	}
	s, err := receipt.NewSigner(seed)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// benchFixture is a SQLite store in a temp dir with one tenant and agents.
type benchFixture struct {
	store    *sqlite.Store
	tenantID string
	agents   []persistence.Agent
}

func newBenchFixture(b testing.TB, agents int) *benchFixture {
	b.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(b.TempDir(), "bench.db")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	now := time.Now().UTC()
	tn := persistence.Tenant{ID: uuid.NewString(), Name: "bench", CreatedAt: now}
	op := persistence.OperatorToken{ID: uuid.NewString(), TenantID: tn.ID, Name: "admin", Role: "admin", CreatedAt: now}
	if err := store.CreateTenant(ctx, tn, op, []byte("op-hash")); err != nil {
		b.Fatal(err)
	}
	f := &benchFixture{store: store, tenantID: tn.ID}
	for i := range agents {
		ag := persistence.Agent{ID: uuid.NewString(), TenantID: tn.ID, Name: fmt.Sprintf("bench-%03d", i), Status: "active",
			RiskTier: "low", CreatedAt: now, UpdatedAt: now}
		if err := store.CreateAgent(ctx, ag, []byte("token-hash-"+ag.ID)); err != nil {
			b.Fatal(err)
		}
		f.agents = append(f.agents, ag)
	}
	return f
}

// decisionWrite is one decision with its audit row and receipt, shaped as
// the Authorizer drafts them (actors/agent.go draftDecision).
func decisionWrite(tenantID, agentID string, i int) persistence.DecisionWrite {
	now := time.Now().UTC().Truncate(time.Microsecond)
	id, rid := uuid.NewString(), uuid.NewString()
	hash := fmt.Sprintf("%064x", i)
	matched := []string{"default_allow_trusted_mutation"}
	rec := persistence.Decision{ID: id, TenantID: tenantID, AgentID: agentID, Tool: "crm", Action: "update_contact",
		ActionHash: hash, Decision: "allow", Reason: "trusted_mutation", RiskScore: 35, CompositeRiskScore: 30,
		MatchedPolicyIDs: matched, RedactedFields: []string{}, MutatesState: true, TrustLevel: "trusted_internal_signed",
		RootTrustLevel: "trusted_internal_signed",
		ToolCall:       []byte(fmt.Sprintf(`{"tool":"crm","action":"update_contact","resource":"contact/c-%d","parameters":{"contact_id":"c-%d"}}`, i, i)),
		CreatedAt:      now, ReceiptID: rid, AuditID: uuid.NewString()}
	return persistence.DecisionWrite{Decision: rec,
		Receipt: &persistence.Receipt{ID: rid, TenantID: tenantID, DecisionID: id, ActionHash: hash, Decision: "allow", CreatedAt: now}}
}

var batchSizes = []int{1, 32, 256}

// BenchmarkChainAppend seals one receipt onto a tenant's chain with
// NewSealer (svc-receipt-1 hash, plus Ed25519 when signed), as the writer
// does inside the commit transaction.
func BenchmarkChainAppend(b *testing.B) {
	for _, tc := range []struct {
		name   string
		signer *receipt.Signer
	}{{"unsigned", nil}, {"signed", benchSigner(b)}} {
		b.Run(tc.name, func(b *testing.B) {
			seal := actors.NewSealer(tc.signer, nil)
			head := persistence.ChainHead{Seq: 41, Hash: strings.Repeat("ab", 32)}
			w := decisionWrite(uuid.NewString(), uuid.NewString(), 1)
			base := *w.Receipt
			r := base
			rs := []*persistence.Receipt{&r}
			b.ReportAllocs()
			for b.Loop() {
				r = base
				if err := seal(base.TenantID, head, rs); err != nil {
					b.Fatal(err)
				}
			}
			if r.Seq != 42 || r.PrevHash != head.Hash || (tc.signer != nil) != (r.Signature != nil) {
				b.Fatalf("sealed receipt: %+v", r)
			}
		})
	}
}

// BenchmarkCommitDecisions commits exactly N decisions (each with its audit
// row and a signed receipt) in one SQLite transaction, the unit of work of
// one group commit. ns/decision is the cost per decision.
func BenchmarkCommitDecisions(b *testing.B) {
	for _, n := range batchSizes {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			f := newBenchFixture(b, 1)
			seal := actors.NewSealer(benchSigner(b), nil)
			ctx := context.Background()
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				writes := make([]persistence.DecisionWrite, n)
				for j := range writes {
					i++
					writes[j] = decisionWrite(f.tenantID, f.agents[0].ID, i)
				}
				b.StartTimer()
				if err := f.store.CommitDecisions(ctx, writes, seal); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/decision")
		})
	}
}

// countingStore counts the GroupWriter's transactions.
type countingStore struct {
	persistence.Store
	txs, writes atomic.Int64
}

func (c *countingStore) CommitDecisions(ctx context.Context, ws []persistence.DecisionWrite, seal persistence.Sealer) error {
	c.txs.Add(1)
	c.writes.Add(int64(len(ws)))
	return c.Store.CommitDecisions(ctx, ws, seal)
}

// BenchmarkGroupWriterBatch offers N decisions at once to the GroupWriter
// actor (signed receipts, SQLite in a temp dir) and waits for every
// Committed answer. The writer has no timer: the first decision is
// committed alone at once and the others form the next batch while it is
// in flight, so N=32 is two transactions (1 + 31); decisions/tx shows it.
func BenchmarkGroupWriterBatch(b *testing.B) {
	for _, n := range batchSizes {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			f := newBenchFixture(b, 1)
			cs := &countingStore{Store: f.store}
			sys := actors.NewSystem(hclog.NewNullLogger())
			pid := sys.Root.Spawn(actor.PropsFromProducer(actors.NewGroupWriter(cs, actors.NewSealer(benchSigner(b), nil), nil,
				actors.WriterOptions{AuditBatchSize: 100, AuditBatchFlush: 500 * time.Millisecond}, hclog.NewNullLogger())))
			b.Cleanup(func() { _ = sys.Root.PoisonFuture(pid).Wait() })
			futures := make([]*actor.Future, n)
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				msgs := make([]*actors.CommitDecision, n)
				for j := range msgs {
					i++
					msgs[j] = &actors.CommitDecision{Write: decisionWrite(f.tenantID, f.agents[0].ID, i)}
				}
				b.StartTimer()
				for j, m := range msgs {
					futures[j] = sys.Root.RequestFuture(pid, m, 30*time.Second)
				}
				for _, fu := range futures {
					res, err := fu.Result()
					if err != nil {
						b.Fatal(err)
					}
					if c, ok := res.(*actors.Committed); !ok || c.Err != nil {
						b.Fatalf("commit: %#v", res)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/decision")
			if t := cs.txs.Load(); t > 0 {
				b.ReportMetric(float64(cs.writes.Load())/float64(t), "decisions/tx")
			}
		})
	}
}

// BenchmarkAuthorizeInProcess runs actors.Authorizer.Authorize end to end,
// wired as cmd/svc wires it (agent actors, in-process shared state, the
// embedded base policies, the GroupWriter with signed receipts on SQLite in
// a temp dir), without HTTP. The parallel cases spread calls over 16 agents
// so that group commit forms batches.
func BenchmarkAuthorizeInProcess(b *testing.B) {
	cases := []struct {
		name     string
		req      messages.AuthorizeRequest
		want     string
		parallel bool
	}{
		{name: "read", want: "allow", req: messages.AuthorizeRequest{SourceTrust: "trusted_internal_unsigned",
			ToolCall: messages.ToolCall{Tool: "crm", Action: "get_contact", Parameters: map[string]any{"contact_id": "c-1"}}}},
		{name: "mutate", want: "allow", req: messages.AuthorizeRequest{SourceTrust: "trusted_internal_signed", MutatesState: true,
			ToolCall: messages.ToolCall{Tool: "crm", Action: "update_contact", Parameters: map[string]any{"contact_id": "c-1", "email": "a@example.com"}}}},
		{name: "mutate_parallel", want: "allow", parallel: true, req: messages.AuthorizeRequest{SourceTrust: "trusted_internal_signed", MutatesState: true,
			ToolCall: messages.ToolCall{Tool: "crm", Action: "update_contact", Parameters: map[string]any{"contact_id": "c-1", "email": "a@example.com"}}}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			f := newBenchFixture(b, 16)
			auth := newBenchAuthorizer(b, f, nil)
			ctx := context.Background()
			call := func(ag persistence.Agent) {
				out := auth.Authorize(ctx, &messages.Authorize{TenantID: f.tenantID, AgentID: ag.ID, AgentName: ag.Name,
					AgentStatus: ag.Status, RiskTier: ag.RiskTier, Request: tc.req, ReceivedAt: time.Now().UTC()})
				if out.Failure != nil || out.Response == nil || out.Response.Decision != tc.want {
					b.Errorf("authorize: %+v %+v", out.Failure, out.Response)
				}
			}
			for _, ag := range f.agents { // spawn the agent actors, warm the caches
				call(ag)
			}
			b.ReportAllocs()
			b.ResetTimer()
			if !tc.parallel {
				for b.Loop() {
					call(f.agents[0])
				}
				return
			}
			var next atomic.Uint64
			b.SetParallelism(8) // 16 callers on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					call(f.agents[next.Add(1)%uint64(len(f.agents))])
				}
			})
		})
	}
}

// newBenchAuthorizer is an authorizer on f's store with a lone node's run
// state, and mods as the tenant's policies.
func newBenchAuthorizer(b *testing.B, f *benchFixture, mods []policy.Module) *actors.Authorizer {
	b.Helper()
	log := hclog.NewNullLogger()
	engine, err := policy.NewEngine(policy.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range mods {
		now := time.Now().UTC()
		if _, err := f.store.CreatePolicy(context.Background(), persistence.Policy{TenantID: f.tenantID, Name: m.Name, Rego: m.Rego,
			Enabled: true, CreatedAt: now, UpdatedAt: now}); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.store.PutRiskEscalation(context.Background(), f.tenantID, 10000, 1); err != nil {
		b.Fatal(err)
	}
	sys := actors.NewSystem(log)
	writer := sys.Root.Spawn(actor.PropsFromProducer(actors.NewGroupWriter(f.store, actors.NewSealer(benchSigner(b), nil), nil,
		actors.WriterOptions{AuditBatchSize: 100, AuditBatchFlush: 500 * time.Millisecond}, log)))
	bus := broadcast.NewEventBus(sys.Root, 4096)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); bus.Run(stop) }()
	shared := sharedstate.NewMemory()
	auth, err := actors.NewAuthorizer(sys, f.store, shared, engine, writer, bus, func(messages.Heartbeat) {},
		actors.AuthorizerOptions{RateCapacity: 1e9, RateRefill: 1e9, ReplayWindow: 5 * time.Minute, SkillCacheCapacity: 1024,
			RiskWeightsTTL: time.Minute, CommitTimeout: 30 * time.Second, Runs: shared.Runs(sharedstate.RunLimits{})}, log)
	if err != nil {
		b.Fatal(err)
	}
	if err := auth.SeedRuns(context.Background()); err != nil { // as a node does before serving
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = sys.Root.PoisonFuture(writer).Wait()
		close(stop)
		wg.Wait()
		_ = shared.Close()
	})
	return auth
}
