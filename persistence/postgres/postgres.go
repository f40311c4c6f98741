// Package postgres is the multi-node store: pgx/v5 with a pgxpool sized and
// aged by SPEC part 8's pool settings, an optional read replica that falls
// back to the primary, and migrations applied under an advisory lock so that
// several nodes starting together migrate once.
package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"svc/persistence"
	"svc/persistence/sqlstore"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLock is the advisory lock key held while migrating.
const migrationLock = `SELECT pg_advisory_xact_lock(7277001)`

// Options configure the store.
type Options struct {
	URL               string
	ReplicaURL        string
	PoolSize          int
	IdleTimeout       time.Duration
	MaxLifetime       time.Duration
	AcquireTimeout    time.Duration
	TestBeforeAcquire bool
	// upTo stops the migrations after this version (0: all); tests use it
	// to write a database as an older version did.
	upTo int
}

// Store is the Postgres implementation of persistence.Store.
type Store struct {
	sqlstore.Store
	pool    *pgxpool.Pool
	replica *pgxpool.Pool
	acquire time.Duration
	// checks counts the pings SVC_DB_TEST_BEFORE_ACQUIRE ran on acquired
	// connections (primary and replica).
	checks atomic.Uint64
	// fallbacks counts the replica reads answered by the primary instead.
	fallbacks replicaFallbacks
}

// replicaFallbacks counts the reads meant for the replica that the primary
// answered: because the replica could not be reached, or because it lacks
// a table, column or function the statement needs (a standby that has not
// yet replayed a migration the primary has applied, as in every rolling
// upgrade that adds one).
type replicaFallbacks struct {
	unavailable, schema atomic.Uint64
}

var _ persistence.Store = (*Store)(nil)

func poolConfig(url string, o Options, checks *atomic.Uint64) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("persistence: postgres config: %w", err)
	}
	if o.PoolSize > 0 {
		cfg.MaxConns = int32(o.PoolSize) //nolint:gosec // validated by config: small positive
	}
	if o.IdleTimeout > 0 {
		cfg.MaxConnIdleTime = o.IdleTimeout
		// pgxpool closes idle connections in its health check, once a
		// minute by default: check at least twice per idle timeout, so the
		// timeout is kept to within half of itself.
		cfg.HealthCheckPeriod = min(cfg.HealthCheckPeriod, max(o.IdleTimeout/2, 100*time.Millisecond))
	}
	if o.MaxLifetime > 0 {
		cfg.MaxConnLifetime = o.MaxLifetime
	}
	test := o.TestBeforeAcquire
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool {
		if test && checks != nil {
			checks.Add(1)
		}
		return test
	}
	return cfg, nil
}

// Open connects, checks the connection and applies migrations.
func Open(ctx context.Context, o Options) (*Store, error) {
	s := &Store{acquire: o.AcquireTimeout}
	cfg, err := poolConfig(o.URL, o, &s.checks)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("persistence: postgres connect: %w", err)
	}
	s.pool = pool
	if s.acquire <= 0 {
		s.acquire = 5 * time.Second
	}
	if o.ReplicaURL != "" {
		rcfg, err := poolConfig(o.ReplicaURL, o, &s.checks)
		if err != nil {
			pool.Close()
			return nil, err
		}
		if s.replica, err = pgxpool.NewWithConfig(ctx, rcfg); err != nil {
			pool.Close()
			return nil, fmt.Errorf("persistence: postgres replica: %w", err)
		}
	}
	s.Store = sqlstore.Store{DB: (*dbAdapter)(s), Dialect: sqlstore.Dialect{Name: "postgres", AuditSearch: auditSearch,
		DecisionSearch: decisionSearch, AuthorizeSearch: authorizeSearch, AdvanceHead: `SELECT svc_advance_receipt_head($1, $2, $3, $4, $5)`,
		AgentDecisions: "decisions", RunDecisions: "decisions"}}
	if err := s.Ping(ctx); err != nil {
		s.close()
		return nil, err
	}
	ms, err := sqlstore.LoadMigrations(migrationFiles, "migrations")
	if err != nil {
		s.close()
		return nil, err
	}
	if o.upTo > 0 {
		ms = slices.DeleteFunc(ms, func(m sqlstore.Migration) bool { return m.Version > o.upTo })
	}
	if _, err := sqlstore.Migrate(ctx, (*dbAdapter)(s), ms, migrationLock); err != nil {
		s.close()
		return nil, fmt.Errorf("persistence: postgres migrate: %w", err)
	}
	return s, nil
}

// tsQuery is tsquery text matching every term, the last as a prefix, each
// at the weights given ("" for any).
func tsQuery(terms []string, weights string) string {
	parts := make([]string, len(terms))
	for i, t := range terms {
		switch {
		case i == len(terms)-1:
			parts[i] = t + ":*" + weights
		case weights != "":
			parts[i] = t + ":" + weights
		default:
			parts[i] = t
		}
	}
	return strings.Join(parts, " & ")
}

// auditSearch matches every term, the last as a prefix, in the tsvector.
func auditSearch(terms []string, n int) (string, any) {
	return fmt.Sprintf(`search @@ to_tsquery('simple', $%d)`, n), tsQuery(terms, "")
}

// decisionSearch matches the decisions' tsvector (alias d) at weight A,
// the decision's own words (migration 0014).
func decisionSearch(terms []string, n int) (string, any) {
	return fmt.Sprintf(`d.search @@ to_tsquery('simple', $%d)`, n), tsQuery(terms, "A")
}

// authorizeSearch matches the decisions' tsvector (alias d) at every
// weight: a decision read as its audit event.
func authorizeSearch(terms []string, n int) (string, any) {
	return fmt.Sprintf(`d.search @@ to_tsquery('simple', $%d)`, n), tsQuery(terms, "")
}

// Backend implements persistence.Store.
func (s *Store) Backend() string { return "postgres" }

// Ping implements persistence.Store.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.acquire)
	defer cancel()
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("%w: %w", persistence.ErrUnavailable, err)
	}
	return nil
}

// PoolStats implements persistence.Store (the primary's pool).
func (s *Store) PoolStats() persistence.PoolStats {
	st := s.pool.Stat()
	return persistence.PoolStats{
		Active: int(st.AcquiredConns()),
		Idle:   int(st.IdleConns()),
		Max:    int(st.MaxConns()),
		Size:   int(st.TotalConns()),

		LivenessChecks: s.checks.Load(),

		ReplicaFallbacksUnavailable: s.fallbacks.unavailable.Load(),
		ReplicaFallbacksSchema:      s.fallbacks.schema.Load(),
	}
}

// SampleAcquire implements persistence.Store.
func (s *Store) SampleAcquire(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, s.acquire)
	defer cancel()
	start := time.Now()
	c, err := s.pool.Acquire(ctx)
	d := time.Since(start)
	if err != nil {
		return d, mapErr(err)
	}
	c.Release()
	return d, nil
}

// Pool exposes the primary pool to the batch writers of this package's
// callers that need CopyFrom or SendBatch.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close implements persistence.Store.
func (s *Store) Close() error {
	s.close()
	return nil
}

func (s *Store) close() {
	if s.replica != nil {
		s.replica.Close()
	}
	s.pool.Close()
}

// ---- adapter ----

type dbAdapter Store

// Reader reads from the primary: what it answers decides (a credential, a
// policy version, a chain head), and a replica may not have caught up.
// Only when the primary cannot be reached does it read the replica: then
// nothing can be written, every protected call is denied (fail closed) and
// low-risk reads are answered on a best-effort record, which is what the
// replica keeps serving; a credential changed in the moments before the
// outage and not yet replayed there could then be honoured for those
// reads until the replica catches up (docs/operations.md, Read replica).
func (d *dbAdapter) Reader() sqlstore.Querier {
	primary := poolQuerier{d.pool, d.acquire}
	if d.replica == nil {
		return primary
	}
	return fallbackQuerier{first: primary, second: poolQuerier{d.replica, d.acquire}, primary: primary}
}

// Replica reads from the replica when there is one, falling back to the
// primary when the replica cannot be reached or is behind on schema (it
// lacks a table, column or function the statement names: a migration not
// yet replayed there); only lists and searches use it. Each fallback is
// counted (db_replica_fallbacks_total).
func (d *dbAdapter) Replica() sqlstore.Querier {
	primary := poolQuerier{d.pool, d.acquire}
	if d.replica == nil {
		return primary
	}
	return fallbackQuerier{first: poolQuerier{d.replica, d.acquire}, second: primary, primary: primary, counts: &d.fallbacks}
}

func (d *dbAdapter) Tx(ctx context.Context, fn func(sqlstore.Querier) error) error {
	actx, cancel := context.WithTimeout(ctx, d.acquire)
	conn, err := d.pool.Acquire(actx)
	cancel()
	if err != nil {
		return mapErr(err)
	}
	defer conn.Release()
	tx := &pipeTx{conn: conn.Conn()}
	err = fn(tx)
	if err == nil {
		err = tx.commit(ctx)
	}
	if err != nil {
		if rerr := tx.rollback(context.WithoutCancel(ctx)); rerr != nil {
			// The connection's state is unknown: do not return it to the pool.
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
		return err
	}
	return nil
}

// poolQuerier acquires a connection within the acquire timeout for each
// statement.
type poolQuerier struct {
	pool    *pgxpool.Pool
	acquire time.Duration
}

func (q poolQuerier) conn(ctx context.Context) (*pgxpool.Conn, error) {
	actx, cancel := context.WithTimeout(ctx, q.acquire)
	defer cancel()
	c, err := q.pool.Acquire(actx)
	return c, mapErr(err)
}

func (q poolQuerier) Batch(ctx context.Context, stmts []sqlstore.Stmt) error {
	return sqlstore.ExecEach(ctx, stmts, q.Exec)
}

func (q poolQuerier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	c, err := q.conn(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Release()
	tag, err := c.Exec(ctx, query, args...)
	return tag.RowsAffected(), mapErr(err)
}

func (q poolQuerier) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	c, err := q.conn(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := c.Query(ctx, query, args...)
	if err != nil {
		c.Release()
		return nil, mapErr(err)
	}
	return pgRows{rows, c}, nil
}

func (q poolQuerier) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	c, err := q.conn(ctx)
	if err != nil {
		return errRow{err}
	}
	return pgRow{c.QueryRow(ctx, query, args...), c}
}

// fallbackQuerier reads from first and retries on second when first is
// unavailable (a connection that fails, not a query that does); writes go
// to the primary, whichever of the two it is. With counts set, first is
// the replica: a statement it cannot run for want of a migration is
// retried on the primary too, and every retry is counted.
type fallbackQuerier struct {
	first, second, primary poolQuerier
	counts                 *replicaFallbacks
}

// retry reports whether a read that failed on first with err goes to
// second, counting it.
func (q fallbackQuerier) retry(err error) bool {
	switch {
	case errors.Is(err, persistence.ErrUnavailable):
		if q.counts != nil {
			q.counts.unavailable.Add(1)
		}
		return true
	case q.counts != nil && behindOnSchema(err):
		q.counts.schema.Add(1)
		return true
	}
	return false
}

// behindOnSchema reports whether err is Postgres refusing a statement for
// an object its schema lacks: undefined table, column, function, object
// or schema (SQLSTATE 42P01, 42703, 42883, 42704, 3F000).
func behindOnSchema(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "42P01", "42703", "42883", "42704", "3F000":
		return true
	}
	return false
}

func (q fallbackQuerier) Batch(ctx context.Context, stmts []sqlstore.Stmt) error {
	return q.primary.Batch(ctx, stmts)
}

func (q fallbackQuerier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	return q.primary.Exec(ctx, query, args...)
}

func (q fallbackQuerier) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	rows, err := q.first.Query(ctx, query, args...)
	if err != nil && q.retry(err) {
		return q.second.Query(ctx, query, args...)
	}
	return rows, err
}

func (q fallbackQuerier) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	return fallbackRow{q, ctx, query, args}
}

type fallbackRow struct {
	q     fallbackQuerier
	ctx   context.Context
	query string
	args  []any
}

func (r fallbackRow) Scan(dest ...any) error {
	err := r.q.first.QueryRow(r.ctx, r.query, r.args...).Scan(dest...)
	if err != nil && r.q.retry(err) {
		return r.q.second.QueryRow(r.ctx, r.query, r.args...).Scan(dest...)
	}
	return err
}

type pgRows struct {
	pgx.Rows
	conn *pgxpool.Conn
}

func (r pgRows) Scan(dest ...any) error { return mapErr(r.Rows.Scan(dest...)) }
func (r pgRows) Err() error             { return mapErr(r.Rows.Err()) }
func (r pgRows) Close() {
	r.Rows.Close()
	if r.conn != nil {
		r.conn.Release()
	}
}

type pgRow struct {
	row  pgx.Row
	conn *pgxpool.Conn
}

func (r pgRow) Scan(dest ...any) error {
	if r.conn != nil {
		defer r.conn.Release()
	}
	return mapErr(r.row.Scan(dest...))
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// mapErr turns pgx errors into persistence sentinels (wrapping both).
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return sql.ErrNoRows
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "23505":
			return fmt.Errorf("%w: %w", persistence.ErrConflict, err)
		case "40001", "40P01", "55P03":
			return fmt.Errorf("%w: %w", persistence.ErrBusy, err)
		case "SVC01": // raised by svc_advance_receipt_head (migration 0009)
			return fmt.Errorf("%w: %w", persistence.ErrHeadMoved, err)
		case "22021", "22P05", "22P02", "22001":
			// character_not_in_repertoire (U+0000), untranslatable_character,
			// invalid_text_representation, string_data_right_truncation.
			return fmt.Errorf("%w: %w", persistence.ErrInvalidInput, err)
		case "57P01", "57P02", "57P03", "53300":
			return fmt.Errorf("%w: %w", persistence.ErrUnavailable, err)
		}
		return err
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || errors.As(err, &ne) || pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) ||
		strings.Contains(err.Error(), "closed pool") {
		return fmt.Errorf("%w: %w", persistence.ErrUnavailable, err)
	}
	return err
}
