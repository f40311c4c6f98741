package postgres_test

// Behavioural tests of the pool settings (SVC_DB_POOL_SIZE,
// SVC_DB_ACQUIRE_TIMEOUT_SECS, SVC_DB_MAX_LIFETIME_SECS,
// SVC_DB_IDLE_TIMEOUT_SECS) on Postgres: each compares the configured value
// with the default, so that a setting the store ignored would fail.
//
// Connections are held by acquiring them directly from the store's own pool
// (Store.Pool), the pool its reads and transactions use.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"svc/persistence"
	"svc/persistence/postgres"
	"svc/persistence/storetest"
)

// openPool opens a store on the database at dbURL with the options given
// (URL is filled in); several stores may share one database, migrated once.
func openPool(t *testing.T, dbURL string, o postgres.Options) *postgres.Store {
	t.Helper()
	o.URL = dbURL
	s, err := postgres.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// holdConns acquires n connections from the store's pool and keeps them
// until release.
func holdConns(t *testing.T, s *postgres.Store, n int) (release func()) {
	t.Helper()
	var held []*pgxpool.Conn
	release = func() {
		for _, c := range held {
			c.Release()
		}
		held = nil
	}
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := s.Pool().Acquire(ctx)
		cancel()
		if err != nil {
			release()
			t.Fatalf("acquire %d of %d: %v", i+1, n, err)
		}
		held = append(held, c)
	}
	return release
}

// SVC_DB_POOL_SIZE is the pool's maximum: with 3 connections held, a store
// read finds none free at PoolSize 3 and fails after its acquire timeout,
// while at the default (pgxpool's, at least 4) it succeeds.
func TestPoolSizeSetting(t *testing.T) {
	dbURL := storetest.PostgresURL(t)
	small := openPool(t, dbURL, postgres.Options{PoolSize: 3, AcquireTimeout: 300 * time.Millisecond})
	dflt := openPool(t, dbURL, postgres.Options{AcquireTimeout: 300 * time.Millisecond})

	if got := small.PoolStats().Max; got != 3 {
		t.Errorf("PoolSize 3: PoolStats().Max = %d, want 3", got)
	}
	if got := dflt.PoolStats().Max; got < 4 {
		t.Errorf("default PoolSize: PoolStats().Max = %d, want pgxpool's default (at least 4)", got)
	}

	for _, c := range []struct {
		name     string
		s        *postgres.Store
		wantFree bool // whether a fourth concurrent read finds a connection
	}{{"PoolSize 3", small, false}, {"default PoolSize", dflt, true}} {
		release := holdConns(t, c.s, 3)
		_, err := c.s.ListTenants(context.Background())
		st := c.s.PoolStats()
		release()
		switch {
		case c.wantFree && err != nil:
			t.Errorf("%s: a read with 3 connections held failed: %v", c.name, err)
		case !c.wantFree && !errors.Is(err, persistence.ErrUnavailable):
			t.Errorf("%s: a read with 3 connections held returned %v, want ErrUnavailable (no connection within the acquire timeout)", c.name, err)
		}
		if !c.wantFree && st.Size > 3 {
			t.Errorf("%s: %d connections open, want at most 3", c.name, st.Size)
		}
	}
}

// SVC_DB_ACQUIRE_TIMEOUT_SECS bounds the wait for a connection of every
// store read (and transaction and SampleAcquire). With the one connection
// of the pool held, a read fails with ErrUnavailable after the configured
// 300 ms; with the default (5 s) it is still waiting a second later, and
// succeeds once the connection is freed.
func TestAcquireTimeoutSetting(t *testing.T) {
	dbURL := storetest.PostgresURL(t)

	t.Run("configured", func(t *testing.T) {
		s := openPool(t, dbURL, postgres.Options{PoolSize: 1, AcquireTimeout: 300 * time.Millisecond})
		release := holdConns(t, s, 1)
		defer release()
		start := time.Now()
		_, err := s.ListTenants(context.Background())
		took := time.Since(start)
		if !errors.Is(err, persistence.ErrUnavailable) {
			t.Fatalf("read with the pool exhausted: %v, want ErrUnavailable", err)
		}
		if took < 250*time.Millisecond || took > 3*time.Second {
			t.Fatalf("read gave up after %v, want about the 300 ms AcquireTimeout", took)
		}
		start = time.Now()
		_, err = s.SampleAcquire(context.Background())
		if took := time.Since(start); err == nil || took < 250*time.Millisecond || took > 3*time.Second {
			t.Fatalf("SampleAcquire with the pool exhausted: %v after %v, want an error after about 300 ms", err, took)
		}
	})

	t.Run("default", func(t *testing.T) {
		s := openPool(t, dbURL, postgres.Options{PoolSize: 1})
		release := holdConns(t, s, 1)
		defer release()
		done := make(chan error, 1)
		go func() {
			_, err := s.ListTenants(context.Background())
			done <- err
		}()
		select {
		case err := <-done:
			t.Fatalf("read returned (%v) within 1 s with the default 5 s AcquireTimeout, want it still waiting", err)
		case <-time.After(time.Second):
		}
		release()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("read after the connection was freed: %v", err)
			}
		case <-time.After(3 * time.Second):
			t.Fatal("read still waiting 3 s after the connection was freed")
		}
	})
}

// backendPID is the server process of the connection a pool query runs on.
func backendPID(t *testing.T, s *postgres.Store) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var pid int
	if err := s.Pool().QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// SVC_DB_MAX_LIFETIME_SECS retires connections by age: with PoolSize 1 and a
// 300 ms lifetime, the connection a query runs on (its server process id)
// changes within a few hundred milliseconds of repeated queries, since
// pgxpool closes an expired connection when it is released or acquired;
// with the default lifetime (an hour) it is the same connection for a
// second of queries.
func TestMaxLifetimeSetting(t *testing.T) {
	dbURL := storetest.PostgresURL(t)
	for _, c := range []struct {
		name     string
		lifetime time.Duration
	}{{"MaxLifetime 300ms", 300 * time.Millisecond}, {"default MaxLifetime", 0}} {
		s := openPool(t, dbURL, postgres.Options{PoolSize: 1, MaxLifetime: c.lifetime})
		first := backendPID(t, s)
		if c.lifetime > 0 {
			deadline := time.Now().Add(3 * time.Second)
			for backendPID(t, s) == first {
				if time.Now().After(deadline) {
					t.Fatalf("%s: still on backend %d after 3 s, want the connection replaced", c.name, first)
				}
				time.Sleep(20 * time.Millisecond)
			}
			continue
		}
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			if pid := backendPID(t, s); pid != first {
				t.Fatalf("%s: backend changed from %d to %d within 1 s, want the one connection kept", c.name, first, pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// SVC_DB_IDLE_TIMEOUT_SECS closes idle connections: with a 300 ms idle
// timeout the three connections opened for three concurrent uses are all
// closed soon after they are released; with the default (pgxpool's 30
// minutes) they stay open. (pgxpool closes idle connections in its health
// check, once a minute by default; the store checks at least twice per
// idle timeout, which is what this test would catch missing.)
func TestIdleTimeoutSetting(t *testing.T) {
	dbURL := storetest.PostgresURL(t)
	idle := openPool(t, dbURL, postgres.Options{PoolSize: 3, IdleTimeout: 300 * time.Millisecond})
	dflt := openPool(t, dbURL, postgres.Options{PoolSize: 3})
	for _, s := range []*postgres.Store{idle, dflt} {
		holdConns(t, s, 3)()
		if st := s.PoolStats(); st.Size != 3 {
			t.Fatalf("after 3 concurrent uses: PoolStats %+v, want 3 open", st)
		}
	}
	released := time.Now()

	deadline := time.Now().Add(3 * time.Second)
	for idle.PoolStats().Size != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("IdleTimeout 300ms: PoolStats %+v 3 s after release, want every idle connection closed", idle.PoolStats())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The default pool, checked as often, keeps its connections for at
	// least 1.5 s after their release: five times the idle timeout of the
	// other pool.
	deadline = released.Add(1500 * time.Millisecond)
	for {
		if st := dflt.PoolStats(); st.Size != 3 || st.Idle != 3 {
			t.Fatalf("default IdleTimeout: PoolStats %+v, want the 3 idle connections kept", st)
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
}
