package sqlstore

import (
	"context"
	"encoding/hex"
	"fmt"
	"sync/atomic"
	"time"

	"svc/persistence"
)

// Store implements the tenant-scoped queries of persistence.Store. Backends
// embed it and add connection management.
type Store struct {
	DB      DB
	Dialect Dialect

	// headLast counts the group commits written with their heads advanced
	// conditionally, headMoved those rewritten with the heads locked first.
	headLast, headMoved atomic.Int64
}

// now is the time rows are stamped with, in the microseconds both backends
// keep, so that what a create returns equals what a later read returns.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func hashText(h []byte) string { return hex.EncodeToString(h) }

// pageClause appends the cursor or offset window to a query whose WHERE
// clause is already open, returning the SQL tail and the extra arguments.
// n is the next placeholder number.
func pageClause(p persistence.Page, n int) (string, []any) { return pageClauseOn("seq", p, n) }

// pageClauseOn is pageClause over a named (possibly qualified) column.
func pageClauseOn(col string, p persistence.Page, n int) (string, []any) {
	limit := p.Limit + 1
	if p.After > 0 {
		return fmt.Sprintf(` AND %s < $%d ORDER BY %s DESC LIMIT $%d`, col, n, col, n+1), []any{p.After, limit}
	}
	return fmt.Sprintf(` ORDER BY %s DESC LIMIT $%d OFFSET $%d`, col, n, n+1), []any{limit, p.Offset}
}

// ---- lease ----

// AcquireLease implements persistence.LeaseStore.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	t := now()
	var got bool
	err := s.DB.Tx(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, `INSERT INTO leader_lease (name, holder, expires_at) VALUES ($1, $2, $3)
			ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
			WHERE leader_lease.holder = excluded.holder OR leader_lease.expires_at < $4`,
			name, holder, t.Add(ttl), t)
		got = n > 0
		return err
	})
	return got, err
}

// ReleaseLease implements persistence.LeaseStore.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	return s.DB.Tx(ctx, func(q Querier) error {
		_, err := q.Exec(ctx, `DELETE FROM leader_lease WHERE name = $1 AND holder = $2`, name, holder)
		return err
	})
}

// ProbeWrite implements persistence.Store: one row, rewritten in a write
// transaction on the writer's connection.
func (s *Store) ProbeWrite(ctx context.Context) error {
	return s.DB.Tx(ctx, func(q Querier) error {
		_, err := q.Exec(ctx, `INSERT INTO writer_probe (id, probed_at) VALUES (1, $1)
			ON CONFLICT (id) DO UPDATE SET probed_at = excluded.probed_at`, now().Format(TimeLayout))
		return err
	})
}

// ---- helpers ----

// seqRow scans a leading seq column and hands the rest to the inner scan.
type seqRow struct {
	r   Row
	seq *int64
}

func (s seqRow) Scan(dest ...any) error { return s.r.Scan(append([]any{s.seq}, dest...)...) }

func withSeq(a persistence.Agent, seq int64, err error) (persistence.Agent, error) {
	a.Seq = seq
	return a, err
}

func collect[T any](rows Rows, scan func(Row) (T, error)) ([]T, error) {
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
