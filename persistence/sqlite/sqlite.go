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
	"sync/atomic"
	"time"

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
