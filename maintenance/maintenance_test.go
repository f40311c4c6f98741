package maintenance

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"svc/messages"
	"svc/persistence"
	"svc/persistence/postgres"
	"svc/persistence/sqlite"
	"svc/persistence/storetest"
	"svc/receipt"
)

// fakeClock is the maintenance passes' injected clock: tests advance it
// instead of sleeping.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) Advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

// maintained is a store on one backend with a tenant and an agent, and a
// way to change its rows behind the gateway's back.
type maintained struct {
	store    persistence.Store
	tenantID string
	agentID  string
	exec     func(t *testing.T, query string, args ...any)
}

// onBothBackends runs fn on a fresh SQLite store and a fresh Postgres
// database.
func onBothBackends(t *testing.T, fn func(t *testing.T, m maintained)) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			var m maintained
			var url string
			switch backend {
			case "sqlite":
				path := filepath.Join(t.TempDir(), "svc.db")
				s, err := sqlite.Open(ctx, sqlite.Options{Path: path})
				if err != nil {
					t.Fatal(err)
				}
				m.store, url = s, "sqlite://"+path
			case "postgres":
				url = storetest.PostgresURL(t)
				s, err := postgres.Open(ctx, postgres.Options{URL: url})
				if err != nil {
					t.Fatal(err)
				}
				m.store = s
			}
			m.exec = func(t *testing.T, query string, args ...any) { t.Helper(); storetest.ExecSQL(t, url, query, args...) }
			t.Cleanup(func() { _ = m.store.Close() })
			now := time.Now().UTC()
			tn := persistence.Tenant{ID: uuid.NewString(), Name: "maintained", CreatedAt: now}
			if err := m.store.CreateTenant(ctx, tn, persistence.OperatorToken{ID: uuid.NewString(), TenantID: tn.ID, Name: "admin",
				Role: persistence.RoleAdmin, CreatedAt: now}, []byte(uuid.NewString())); err != nil {
				t.Fatal(err)
			}
			ag := persistence.Agent{ID: uuid.NewString(), TenantID: tn.ID, Name: "bot", Status: "active", RiskTier: "low", CreatedAt: now, UpdatedAt: now}
			if err := m.store.CreateAgent(ctx, ag, []byte("token-hash-"+ag.ID)); err != nil {
				t.Fatal(err)
			}
			m.tenantID, m.agentID = tn.ID, ag.ID
			fn(t, m)
		})
	}
}

// commit writes n signed decisions.
func (m maintained) commit(t *testing.T, signer *receipt.Signer, n int) {
	t.Helper()
	var ws []persistence.DecisionWrite
	for i := range n {
		ws = append(ws, decisionWrite(m.tenantID, m.agentID, i))
	}
	if err := m.store.CommitDecisions(context.Background(), ws, sealer(signer)); err != nil {
		t.Fatal(err)
	}
}

// eventChan is an event bus that hands every event to a channel.
type eventChan chan messages.AseEvent

func (c eventChan) Publish(ev messages.AseEvent) { c <- ev }

// brokenEvents collects the receipt_chain_broken events published.
func brokenEvents(_ *testing.T) (Events, chan messages.AseEvent) {
	ch := make(chan messages.AseEvent, 16)
	return eventChan(ch), ch
}

// sealer seals receipts onto the chain's head inside the commit, as the
// writer's (actors.NewSealer) does.
func sealer(signer *receipt.Signer) persistence.Sealer {
	return func(_ string, head persistence.ChainHead, rs []*persistence.Receipt) error {
		var err error
		for _, r := range rs {
			if head, err = r.SealAfter(head, signer); err != nil {
				return err
			}
		}
		return nil
	}
}

// decisionWrite is the i-th allowed decision of the agent, with its
// receipt to seal.
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

func wantNoEvent(t *testing.T, ch chan messages.AseEvent) {
	t.Helper()
	select {
	case ev := <-ch:
		t.Fatalf("unexpected event %+v", ev)
	case <-time.After(100 * time.Millisecond):
	}
}

func wantBrokenEvent(t *testing.T, ch chan messages.AseEvent, tenantID string, seq int64) {
	t.Helper()
	select {
	case ev := <-ch:
		if ev.Kind != messages.KindReceiptChainBroken || ev.TenantID != tenantID || !strings.HasPrefix(ev.Reason, fmt.Sprintf("seq %d:", seq)) {
			t.Fatalf("event %+v; want receipt_chain_broken at seq %d", ev, seq)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no receipt_chain_broken event for seq %d", seq)
	}
}

// TestReceiptIntegrity runs the integrity pass on both backends: it
// verifies only what was appended since the last pass (plus the rolling
// re-verification of older links), finds a tampered row among the older
// links and a gap among the new ones, raises each break once, and clears
// when the chain is restored.
func TestReceiptIntegrity(t *testing.T) {
	onBothBackends(t, func(t *testing.T, st maintained) {
		ctx := context.Background()
		signer, err := receipt.NewSigner(make([]byte, 32))
		if err != nil {
			t.Fatal(err)
		}
		clock := &fakeClock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
		bus, events := brokenEvents(t)
		m := New(st.store, Options{PublicKey: signer.PublicKey(), Now: clock.Now, Events: bus},
			hclog.NewNullLogger())
		pass := func() IntegrityPass {
			t.Helper()
			p, err := m.CheckReceipts(ctx)
			if err != nil {
				t.Fatalf("CheckReceipts: %v", err)
			}
			return p
		}
		state := func() persistence.ChainCheckState {
			t.Helper()
			s, err := st.store.ChainCheck(ctx, st.tenantID)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}

		st.commit(t, signer, 25)
		if p := pass(); p.Verified != 25 || len(p.Broken) != 0 {
			t.Fatalf("first pass: %+v", p)
		}
		if s := state(); s.VerifiedSeq != 25 || !s.CheckedAt.Equal(clock.Now()) {
			t.Fatalf("after the first pass: %+v", s)
		}
		// Incremental: the next pass verifies the five new links only
		// (and re-verifies the older ones within its sweep budget).
		st.commit(t, signer, 5)
		clock.Advance(time.Hour)
		if p := pass(); p.Verified != 5 || p.Swept != 30 || len(p.Broken) != 0 {
			t.Fatalf("second pass: %+v", p)
		}
		if s := state(); s.VerifiedSeq != 30 || !s.CheckedAt.Equal(clock.Now()) {
			t.Fatalf("after the second pass: %+v", s)
		}
		wantNoEvent(t, events)
		if n, ran := m.BrokenChains(); n != 0 || !ran {
			t.Fatalf("gauge %d, ran %v", n, ran)
		}

		// A verified row altered afterwards: the re-verification finds it.
		st.exec(t, `UPDATE decisions SET decision = 'deny' WHERE tenant_id = $1 AND receipt_seq = 10`, st.tenantID)
		clock.Advance(time.Hour)
		p := pass()
		if len(p.Broken) != 1 || p.Broken[0].BrokenSeq != 10 || !strings.Contains(p.Broken[0].BrokenError, "hash") {
			t.Fatalf("after tampering with seq 10: %+v", p)
		}
		wantBrokenEvent(t, events, st.tenantID, 10)
		if n, _ := m.BrokenChains(); n != 1 {
			t.Fatalf("gauge %d, want 1", n)
		}
		pass() // still broken: reported, not raised again
		wantNoEvent(t, events)
		if s := state(); s.BrokenSeq != 10 {
			t.Fatalf("the break is not kept: %+v", s)
		}

		// Restored (from a backup, say): the chain verifies again.
		st.exec(t, `UPDATE decisions SET decision = 'allow' WHERE tenant_id = $1 AND receipt_seq = 10`, st.tenantID)
		if p := pass(); len(p.Broken) != 0 {
			t.Fatalf("after the restore: %+v", p)
		}
		if n, _ := m.BrokenChains(); n != 0 {
			t.Fatalf("gauge %d after the restore", n)
		}

		// A link missing among the new ones: a gap in seq.
		st.commit(t, signer, 5)
		st.exec(t, `DELETE FROM decisions WHERE tenant_id = $1 AND receipt_seq = 33`, st.tenantID)
		p = pass()
		if len(p.Broken) != 1 || p.Broken[0].BrokenSeq != 33 || !strings.Contains(p.Broken[0].BrokenError, "gap") {
			t.Fatalf("after deleting seq 33: %+v", p)
		}
		wantBrokenEvent(t, events, st.tenantID, 33)
		if s := state(); s.VerifiedSeq != 32 {
			t.Fatalf("the verified point moved past the gap: %+v", s)
		}
	})
}

// TestReceiptIntegrityStopsOffLeadership: a node that does not lead stops
// its pass before it verifies anything.
func TestReceiptIntegrityStopsOffLeadership(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(t.TempDir(), "svc.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	tn := persistence.Tenant{ID: uuid.NewString(), Name: "t", CreatedAt: time.Now().UTC()}
	if err := store.CreateTenant(ctx, tn, persistence.OperatorToken{ID: uuid.NewString(), TenantID: tn.ID, Name: "admin",
		Role: persistence.RoleAdmin, CreatedAt: time.Now().UTC()}, []byte("op-hash")); err != nil {
		t.Fatal(err)
	}
	f := struct {
		store    persistence.Store
		tenantID string
	}{store, tn.ID}
	m := New(f.store, Options{IsLeader: func() bool { return false }}, hclog.NewNullLogger())
	if _, err := m.CheckReceipts(context.Background()); err == nil {
		t.Fatal("a pass ran on a node that does not lead")
	}
	if s, err := f.store.ChainCheck(context.Background(), f.tenantID); err != nil || !s.CheckedAt.IsZero() {
		t.Fatalf("state %+v, %v", s, err)
	}
}

// TestAuditArchival runs the archival pass on both backends with the clock
// advanced: each pass moves exactly the events older than the retention
// at its time, in batches, and every event stays listed.
func TestAuditArchival(t *testing.T) {
	onBothBackends(t, func(t *testing.T, st maintained) {
		ctx := context.Background()
		start := time.Now().UTC().Truncate(time.Millisecond)
		clock := &fakeClock{now: start}
		// A retention of 10 days (SVC_AUDIT_RETENTION_DAYS=10, not the
		// default 90).
		day := 24 * time.Hour
		m := New(st.store, Options{Retention: 10 * day, Now: clock.Now}, hclog.NewNullLogger())
		var evs []persistence.AuditEvent
		add := func(n int, age time.Duration, action string) {
			for range n {
				evs = append(evs, persistence.AuditEvent{ID: uuid.NewString(), TenantID: st.tenantID, EventType: "config_change",
					Action: action, Actor: "test", Details: map[string]any{"n": len(evs)}, CreatedAt: start.Add(-age)})
			}
		}
		add(2100, 200*day, "ancient") // more than two transactions' worth
		add(3, 8*day, "older")
		if err := st.store.AppendAudit(ctx, evs); err != nil {
			t.Fatal(err)
		}
		count := func() (hot, archived int) {
			t.Helper()
			for p := (persistence.Page{Limit: 500}); ; {
				page, err := st.store.ListAudit(ctx, st.tenantID, persistence.AuditFilter{}, p)
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < len(page) && i < p.Limit; i++ {
					if page[i].Archived {
						archived++
					} else {
						hot++
					}
				}
				if len(page) <= p.Limit {
					return hot, archived
				}
				p.After = page[p.Limit-1].Seq
			}
		}
		hot0, _ := count() // the events above, the tenant's and the agent's creation
		for _, step := range []struct {
			advance time.Duration
			moved   int
		}{
			{0, 2100},              // cutoff start-10d: the ancient ones only
			{0, 0},                 // nothing more at the same time
			{3 * day, 3},           // cutoff start-7d: the 8-day-old ones
			{5 * day, 0},           // start-2d: nothing yet
			{3 * day, hot0 - 2103}, // start+1d: the creation events too
		} {
			clock.Advance(step.advance)
			n, err := m.ArchiveAudit(ctx)
			if err != nil || n != step.moved {
				t.Fatalf("at %v: archived %d, %v; want %d", clock.Now().Sub(start), n, err, step.moved)
			}
		}
		if hot, archived := count(); hot != 0 || archived != hot0 {
			t.Fatalf("after archival: %d hot, %d archived; want 0 and %d", hot, archived, hot0)
		}
	})
}

// failingRange fails ReceiptRange from its nth call on.
type failingRange struct {
	persistence.Store
	calls, failFrom int
}

func (f *failingRange) ReceiptRange(ctx context.Context, tenantID string, from, to int64, limit int) ([]persistence.Receipt, error) {
	f.calls++
	if f.failFrom > 0 && f.calls >= f.failFrom {
		return nil, errors.New("the database went away")
	}
	return f.Store.ReceiptRange(ctx, tenantID, from, to, limit)
}

// An integrity pass interrupted after its first page of 1,000 receipts
// resumes from there: the next pass verifies the 1,500 after it, not the
// whole chain again.
func TestReceiptIntegrityResumes(t *testing.T) {
	onBothBackends(t, func(t *testing.T, st maintained) {
		ctx := context.Background()
		for range 5 {
			st.commit(t, nil, 500)
		}
		flaky := &failingRange{Store: st.store, failFrom: 2}
		m := New(flaky, Options{}, hclog.NewNullLogger())
		if _, err := m.CheckReceipts(ctx); err == nil {
			t.Fatal("the pass did not report the failed read")
		}
		if s, err := st.store.ChainCheck(ctx, st.tenantID); err != nil || s.VerifiedSeq != 1000 {
			t.Fatalf("after the interrupted pass: %+v, %v", s, err)
		}
		flaky.failFrom = 0
		p, err := m.CheckReceipts(ctx)
		if err != nil || p.Verified != 1500 || len(p.Broken) != 0 {
			t.Fatalf("the resumed pass: %+v, %v", p, err)
		}
	})
}
