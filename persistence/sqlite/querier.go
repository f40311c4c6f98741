package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"svc/persistence"
	"svc/persistence/sqlstore"
)

// ---- adapter ----

type dbAdapter Store

func (d *dbAdapter) Reader() sqlstore.Querier {
	if d.testBefore {
		return checkedQuerier{db: d.reader, tries: d.maxConn, checks: &d.checks}
	}
	return querier{d.reader}
}

// Replica is Reader: one file has no replica.
func (d *dbAdapter) Replica() sqlstore.Querier { return d.Reader() }

func (d *dbAdapter) Tx(ctx context.Context, fn func(sqlstore.Querier) error) error {
	if d.w != nil {
		return d.w.tx(ctx, fn)
	}
	tx, err := d.writer.BeginTx(ctx, nil)
	if err != nil {
		return mapErr(err)
	}
	if err := fn(querier{tx}); err != nil {
		_ = tx.Rollback()
		return err
	}
	return mapErr(tx.Commit())
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type querier struct{ db execer }

func (q querier) Batch(ctx context.Context, stmts []sqlstore.Stmt) error {
	return sqlstore.ExecEach(ctx, stmts, q.Exec)
}

// rewritten caches sqlstore.RewriteDollar's results by query text (the
// texts are svc's own, a bounded set); at most maxRewritten are kept.
var (
	rewritten      sync.Map // string → rewrittenQuery
	rewrittenCount atomic.Int64
)

const maxRewritten = 4096

type rewrittenQuery struct {
	text  string
	order []int
}

// rewrite turns a `$N` query and its arguments into SQLite's positional
// form (see sqlstore.RewriteDollar).
func rewrite(query string, args []any) (string, []any) {
	var q string
	var order []int
	if r, ok := rewritten.Load(query); ok {
		rq := r.(rewrittenQuery) //nolint:errcheck // only rewrittenQuery is stored
		q, order = rq.text, rq.order
	} else {
		q, order = sqlstore.RewriteDollar(query)
		if rewrittenCount.Load() < maxRewritten {
			if _, loaded := rewritten.LoadOrStore(query, rewrittenQuery{q, order}); !loaded {
				rewrittenCount.Add(1)
			}
		}
	}
	if order == nil {
		return q, encodeArgs(args)
	}
	args = encodeArgs(args)
	out := make([]any, len(order))
	for i, n := range order {
		if n >= 0 && n < len(args) {
			out[i] = args[n]
		}
	}
	return q, out
}

func (q querier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	sqlText, bound := rewrite(query, args)
	res, err := q.db.ExecContext(ctx, sqlText, bound...)
	if err != nil {
		return 0, mapErr(err)
	}
	n, err := res.RowsAffected()
	return n, mapErr(err)
}

func (q querier) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	sqlText, bound := rewrite(query, args)
	rows, err := q.db.QueryContext(ctx, sqlText, bound...)
	if err != nil {
		return nil, mapErr(err)
	}
	return sqlRows{rows}, nil
}

func (q querier) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	sqlText, bound := rewrite(query, args)
	return sqlRow{q.db.QueryRowContext(ctx, sqlText, bound...)}
}

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close()     { _ = r.Rows.Close() }
func (r sqlRows) Err() error { return mapErr(r.Rows.Err()) }

type sqlRow struct{ r *sql.Row }

func (r sqlRow) Scan(dest ...any) error { return mapErr(r.r.Scan(dest...)) }

// encodeArgs stores times in the fixed sortable UTC text form.
func encodeArgs(args []any) []any {
	for i, a := range args {
		switch v := a.(type) {
		case time.Time:
			args[i] = v.UTC().Format(sqlstore.TimeLayout)
		case *time.Time:
			if v != nil {
				args[i] = v.UTC().Format(sqlstore.TimeLayout)
			} else {
				args[i] = nil
			}
		}
	}
	return args
}

// mapErr turns driver errors into persistence sentinels (wrapping both).
func mapErr(err error) error {
	if err == nil || errors.Is(err, sql.ErrNoRows) {
		return err
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("%w: %w", persistence.ErrConflict, err)
		}
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return fmt.Errorf("%w: %w", persistence.ErrBusy, err)
		case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_FULL:
			return fmt.Errorf("%w: %w", persistence.ErrUnavailable, err)
		}
	}
	return err
}
