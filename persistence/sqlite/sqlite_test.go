package sqlite_test

import (
	"context"
	"errors"
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
