// Package sqlite is the embedded single-node store: modernc.org/sqlite (pure
// Go) in WAL mode with synchronous=NORMAL and a 5 s busy timeout, one writer
// connection (transactions begin IMMEDIATE, so writers queue instead of
// failing on a lock upgrade) and a pool of read connections.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"svc/persistence"
	"svc/persistence/sqlstore"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Options configure the store.
type Options struct {
	// Path is the database file, or ":memory:" for a private in-memory
	// database (tests).
	Path           string
	PoolSize       int
	IdleTimeout    time.Duration
	MaxLifetime    time.Duration
	AcquireTimeout time.Duration
	// TestBeforeAcquire checks every read connection with a trivial
	// statement before its read (SVC_DB_TEST_BEFORE_ACQUIRE; see
	// checkedQuerier).
	TestBeforeAcquire bool
	// upTo stops the migrations after this version (0: all); tests use it
	// to write a database as an older version did.
	upTo int
}

// Store is the SQLite implementation of persistence.Store.
type Store struct {
	sqlstore.Store
	writer  *sql.DB
	reader  *sql.DB
	maxConn int
	acquire time.Duration
	w       *writeConn // nil for an in-memory database
	ckpt    *checkpointer
	upTo    int
	// testBefore and checks: SVC_DB_TEST_BEFORE_ACQUIRE and the liveness
	// checks it ran.
	testBefore bool
	checks     atomic.Uint64
}

var _ persistence.Store = (*Store)(nil)

// Open opens (creating when missing) the database and applies migrations.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.PoolSize < 1 {
		o.PoolSize = 5
	}
	memory := o.Path == ":memory:"
	pragmas := "_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_pragma=temp_store(MEMORY)"
	var base, writerDSN, readerDSN string
	if memory {
		writerDSN = "file::memory:?" + pragmas + "&_txlock=immediate"
	} else {
		base = "file:" + (&url.URL{Path: o.Path}).EscapedPath() + "?" + pragmas + "&_pragma=journal_mode(WAL)"
		writerDSN = base + "&_txlock=immediate"
		readerDSN = base + "&_pragma=query_only(1)"
	}
	writer, err := sql.Open("sqlite", writerDSN)
	if err != nil {
		return nil, fmt.Errorf("persistence: sqlite open: %w", err)
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxLifetime(0) // the in-memory database lives in its one connection
	reader := writer
	if !memory {
		reader, err = sql.Open("sqlite", readerDSN)
		if err != nil {
			_ = writer.Close()
			return nil, fmt.Errorf("persistence: sqlite open: %w", err)
		}
		reader.SetMaxOpenConns(o.PoolSize)
		reader.SetMaxIdleConns(o.PoolSize)
		reader.SetConnMaxIdleTime(o.IdleTimeout)
		reader.SetConnMaxLifetime(o.MaxLifetime)
	}
	s := &Store{writer: writer, reader: reader, maxConn: o.PoolSize, acquire: o.AcquireTimeout, upTo: o.upTo,
		testBefore: o.TestBeforeAcquire && !memory}
	if s.acquire <= 0 {
		s.acquire = 5 * time.Second
	}
	s.Store = sqlstore.Store{DB: (*dbAdapter)(s), Dialect: sqlstore.Dialect{Name: "sqlite", AuditSearch: auditSearch, DecisionSearch: decisionSearch,
		AuthorizeSearch: authorizeSearch, AllocSeq: allocSeq, IndexSearch: indexSearch, SearchBacklog: searchBacklog,
		AgentDecisions: "decision_agents", RunDecisions: "decision_runs"}}
	if err := s.makeIncremental(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	if err := s.migrate(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	if !memory {
		conn, err := writer.Conn(ctx)
		if err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("persistence: sqlite writer connection: %w", err)
		}
		s.w = &writeConn{lock: make(chan struct{}, 1), conn: conn, stmts: map[string]*sql.Stmt{}}
		// Checkpoints run on a connection of their own (checkpoint.go);
		// the writer's automatic checkpoint is only the backstop.
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA wal_autocheckpoint = %d", backstopPages)); err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("persistence: sqlite wal_autocheckpoint: %w", mapErr(err))
		}
		cdb, err := sql.Open("sqlite", base)
		if err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("persistence: sqlite open: %w", err)
		}
		cdb.SetMaxOpenConns(1)
		s.ckpt = startCheckpointer(cdb, checkpointInterval, checkpointRewindAt)
		s.w.ckpt = s.ckpt
	}
	return s, nil
}

func (s *Store) migrate(ctx context.Context) error {
	ms, err := sqlstore.LoadMigrations(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	if s.upTo > 0 {
		ms = slices.DeleteFunc(ms, func(m sqlstore.Migration) bool { return m.Version > s.upTo })
	}
	if _, err := sqlstore.Migrate(ctx, (*dbAdapter)(s), ms, ""); err != nil {
		return fmt.Errorf("persistence: sqlite migrate: %w", err)
	}
	return nil
}

// matchQuery is FTS5 query text matching every term, the last as a prefix,
// each within the columns colspec names ("" for all).
func matchQuery(terms []string, colspec string) string {
	quoted := make([]string, len(terms))
	for i, t := range terms {
		quoted[i] = colspec + `"` + t + `"`
	}
	quoted[len(quoted)-1] += "*"
	return strings.Join(quoted, " ")
}

// auditSearch matches every term, the last as a prefix, in the audit
// events' FTS5 index.
func auditSearch(terms []string, n int) (string, any) {
	return fmt.Sprintf(`seq IN (SELECT rowid FROM audit_events_fts WHERE audit_events_fts MATCH $%d)`, n), matchQuery(terms, "")
}

// decisionSearch matches every term, the last as a prefix, in the
// decisions' FTS5 index, outside the column that only the decision's
// audit event is searched by (event).
func decisionSearch(terms []string, n int) (string, any) {
	return fmt.Sprintf(`d.seq IN (SELECT rowid FROM decisions_fts WHERE decisions_fts MATCH $%d)`, n), matchQuery(terms, "- event : ")
}

// authorizeSearch matches every term, the last as a prefix, in every
// column of the decisions' FTS5 index (a decision read as its audit event).
func authorizeSearch(terms []string, n int) (string, any) {
	return fmt.Sprintf(`d.seq IN (SELECT rowid FROM decisions_fts WHERE decisions_fts MATCH $%d)`, n), matchQuery(terms, "")
}

// allocSeq implements sqlstore.Dialect.AllocSeq. Decisions take their seq
// from their AUTOINCREMENT counter (sqlite_sequence), which never hands
// out a number below its stored value; audit events reserve theirs by
// moving that counter forward, inside the write transaction that inserts
// them, so the two tables never share a number (migration 0012).
func allocSeq(ctx context.Context, q sqlstore.Querier, n int) (int64, error) {
	var last int64
	err := q.QueryRow(ctx, `UPDATE sqlite_sequence SET seq = max(seq, (SELECT COALESCE(max(seq), 0) FROM decisions),
		(SELECT COALESCE(max(seq), 0) FROM audit_events)) + $1 WHERE name = 'decisions' RETURNING seq`, n).Scan(&last)
	return last, err
}

// bulkIndexes are what the group writer keeps in bulk: the FTS5 indexes
// (migration 0007) and, since migration 0013, the decisions by agent and by
// run. Each holds its table's rows with seq above search_progress.upto
// (by its name), read through the view that removes hyphens for the
// full-text ones (migrations 0008 and 0012). bulk is the backlog at which
// a group commit adds them (a search or an evidence read first adds
// whatever waits); chunk bounds the rows one call adds, so that the commit
// that carries it stays short.
var bulkIndexes = []struct {
	name, table, insert string
	bulk, chunk         int64
}{
	{"decisions", "decisions", `INSERT INTO decisions_fts (rowid, tool, action, resource, decision, reason, matched_policy_ids, agent_id, run_id, event)
		SELECT seq, tool, action, resource, decision, reason, matched_policy_ids, agent_id, run_id, event FROM decisions_search
		WHERE seq > $1 AND seq <= $2`, sqlstore.SearchBatch, searchChunk},
	{"audit_events", "audit_events", `INSERT INTO audit_events_fts (rowid, event_type, action, actor, agent_id, details)
		SELECT seq, event_type, action, actor, agent_id, details FROM audit_events_search WHERE seq > $1 AND seq <= $2`,
		sqlstore.SearchBatch, searchChunk},
	// Sorted, so that each agent's and each run's leaf page is written once
	// per bulk; larger bulks than the full-text ones, since a leaf per
	// agent is what a row-by-row index paid in every commit.
	{"decision_agents", "decisions", `INSERT INTO decision_agents (tenant_id, agent_id, created_at, seq, composite_risk_score)
		SELECT tenant_id, agent_id, created_at, seq, composite_risk_score FROM decisions WHERE seq > $1 AND seq <= $2
		ORDER BY tenant_id, agent_id, created_at, seq`, linkBatch, linkBatch},
	{"decision_runs", "decisions", `INSERT INTO decision_runs (tenant_id, run_id, seq)
		SELECT tenant_id, run_id, seq FROM decisions WHERE seq > $1 AND seq <= $2 AND run_id IS NOT NULL
		ORDER BY tenant_id, run_id, seq`, linkBatch, linkBatch},
}

// searchChunk bounds the rows one full-text step adds per index.
const searchChunk = 2048

// linkBatch is the bulk of the agent and run tables: at 5,000 decisions/s
// a commit carries it about five times a second.
const linkBatch = 1024

// progressQuery reads, per bulk index, the last row added and the last row
// written (one row, so that the writer runs it prepared). Decisions and
// audit events share one sequence, so last - upto counts the other table's
// rows in between too: an upper bound of the backlog.
var progressQuery = func() string {
	var cols []string
	for _, ix := range bulkIndexes {
		cols = append(cols, fmt.Sprintf("(SELECT upto FROM search_progress WHERE name = '%s'), (SELECT COALESCE(max(seq), 0) FROM %s)", ix.name, ix.table))
	}
	return "SELECT " + strings.Join(cols, ", ")
}()

func readProgress(ctx context.Context, q sqlstore.Querier) (upto, last []int64, err error) {
	upto, last = make([]int64, len(bulkIndexes)), make([]int64, len(bulkIndexes))
	dest := make([]any, 0, 2*len(bulkIndexes))
	for i := range bulkIndexes {
		dest = append(dest, &upto[i], &last[i])
	}
	err = q.QueryRow(ctx, progressQuery).Scan(dest...)
	return upto, last, err
}

// indexSearch implements sqlstore.Dialect.IndexSearch: each bulk index
// that has at least max(atLeast, its bulk) rows waiting (atLeast 1: any)
// gets up to its chunk of them, within q.
func indexSearch(ctx context.Context, q sqlstore.Querier, atLeast int64) (bool, error) {
	upto, last, err := readProgress(ctx, q)
	if err != nil {
		return false, err
	}
	more := false
	for i, ix := range bulkIndexes {
		threshold := atLeast
		if atLeast > 1 {
			threshold = max(atLeast, ix.bulk)
		}
		if last[i]-upto[i] < threshold || last[i] <= upto[i] {
			continue
		}
		// The chunk ends at its chunk-th waiting row (seq values of a
		// table have gaps: the other table's rows).
		to := last[i]
		var nth int64
		err := q.QueryRow(ctx, `SELECT seq FROM `+ix.table+` WHERE seq > $1 ORDER BY seq LIMIT 1 OFFSET $2`, upto[i], ix.chunk-1).Scan(&nth)
		switch {
		case err == nil && nth < last[i]:
			to, more = nth, true
		case err != nil && !sqlstore.IsNoRows(err):
			return false, err
		}
		if _, err := q.Exec(ctx, ix.insert, upto[i], to); err != nil {
			return false, err
		}
		if _, err := q.Exec(ctx, `UPDATE search_progress SET upto = $1 WHERE name = $2`, to, ix.name); err != nil {
			return false, err
		}
	}
	return more, nil
}

// searchBacklog implements sqlstore.Dialect.SearchBacklog.
func searchBacklog(ctx context.Context, q sqlstore.Querier) (int64, error) {
	upto, last, err := readProgress(ctx, q)
	var n int64
	for i := range upto {
		n += max(last[i]-upto[i], 0)
	}
	return n, err
}

// Backend implements persistence.Store.
func (s *Store) Backend() string { return "sqlite" }

// Ping implements persistence.Store.
func (s *Store) Ping(ctx context.Context) error {
	ping := s.writer.PingContext
	if s.w != nil {
		ping = func(ctx context.Context) error {
			if err := s.w.acquire(ctx); err != nil {
				return err
			}
			defer s.w.release()
			return s.w.conn.PingContext(ctx)
		}
	}
	if err := ping(ctx); err != nil {
		return fmt.Errorf("%w: %w", persistence.ErrUnavailable, err)
	}
	return nil
}

// PoolStats implements persistence.Store: the read pool plus the writer.
func (s *Store) PoolStats() persistence.PoolStats {
	st := s.reader.Stats()
	out := persistence.PoolStats{Active: st.InUse, Idle: st.Idle, Max: s.maxConn, Size: st.OpenConnections, LivenessChecks: s.checks.Load()}
	if s.reader != s.writer {
		w := s.writer.Stats()
		active, idle := w.InUse, w.Idle
		if s.w != nil { // the held write connection is busy while a transaction holds it
			busy := len(s.w.lock)
			active, idle = busy, w.OpenConnections-busy
		}
		out.Active += active
		out.Idle += idle
		out.Size += w.OpenConnections
		out.Max++
	}
	return out
}

// SampleAcquire implements persistence.Store.
func (s *Store) SampleAcquire(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, s.acquire)
	defer cancel()
	start := time.Now()
	c, err := s.reader.Conn(ctx)
	if err != nil {
		return time.Since(start), mapErr(err)
	}
	d := time.Since(start)
	return d, c.Close()
}

// Close implements persistence.Store.
func (s *Store) Close() error {
	var err error
	if s.ckpt != nil {
		err = s.ckpt.close()
	}
	if s.w != nil {
		s.w.lock <- struct{}{} // after the transaction in progress
		if !s.w.closed {
			for _, st := range s.w.stmts {
				_ = st.Close()
			}
			err = errors.Join(err, s.w.conn.Close())
			s.w.closed = true
		}
		s.w.release()
	}
	if s.reader != s.writer {
		err = errors.Join(err, s.reader.Close())
	}
	return errors.Join(err, s.writer.Close())
}

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
