package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"svc/persistence/sqlstore"
)

// The checkpointer copies the log into the database in the background and
// has the writer rewind it once it is long: under a steady stream of small
// write transactions the log file stays near the rewind length instead of
// growing to the backstop, every row stays readable, and the database
// passes SQLite's integrity check. The writer's automatic checkpoint is the
// backstop.
func TestCheckpointerBoundsTheLog(t *testing.T) {
	saved := checkpointRewindAt
	checkpointRewindAt = 256
	t.Cleanup(func() { checkpointRewindAt = saved })
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "c.db")
	s, err := Open(ctx, Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var auto int
	if err := s.w.conn.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&auto); err != nil || auto != backstopPages {
		t.Fatalf("writer's wal_autocheckpoint %d (%v), want the backstop %d", auto, err, backstopPages)
	}
	if err := s.DB.Tx(ctx, func(q sqlstore.Querier) error {
		_, err := q.Exec(ctx, `CREATE TABLE ck (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// About 12,000 frames in all: 48 times the rewind length.
	const txs = 3000
	pad := strings.Repeat("x", 3000) // about one page per row
	// A steady load, not a burst that starves the checkpointer of the CPU:
	// every 50 transactions (about 100 frames) wait, up to 5 s, until the
	// background rounds have had a turn. On a busy machine a 10 ms ticker
	// can be late by more than the 8,000 frames a tight loop writes; what
	// is tested is that the log stays bounded when the rounds do run.
	lastRound := s.ckpt.rounds.Load()
	for i := range txs {
		if i%50 == 49 {
			for deadline := time.Now().Add(5 * time.Second); s.ckpt.rounds.Load() == lastRound && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			lastRound = s.ckpt.rounds.Load()
		}
		if err := s.DB.Tx(ctx, func(q sqlstore.Querier) error {
			_, err := q.Exec(ctx, `INSERT INTO ck (id, v) VALUES ($1, $2)`, i, pad)
			if err == nil {
				_, err = q.Exec(ctx, `INSERT INTO ck (id, v) VALUES ($1, $2)`, txs+i, pad)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	const frame = 4096 + 24
	if limit := int64(backstopPages/2) * frame; st.Size() > limit {
		t.Errorf("log file %d bytes (%d frames) after %d transactions; want under %d frames", st.Size(), st.Size()/frame, txs, backstopPages/2)
	}
	if s.ckpt.rounds.Load() == 0 || s.ckpt.rewinds.Load() == 0 {
		t.Errorf("checkpointer: %d rounds, %d rewinds; want both", s.ckpt.rounds.Load(), s.ckpt.rewinds.Load())
	}
	var n int
	var check string
	if err := s.DB.Reader().QueryRow(ctx, `SELECT count(*) FROM ck`).Scan(&n); err != nil || n != 2*txs {
		t.Fatalf("rows %d (%v), want %d", n, err, 2*txs)
	}
	if err := s.DB.Reader().QueryRow(ctx, `PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check %q (%v)", check, err)
	}
	t.Logf("log file %d frames; %d rounds, %d rewinds", st.Size()/frame, s.ckpt.rounds.Load(), s.ckpt.rewinds.Load())
}

// The rounds follow writes: one runs after a commit, and none while nobody
// writes (an idle store costs no CPU).
func TestCheckpointerRestsWhileIdle(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Options{Path: filepath.Join(t.TempDir(), "idle.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	write := func() {
		t.Helper()
		if err := s.DB.Tx(ctx, func(q sqlstore.Querier) error {
			_, err := q.Exec(ctx, `CREATE TABLE IF NOT EXISTS idle (id INTEGER PRIMARY KEY)`)
			if err == nil {
				_, err = q.Exec(ctx, `INSERT INTO idle DEFAULT VALUES`)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	// Whatever opening wrote gets its round; then the store is idle.
	write()
	deadline := time.Now().Add(10 * time.Second)
	for s.ckpt.rounds.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if s.ckpt.rounds.Load() == 0 {
		t.Fatal("no round after a commit")
	}
	// A round still due runs now: wait until the count holds for 20
	// intervals (a busy machine may delay it), then watch.
	idle := s.ckpt.rounds.Load()
	for still := time.Now(); time.Since(still) < 20*checkpointInterval && time.Now().Before(deadline); time.Sleep(checkpointInterval) {
		if n := s.ckpt.rounds.Load(); n != idle {
			idle, still = n, time.Now()
		}
	}
	time.Sleep(30 * checkpointInterval)
	if got := s.ckpt.rounds.Load(); got != idle {
		t.Fatalf("%d rounds while nothing was written (a ticker's polling)", got-idle)
	}
	write()
	for deadline := time.Now().Add(10 * time.Second); s.ckpt.rounds.Load() == idle && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if s.ckpt.rounds.Load() == idle {
		t.Fatal("no round after the next commit")
	}
}
