package postgres_test

import (
	"context"
	"testing"

	"svc/persistence"
	"svc/persistence/postgres"
	"svc/persistence/storetest"
)

func open(t *testing.T, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), postgres.Options{URL: url, PoolSize: 10, TestBeforeAcquire: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) persistence.Store { return open(t, storetest.PostgresURL(t)) })
}

// Several nodes starting together must migrate once, under the lock.
func TestConcurrentMigrate(t *testing.T) {
	url := storetest.PostgresURL(t)
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() {
			s, err := postgres.Open(context.Background(), postgres.Options{URL: url, PoolSize: 2})
			if err == nil {
				_ = s.Close()
			}
			errs <- err
		}()
	}
	for i := 0; i < 4; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestReplicaFallsBackToPrimary(t *testing.T) {
	url := storetest.PostgresURL(t)
	s, err := postgres.Open(context.Background(), postgres.Options{URL: url, ReplicaURL: "postgres://svc@127.0.0.1:1/none?sslmode=disable&connect_timeout=1", PoolSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if _, err := s.ListTenants(context.Background()); err != nil {
		t.Fatalf("read with a dead replica: %v", err)
	}
}

func TestDecisionsContract(t *testing.T) {
	storetest.RunDecisions(t, func(t *testing.T) persistence.Store { return open(t, storetest.PostgresURL(t)) })
}

func TestSealedAheadContract(t *testing.T) {
	storetest.RunSealedAhead(t, func(t *testing.T) persistence.Store { return open(t, storetest.PostgresURL(t)) }, true)
}

func TestApprovalsContract(t *testing.T) {
	storetest.RunApprovals(t, func(t *testing.T) persistence.Store { return open(t, storetest.PostgresURL(t)) })
}

func TestSOCContract(t *testing.T) {
	storetest.RunSOC(t, func(t *testing.T) persistence.Store { return open(t, storetest.PostgresURL(t)) })
}

func TestWebhooksContract(t *testing.T) {
	storetest.RunWebhooks(t, func(t *testing.T) persistence.Store { return open(t, storetest.PostgresURL(t)) })
}

func TestMCPContract(t *testing.T) {
	storetest.RunMCP(t, func(t *testing.T) persistence.Store { return open(t, storetest.PostgresURL(t)) })
}

func TestReceiptLogContract(t *testing.T) {
	storetest.RunReceiptLog(t, func(t *testing.T) persistence.Store { return open(t, storetest.PostgresURL(t)) })
}

func TestMaintenanceContract(t *testing.T) {
	storetest.RunMaintenance(t, func(t *testing.T) persistence.Store { return open(t, storetest.PostgresURL(t)) })
}

// SVC_DB_TEST_BEFORE_ACQUIRE on Postgres: with it, every acquired
// connection is pinged first (and counted); without it, none is.
func TestTestBeforeAcquire(t *testing.T) {
	ctx := context.Background()
	url := storetest.PostgresURL(t)
	for _, on := range []bool{false, true} {
		s, err := postgres.Open(ctx, postgres.Options{URL: url, PoolSize: 2, TestBeforeAcquire: on})
		if err != nil {
			t.Fatal(err)
		}
		before := s.PoolStats().LivenessChecks
		for range 10 {
			if _, err := s.ListTenants(ctx); err != nil {
				t.Fatal(err)
			}
		}
		got := s.PoolStats().LivenessChecks - before
		if (on && got < 10) || (!on && got != 0) {
			t.Errorf("TestBeforeAcquire %v: %d liveness checks for 10 reads", on, got)
		}
		_ = s.Close()
	}
}
