package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/persistence"
	"svc/persistence/sqlite"
	"svc/persistence/storetest"
)

func open(t *testing.T, path string) persistence.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: path, PoolSize: 5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestContractFile(t *testing.T) {
	storetest.Run(t, func(t *testing.T) persistence.Store {
		return open(t, filepath.Join(t.TempDir(), "svc.db"))
	})
}

func TestContractMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) persistence.Store { return open(t, ":memory:") })
}

func TestReopenKeepsDataAndSkipsMigrations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "svc.db")
	s := open(t, path)
	if err := s.AppendAudit(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	s2 := open(t, path)
	if _, err := s2.ListTenants(context.Background()); err != nil {
		t.Fatalf("reopened store: %v", err)
	}
}

func TestDecisionsContract(t *testing.T) {
	storetest.RunDecisions(t, func(t *testing.T) persistence.Store {
		return open(t, filepath.Join(t.TempDir(), "svc.db"))
	})
}

func TestSealedAheadContract(t *testing.T) {
	storetest.RunSealedAhead(t, func(t *testing.T) persistence.Store { return open(t, filepath.Join(t.TempDir(), "svc.db")) }, false)
}

func TestApprovalsContract(t *testing.T) {
	storetest.RunApprovals(t, func(t *testing.T) persistence.Store { return open(t, filepath.Join(t.TempDir(), "svc.db")) })
}

func TestSOCContract(t *testing.T) {
	storetest.RunSOC(t, func(t *testing.T) persistence.Store { return open(t, filepath.Join(t.TempDir(), "svc.db")) })
}

// The lone node's cache in front of the store passes the same contract:
// every write that changes an agent, a token or a binding is seen by the
// very next read.
func TestContractCached(t *testing.T) {
	storetest.Run(t, func(t *testing.T) persistence.Store {
		return persistence.NewCachedStore(open(t, filepath.Join(t.TempDir(), "svc.db")), 1000)
	})
}

// A write that bypasses the cache (another node on the same database, a
// misconfiguration) reaches the cache within its entry lifetime.
func TestCachedStoreLifetimeBoundsStaleness(t *testing.T) {
	inner := open(t, filepath.Join(t.TempDir(), "svc.db"))
	clock := time.Now()
	c := persistence.NewCachedStoreWithLifetime(inner, 100, 2*time.Second, func() time.Time { return clock })
	ctx := context.Background()
	tn := persistence.Tenant{ID: uuid.NewString(), Name: "t", CreatedAt: clock}
	if err := inner.CreateTenant(ctx, tn, persistence.OperatorToken{ID: uuid.NewString(), TenantID: tn.ID, Name: "a", Role: "admin", CreatedAt: clock}, []byte("op")); err != nil {
		t.Fatal(err)
	}
	a := persistence.Agent{ID: uuid.NewString(), TenantID: tn.ID, Name: "bot", Status: "active", RiskTier: "low", CreatedAt: clock, UpdatedAt: clock}
	if err := inner.CreateAgent(ctx, a, []byte("old")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.LookupAgentToken(ctx, []byte("old")); err != nil {
		t.Fatal(err)
	}
	// Revoked behind the cache's back.
	if _, err := inner.RotateAgentToken(ctx, tn.ID, a.ID, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.LookupAgentToken(ctx, []byte("old")); err != nil {
		t.Fatalf("within the lifetime the entry may still serve: %v", err)
	}
	clock = clock.Add(2 * time.Second)
	if _, err := c.LookupAgentToken(ctx, []byte("old")); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("after the lifetime the old token must fail: %v", err)
	}
	// A write through the cache invalidates at once, lifetime or not.
	if _, err := c.LookupAgentToken(ctx, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RotateAgentToken(ctx, tn.ID, a.ID, []byte("newer")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.LookupAgentToken(ctx, []byte("new")); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("a write through the cache must invalidate at once: %v", err)
	}
}

func TestWebhooksContract(t *testing.T) {
	storetest.RunWebhooks(t, func(t *testing.T) persistence.Store { return open(t, filepath.Join(t.TempDir(), "svc.db")) })
}

func TestMCPContract(t *testing.T) {
	storetest.RunMCP(t, func(t *testing.T) persistence.Store { return open(t, filepath.Join(t.TempDir(), "svc.db")) })
}

// TestSearchIndexIntegrity: the full-text indexes are maintained in bulk
// (migration 0007); deleting a tenant whose newest rows are not indexed yet
// must leave both FTS5 indexes consistent with their tables (FTS5's own
// integrity-check compares them), and rows written afterwards are indexed.
func TestSearchIndexIntegrity(t *testing.T) {
	path := filepath.Join(t.TempDir(), "svc.db")
	s := open(t, path)
	ctx := context.Background()
	tenant := func(name string) (string, string) {
		now := time.Now().UTC()
		tn := persistence.Tenant{ID: uuid.NewString(), Name: name, CreatedAt: now}
		if err := s.CreateTenant(ctx, tn, persistence.OperatorToken{ID: uuid.NewString(), TenantID: tn.ID, Name: "admin", Role: "admin", CreatedAt: now}, []byte(name)); err != nil {
			t.Fatal(err)
		}
		ag := persistence.Agent{ID: uuid.NewString(), TenantID: tn.ID, Name: "ag", Status: "active", RiskTier: "low", CreatedAt: now, UpdatedAt: now}
		if err := s.CreateAgent(ctx, ag, []byte("tok-"+name)); err != nil {
			t.Fatal(err)
		}
		return tn.ID, ag.ID
	}
	commit := func(tenantID, agentID string, n int) {
		ws := make([]persistence.DecisionWrite, n)
		for i := range ws {
			now := time.Now().UTC()
			d := persistence.Decision{ID: uuid.NewString(), TenantID: tenantID, AgentID: agentID, Tool: "crm", Action: "read",
				ActionHash: "ab", Decision: "allow", Reason: "fine", MatchedPolicyIDs: []string{"p"}, RedactedFields: []string{},
				TrustLevel: "unknown", RootTrustLevel: "unknown", ToolCall: []byte(`{}`), CreatedAt: now, AuditID: uuid.NewString()}
			ws[i] = persistence.DecisionWrite{Decision: d,
				Receipt: &persistence.Receipt{ID: uuid.NewString(), TenantID: tenantID, DecisionID: d.ID, ActionHash: "ab", Decision: "allow", CreatedAt: now}}
		}
		seal := func(_ string, h persistence.ChainHead, rs []*persistence.Receipt) error {
			for _, r := range rs {
				h.Seq++
				r.Seq, r.PrevHash, r.Hash = h.Seq, h.Hash, fmt.Sprintf("%064x", h.Seq)
				h.Hash = r.Hash
			}
			return nil
		}
		if err := s.CommitDecisions(ctx, ws, seal); err != nil {
			t.Fatal(err)
		}
	}
	a, agA := tenant("a")
	b, agB := tenant("b")
	commit(a, agA, 300) // indexed in its own commit (past the batch threshold)
	commit(b, agB, 5)   // not indexed yet
	commit(a, agA, 3)   // not indexed yet
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var indexed, last int64
	if err := raw.QueryRow(`SELECT upto, (SELECT max(seq) FROM decisions) FROM search_progress WHERE name = 'decisions'`).Scan(&indexed, &last); err != nil {
		t.Fatal(err)
	}
	if indexed != 300 || last != 308 {
		t.Fatalf("search_progress: indexed up to %d of %d decisions, want 300 of 308", indexed, last)
	}
	check := func(when string) {
		t.Helper()
		for _, fts := range []string{"decisions_fts", "audit_events_fts"} {
			stmt := `INSERT INTO ` + fts + ` (` + fts + `, rank) VALUES ('integrity-check', 1)` //nolint:gosec // fixed table names
			if _, err := raw.Exec(stmt); err != nil {
				t.Fatalf("%s: %s integrity-check: %v", when, fts, err)
			}
		}
	}
	if err := s.DeleteTenant(ctx, b); err != nil {
		t.Fatal(err)
	}
	ds, err := s.ListDecisions(ctx, a, "crm", persistence.Page{Limit: 500})
	if err != nil || len(ds) != 303 {
		t.Fatalf("search after deleting b: %d decisions, %v; want 303", len(ds), err)
	}
	check("after the deletion and a search's catch-up")
	if err := s.DeleteTenant(ctx, a); err != nil {
		t.Fatal(err)
	}
	check("after deleting every indexed row")
}

func TestReceiptLogContract(t *testing.T) {
	storetest.RunReceiptLog(t, func(t *testing.T) persistence.Store { return open(t, filepath.Join(t.TempDir(), "svc.db")) })
}

func TestMaintenanceContract(t *testing.T) {
	storetest.RunMaintenance(t, func(t *testing.T) persistence.Store { return open(t, filepath.Join(t.TempDir(), "svc.db")) })
}

// SVC_DB_TEST_BEFORE_ACQUIRE on SQLite: with it, every read checks its
// connection first (and the checks are counted); without it, none does.
func TestTestBeforeAcquire(t *testing.T) {
	ctx := context.Background()
	for _, on := range []bool{false, true} {
		s, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(t.TempDir(), "svc.db"), TestBeforeAcquire: on})
		if err != nil {
			t.Fatal(err)
		}
		before := s.PoolStats().LivenessChecks
		for range 5 {
			if _, err := s.ListTenants(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := s.GetTenant(ctx, "none"); !errors.Is(err, persistence.ErrNotFound) {
				t.Fatalf("GetTenant: %v", err)
			}
		}
		got := s.PoolStats().LivenessChecks - before
		if (on && got != 10) || (!on && got != 0) {
			t.Errorf("TestBeforeAcquire %v: %d liveness checks for 10 reads", on, got)
		}
		if st := s.PoolStats(); st.Active != 0 {
			t.Errorf("TestBeforeAcquire %v: %d connections still held after the reads", on, st.Active)
		}
		_ = s.Close()
	}
}
