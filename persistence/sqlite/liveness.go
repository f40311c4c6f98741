package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync/atomic"

	"svc/persistence/sqlstore"
)

// checkedQuerier is the read pool with SVC_DB_TEST_BEFORE_ACQUIRE: every
// read takes a connection of its own from the pool, checks it with a
// trivial statement first, and, when the check fails, discards that
// connection (driver.ErrBadConn, so database/sql closes it) and takes
// another, up to the pool's size. What this catches on a file database is
// a connection whose handle went bad (the file replaced or unreadable
// under it, an I/O error left behind); it costs one statement per read,
// which is why SQLite's default is off.
type checkedQuerier struct {
	db     *sql.DB
	tries  int
	checks *atomic.Uint64
}

// conn returns a checked connection of the pool.
func (q checkedQuerier) conn(ctx context.Context) (*sql.Conn, error) {
	var last error
	for range max(q.tries, 1) + 1 {
		c, err := q.db.Conn(ctx)
		if err != nil {
			return nil, mapErr(err)
		}
		q.checks.Add(1)
		var one int
		if last = c.QueryRowContext(ctx, `SELECT 1`).Scan(&one); last == nil {
			return c, nil
		}
		// Discard it: Raw's error ErrBadConn makes database/sql close it.
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
		_ = c.Close()
		if ctx.Err() != nil {
			break
		}
	}
	return nil, mapErr(errors.Join(errors.New("sqlite: no read connection passed its liveness check"), last))
}

func (q checkedQuerier) Batch(ctx context.Context, stmts []sqlstore.Stmt) error {
	return sqlstore.ExecEach(ctx, stmts, q.Exec)
}

func (q checkedQuerier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	c, err := q.conn(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = c.Close() }()
	return querier{c}.Exec(ctx, query, args...)
}

func (q checkedQuerier) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	c, err := q.conn(ctx)
	if err != nil {
		return nil, err
	}
	sqlText, bound := rewrite(query, args)
	rows, err := c.QueryContext(ctx, sqlText, bound...)
	if err != nil {
		_ = c.Close()
		return nil, mapErr(err)
	}
	return connRows{sqlRows{rows}, c}, nil
}

func (q checkedQuerier) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	c, err := q.conn(ctx)
	if err != nil {
		return errRow{err}
	}
	return connRow{querier{c}.QueryRow(ctx, query, args...), c}
}

// connRows returns its connection to the pool when closed.
type connRows struct {
	sqlRows
	c *sql.Conn
}

func (r connRows) Close() { r.sqlRows.Close(); _ = r.c.Close() }

// connRow returns its connection to the pool once scanned.
type connRow struct {
	r sqlstore.Row
	c *sql.Conn
}

func (r connRow) Scan(dest ...any) error {
	defer func() { _ = r.c.Close() }()
	return r.r.Scan(dest...)
}
