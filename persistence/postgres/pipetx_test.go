package postgres_test

import (
	"context"
	"errors"
	"testing"

	"svc/persistence"
	"svc/persistence/postgres"
	"svc/persistence/sqlstore"
	"svc/persistence/storetest"
)

// The pipelined transaction (BEGIN with the first statement, Batch held
// back until the next statement or COMMIT) keeps the semantics of a plain
// one: order, atomicity, errors, and a clean connection afterwards. One
// pooled connection, so every transaction reuses the previous one's.
func TestPipelinedTx(t *testing.T) {
	ctx := context.Background()
	s, err := postgres.Open(ctx, postgres.Options{URL: storetest.PostgresURL(t), PoolSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	db := s.DB
	if err := db.Tx(ctx, func(q sqlstore.Querier) error {
		_, err := q.Exec(ctx, `DROP TABLE IF EXISTS pipetx_test; CREATE TABLE pipetx_test (id int PRIMARY KEY, v text NOT NULL)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		t.Helper()
		var n int
		if err := db.Reader().QueryRow(ctx, `SELECT count(*) FROM pipetx_test`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	ins := func(id int) sqlstore.Stmt {
		return sqlstore.Stmt{SQL: `INSERT INTO pipetx_test (id, v) VALUES ($1, 'x')`, Args: []any{id}}
	}

	// Held-back statements run before a later read in the same transaction.
	var seen int
	if err := db.Tx(ctx, func(q sqlstore.Querier) error {
		if err := q.Batch(ctx, []sqlstore.Stmt{ins(1), ins(2)}); err != nil {
			return err
		}
		return q.QueryRow(ctx, `SELECT count(*) FROM pipetx_test WHERE id <= $1`, 10).Scan(&seen)
	}); err != nil {
		t.Fatal(err)
	}
	if seen != 2 || count() != 2 {
		t.Fatalf("read inside the transaction saw %d rows, committed %d; want 2 and 2", seen, count())
	}

	// A held-back statement that fails fails the commit, as a conflict,
	// and takes the whole transaction with it.
	err = db.Tx(ctx, func(q sqlstore.Querier) error {
		if _, err := q.Exec(ctx, `INSERT INTO pipetx_test (id, v) VALUES ($1, 'y')`, 5); err != nil {
			return err
		}
		return q.Batch(ctx, []sqlstore.Stmt{ins(3), ins(1)})
	})
	if !errors.Is(err, persistence.ErrConflict) {
		t.Fatalf("duplicate key in a held-back batch: %v, want ErrConflict", err)
	}
	if n := count(); n != 2 {
		t.Fatalf("a failed transaction left rows: %d, want 2", n)
	}

	// An error returned by the function rolls back what was sent.
	boom := errors.New("boom")
	err = db.Tx(ctx, func(q sqlstore.Querier) error {
		if _, err := q.Exec(ctx, `INSERT INTO pipetx_test (id, v) VALUES ($1, 'z')`, 6); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) || count() != 2 {
		t.Fatalf("rollback: err %v, %d rows; want boom and 2", err, count())
	}

	// A statement failing in the middle reports its own error; rows and
	// queries work as before; a transaction that sends nothing commits.
	err = db.Tx(ctx, func(q sqlstore.Querier) error {
		_, err := q.Exec(ctx, `INSERT INTO pipetx_test (id, v) VALUES ($1, 'w')`, 1)
		return err
	})
	if !errors.Is(err, persistence.ErrConflict) {
		t.Fatalf("duplicate key in Exec: %v, want ErrConflict", err)
	}
	var ids []int
	if err := db.Tx(ctx, func(q sqlstore.Querier) error {
		if err := q.Batch(ctx, []sqlstore.Stmt{ins(7)}); err != nil {
			return err
		}
		rows, err := q.Query(ctx, `SELECT id FROM pipetx_test WHERE id > $1 ORDER BY id`, 0)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return rows.Err()
	}); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 3 || ids[0] != 1 || ids[1] != 2 || ids[2] != 7 {
		t.Fatalf("rows in the transaction: %v, want [1 2 7]", ids)
	}
	if err := db.Tx(ctx, func(sqlstore.Querier) error { return nil }); err != nil {
		t.Fatalf("empty transaction: %v", err)
	}
	if err := db.Tx(ctx, func(q sqlstore.Querier) error {
		_, err := q.Exec(ctx, `DROP TABLE pipetx_test`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
