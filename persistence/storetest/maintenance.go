package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"svc/persistence"
)

// RunMaintenance runs the contract of the maintenance jobs' storage: the
// receipt integrity job's state round-trips per tenant; archival moves
// exactly the events older than the cutoff, in batches, each event in one
// of the two tables at every point, and the audit list still reads them;
// a vacuum pass returns freed space.
func RunMaintenance(t *testing.T, open func(t *testing.T) persistence.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s persistence.Store)
	}{
		{"chain check state round-trips; a tenant never checked reads zero", testChainCheckState},
		{"archival moves exactly the old events, which stay listed", testArchiveAudit},
		{"vacuum reclaims the space of deleted rows", testVacuum},
		{"run taint floors rise only, are listed since a time and pruned before one", testRunTaint},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func chainCheck(t *testing.T, s persistence.Store, tenantID string) persistence.ChainCheckState {
	t.Helper()
	all, err := s.ChainChecks(ctx(t))
	if err != nil {
		t.Fatalf("ChainChecks: %v", err)
	}
	i := slices.IndexFunc(all, func(c persistence.ChainCheckState) bool { return c.TenantID == tenantID })
	if i < 0 {
		t.Fatalf("ChainChecks has no state for tenant %s: %+v", tenantID, all)
	}
	return all[i]
}

func testChainCheckState(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	if got := chainCheck(t, s, a.ID); got != (persistence.ChainCheckState{TenantID: a.ID}) {
		t.Fatalf("never checked: %+v", got)
	}
	at := time.Now().UTC().Truncate(time.Millisecond)
	want := persistence.ChainCheckState{TenantID: a.ID, VerifiedSeq: 41, VerifiedHash: strings.Repeat("ab", 32), SweepSeq: 7,
		BrokenSeq: 42, BrokenError: "broken link", CheckedAt: at}
	for range 2 { // the second save updates the first
		if err := s.SaveChainCheck(ctx(t), want); err != nil {
			t.Fatalf("SaveChainCheck: %v", err)
		}
	}
	got := chainCheck(t, s, a.ID)
	if !got.CheckedAt.Equal(at) {
		t.Errorf("checked_at %v, want %v", got.CheckedAt, at)
	}
	got.CheckedAt = want.CheckedAt
	if got != want {
		t.Errorf("read back %+v, want %+v", got, want)
	}
	if got := chainCheck(t, s, b.ID); got.VerifiedSeq != 0 || !got.CheckedAt.IsZero() {
		t.Errorf("the other tenant's state moved: %+v", got)
	}
}

func testArchiveAudit(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a") // one tenant_created event, now
	b, _ := mustTenant(t, s, "b")
	now := time.Now().UTC()
	cutoff := now.Add(-90 * 24 * time.Hour)
	at := func(e persistence.AuditEvent, age time.Duration) persistence.AuditEvent {
		e.CreatedAt = now.Add(-age)
		return e
	}
	day := 24 * time.Hour
	events := []persistence.AuditEvent{
		at(audit(a.ID, "agent_token_rotated", "old_rotation_1"), 200*day),
		at(audit(a.ID, "config_change", "old_reload"), 120*day),
		at(audit(a.ID, "agent_token_rotated", "old_rotation_2"), 91*day),
		at(audit(a.ID, "agent_token_rotated", "recent_rotation"), 89*day),
		at(audit(b.ID, "agent_token_rotated", "old_other_tenant"), 100*day),
	}
	if err := s.AppendAudit(ctx(t), events); err != nil {
		t.Fatal(err)
	}
	before, err := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{}, persistence.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	// Batches of 3: the three oldest of both tenants, then the last old
	// one, then nothing.
	archivedAt := now.Truncate(time.Millisecond)
	for i, want := range []int{3, 1, 0} {
		n, err := s.ArchiveAudit(ctx(t), cutoff, archivedAt, 3)
		if err != nil || n != want {
			t.Fatalf("ArchiveAudit pass %d = %d, %v; want %d", i, n, err, want)
		}
	}
	after, err := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{}, persistence.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("the list has %d events after archival, %d before", len(after), len(before))
	}
	for i, e := range after {
		old := strings.HasPrefix(e.Action, "old_")
		if e.ID != before[i].ID || e.Seq != before[i].Seq || e.Archived != old || !e.CreatedAt.Equal(before[i].CreatedAt) ||
			fmt.Sprint(e.Details) != fmt.Sprint(before[i].Details) {
			t.Errorf("event %d after archival: %+v; before: %+v", i, e, before[i])
		}
	}
	typed, err := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{EventType: "agent_token_rotated"}, persistence.Page{Limit: 100})
	if err != nil || len(typed) != 3 {
		t.Errorf("event_type filter across hot and archive = %d, %v; want 3", len(typed), err)
	}
	// Pages walk across the two tables by seq.
	var walked []string
	for p := (persistence.Page{Limit: 2}); ; {
		page, err := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{}, p)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(page) && i < p.Limit; i++ {
			walked = append(walked, page[i].ID)
		}
		if len(page) <= p.Limit {
			break
		}
		p.After = page[p.Limit-1].Seq
	}
	if len(walked) != len(before) {
		t.Errorf("paged through %d events, want %d", len(walked), len(before))
	}
	// The archive has no full-text index: a keyword search reads the hot
	// table only.
	if got, _ := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{Query: "rotation"}, persistence.Page{Limit: 100}); len(got) != 1 ||
		got[0].Action != "recent_rotation" {
		t.Errorf("search after archival: %+v", got)
	}
	other, _ := s.ListAudit(ctx(t), b.ID, persistence.AuditFilter{}, persistence.Page{Limit: 100})
	if !slices.ContainsFunc(other, func(e persistence.AuditEvent) bool { return e.Action == "old_other_tenant" && e.Archived }) ||
		slices.ContainsFunc(other, func(e persistence.AuditEvent) bool { return e.TenantID != b.ID }) {
		t.Errorf("the other tenant's list: %+v", other)
	}
	// A deleted tenant takes its archived events with it.
	if err := s.DeleteTenant(ctx(t), b.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := s.ArchiveAudit(ctx(t), now.Add(time.Hour), archivedAt, 100); err != nil || n != 2 {
		t.Errorf("archiving everything left = %d, %v; want tenant a's two recent events", n, err)
	}
}

func testVacuum(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	keep, _ := mustTenant(t, s, "keep")
	big := strings.Repeat("x", 2000)
	for range 4 {
		var evs []persistence.AuditEvent
		for range 250 {
			e := audit(a.ID, "config_change", "filler")
			e.Details = map[string]any{"filler": big}
			evs = append(evs, e)
		}
		if err := s.AppendAudit(ctx(t), evs); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteTenant(ctx(t), a.ID); err != nil {
		t.Fatal(err)
	}
	res, err := s.Vacuum(ctx(t))
	if err != nil {
		t.Fatalf("Vacuum: %v", err)
	}
	switch s.Backend() {
	case "sqlite": // about 2 MB of rows deleted: their pages go back
		if res.FreedPages < 250 || res.Note != "" {
			t.Errorf("vacuum freed %d pages (%q); want the deleted rows' pages", res.FreedPages, res.Note)
		}
		again, err := s.Vacuum(ctx(t))
		if err != nil || again.FreedPages != 0 {
			t.Errorf("a second pass freed %d pages, %v", again.FreedPages, err)
		}
	case "postgres":
		if !slices.Contains(res.Tables, "audit_events") || !slices.Contains(res.Tables, "decisions") {
			t.Errorf("vacuumed %v", res.Tables)
		}
	}
	if _, err := s.GetTenant(ctx(t), keep.ID); err != nil {
		t.Errorf("after vacuum: %v", err)
	}
}

func testRunTaint(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	now := usNow()
	taint := func(run string, level int, at time.Time) {
		t.Helper()
		w := decisionWrite(a.ID, "agent-1", "allow", nil)
		w.Taint = &persistence.RunTaint{TenantID: a.ID, RunID: run, Level: level, Seq: 1, Via: "source_trust", UpdatedAt: at}
		if err := s.CommitDecisions(ctx(t), []persistence.DecisionWrite{w}, testSeal); err != nil {
			t.Fatal(err)
		}
	}
	taint("old", 5, now.Add(-48*time.Hour))
	taint("r", 5, now.Add(-time.Minute))
	taint("r", 6, now)
	taint("r", 5, now) // never lowers
	if got, err := s.RunTaint(ctx(t), a.ID, "r"); err != nil || got.Level != 6 || !got.UpdatedAt.Equal(now) {
		t.Fatalf("RunTaint = %+v, %v; want level 6 at %v", got, err, now)
	}
	if _, err := s.RunTaint(ctx(t), a.ID, "never"); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("an untainted run: %v", err)
	}
	recent, err := s.RecentRunTaints(ctx(t), now.Add(-24*time.Hour))
	if err != nil || len(recent) != 1 || recent[0].RunID != "r" {
		t.Fatalf("RecentRunTaints = %+v, %v", recent, err)
	}
	if n, err := s.PruneRunTaint(ctx(t), now.Add(-24*time.Hour)); err != nil || n != 1 {
		t.Fatalf("PruneRunTaint = %d, %v; want 1", n, err)
	}
	if _, err := s.RunTaint(ctx(t), a.ID, "old"); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("a pruned floor is still there: %v", err)
	}
}
