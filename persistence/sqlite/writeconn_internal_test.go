package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"svc/persistence"
	"svc/persistence/sqlstore"
)

// The write connection prepares each statement text once and reuses it in
// later transactions, makes a waiting transaction give up when its context
// ends, rolls back on error, and closes once.
func TestWriteConn(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Options{Path: filepath.Join(t.TempDir(), "w.db")})
	if err != nil {
		t.Fatal(err)
	}
	if s.w == nil {
		t.Fatal("a file database has no held write connection")
	}
	if err := s.DB.Tx(ctx, func(q sqlstore.Querier) error {
		_, err := q.Exec(ctx, `CREATE TABLE wc (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	before := len(s.w.stmts)
	for i := range 20 {
		if err := s.DB.Tx(ctx, func(q sqlstore.Querier) error {
			_, err := q.Exec(ctx, `INSERT INTO wc (id, v) VALUES ($1, $2)`, i, "x")
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(s.w.stmts) - before; got != 1 {
		t.Fatalf("20 transactions of one statement text prepared %d statements, want 1", got)
	}

	// Past maxPrepared texts, statements still run, unprepared.
	for i := len(s.w.stmts); i < maxPrepared; i++ {
		if _, err := s.w.stmt(ctx, fmt.Sprintf("SELECT %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DB.Tx(ctx, func(q sqlstore.Querier) error {
		if _, err := q.Exec(ctx, `INSERT INTO wc (id, v) VALUES ($1, $2) -- a new text`, 50, "z"); err != nil {
			return err
		}
		var v string
		if err := q.QueryRow(ctx, `SELECT v FROM wc WHERE id = $1 -- another`, 50).Scan(&v); err != nil || v != "z" {
			return fmt.Errorf("read back %q: %w", v, err)
		}
		_, err := q.Exec(ctx, `DELETE FROM wc WHERE id = $1`, 50)
		return err
	}); err != nil {
		t.Fatalf("statements beyond the cache: %v", err)
	}
	if len(s.w.stmts) != maxPrepared {
		t.Fatalf("%d statements cached, want the cap %d", len(s.w.stmts), maxPrepared)
	}

	// A failing transaction leaves nothing and the connection usable.
	boom := errors.New("boom")
	err = s.DB.Tx(ctx, func(q sqlstore.Querier) error {
		if _, err := q.Exec(ctx, `INSERT INTO wc (id, v) VALUES ($1, $2)`, 100, "y"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Tx = %v, want boom", err)
	}
	err = s.DB.Tx(ctx, func(q sqlstore.Querier) error {
		_, err := q.Exec(ctx, `INSERT INTO wc (id, v) VALUES ($1, $2)`, 1, "dup")
		return err
	})
	if !errors.Is(err, persistence.ErrConflict) {
		t.Fatalf("duplicate key: %v, want ErrConflict", err)
	}
	var n int
	if err := s.DB.Reader().QueryRow(ctx, `SELECT count(*) FROM wc`).Scan(&n); err != nil || n != 20 {
		t.Fatalf("rows after the failed transactions: %d (%v), want 20", n, err)
	}

	// While a transaction holds the connection, another one waits no
	// longer than its context.
	held, release := make(chan struct{}), make(chan struct{})
	go func() {
		_ = s.DB.Tx(ctx, func(sqlstore.Querier) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	if st := s.PoolStats(); st.Active != 1 {
		t.Fatalf("pool stats while a transaction holds the writer: %+v, want 1 active", st)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err = s.DB.Tx(short, func(sqlstore.Querier) error { return nil })
	cancel()
	close(release)
	if !errors.Is(err, persistence.ErrBusy) {
		t.Fatalf("Tx while the writer is held: %v, want ErrBusy", err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping after the holder finished: %v", err)
	}
	if st := s.PoolStats(); st.Active != 0 || st.Max != 6 {
		t.Fatalf("pool stats at rest: %+v, want 0 active of 6 (5 readers and the writer)", st)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.DB.Tx(ctx, func(sqlstore.Querier) error { return nil }); err == nil {
		t.Fatal("a transaction on a closed store succeeded")
	}
}
