package receiptlog_test

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/tlog"

	"svc/persistence"
	"svc/persistence/postgres"
	"svc/persistence/sqlite"
	"svc/persistence/storetest"
	"svc/receiptlog"
)

// benchLeaves is the log size of BenchmarkLogAt (SVC_BENCH_LOG_LEAVES;
// issue 41 measures 10 million).
func benchLeaves(b *testing.B) int64 {
	n := int64(10_000_000)
	if v := os.Getenv("SVC_BENCH_LOG_LEAVES"); v != "" {
		var err error
		if n, err = strconv.ParseInt(v, 10, 64); err != nil || n < 2 {
			b.Fatalf("SVC_BENCH_LOG_LEAVES=%q", v)
		}
	}
	return n
}

// buildLog stores a log of n synthetic leaves for tenantID directly (no
// receipts): tlog's stored hashes computed in memory, appended to the
// store 131,072 leaves at a time, as receiptlog.Append would.
func buildLog(b *testing.B, s persistence.Store, tenantID string, n int64) {
	b.Helper()
	ctx := context.Background()
	all := make([]tlog.Hash, 0, tlog.StoredHashCount(n))
	r := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = all[x]
		}
		return out, nil
	})
	var leaf [8]byte
	var stored, leaves int64
	flush := func(upTo int64) {
		buf := make([]byte, 0, 32*(int64(len(all))-stored))
		for _, h := range all[stored:] {
			buf = append(buf, h[:]...)
		}
		if err := s.AppendLog(ctx, tenantID, leaves, stored, upTo, buf); err != nil {
			b.Fatal(err)
		}
		leaves, stored = upTo, int64(len(all))
	}
	for i := range n {
		binary.BigEndian.PutUint64(leaf[:], uint64(i))
		hs, err := tlog.StoredHashesForRecordHash(i, tlog.RecordHash(leaf[:]), r)
		if err != nil {
			b.Fatal(err)
		}
		all = append(all, hs...)
		if (i+1)%(1<<17) == 0 {
			flush(i + 1)
		}
	}
	if leaves < n {
		flush(n)
	}
}

// BenchmarkLogAt builds a log of SVC_BENCH_LOG_LEAVES (10 million) leaves
// in each backend and measures an inclusion and a consistency proof
// against it, and what the log stores. It takes minutes: run it alone,
// with -benchtime, under make bench's testenv (Postgres too).
func BenchmarkLogAt(b *testing.B) {
	n := benchLeaves(b)
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			ctx := context.Background()
			var s persistence.Store
			var err error
			var size func() int64
			switch backend {
			case "sqlite":
				dir := b.TempDir()
				s, err = sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(dir, "svc.db")})
				size = func() int64 { return dirSize(dir) }
			default:
				if os.Getenv("SVC_TEST_POSTGRES_URL") == "" {
					b.Skip("no Postgres (SVC_TEST_POSTGRES_URL)")
				}
				var pg *postgres.Store
				pg, err = postgres.Open(ctx, postgres.Options{URL: storetest.PostgresURL(b)})
				s = pg
				size = func() int64 {
					var bytes int64
					if err := pg.Pool().QueryRow(ctx, `SELECT pg_total_relation_size('receipt_log_hashes')`).Scan(&bytes); err != nil {
						b.Fatal(err)
					}
					return bytes
				}
			}
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			now := time.Now().UTC()
			tn := persistence.Tenant{ID: uuid.NewString(), Name: "log-bench", CreatedAt: now}
			if err := s.CreateTenant(ctx, tn, persistence.OperatorToken{ID: uuid.NewString(), TenantID: tn.ID, Name: "admin",
				Role: persistence.RoleAdmin, CreatedAt: now}, []byte(uuid.NewString())); err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			buildLog(b, s, tn.ID, n)
			b.Logf("%s: %d leaves built and stored in %s; %d bytes stored (%.1f per leaf)", backend, n, time.Since(start).Round(time.Millisecond),
				size(), float64(size())/float64(n))
			rng := rand.New(rand.NewPCG(1, 2))
			b.Run("inclusion", func(b *testing.B) {
				for b.Loop() {
					if _, err := receiptlog.Inclusion(ctx, s, tn.ID, 1+rng.Int64N(n), n); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("consistency", func(b *testing.B) {
				for b.Loop() {
					if _, err := receiptlog.Consistency(ctx, s, tn.ID, 1+rng.Int64N(n-1), n); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("root", func(b *testing.B) {
				for b.Loop() {
					if _, err := receiptlog.Root(ctx, s, tn.ID, n-rng.Int64N(n/2)); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

func dirSize(dir string) int64 {
	var total int64
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if info, err := e.Info(); err == nil {
			total += info.Size()
		}
	}
	return total
}
