// Package sqlstore is the SQL shared by the SQLite and Postgres stores: one
// implementation of persistence.Store written against a small database
// abstraction ([DB]) that each backend adapts (placeholders, time encoding,
// error mapping, full-text search).
//
// # Why one implementation
//
// The two backends differ in a handful of places only (types in the schema,
// the full-text clause, batch insertion); writing every query twice would
// let them drift. Queries here use Postgres-style `$N` placeholders; the
// SQLite adapter rewrites them to SQLite's equivalent `?N`.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Rows is a result set; both database/sql and pgx rows are adapted to it.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Row is a single-row result.
type Row interface {
	Scan(dest ...any) error
}

// Stmt is one statement with its arguments.
type Stmt struct {
	SQL  string
	Args []any
}

// ExecEach runs stmts one after the other with exec, stopping at the first
// error: Querier.Batch for a backend without a batch protocol.
func ExecEach(ctx context.Context, stmts []Stmt, exec func(ctx context.Context, query string, args ...any) (int64, error)) error {
	for _, st := range stmts {
		if _, err := exec(ctx, st.SQL, st.Args...); err != nil {
			return err
		}
	}
	return nil
}

// Querier runs statements, inside or outside a transaction. Errors are
// already mapped to persistence's sentinels.
type Querier interface {
	// Batch runs statements in order; Postgres sends them in one round
	// trip (pgx.Batch), SQLite runs them one after the other.
	Batch(ctx context.Context, stmts []Stmt) error
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// DB is what a backend provides.
type DB interface {
	// Reader runs reads that must see every committed write: credentials,
	// policies, chain heads and anything the authorize path decides on
	// (Postgres: the primary; SQLite: the read pool of the one file).
	Reader() Querier
	// Replica runs the reads of list and search endpoints, which may lag
	// behind the last write (Postgres: the read replica when one is set,
	// falling over to the primary when it fails; otherwise Reader).
	Replica() Querier
	// Tx runs fn in one write transaction, committing when it returns nil.
	Tx(ctx context.Context, fn func(q Querier) error) error
}

// Dialect holds what differs between backends in the shared queries.
type Dialect struct {
	Name string
	// AuditSearch returns a condition restricting audit_events to rows
	// matching every term (the last as a prefix), using placeholder $n, and
	// the argument to bind to it.
	AuditSearch func(terms []string, n int) (cond string, arg any)
	// DecisionSearch is the same for decisions (alias d), over the
	// decision's own columns.
	DecisionSearch func(terms []string, n int) (cond string, arg any)
	// AuthorizeSearch is the same for decisions (alias d) read as their
	// authorize_decision audit events: over the decision's columns and the
	// event's (its type, actor, action hash, receipt and approval ids), in
	// the one full-text index every decision is written to.
	AuthorizeSearch func(terms []string, n int) (cond string, arg any)
	// AllocSeq, when set (SQLite), reserves n numbers of the sequence that
	// decisions and audit events share and returns the last one; Postgres
	// draws them from a shared sequence as the rows' default.
	AllocSeq func(ctx context.Context, q Querier, n int) (last int64, err error)
	// IndexSearch, when set, maintains the full-text indexes in bulk
	// instead of row by row (SQLite): within q it indexes the rows written
	// since the last call, a bounded number of them, when at least atLeast
	// wait, and reports whether rows still wait. CommitDecisions calls it
	// in every group commit with SearchBatch; a search first calls it with
	// 1 until nothing waits. Postgres indexes each row as it is written.
	IndexSearch func(ctx context.Context, q Querier, atLeast int64) (more bool, err error)
	// SearchBacklog reports, with a read, how many rows wait for
	// IndexSearch (a search skips its write transaction when none do).
	SearchBacklog func(ctx context.Context, q Querier) (int64, error)
	// AgentDecisions and RunDecisions name the relations that list a
	// tenant's decisions by agent (tenant_id, agent_id, created_at, seq,
	// composite_risk_score) and by run (tenant_id, run_id, seq): on SQLite
	// side tables kept in bulk by IndexSearch (reads catch up first), on
	// Postgres decisions itself, through its indexes.
	AgentDecisions, RunDecisions string
	// AdvanceHead, when set (Postgres), is a statement taking (tenant,
	// from_seq, from_hash, to_seq, to_hash) that moves a chain head from
	// one link to another and fails with persistence.ErrHeadMoved when the
	// head is not at from. CommitDecisions then writes receipts sealed
	// ahead of time without reading and locking their heads first.
	AdvanceHead string
}

// SearchBatch is the backlog at which a group commit brings the full-text
// indexes up to date (Dialect.IndexSearch): large enough that a commit of a
// few decisions does not pay for a new index segment, small enough that the
// commit that does stays short (at 2,250 decisions/s on SQLite, such a
// commit took 1.8 ms at the median and 5–7 ms at p90 with 64, against 6.5
// and 20 ms with 256).
const SearchBatch = 64

// catchUpSearch brings the full-text indexes up to date before a search, so
// that a search sees every committed row.
func (s *Store) catchUpSearch(ctx context.Context) error {
	d := s.Dialect
	if d.IndexSearch == nil {
		return nil
	}
	for {
		n, err := d.SearchBacklog(ctx, s.DB.Reader())
		if err != nil || n == 0 {
			return err
		}
		more := false
		if err := s.DB.Tx(ctx, func(q Querier) error {
			var err error
			more, err = d.IndexSearch(ctx, q, 1)
			return err
		}); err != nil || !more {
			return err
		}
	}
}

// Time is a scan target that accepts the backends' timestamp forms: a
// time.Time (Postgres) or the fixed UTC text SQLite stores.
type Time struct{ T *time.Time }

// TimeLayout is how SQLite stores timestamps: sortable as text, UTC, the
// "date space time" form of SPEC 2.4 with microseconds.
const TimeLayout = "2006-01-02 15:04:05.000000"

// Scan implements sql.Scanner.
func (t Time) Scan(src any) error {
	switch v := src.(type) {
	case time.Time:
		*t.T = v.UTC()
		return nil
	case string:
		return t.parse(v)
	case []byte:
		return t.parse(string(v))
	default:
		return fmt.Errorf("sqlstore: cannot scan %T into a time", src)
	}
}

func (t Time) parse(s string) error {
	for _, layout := range []string{TimeLayout, "2006-01-02 15:04:05", time.RFC3339Nano} {
		if v, err := time.Parse(layout, s); err == nil {
			*t.T = v.UTC()
			return nil
		}
	}
	return fmt.Errorf("sqlstore: unparseable time %q", s)
}

// NullTime scans a nullable timestamp into a *time.Time that stays nil for
// NULL.
type NullTime struct{ T **time.Time }

// Scan implements sql.Scanner.
func (n NullTime) Scan(src any) error {
	if src == nil {
		*n.T = nil
		return nil
	}
	var v time.Time
	if err := (Time{&v}).Scan(src); err != nil {
		return err
	}
	*n.T = &v
	return nil
}

var (
	_ sql.Scanner = Time{}
	_ sql.Scanner = NullTime{}
)

// IsNoRows reports whether err says a single-row query found nothing, for
// either driver (adapters map their own no-rows error to sql.ErrNoRows).
func IsNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// RewriteDollar turns `$N` placeholders into SQLite's anonymous `?` and
// returns, for each `?` in order, the index of the argument it binds, so
// the caller can lay the arguments out positionally (a `$N` used twice
// binds its argument twice). Anonymous parameters matter: modernc.org/sqlite
// resolves every numbered or named parameter's name with a linear scan,
// which makes a many-row INSERT quadratic. Dollar signs inside single-quoted
// literals are left alone.
func RewriteDollar(q string) (string, []int) {
	if !strings.Contains(q, "$") {
		return q, nil
	}
	var b strings.Builder
	b.Grow(len(q))
	var order []int
	inQuote := false
	for i := 0; i < len(q); i++ {
		c := q[i]
		if c == '\'' {
			inQuote = !inQuote
		}
		if c == '$' && !inQuote && i+1 < len(q) && q[i+1] >= '0' && q[i+1] <= '9' {
			n := 0
			for i+1 < len(q) && q[i+1] >= '0' && q[i+1] <= '9' {
				i++
				n = n*10 + int(q[i]-'0')
			}
			order = append(order, n-1)
			b.WriteByte('?')
			continue
		}
		b.WriteByte(c)
	}
	return b.String(), order
}
