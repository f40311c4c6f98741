package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"
)

// checkpointer moves WAL checkpoints off the group writer's path.
//
// With SQLite's automatic checkpoint, the commit that crosses
// wal_autocheckpoint pages copies the log into the database file and
// fsyncs both, on the writer's connection: at a steady 2,250 decisions/s
// that was about 20 checkpoints a second of about 10 ms each, almost all of
// it in fsync, and every decision queued behind one waited for it (the
// commits' p99 was 7–9 ms). Here a connection of its own copies the log
// into the database every interval, PASSIVE: it never takes the writer's
// lock, so commits go on meanwhile. Rounds follow writes: a round runs an
// interval after a commit (the commits meanwhile wait for the same round),
// so a store that nobody writes to costs nothing (a ticker polling every
// 10 ms kept an idle node at about 1% of a core).
//
// A checkpoint alone never shortens the log; SQLite rewinds it at the start
// of a write transaction once every frame has been copied, which cannot
// happen while the writer keeps appending. So once the log holds rewindAt
// frames, the writer itself runs a PASSIVE checkpoint between two of its
// transactions (rewind): by then the background rounds have copied nearly
// every frame, so that pause is short (about 4 ms at the median against
// 10 ms for a full inline checkpoint), and the next transaction rewinds the
// log. The writer's automatic checkpoint stays on as a backstop at
// backstopPages, should this goroutine fall behind or fail.
type checkpointer struct {
	db       *sql.DB // one connection, not the writer's
	interval time.Duration
	rewindAt int64
	wanted   atomic.Bool   // the log is long: the writer should rewind it
	wrote    chan struct{} // a commit since the last round (one token at most)
	stop     chan struct{}
	done     sync.WaitGroup
	closed   sync.Once
	closeErr error

	rounds, rewinds atomic.Int64 // for tests
}

// The rounds' interval, the log length at which the writer rewinds it, and
// the writer's own automatic checkpoint (variables for the tests).
var (
	checkpointInterval       = 10 * time.Millisecond
	checkpointRewindAt int64 = 4096
	backstopPages            = 16384
)

func startCheckpointer(db *sql.DB, interval time.Duration, rewindAt int64) *checkpointer {
	c := &checkpointer{db: db, interval: interval, rewindAt: rewindAt, wrote: make(chan struct{}, 1), stop: make(chan struct{})}
	c.done.Add(1)
	go c.run()
	return c
}

// noteWrite tells the rounds that the writer committed.
func (c *checkpointer) noteWrite() {
	select {
	case c.wrote <- struct{}{}:
	default:
	}
}

func (c *checkpointer) run() {
	defer c.done.Done()
	t := time.NewTimer(c.interval)
	t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-c.wrote:
		}
		t.Reset(c.interval)
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, log, _, err := checkpoint(ctx, c.db.QueryRowContext)
		cancel()
		if err != nil {
			// Busy or failing: the next round tries again, and the writer's
			// automatic checkpoint bounds the log meanwhile.
			continue
		}
		c.rounds.Add(1)
		if log >= c.rewindAt {
			c.wanted.Store(true)
		}
	}
}

// checkpoint runs a PASSIVE checkpoint: whether it was blocked, the frames
// in the log, and the frames copied into the database.
func checkpoint(ctx context.Context, query func(context.Context, string, ...any) *sql.Row) (busy bool, log, copied int64, err error) {
	var b int64
	err = query(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&b, &log, &copied)
	return b != 0, log, copied, mapErr(err)
}

// rewind runs on the writer's connection between two transactions: when
// the background rounds found the log long, a PASSIVE checkpoint here copies
// the last frames (nothing appends meanwhile), so that the next write
// transaction starts the log over. It stays wanted while that fails (a
// round in progress holds the checkpoint lock; a reader still uses the log).
func (c *checkpointer) rewind(ctx context.Context, conn *sql.Conn) {
	if !c.wanted.Load() {
		return
	}
	busy, log, copied, err := checkpoint(ctx, conn.QueryRowContext)
	if err == nil && !busy && copied == log {
		c.wanted.Store(false)
		c.rewinds.Add(1)
	}
}

// close stops the rounds and closes their connection (once; Store.Close
// may be called again).
func (c *checkpointer) close() error {
	c.closed.Do(func() {
		close(c.stop)
		c.done.Wait()
		c.closeErr = c.db.Close()
	})
	return c.closeErr
}
