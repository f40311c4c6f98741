package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"svc/persistence"
	"svc/persistence/sqlstore"
)

// writeConn is the writer's one connection, held for the store's life, and
// the statements prepared on it. Transactions are BEGIN IMMEDIATE ... COMMIT
// on it, one at a time (lock): database/sql's own transactions cannot reuse a
// statement across transactions without preparing it again, and preparing
// (parsing and compiling, triggers included) was 8% of a group commit's
// CPU at saturation and 13% at half load, where commits are small.
type writeConn struct {
	lock   chan struct{} // held (one token) by the transaction or ping in progress
	conn   *sql.Conn
	stmts  map[string]*sql.Stmt // positional SQL text → statement prepared on conn
	closed bool
	ckpt   *checkpointer
}

// maxPrepared bounds the prepared statements kept (texts beyond it run
// unprepared); svc's write statements number well under a hundred.
const maxPrepared = 256

// acquire takes the connection, waiting no longer than ctx allows (as
// database/sql's pool did).
func (w *writeConn) acquire(ctx context.Context) error {
	select {
	case w.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: waiting for the writer connection: %w", persistence.ErrBusy, ctx.Err())
	}
}

func (w *writeConn) release() { <-w.lock }

func (w *writeConn) tx(ctx context.Context, fn func(sqlstore.Querier) error) error {
	if err := w.acquire(ctx); err != nil {
		return err
	}
	defer w.release()
	if w.ckpt != nil {
		w.ckpt.rewind(ctx, w.conn)
	}
	if _, err := w.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return mapErr(err)
	}
	err := fn(connQuerier{querier{w.conn}, w})
	if err == nil {
		_, err = w.conn.ExecContext(ctx, "COMMIT")
		err = mapErr(err)
	}
	if err == nil && w.ckpt != nil {
		w.ckpt.noteWrite()
	}
	if err != nil {
		// After a failed statement or COMMIT the transaction may still be
		// open; after some errors SQLite has already rolled it back, and
		// this ROLLBACK's "no transaction is active" is expected.
		_, _ = w.conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		return err
	}
	return nil
}

// stmt returns the statement for text, preparing it on first use; nil when
// the cache is full.
func (w *writeConn) stmt(ctx context.Context, text string) (*sql.Stmt, error) {
	if st, ok := w.stmts[text]; ok {
		return st, nil
	}
	if len(w.stmts) >= maxPrepared {
		return nil, nil
	}
	st, err := w.conn.PrepareContext(ctx, text)
	if err != nil {
		return nil, mapErr(err)
	}
	w.stmts[text] = st
	return st, nil
}

// connQuerier runs a transaction's statements on the write connection,
// prepared; the plain querier over the same connection runs queries and
// any text beyond the statement cache. It is used only inside
// writeConn.tx, which holds the lock.
type connQuerier struct {
	querier
	w *writeConn
}

func (q connQuerier) Batch(ctx context.Context, stmts []sqlstore.Stmt) error {
	return sqlstore.ExecEach(ctx, stmts, q.Exec)
}

func (q connQuerier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	text, bound := rewrite(query, args)
	st, err := q.w.stmt(ctx, text)
	if err != nil {
		return 0, err
	}
	if st == nil {
		return q.querier.Exec(ctx, query, args...)
	}
	res, err := st.ExecContext(ctx, bound...)
	if err != nil {
		return 0, mapErr(err)
	}
	n, err := res.RowsAffected()
	return n, mapErr(err)
}

func (q connQuerier) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	text, bound := rewrite(query, args)
	st, err := q.w.stmt(ctx, text)
	if err != nil {
		return errRow{err}
	}
	if st == nil {
		return q.querier.QueryRow(ctx, query, args...)
	}
	return sqlRow{st.QueryRowContext(ctx, bound...)}
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
