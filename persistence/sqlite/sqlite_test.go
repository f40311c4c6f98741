package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

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

// The lone node's cache in front of the store passes the same contract:
// every write that changes an agent, a token or a binding is seen by the
// very next read.
func TestContractCached(t *testing.T) {
	storetest.Run(t, func(t *testing.T) persistence.Store {
		return persistence.NewCachedStore(open(t, filepath.Join(t.TempDir(), "svc.db")), 1000)
	})
}
