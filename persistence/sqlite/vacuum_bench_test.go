package sqlite_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/persistence"
	"svc/persistence/sqlite"
)

// BenchmarkVacuumWriterStall measures what the vacuum job costs the
// writer on SQLite: about 40 MB of rows deleted (a tenant's), then one
// vacuum pass returning the free pages to the file system while a writer
// commits one audit event after another. It reports the pass's longest
// single hold of the writer (vacuum-hold-ms), the writer's longest commit
// during the pass (max-commit-ms) against its longest commit over as many
// commits without a pass (max-commit-idle-ms), each the longest over the
// iterations, and the pages freed.
func BenchmarkVacuumWriterStall(b *testing.B) {
	ctx := context.Background()
	var hold, busyMax, idleMax time.Duration
	var freed, during float64
	for range b.N {
		b.StopTimer()
		s, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(b.TempDir(), "svc.db")})
		if err != nil {
			b.Fatal(err)
		}
		now := time.Now().UTC()
		mk := func(name string) string {
			tn := persistence.Tenant{ID: uuid.NewString(), Name: name, CreatedAt: now}
			if err := s.CreateTenant(ctx, tn, persistence.OperatorToken{ID: uuid.NewString(), TenantID: tn.ID, Name: "admin",
				Role: persistence.RoleAdmin, CreatedAt: now}, []byte(uuid.NewString())); err != nil {
				b.Fatal(err)
			}
			return tn.ID
		}
		gone, kept := mk("gone"), mk("kept")
		filler := strings.Repeat("x", 4000)
		for range 10 {
			evs := make([]persistence.AuditEvent, 1000)
			for i := range evs {
				evs[i] = persistence.AuditEvent{ID: uuid.NewString(), TenantID: gone, EventType: "config_change", Action: "filler",
					Details: map[string]any{"f": filler}, CreatedAt: now}
			}
			if err := s.AppendAudit(ctx, evs); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.DeleteTenant(ctx, gone); err != nil {
			b.Fatal(err)
		}
		commits := func(stop <-chan struct{}) []time.Duration {
			var out []time.Duration
			for {
				select {
				case <-stop:
					return out
				default:
				}
				start := time.Now()
				if err := s.AppendAudit(ctx, []persistence.AuditEvent{{ID: uuid.NewString(), TenantID: kept, EventType: "config_change",
					Action: "tick", Details: map[string]any{}, CreatedAt: time.Now().UTC()}}); err != nil {
					b.Error(err)
					return out
				}
				out = append(out, time.Since(start))
			}
		}
		run := func(during func()) []time.Duration {
			stop := make(chan struct{})
			var got []time.Duration
			var wg sync.WaitGroup
			wg.Go(func() { got = commits(stop) })
			during()
			close(stop)
			wg.Wait()
			return got
		}
		b.StartTimer()
		var res persistence.VacuumResult
		busy := run(func() {
			if res, err = s.Vacuum(ctx); err != nil {
				b.Error(err)
			}
		})
		b.StopTimer()
		idle := run(func() {
			for range 200 {
				time.Sleep(time.Millisecond)
			}
		})
		hold = max(hold, res.LongestStall)
		busyMax = max(busyMax, slices.Max(append(busy, 0)))
		idleMax = max(idleMax, slices.Max(append(idle, 0)))
		freed += float64(res.FreedPages) / float64(b.N)
		during += float64(len(busy)) / float64(b.N)
		_ = s.Close()
		b.StartTimer()
	}
	// The longest over every iteration; pages and commits per iteration.
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(hold), "vacuum-hold-ms")
	b.ReportMetric(ms(busyMax), "max-commit-ms")
	b.ReportMetric(ms(idleMax), "max-commit-idle-ms")
	b.ReportMetric(freed, "pages-freed")
	b.ReportMetric(during, "commits-during")
}
