package sqlite_test

// Behavioural tests of the pool settings (SVC_DB_POOL_SIZE,
// SVC_DB_ACQUIRE_TIMEOUT_SECS, SVC_DB_IDLE_TIMEOUT_SECS,
// SVC_DB_MAX_LIFETIME_SECS) on a file database: each compares the configured
// value with the default, so that a setting the store ignored would fail.
//
// A read connection is held by leaving a Rows of the store's read pool
// (Store.DB.Reader) open: database/sql keeps the connection until the Rows
// is closed.

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"svc/persistence/sqlite"
	"svc/persistence/sqlstore"
)

// openWith opens a file store with the options given (Path is filled in).
func openWith(t *testing.T, o sqlite.Options) *sqlite.Store {
	t.Helper()
	o.Path = filepath.Join(t.TempDir(), "svc.db")
	s, err := sqlite.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// holdReads opens n reads on the read pool and leaves them open, each
// holding one read connection; release closes them.
func holdReads(t *testing.T, s *sqlite.Store, n int) (release func()) {
	t.Helper()
	var held []sqlstore.Rows
	release = func() {
		for _, r := range held {
			r.Close()
		}
		held = nil
	}
	for i := range n {
		// Not a context with a deadline: database/sql closes a Rows when
		// its context ends, which would free the connection.
		rows, err := s.DB.Reader().Query(context.Background(), `SELECT 1`)
		if err != nil {
			release()
			t.Fatalf("read %d of %d: %v", i+1, n, err)
		}
		held = append(held, rows)
	}
	return release
}

// readWithin runs one more read on the read pool, waiting at most d for a
// connection.
func readWithin(s *sqlite.Store, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var one int
	return s.DB.Reader().QueryRow(ctx, `SELECT 1`).Scan(&one)
}

// SVC_DB_POOL_SIZE bounds the read connections: with 3, a fourth concurrent
// read cannot get a connection while three are held; with the default (5)
// it can. PoolStats reports the size plus the one writer connection.
func TestPoolSizeSetting(t *testing.T) {
	small := openWith(t, sqlite.Options{PoolSize: 3})
	dflt := openWith(t, sqlite.Options{})

	if got := small.PoolStats().Max; got != 4 {
		t.Errorf("PoolSize 3: PoolStats().Max = %d, want 4 (3 readers and the writer)", got)
	}
	if got := dflt.PoolStats().Max; got != 6 {
		t.Errorf("default PoolSize: PoolStats().Max = %d, want 6 (5 readers and the writer)", got)
	}

	for _, c := range []struct {
		name     string
		s        *sqlite.Store
		wantFree bool // whether a fourth read finds a connection
	}{{"PoolSize 3", small, false}, {"default PoolSize", dflt, true}} {
		release := holdReads(t, c.s, 3)
		st := c.s.PoolStats()
		err := readWithin(c.s, 300*time.Millisecond)
		release()
		if st.Active != 3 || st.Size != 4 {
			t.Errorf("%s, 3 reads held: PoolStats %+v, want 3 active of 4 open (3 readers and the writer)", c.name, st)
		}
		switch {
		case c.wantFree && err != nil:
			t.Errorf("%s: a fourth concurrent read failed: %v", c.name, err)
		case !c.wantFree && !errors.Is(err, context.DeadlineExceeded):
			t.Errorf("%s: a fourth concurrent read returned %v, want it to wait for a connection until its deadline", c.name, err)
		}
	}
	// No more than PoolSize read connections were ever opened.
	if st := small.PoolStats(); st.Size > 4 {
		t.Errorf("PoolSize 3: %d connections open, want at most 4", st.Size)
	}
}

// SVC_DB_ACQUIRE_TIMEOUT_SECS on SQLite bounds SampleAcquire (the pool
// sampler's probe of the read pool). With the one read connection held, a
// sample gives up after the configured 300 ms; with the default (5 s) it is
// still waiting a second later, and succeeds once the connection is freed.
//
// Ordinary reads and writes do not use this setting on SQLite: they wait as
// long as their caller's context allows.
func TestAcquireTimeoutSetting(t *testing.T) {
	t.Run("configured", func(t *testing.T) {
		s := openWith(t, sqlite.Options{PoolSize: 1, AcquireTimeout: 300 * time.Millisecond})
		release := holdReads(t, s, 1)
		defer release()
		start := time.Now()
		_, err := s.SampleAcquire(context.Background())
		took := time.Since(start)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("SampleAcquire with the read pool exhausted: %v, want a deadline error", err)
		}
		if took < 250*time.Millisecond || took > 3*time.Second {
			t.Fatalf("SampleAcquire gave up after %v, want about the 300 ms AcquireTimeout", took)
		}
	})

	t.Run("default", func(t *testing.T) {
		s := openWith(t, sqlite.Options{PoolSize: 1})
		release := holdReads(t, s, 1)
		defer release()
		done := make(chan error, 1)
		go func() {
			_, err := s.SampleAcquire(context.Background())
			done <- err
		}()
		select {
		case err := <-done:
			t.Fatalf("SampleAcquire returned (%v) within 1 s with the default 5 s AcquireTimeout, want it still waiting", err)
		case <-time.After(time.Second):
		}
		release()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("SampleAcquire after the connection was freed: %v", err)
			}
		case <-time.After(3 * time.Second):
			t.Fatal("SampleAcquire still waiting 3 s after the connection was freed")
		}
	})
}

// SVC_DB_IDLE_TIMEOUT_SECS and SVC_DB_MAX_LIFETIME_SECS close read
// connections: after three reads run together and finish, a pool with either
// set to 300 ms is back to no read connection (PoolStats().Size counts only
// the writer's), while a pool with neither keeps its three. database/sql
// closes them from a cleaner goroutine that runs at most once a second, so
// the wait is polled for up to 3 s.
func TestIdleTimeoutAndMaxLifetimeSettings(t *testing.T) {
	const limit = 300 * time.Millisecond
	for _, c := range []struct {
		name  string
		o     sqlite.Options
		drain bool
	}{
		{"IdleTimeout", sqlite.Options{PoolSize: 3, IdleTimeout: limit}, true},
		{"MaxLifetime", sqlite.Options{PoolSize: 3, MaxLifetime: limit}, true},
		{"neither", sqlite.Options{PoolSize: 3}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := openWith(t, c.o)
			release := holdReads(t, s, 3)
			if st := s.PoolStats(); st.Size != 4 {
				release()
				t.Fatalf("3 reads held: PoolStats %+v, want 4 open (3 readers and the writer)", st)
			}
			release()

			if c.drain {
				deadline := time.Now().Add(3 * time.Second)
				for s.PoolStats().Size != 1 {
					if time.Now().After(deadline) {
						t.Fatalf("%s %v: PoolStats %+v 3 s after the reads, want only the writer's connection open", c.name, limit, s.PoolStats())
					}
					time.Sleep(20 * time.Millisecond)
				}
				return
			}
			// Without a limit the three idle read connections stay open
			// well past the point where the limited pools drained.
			deadline := time.Now().Add(2 * time.Second)
			for time.Now().Before(deadline) {
				if st := s.PoolStats(); st.Size != 4 || st.Idle != 4 {
					t.Fatalf("no idle timeout or lifetime: PoolStats %+v, want 4 open and idle (3 readers and the writer)", st)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}
