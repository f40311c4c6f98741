package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"svc/persistence/sqlstore"
)

// pipeTx is a write transaction sent in as few round trips as possible.
// BEGIN is not sent on its own: it travels with the transaction's first
// statement. Statements given to Batch are held back and travel with the
// next statement, or with COMMIT. A group commit (lock the chain head,
// write the batch's rows, advance the head) so costs two round trips
// instead of five; the GroupWriter is serial, so on Postgres each round
// trip was time during which no decision could be committed.
//
// Errors surface where the statements are sent: a held-back Batch's error
// is reported by the call that carries it (or by Commit), never lost.
type pipeTx struct {
	conn    *pgx.Conn
	begun   bool // BEGIN has been sent
	pending []sqlstore.Stmt
}

var _ sqlstore.Querier = (*pipeTx)(nil)

// batch returns a batch with BEGIN (when not yet sent) and the held-back
// statements, and how many results precede the caller's own.
func (t *pipeTx) batch() (*pgx.Batch, int) {
	b := &pgx.Batch{}
	if !t.begun {
		b.Queue("BEGIN")
	}
	for _, st := range t.pending {
		b.Queue(st.SQL, st.Args...)
	}
	return b, b.Len()
}

// send sends b and consumes the first n results; the caller reads the
// rest and closes the results.
func (t *pipeTx) send(ctx context.Context, b *pgx.Batch, n int) (pgx.BatchResults, error) {
	br := t.conn.SendBatch(ctx, b)
	t.begun, t.pending = true, nil
	for range n {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return nil, mapErr(err)
		}
	}
	return br, nil
}

func (t *pipeTx) Batch(_ context.Context, stmts []sqlstore.Stmt) error {
	t.pending = append(t.pending, stmts...)
	return nil
}

func (t *pipeTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	if len(args) == 0 {
		// Without arguments pgx uses the simple protocol, which runs
		// several ;-separated commands (migrations); a batch cannot.
		if err := t.flush(ctx); err != nil {
			return 0, err
		}
		tag, err := t.conn.Exec(ctx, query)
		return tag.RowsAffected(), mapErr(err)
	}
	b, n := t.batch()
	b.Queue(query, args...)
	br, err := t.send(ctx, b, n)
	if err != nil {
		return 0, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag.RowsAffected(), mapErr(err)
}

func (t *pipeTx) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	b, n := t.batch()
	b.Queue(query, args...)
	br, err := t.send(ctx, b, n)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, mapErr(err)
	}
	return batchRows{pgRows{rows, nil}, br}, nil
}

func (t *pipeTx) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	b, n := t.batch()
	b.Queue(query, args...)
	br, err := t.send(ctx, b, n)
	if err != nil {
		return errRow{err}
	}
	return batchRow{br.QueryRow(), br}
}

// flush sends BEGIN and the held-back statements, when there are any.
func (t *pipeTx) flush(ctx context.Context) error {
	if t.begun && len(t.pending) == 0 {
		return nil
	}
	b, n := t.batch()
	br, err := t.send(ctx, b, n)
	if err != nil {
		return err
	}
	return mapErr(br.Close())
}

// commit sends what is held back with COMMIT. A transaction that sent
// nothing commits nothing.
func (t *pipeTx) commit(ctx context.Context) error {
	if !t.begun && len(t.pending) == 0 {
		return nil
	}
	b, n := t.batch()
	b.Queue("COMMIT")
	br, err := t.send(ctx, b, n)
	if err != nil {
		return err
	}
	_, err = br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return mapErr(err)
}

// rollback ends a transaction that was begun. After a failed statement
// the server has skipped the rest of its batch, COMMIT included, and waits
// in the aborted transaction for this.
func (t *pipeTx) rollback(ctx context.Context) error {
	t.pending = nil
	if !t.begun {
		return nil
	}
	_, err := t.conn.Exec(ctx, "ROLLBACK")
	return mapErr(err)
}

type batchRows struct {
	pgRows
	br pgx.BatchResults
}

func (r batchRows) Close() {
	r.pgRows.Close()
	_ = r.br.Close()
}

type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil && !errors.Is(cerr, pgx.ErrNoRows) {
		err = cerr
	}
	return mapErr(err)
}
