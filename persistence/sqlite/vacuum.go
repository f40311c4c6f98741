package sqlite

import (
	"context"
	"fmt"
	"time"

	"svc/persistence"
	"svc/persistence/sqlstore"
)

// vacuumChunk is the free pages one incremental vacuum step returns to the
// file system: one write transaction of the writer's, queued between group
// commits like any other, so that a pass never holds the writer for longer
// than one chunk takes (BenchmarkVacuumWriterStall measures it).
const vacuumChunk = 256

// incrementalVacuum is PRAGMA auto_vacuum's value for INCREMENTAL.
const incrementalVacuum = 2

// makeIncremental gives a database created now auto_vacuum=INCREMENTAL,
// which can only be chosen before its first table (after that, only a
// VACUUM that rewrites the whole file changes it): a new, empty file is
// switched and vacuumed, which takes no time; an existing one is left as
// it was made.
func (s *Store) makeIncremental(ctx context.Context) error {
	var tables int
	if err := s.writer.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master`).Scan(&tables); err != nil {
		return fmt.Errorf("persistence: sqlite schema: %w", mapErr(err))
	}
	if tables > 0 {
		return nil
	}
	for _, stmt := range []string{`PRAGMA auto_vacuum = INCREMENTAL`, `VACUUM`} {
		if _, err := s.writer.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("persistence: sqlite %s: %w", stmt, mapErr(err))
		}
	}
	return nil
}

// Vacuum implements persistence.MaintenanceStore: the database's free
// pages go back to the file system a chunk at a time (PRAGMA
// incremental_vacuum), each chunk one write transaction, until none is
// left. A database made before auto_vacuum=INCREMENTAL (an older
// release's) cannot do that without a full VACUUM, which rewrites the
// whole file while holding the writer: the pass says so in Note and leaves
// it to an operator (docs/operations.md, "Maintenance jobs").
func (s *Store) Vacuum(ctx context.Context) (persistence.VacuumResult, error) {
	var res persistence.VacuumResult
	var mode, free int64
	r := s.DB.Reader()
	if err := r.QueryRow(ctx, `PRAGMA auto_vacuum`).Scan(&mode); err != nil {
		return res, err
	}
	if err := r.QueryRow(ctx, `PRAGMA freelist_count`).Scan(&free); err != nil {
		return res, err
	}
	if mode != incrementalVacuum {
		if free > 0 {
			res.Note = fmt.Sprintf("%d free pages are reused by new rows but cannot be returned to the file system: "+
				"the database predates auto_vacuum=INCREMENTAL (see docs/operations.md, Maintenance jobs)", free)
		}
		return res, nil
	}
	for free > 0 {
		start := time.Now()
		err := s.DB.Tx(ctx, func(q sqlstore.Querier) error {
			_, err := q.Exec(ctx, fmt.Sprintf(`PRAGMA incremental_vacuum(%d)`, vacuumChunk))
			return err
		})
		if err != nil {
			return res, err
		}
		res.LongestStall = max(res.LongestStall, time.Since(start))
		var left int64
		if err := r.QueryRow(ctx, `PRAGMA freelist_count`).Scan(&left); err != nil {
			return res, err
		}
		if left >= free { // nothing moved: stop rather than spin
			return res, fmt.Errorf("persistence: sqlite incremental_vacuum left %d of %d free pages", left, free)
		}
		res.FreedPages += free - left
		free = left
	}
	return res, nil
}
