package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"testing"
	"time"

	"svc/persistence"
)

// RunSOC runs the security-operations contract: custom rules (create,
// replace, list, delete), alerts and incidents (round trips, filters,
// pagination, the SinceSeq watch tail), the conditional close under
// concurrency, the summary counts, the backtest's decision window, tenant
// isolation and tenant deletion.
func RunSOC(t *testing.T, open func(t *testing.T) persistence.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s persistence.Store)
	}{
		{"custom rules create, replace, list and delete", testSOCRules},
		{"alerts append, list, filter, page and watch", testSOCAlerts},
		{"incidents open, read, list, filter, page and watch", testSOCIncidents},
		{"close incident is a conditional transition", testSOCClose},
		{"concurrent closers: exactly one closes", testSOCCloseRace},
		{"summary counts", testSOCSummary},
		{"decisions between two instants", testSOCDecisionsBetween},
		{"deleting a tenant deletes its rules, alerts and incidents", testSOCTenantDelete},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

// ---- helpers ----

func reversed[T any](in []T) []T {
	out := slices.Clone(in)
	slices.Reverse(out)
	return out
}

func idsOf[T any](rows []T, f func(T) string) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = f(r)
	}
	return out
}

func alertID(a persistence.Alert) string        { return a.ID }
func incidentID(in persistence.Incident) string { return in.ID }
func ruleKey(r persistence.CustomRule) string   { return r.Key }

// wantOrder fails unless got lists exactly want, in order.
func wantOrder(t *testing.T, what string, got []string, err error, want []string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// diffs collects field mismatches and reports them all at once.
type diffs struct {
	what string
	list []string
}

func (d *diffs) check(field string, ok bool, got, want any) {
	if !ok {
		d.list = append(d.list, fmt.Sprintf("%s = %v, want %v", field, got, want))
	}
}

func (d *diffs) report(t *testing.T) {
	t.Helper()
	for _, x := range d.list {
		t.Errorf("%s: %s", d.what, x)
	}
	if len(d.list) > 0 {
		t.FailNow()
	}
}

func isUTC(ts time.Time) bool { return ts.Location() == time.UTC }

func sameRule(t *testing.T, what string, got, want persistence.CustomRule) {
	t.Helper()
	d := diffs{what: what}
	d.check("TenantID", got.TenantID == want.TenantID, got.TenantID, want.TenantID)
	d.check("Key", got.Key == want.Key, got.Key, want.Key)
	d.check("AlertName", got.AlertName == want.AlertName, got.AlertName, want.AlertName)
	d.check("Severity", got.Severity == want.Severity, got.Severity, want.Severity)
	d.check("Enabled", got.Enabled == want.Enabled, got.Enabled, want.Enabled)
	d.check("Condition", string(got.Condition) == string(want.Condition), string(got.Condition), string(want.Condition))
	d.check("CreatedAt", got.CreatedAt.Equal(want.CreatedAt) && isUTC(got.CreatedAt), got.CreatedAt, want.CreatedAt.UTC())
	d.check("UpdatedAt", got.UpdatedAt.Equal(want.UpdatedAt) && isUTC(got.UpdatedAt), got.UpdatedAt, want.UpdatedAt.UTC())
	d.report(t)
}

// sameAlert compares every field but Seq (which only has to be set).
func sameAlert(t *testing.T, what string, got, want persistence.Alert) {
	t.Helper()
	d := diffs{what: what}
	d.check("Seq", got.Seq > 0, got.Seq, "> 0")
	d.check("ID", got.ID == want.ID, got.ID, want.ID)
	d.check("TenantID", got.TenantID == want.TenantID, got.TenantID, want.TenantID)
	d.check("RuleKey", got.RuleKey == want.RuleKey, got.RuleKey, want.RuleKey)
	d.check("AlertName", got.AlertName == want.AlertName, got.AlertName, want.AlertName)
	d.check("Severity", got.Severity == want.Severity, got.Severity, want.Severity)
	d.check("Source", got.Source == want.Source, got.Source, want.Source)
	d.check("AgentID", got.AgentID == want.AgentID, got.AgentID, want.AgentID)
	d.check("DecisionID", got.DecisionID == want.DecisionID, got.DecisionID, want.DecisionID)
	d.check("SourceEventID", got.SourceEventID == want.SourceEventID, got.SourceEventID, want.SourceEventID)
	d.check("Summary", got.Summary == want.Summary, got.Summary, want.Summary)
	d.check("CreatedAt", got.CreatedAt.Equal(want.CreatedAt) && isUTC(got.CreatedAt), got.CreatedAt, want.CreatedAt.UTC())
	d.report(t)
}

// sameIncident compares every field but Seq (which only has to be set).
func sameIncident(t *testing.T, what string, got, want persistence.Incident) {
	t.Helper()
	d := diffs{what: what}
	d.check("Seq", got.Seq > 0, got.Seq, "> 0")
	d.check("ID", got.ID == want.ID, got.ID, want.ID)
	d.check("TenantID", got.TenantID == want.TenantID, got.TenantID, want.TenantID)
	d.check("Kind", got.Kind == want.Kind, got.Kind, want.Kind)
	d.check("Severity", got.Severity == want.Severity, got.Severity, want.Severity)
	d.check("Status", got.Status == want.Status, got.Status, want.Status)
	d.check("AgentID", got.AgentID == want.AgentID, got.AgentID, want.AgentID)
	d.check("Summary", got.Summary == want.Summary, got.Summary, want.Summary)
	d.check("SourceEventIDs", slices.Equal(got.SourceEventIDs, want.SourceEventIDs), got.SourceEventIDs, want.SourceEventIDs)
	d.check("OpenedAt", got.OpenedAt.Equal(want.OpenedAt) && isUTC(got.OpenedAt), got.OpenedAt, want.OpenedAt.UTC())
	d.check("ClosedAt", timeEq(got.ClosedAt, want.ClosedAt) && (got.ClosedAt == nil || isUTC(*got.ClosedAt)),
		fmtTime(got.ClosedAt), fmtTime(want.ClosedAt))
	d.check("CloseReason", strEq(got.CloseReason, want.CloseReason), fmtStr(got.CloseReason), fmtStr(want.CloseReason))
	d.report(t)
}

func mustPutRule(t *testing.T, s persistence.Store, r persistence.CustomRule, ev ...persistence.AuditEvent) persistence.CustomRule {
	t.Helper()
	got, err := s.PutRule(ctx(t), r, ev...)
	if err != nil {
		t.Fatalf("PutRule %s/%s: %v", r.TenantID, r.Key, err)
	}
	return got
}

func mustGetIncident(t *testing.T, s persistence.Store, tenantID, id string) persistence.Incident {
	t.Helper()
	in, err := s.GetIncident(ctx(t), tenantID, id)
	if err != nil {
		t.Fatalf("GetIncident %s: %v", id, err)
	}
	return in
}

func mustOpenIncident(t *testing.T, s persistence.Store, in persistence.Incident) persistence.Incident {
	t.Helper()
	if err := s.OpenIncidents(ctx(t), []persistence.Incident{in}); err != nil {
		t.Fatalf("OpenIncident: %v", err)
	}
	in.Status = persistence.IncidentOpen
	return in
}

func newIncident(tenantID, agentID, kind, severity string, at time.Time) persistence.Incident {
	return persistence.Incident{ID: id(), TenantID: tenantID, Kind: kind, Severity: severity, Status: persistence.IncidentOpen,
		AgentID: agentID, Summary: kind + " on " + agentID, SourceEventIDs: []string{"ev-3-" + id(), "ev-1-" + id(), "ev-2-" + id()},
		OpenedAt: at}
}

func newAlert(tenantID, agentID, severity string, at time.Time) persistence.Alert {
	return persistence.Alert{ID: id(), TenantID: tenantID, RuleKey: "rule_" + severity, AlertName: "Rule " + severity,
		Severity: severity, Source: "default", AgentID: agentID, DecisionID: id(), SourceEventID: id(),
		Summary: "matched " + severity + " for " + agentID, CreatedAt: at}
}

// ---- custom rules ----

const (
	socCondition  = `{"field":"decision","op":"eq","value":"deny"}`
	socCondition2 = `{"all":[{"field":"tool","op":"in","value":["github","slack"]},{"field":"risk_score","op":"gte","value":70}]}`
)

func testSOCRules(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")

	// Create: every field round-trips, created_at == updated_at.
	t0 := usNow()
	r := persistence.CustomRule{TenantID: a.ID, Key: "deny_burst", AlertName: "Deny burst", Severity: "HIGH", Enabled: true,
		Condition: json.RawMessage(socCondition), CreatedAt: t0, UpdatedAt: t0}
	got := mustPutRule(t, s, r, audit(a.ID, "config_change", "rule_created"))
	sameRule(t, "PutRule (create) result", got, r)
	list, err := s.ListRules(ctx(t), a.ID)
	if err != nil || len(list) != 1 {
		t.Fatalf("ListRules after create = %v, %v", idsOf(list, ruleKey), err)
	}
	sameRule(t, "ListRules after create", list[0], r)

	// Replace: the content and updated_at change, created_at stays.
	t1 := t0.Add(90 * time.Second)
	r2 := persistence.CustomRule{TenantID: a.ID, Key: "deny_burst", AlertName: "Deny burst v2", Severity: "MEDIUM", Enabled: false,
		Condition: json.RawMessage(socCondition2), CreatedAt: t1, UpdatedAt: t1}
	got = mustPutRule(t, s, r2, audit(a.ID, "config_change", "rule_replaced"))
	want := r2
	want.CreatedAt = t0
	sameRule(t, "PutRule (replace) result", got, want)
	list, err = s.ListRules(ctx(t), a.ID)
	if err != nil || len(list) != 1 {
		t.Fatalf("ListRules after replace = %v, %v (a replace must not add a row)", idsOf(list, ruleKey), err)
	}
	sameRule(t, "ListRules after replace", list[0], want)
	// Enabled back to true: a boolean that flips both ways.
	r3 := want
	r3.Enabled, r3.UpdatedAt = true, t1.Add(time.Second)
	sameRule(t, "PutRule (re-enable) result", mustPutRule(t, s, r3), r3)
	if acts := auditActions(t, s, a.ID, "config_change"); !maps.Equal(acts, map[string]int{"rule_created": 1, "rule_replaced": 1}) {
		t.Fatalf("rule audit events = %v, want rule_created and rule_replaced once each", acts)
	}

	// Listing: the tenant's rules ordered by key (byte order), never
	// another tenant's, even one with the same key.
	keys := []string{"zeta", "ab", "a_c", "m1", "deny_burst"}
	for i, k := range keys[:4] {
		at := t0.Add(time.Duration(i) * time.Second)
		mustPutRule(t, s, persistence.CustomRule{TenantID: a.ID, Key: k, AlertName: "Rule " + k, Severity: "LOW", Enabled: true,
			Condition: json.RawMessage(socCondition), CreatedAt: at, UpdatedAt: at})
	}
	bRule := persistence.CustomRule{TenantID: b.ID, Key: "deny_burst", AlertName: "b's own", Severity: "INFO", Enabled: true,
		Condition: json.RawMessage(`{"field":"tool","op":"eq","value":"b"}`), CreatedAt: t1, UpdatedAt: t1}
	sameRule(t, "tenant b's rule with a's key", mustPutRule(t, s, bRule), bRule)
	bOnly := persistence.CustomRule{TenantID: b.ID, Key: "b_only", AlertName: "b only", Severity: "HIGH", Enabled: true,
		Condition: json.RawMessage(socCondition), CreatedAt: t1, UpdatedAt: t1}
	mustPutRule(t, s, bOnly)
	sorted := slices.Clone(keys)
	sort.Strings(sorted)
	list, err = s.ListRules(ctx(t), a.ID)
	wantOrder(t, "ListRules of a", idsOf(list, ruleKey), err, sorted)
	for _, x := range list {
		if x.TenantID != a.ID {
			t.Fatalf("ListRules of a returned tenant %s's rule %s", x.TenantID, x.Key)
		}
		if x.Key == "deny_burst" {
			sameRule(t, "a's deny_burst after b wrote its own", x, r3)
		}
	}
	list, err = s.ListRules(ctx(t), b.ID)
	wantOrder(t, "ListRules of b", idsOf(list, ruleKey), err, []string{"b_only", "deny_burst"})
	sameRule(t, "b's deny_burst", list[1], bRule)
	list, err = s.ListRules(ctx(t), id())
	wantOrder(t, "ListRules of an unknown tenant", idsOf(list, ruleKey), err, nil)

	// Delete: once; then, and for unknown keys and other tenants' keys,
	// ErrNotFound with nothing removed and no audit event written.
	if err := s.DeleteRule(ctx(t), a.ID, "zeta", audit(a.ID, "config_change", "rule_deleted")); err != nil {
		t.Fatalf("DeleteRule: %v", err)
	}
	list, err = s.ListRules(ctx(t), a.ID)
	wantOrder(t, "ListRules after delete", idsOf(list, ruleKey), err, []string{"a_c", "ab", "deny_burst", "m1"})
	wantErrMsg(t, "second DeleteRule", s.DeleteRule(ctx(t), a.ID, "zeta", audit(a.ID, "config_change", "rule_deleted_again")),
		persistence.ErrNotFound)
	wantErrMsg(t, "DeleteRule of an unknown key", s.DeleteRule(ctx(t), a.ID, "no_such_rule", audit(a.ID, "config_change", "rule_deleted_unknown")),
		persistence.ErrNotFound)
	wantErrMsg(t, "DeleteRule of another tenant's key", s.DeleteRule(ctx(t), a.ID, "b_only", audit(a.ID, "config_change", "rule_deleted_cross")),
		persistence.ErrNotFound)
	wantErrMsg(t, "tenant b deleting a's key", s.DeleteRule(ctx(t), b.ID, "m1", audit(b.ID, "config_change", "rule_deleted_cross")),
		persistence.ErrNotFound)
	list, err = s.ListRules(ctx(t), b.ID)
	wantOrder(t, "ListRules of b after a's deletes", idsOf(list, ruleKey), err, []string{"b_only", "deny_burst"})
	sameRule(t, "b's b_only after a tried to delete it", list[0], bOnly)
	list, err = s.ListRules(ctx(t), a.ID)
	wantOrder(t, "ListRules of a after the failed deletes", idsOf(list, ruleKey), err, []string{"a_c", "ab", "deny_burst", "m1"})
	if acts := auditActions(t, s, a.ID, "config_change"); !maps.Equal(acts, map[string]int{"rule_created": 1, "rule_replaced": 1, "rule_deleted": 1}) {
		t.Fatalf("rule audit events of a = %v, want only the successful writes'", acts)
	}
	if acts := auditActions(t, s, b.ID, "config_change"); len(acts) != 0 {
		t.Fatalf("tenant b's failed delete wrote audit events: %v", acts)
	}
	// Deleting b's deny_burst leaves a's.
	if err := s.DeleteRule(ctx(t), b.ID, "deny_burst"); err != nil {
		t.Fatalf("DeleteRule of b's deny_burst: %v", err)
	}
	list, err = s.ListRules(ctx(t), a.ID)
	wantOrder(t, "ListRules of a after b deleted its deny_burst", idsOf(list, ruleKey), err, []string{"a_c", "ab", "deny_burst", "m1"})
	// And a's rule can be created again after a delete, fresh.
	t2 := t1.Add(time.Hour)
	again := persistence.CustomRule{TenantID: a.ID, Key: "zeta", AlertName: "Zeta again", Severity: "HIGH", Enabled: true,
		Condition: json.RawMessage(socCondition), CreatedAt: t2, UpdatedAt: t2}
	sameRule(t, "PutRule after delete", mustPutRule(t, s, again), again)
}

// ---- alerts ----

func testSOCAlerts(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	ag1 := mustAgent(t, s, a.ID, "bot1")
	ag2 := mustAgent(t, s, a.ID, "bot2")
	bAg := mustAgent(t, s, b.ID, "bot")

	// Empty batches are no-ops.
	if err := s.AppendAlerts(ctx(t), nil); err != nil {
		t.Fatalf("AppendAlerts(nil): %v", err)
	}
	if err := s.AppendAlerts(ctx(t), []persistence.Alert{}); err != nil {
		t.Fatalf("AppendAlerts(empty): %v", err)
	}
	if got, err := s.ListAlerts(ctx(t), a.ID, persistence.AlertFilter{}, persistence.Page{Limit: 100}); err != nil || len(got) != 0 {
		t.Fatalf("ListAlerts after empty batches = %v, %v", idsOf(got, alertID), err)
	}

	// One batch spanning two tenants, then a second batch.
	base := usNow().Add(-time.Hour)
	sevs := []string{"HIGH", "LOW", "HIGH", "MEDIUM", "LOW", "HIGH", "INFO", "HIGH", "LOW", "MEDIUM"}
	var aAlerts, bAlerts, batch1, batch2 []persistence.Alert
	for i, sev := range sevs {
		owner := ag1.ID
		if i%3 == 1 {
			owner = ag2.ID
		}
		al := newAlert(a.ID, owner, sev, base.Add(time.Duration(i)*time.Second+time.Duration(i)*time.Microsecond))
		switch i {
		case 2:
			al.Source, al.DecisionID = "custom", "" // no decision
		case 4:
			// A time in another zone is stored as the same instant and read in UTC.
			al.CreatedAt = al.CreatedAt.In(time.FixedZone("UTC+5", 5*3600))
		}
		aAlerts = append(aAlerts, al)
		if i < 7 {
			batch1 = append(batch1, al)
		} else {
			batch2 = append(batch2, al)
		}
		if i == 1 || i == 4 {
			bl := newAlert(b.ID, bAg.ID, "HIGH", base)
			bAlerts = append(bAlerts, bl)
			batch1 = append(batch1, bl)
		}
	}
	if err := s.AppendAlerts(ctx(t), batch1); err != nil {
		t.Fatalf("AppendAlerts of two tenants: %v", err)
	}
	if err := s.AppendAlerts(ctx(t), batch2); err != nil {
		t.Fatalf("AppendAlerts: %v", err)
	}

	// Newest first, every field round-tripping, seq strictly decreasing.
	all := reversed(idsOf(aAlerts, alertID))
	list, err := s.ListAlerts(ctx(t), a.ID, persistence.AlertFilter{}, persistence.Page{Limit: 100})
	wantOrder(t, "ListAlerts of a", idsOf(list, alertID), err, all)
	for i, got := range list {
		sameAlert(t, fmt.Sprintf("ListAlerts row %d", i), got, aAlerts[len(aAlerts)-1-i])
		if i > 0 && got.Seq >= list[i-1].Seq {
			t.Fatalf("ListAlerts not newest first by seq: %d then %d", list[i-1].Seq, got.Seq)
		}
	}
	seqs := map[string]int64{}
	for _, x := range list {
		seqs[x.ID] = x.Seq
	}
	bList, err := s.ListAlerts(ctx(t), b.ID, persistence.AlertFilter{}, persistence.Page{Limit: 100})
	wantOrder(t, "ListAlerts of b", idsOf(bList, alertID), err, reversed(idsOf(bAlerts, alertID)))
	for i, got := range bList {
		sameAlert(t, "tenant b's alert", got, bAlerts[len(bAlerts)-1-i])
	}

	// Filters alone and combined, against a model of the rows.
	filtered := func(f persistence.AlertFilter) []persistence.Alert {
		var out []persistence.Alert
		for _, x := range aAlerts {
			if (f.Severity == "" || x.Severity == f.Severity) && (f.AgentID == "" || x.AgentID == f.AgentID) {
				out = append(out, x)
			}
		}
		return out
	}
	for _, sev := range []string{"", "HIGH", "LOW", "MEDIUM", "INFO", "CRITICAL"} {
		for _, agent := range []string{"", ag1.ID, ag2.ID, bAg.ID} {
			f := persistence.AlertFilter{Severity: sev, AgentID: agent}
			list, err := s.ListAlerts(ctx(t), a.ID, f, persistence.Page{Limit: 100})
			wantOrder(t, fmt.Sprintf("ListAlerts %+v", f), idsOf(list, alertID), err, reversed(idsOf(filtered(f), alertID)))
		}
	}
	if n := len(filtered(persistence.AlertFilter{Severity: "HIGH", AgentID: ag1.ID})); n < 2 || n == len(filtered(persistence.AlertFilter{Severity: "HIGH"})) {
		t.Fatalf("test data: the combined filter must select a strict, non-trivial subset (%d rows)", n)
	}

	// Pages: Limit 3 reads 4 rows; the cursor is the seq; Offset skips.
	p1, err := s.ListAlerts(ctx(t), a.ID, persistence.AlertFilter{}, persistence.Page{Limit: 3})
	wantOrder(t, "first page", idsOf(p1, alertID), err, all[0:4])
	p2, err := s.ListAlerts(ctx(t), a.ID, persistence.AlertFilter{}, persistence.Page{Limit: 3, After: p1[2].Seq})
	wantOrder(t, "second page", idsOf(p2, alertID), err, all[3:7])
	p3, err := s.ListAlerts(ctx(t), a.ID, persistence.AlertFilter{}, persistence.Page{Limit: 3, After: p2[2].Seq})
	wantOrder(t, "third page", idsOf(p3, alertID), err, all[6:10])
	p4, err := s.ListAlerts(ctx(t), a.ID, persistence.AlertFilter{}, persistence.Page{Limit: 3, After: p3[2].Seq})
	wantOrder(t, "last page", idsOf(p4, alertID), err, all[9:])
	off, err := s.ListAlerts(ctx(t), a.ID, persistence.AlertFilter{}, persistence.Page{Limit: 2, Offset: 4})
	wantOrder(t, "offset page", idsOf(off, alertID), err, all[4:7])
	high := reversed(idsOf(filtered(persistence.AlertFilter{Severity: "HIGH"}), alertID))
	h1, err := s.ListAlerts(ctx(t), a.ID, persistence.AlertFilter{Severity: "HIGH"}, persistence.Page{Limit: 1})
	wantOrder(t, "HIGH first page", idsOf(h1, alertID), err, high[0:2])
	h2, err := s.ListAlerts(ctx(t), a.ID, persistence.AlertFilter{Severity: "HIGH"}, persistence.Page{Limit: 1, After: h1[0].Seq})
	wantOrder(t, "HIGH second page", idsOf(h2, alertID), err, high[1:3])

	// SinceSeq: only rows after it, OLDEST first, filters honoured.
	since := seqs[aAlerts[2].ID]
	watch, err := s.ListAlerts(ctx(t), a.ID, persistence.AlertFilter{SinceSeq: since}, persistence.Page{Limit: 100})
	wantOrder(t, "ListAlerts SinceSeq", idsOf(watch, alertID), err, idsOf(aAlerts[3:], alertID))
	for i, got := range watch {
		sameAlert(t, "SinceSeq row", got, aAlerts[3+i])
		if got.Seq <= since || (i > 0 && got.Seq <= watch[i-1].Seq) {
			t.Fatalf("SinceSeq %d row %d has seq %d (previous %d): want increasing seqs above %d", since, i, got.Seq,
				watch[max(i-1, 0)].Seq, since)
		}
	}
	for _, f := range []persistence.AlertFilter{{Severity: "HIGH"}, {AgentID: ag2.ID}, {Severity: "LOW", AgentID: ag1.ID}} {
		var want []string
		for _, x := range filtered(f) {
			if seqs[x.ID] > since {
				want = append(want, x.ID)
			}
		}
		f.SinceSeq = since
		watch, err := s.ListAlerts(ctx(t), a.ID, f, persistence.Page{Limit: 100})
		wantOrder(t, fmt.Sprintf("ListAlerts %+v", f), idsOf(watch, alertID), err, want)
	}
	// A short limit keeps the oldest rows after SinceSeq.
	short, err := s.ListAlerts(ctx(t), a.ID, persistence.AlertFilter{SinceSeq: since}, persistence.Page{Limit: 2})
	if err != nil || len(short) < 2 || len(short) > 3 || !slices.Equal(idsOf(short, alertID), idsOf(aAlerts[3:3+len(short)], alertID)) {
		t.Fatalf("ListAlerts SinceSeq with Limit 2 = %v, %v; want the oldest 2 (or 3) after seq %d: %v",
			idsOf(short, alertID), err, since, idsOf(aAlerts[3:6], alertID))
	}
	last := seqs[aAlerts[len(aAlerts)-1].ID]
	watch, err = s.ListAlerts(ctx(t), a.ID, persistence.AlertFilter{SinceSeq: last}, persistence.Page{Limit: 100})
	wantOrder(t, "ListAlerts SinceSeq at the newest seq", idsOf(watch, alertID), err, nil)
	// b's rows interleave a's seqs; a's watch never sees them, b's only them.
	watch, err = s.ListAlerts(ctx(t), b.ID, persistence.AlertFilter{SinceSeq: 1}, persistence.Page{Limit: 100})
	wantOrder(t, "tenant b's SinceSeq", idsOf(watch, alertID), err, idsOf(bAlerts, alertID))

	// Isolation: b's filters never reach a's rows.
	for _, f := range []persistence.AlertFilter{{AgentID: ag1.ID}, {Severity: "LOW"}} {
		list, err := s.ListAlerts(ctx(t), b.ID, f, persistence.Page{Limit: 100})
		wantOrder(t, fmt.Sprintf("tenant b's ListAlerts %+v", f), idsOf(list, alertID), err, nil)
	}
	var bAfter []string
	for _, x := range reversed(bList) {
		if x.Seq > since {
			bAfter = append(bAfter, x.ID)
		}
	}
	watch, err = s.ListAlerts(ctx(t), b.ID, persistence.AlertFilter{SinceSeq: since}, persistence.Page{Limit: 100})
	wantOrder(t, "tenant b's ListAlerts SinceSeq", idsOf(watch, alertID), err, bAfter)
	list, err = s.ListAlerts(ctx(t), id(), persistence.AlertFilter{}, persistence.Page{Limit: 100})
	wantOrder(t, "ListAlerts of an unknown tenant", idsOf(list, alertID), err, nil)
}

// ---- incidents ----

var (
	socKinds = []string{"deny_storm", "runaway", "repeated_approval", "trust_escalation"}
	socSevs  = []string{"HIGH", "LOW", "MEDIUM", "HIGH", "INFO", "LOW", "HIGH", "MEDIUM", "HIGH", "LOW", "HIGH"}
)

func testSOCIncidents(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	ag1 := mustAgent(t, s, a.ID, "bot1")
	ag2 := mustAgent(t, s, a.ID, "bot2")
	bAg := mustAgent(t, s, b.ID, "bot")

	// Round trip: source_event_ids in their order, open, never closed.
	base := usNow().Add(-time.Hour)
	first := newIncident(a.ID, ag1.ID, "deny_storm", "HIGH", base)
	first.SourceEventIDs = []string{"z-3", "a-1", "m-2", "a-1"}
	mustOpenIncident(t, s, first)
	got := mustGetIncident(t, s, a.ID, first.ID)
	sameIncident(t, "GetIncident after OpenIncident", got, first)
	// The status is the store's: whatever the caller set, it opens.
	odd := newIncident(a.ID, ag2.ID, "runaway", "LOW", base.Add(time.Second))
	odd.Status = ""
	if err := s.OpenIncidents(ctx(t), []persistence.Incident{odd}); err != nil {
		t.Fatalf("OpenIncident without a status: %v", err)
	}
	odd.Status = persistence.IncidentOpen
	sameIncident(t, "incident opened without a status", mustGetIncident(t, s, a.ID, odd.ID), odd)
	// No source events reads back as none, and a non-UTC time as UTC.
	bare := newIncident(a.ID, ag1.ID, "runaway", "MEDIUM", base.Add(2*time.Second).In(time.FixedZone("UTC-7", -7*3600)))
	bare.SourceEventIDs = nil
	mustOpenIncident(t, s, bare)
	if g := mustGetIncident(t, s, a.ID, bare.ID); len(g.SourceEventIDs) != 0 || !g.OpenedAt.Equal(bare.OpenedAt) || !isUTC(g.OpenedAt) {
		t.Fatalf("incident without source events: source_event_ids %v, opened_at %v; want none, %v UTC", g.SourceEventIDs,
			g.OpenedAt, bare.OpenedAt.UTC())
	}
	// Opening the same id again is ErrConflict (the pipeline's retry relies
	// on it) and changes nothing.
	dup := newIncident(a.ID, ag2.ID, "runaway", "LOW", base.Add(time.Hour))
	dup.ID = first.ID
	wantErrMsg(t, "OpenIncidents with an existing id", s.OpenIncidents(ctx(t), []persistence.Incident{dup}), persistence.ErrConflict)
	sameIncident(t, "incident after a duplicate open", mustGetIncident(t, s, a.ID, first.ID), first)

	// Unknown and other tenants' ids are not found.
	_, err := s.GetIncident(ctx(t), a.ID, id())
	wantErrMsg(t, "GetIncident of an unknown id", err, persistence.ErrNotFound)
	_, err = s.GetIncident(ctx(t), b.ID, first.ID)
	wantErrMsg(t, "GetIncident of another tenant's id", err, persistence.ErrNotFound)

	// Listing: more incidents over two agents, four kinds and severities,
	// some closed, plus tenant b's.
	aInc := []persistence.Incident{first, odd, bare}
	for i, sev := range socSevs {
		owner := ag1.ID
		if i%3 == 2 {
			owner = ag2.ID
		}
		aInc = append(aInc, mustOpenIncident(t, s, newIncident(a.ID, owner, socKinds[i%len(socKinds)], sev,
			base.Add(time.Duration(10+i)*time.Second))))
		if i == 4 {
			bInc := newIncident(b.ID, bAg.ID, "deny_storm", "HIGH", base)
			mustOpenIncident(t, s, bInc)
		}
	}
	closeAt := usNow()
	for _, i := range []int{0, 4, 5, 9, 12} {
		reason := fmt.Sprintf("closed %d", i)
		got, err := s.CloseIncident(ctx(t), a.ID, aInc[i].ID, &reason, closeAt)
		if err != nil {
			t.Fatalf("CloseIncident %d: %v", i, err)
		}
		aInc[i].Status, aInc[i].ClosedAt, aInc[i].CloseReason = persistence.IncidentClosed, &closeAt, &reason
		sameIncident(t, "CloseIncident result", got, aInc[i])
	}
	all := reversed(idsOf(aInc, incidentID))
	list, err := s.ListIncidents(ctx(t), a.ID, persistence.IncidentFilter{}, persistence.Page{Limit: 100})
	wantOrder(t, "ListIncidents of a", idsOf(list, incidentID), err, all)
	seqs := map[string]int64{}
	for i, got := range list {
		sameIncident(t, fmt.Sprintf("ListIncidents row %d", i), got, aInc[len(aInc)-1-i])
		if i > 0 && got.Seq >= list[i-1].Seq {
			t.Fatalf("ListIncidents not newest first by seq: %d then %d", list[i-1].Seq, got.Seq)
		}
		seqs[got.ID] = got.Seq
	}

	filtered := func(f persistence.IncidentFilter) []persistence.Incident {
		var out []persistence.Incident
		for _, x := range aInc {
			if (f.Status == "" || x.Status == f.Status) && (f.Severity == "" || x.Severity == f.Severity) &&
				(f.AgentID == "" || x.AgentID == f.AgentID) && (f.Kind == "" || x.Kind == f.Kind) {
				out = append(out, x)
			}
		}
		return out
	}
	nonEmptyCombos := 0
	for _, st := range []string{"", persistence.IncidentOpen, persistence.IncidentClosed} {
		for _, sev := range []string{"", "HIGH", "LOW", "CRITICAL"} {
			for _, agent := range []string{"", ag1.ID, ag2.ID, bAg.ID} {
				for _, kind := range []string{"", "deny_storm", "runaway", "trust_escalation", "nope"} {
					f := persistence.IncidentFilter{Status: st, Severity: sev, AgentID: agent, Kind: kind}
					want := filtered(f)
					if len(want) > 0 && st != "" && sev != "" && agent != "" && kind != "" {
						nonEmptyCombos++
					}
					list, err := s.ListIncidents(ctx(t), a.ID, f, persistence.Page{Limit: 100})
					wantOrder(t, fmt.Sprintf("ListIncidents %+v", f), idsOf(list, incidentID), err, reversed(idsOf(want, incidentID)))
				}
			}
		}
	}
	if nonEmptyCombos < 3 {
		t.Fatalf("test data: only %d combinations of all four filters select rows", nonEmptyCombos)
	}

	// Pages, alone and with a filter.
	p1, err := s.ListIncidents(ctx(t), a.ID, persistence.IncidentFilter{}, persistence.Page{Limit: 4})
	wantOrder(t, "first page", idsOf(p1, incidentID), err, all[0:5])
	p2, err := s.ListIncidents(ctx(t), a.ID, persistence.IncidentFilter{}, persistence.Page{Limit: 4, After: p1[3].Seq})
	wantOrder(t, "second page", idsOf(p2, incidentID), err, all[4:9])
	off, err := s.ListIncidents(ctx(t), a.ID, persistence.IncidentFilter{}, persistence.Page{Limit: 3, Offset: 5})
	wantOrder(t, "offset page", idsOf(off, incidentID), err, all[5:9])
	open := reversed(idsOf(filtered(persistence.IncidentFilter{Status: persistence.IncidentOpen}), incidentID))
	o1, err := s.ListIncidents(ctx(t), a.ID, persistence.IncidentFilter{Status: persistence.IncidentOpen}, persistence.Page{Limit: 2})
	wantOrder(t, "open first page", idsOf(o1, incidentID), err, open[0:3])
	o2, err := s.ListIncidents(ctx(t), a.ID, persistence.IncidentFilter{Status: persistence.IncidentOpen}, persistence.Page{Limit: 2, After: o1[1].Seq})
	wantOrder(t, "open second page", idsOf(o2, incidentID), err, open[2:5])
	o3, err := s.ListIncidents(ctx(t), a.ID, persistence.IncidentFilter{Status: persistence.IncidentOpen}, persistence.Page{Limit: 2, Offset: 1})
	wantOrder(t, "open offset page", idsOf(o3, incidentID), err, open[1:4])

	// SinceSeq: oldest first, after the seq, filters honoured.
	since := seqs[aInc[5].ID]
	watch, err := s.ListIncidents(ctx(t), a.ID, persistence.IncidentFilter{SinceSeq: since}, persistence.Page{Limit: 100})
	wantOrder(t, "ListIncidents SinceSeq", idsOf(watch, incidentID), err, idsOf(aInc[6:], incidentID))
	for i, got := range watch {
		sameIncident(t, "SinceSeq row", got, aInc[6+i])
	}
	for _, f := range []persistence.IncidentFilter{{Status: persistence.IncidentOpen}, {Status: persistence.IncidentClosed},
		{Severity: "HIGH", AgentID: ag1.ID}, {Kind: "deny_storm"}, {Status: persistence.IncidentOpen, Kind: "runaway", Severity: "LOW"}} {
		var want []string
		for _, x := range filtered(f) {
			if seqs[x.ID] > since {
				want = append(want, x.ID)
			}
		}
		f.SinceSeq = since
		watch, err := s.ListIncidents(ctx(t), a.ID, f, persistence.Page{Limit: 100})
		wantOrder(t, fmt.Sprintf("ListIncidents %+v", f), idsOf(watch, incidentID), err, want)
	}
	short, err := s.ListIncidents(ctx(t), a.ID, persistence.IncidentFilter{SinceSeq: since}, persistence.Page{Limit: 2})
	if err != nil || len(short) < 2 || len(short) > 3 || !slices.Equal(idsOf(short, incidentID), idsOf(aInc[6:6+len(short)], incidentID)) {
		t.Fatalf("ListIncidents SinceSeq with Limit 2 = %v, %v; want the oldest 2 (or 3) after seq %d: %v",
			idsOf(short, incidentID), err, since, idsOf(aInc[6:9], incidentID))
	}
	watch, err = s.ListIncidents(ctx(t), a.ID, persistence.IncidentFilter{SinceSeq: seqs[aInc[len(aInc)-1].ID]}, persistence.Page{Limit: 100})
	wantOrder(t, "ListIncidents SinceSeq at the newest seq", idsOf(watch, incidentID), err, nil)

	// Isolation.
	bl, err := s.ListIncidents(ctx(t), b.ID, persistence.IncidentFilter{}, persistence.Page{Limit: 100})
	if err != nil || len(bl) != 1 || bl[0].TenantID != b.ID || bl[0].AgentID != bAg.ID {
		t.Fatalf("ListIncidents of b = %+v, %v; want its one incident", bl, err)
	}
	for _, f := range []persistence.IncidentFilter{{AgentID: ag1.ID}, {Kind: "runaway"}, {Status: persistence.IncidentClosed},
		{SinceSeq: bl[0].Seq}} {
		list, err := s.ListIncidents(ctx(t), b.ID, f, persistence.Page{Limit: 100})
		wantOrder(t, fmt.Sprintf("tenant b's ListIncidents %+v", f), idsOf(list, incidentID), err, nil)
	}
	watch, err = s.ListIncidents(ctx(t), b.ID, persistence.IncidentFilter{SinceSeq: bl[0].Seq - 1}, persistence.Page{Limit: 100})
	wantOrder(t, "tenant b's ListIncidents SinceSeq", idsOf(watch, incidentID), err, []string{bl[0].ID})
}

func testSOCClose(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	ag := mustAgent(t, s, a.ID, "bot")
	base := usNow().Add(-time.Hour)
	in := mustOpenIncident(t, s, newIncident(a.ID, ag.ID, "deny_storm", "HIGH", base))
	plain := mustOpenIncident(t, s, newIncident(a.ID, ag.ID, "runaway", "LOW", base.Add(time.Second)))
	kept := mustOpenIncident(t, s, newIncident(a.ID, ag.ID, "runaway", "MEDIUM", base.Add(2*time.Second)))
	before := auditActions(t, s, a.ID, "admin_action")

	// Close with a reason: status, closed_at, close_reason, the audit event.
	at := usNow()
	reason := "false positive"
	got, err := s.CloseIncident(ctx(t), a.ID, in.ID, &reason, at, audit(a.ID, "admin_action", "incident_closed"))
	if err != nil {
		t.Fatalf("CloseIncident: %v", err)
	}
	want := in
	want.Status, want.ClosedAt, want.CloseReason = persistence.IncidentClosed, &at, &reason
	sameIncident(t, "CloseIncident result", got, want)
	sameIncident(t, "GetIncident after close", mustGetIncident(t, s, a.ID, in.ID), want)
	wantAudit := maps.Clone(before)
	wantAudit["incident_closed"] = 1
	if acts := auditActions(t, s, a.ID, "admin_action"); !maps.Equal(acts, wantAudit) {
		t.Fatalf("audit events after close = %v, want %v", acts, wantAudit)
	}

	// Closing again: ErrStateConflict, nothing rewritten, no audit event.
	other := "again"
	_, err = s.CloseIncident(ctx(t), a.ID, in.ID, &other, at.Add(time.Minute), audit(a.ID, "admin_action", "incident_closed_again"))
	wantErrMsg(t, "second CloseIncident", err, persistence.ErrStateConflict)
	_, err = s.CloseIncident(ctx(t), a.ID, in.ID, nil, at.Add(time.Minute), audit(a.ID, "admin_action", "incident_closed_again"))
	wantErrMsg(t, "second CloseIncident without a reason", err, persistence.ErrStateConflict)
	sameIncident(t, "incident after the failed closes", mustGetIncident(t, s, a.ID, in.ID), want)

	// No reason is allowed.
	at2 := at.Add(time.Second)
	got, err = s.CloseIncident(ctx(t), a.ID, plain.ID, nil, at2, audit(a.ID, "admin_action", "incident_closed_plain"))
	if err != nil {
		t.Fatalf("CloseIncident without a reason: %v", err)
	}
	wantPlain := plain
	wantPlain.Status, wantPlain.ClosedAt = persistence.IncidentClosed, &at2
	sameIncident(t, "CloseIncident without a reason", got, wantPlain)
	sameIncident(t, "GetIncident after a close without a reason", mustGetIncident(t, s, a.ID, plain.ID), wantPlain)
	wantAudit["incident_closed_plain"] = 1

	// Unknown ids and other tenants' ids: ErrNotFound, nothing written.
	_, err = s.CloseIncident(ctx(t), a.ID, id(), &reason, at, audit(a.ID, "admin_action", "incident_closed_unknown"))
	wantErrMsg(t, "CloseIncident of an unknown id", err, persistence.ErrNotFound)
	_, err = s.CloseIncident(ctx(t), b.ID, kept.ID, &reason, at, audit(b.ID, "admin_action", "incident_closed_cross"))
	wantErrMsg(t, "CloseIncident of another tenant's open incident", err, persistence.ErrNotFound)
	_, err = s.CloseIncident(ctx(t), b.ID, in.ID, &reason, at, audit(b.ID, "admin_action", "incident_closed_cross"))
	wantErrMsg(t, "CloseIncident of another tenant's closed incident", err, persistence.ErrNotFound)
	sameIncident(t, "open incident after tenant b's close", mustGetIncident(t, s, a.ID, kept.ID), kept)
	if acts := auditActions(t, s, a.ID, "admin_action"); !maps.Equal(acts, wantAudit) {
		t.Fatalf("audit events of a = %v, want %v (failed closes write none)", acts, wantAudit)
	}
	if acts := auditActions(t, s, b.ID, "admin_action"); !maps.Equal(acts, map[string]int{"tenant_created": 1}) {
		t.Fatalf("tenant b's failed closes wrote audit events: %v", acts)
	}

	// The status filter follows the closes.
	list, err := s.ListIncidents(ctx(t), a.ID, persistence.IncidentFilter{Status: persistence.IncidentOpen}, persistence.Page{Limit: 10})
	wantOrder(t, "open incidents after the closes", idsOf(list, incidentID), err, []string{kept.ID})
	list, err = s.ListIncidents(ctx(t), a.ID, persistence.IncidentFilter{Status: persistence.IncidentClosed}, persistence.Page{Limit: 10})
	wantOrder(t, "closed incidents after the closes", idsOf(list, incidentID), err, []string{plain.ID, in.ID})
}

func testSOCCloseRace(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	ag := mustAgent(t, s, a.ID, "bot")
	in := mustOpenIncident(t, s, newIncident(a.ID, ag.ID, "deny_storm", "HIGH", usNow()))
	const n = 50
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	at := usNow()
	reasons := make([]string, n)
	for i := range reasons {
		reasons[i] = fmt.Sprintf("closer %d", i)
	}
	wins, conflicts, others := race(t, s, n, func(i int) error {
		_, err := s.CloseIncident(c, a.ID, in.ID, &reasons[i], at.Add(time.Duration(i)*time.Microsecond),
			audit(a.ID, "incident_closed", fmt.Sprintf("close_%d", i)))
		return err
	})
	reportRace(t, "50 CloseIncident", n, wins, conflicts, others)
	w := wins[0]
	winAt := at.Add(time.Duration(w) * time.Microsecond)
	want := in
	want.Status, want.ClosedAt, want.CloseReason = persistence.IncidentClosed, &winAt, &reasons[w]
	sameIncident(t, "incident after the race (the winner's close)", mustGetIncident(t, s, a.ID, in.ID), want)
	if acts := auditActions(t, s, a.ID, "incident_closed"); !maps.Equal(acts, map[string]int{fmt.Sprintf("close_%d", w): 1}) {
		t.Fatalf("audit events of the race = %v, want only the winner's close_%d", acts, w)
	}
}

// ---- summary ----

// nonZero drops zero counts, so that a store may list a severity with no
// rows as 0 or leave it out.
func nonZero(m map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

func wantSummary(t *testing.T, what string, got persistence.SOCSummary, err error, want persistence.SOCSummary) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: SOCSummary: %v", what, err)
	}
	d := diffs{what: what}
	d.check("AlertsTotal", got.AlertsTotal == want.AlertsTotal, got.AlertsTotal, want.AlertsTotal)
	d.check("IncidentsTotal", got.IncidentsTotal == want.IncidentsTotal, got.IncidentsTotal, want.IncidentsTotal)
	// The maps go to JSON as they are: never nil (null), even when empty.
	d.check("AlertsBySeverity", got.AlertsBySeverity != nil && maps.Equal(nonZero(got.AlertsBySeverity), want.AlertsBySeverity),
		got.AlertsBySeverity, want.AlertsBySeverity)
	d.check("IncidentsByStatus", got.IncidentsByStatus != nil && maps.Equal(nonZero(got.IncidentsByStatus), want.IncidentsByStatus),
		got.IncidentsByStatus, want.IncidentsByStatus)
	d.check("IncidentsBySeverity", got.IncidentsBySeverity != nil && maps.Equal(nonZero(got.IncidentsBySeverity), want.IncidentsBySeverity),
		got.IncidentsBySeverity, want.IncidentsBySeverity)
	d.report(t)
}

func testSOCSummary(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	empty, _ := mustTenant(t, s, "empty")
	ag := mustAgent(t, s, a.ID, "bot")
	bAg := mustAgent(t, s, b.ID, "bot")
	zero := persistence.SOCSummary{AlertsBySeverity: map[string]int64{}, IncidentsByStatus: map[string]int64{}, IncidentsBySeverity: map[string]int64{}}

	sum, err := s.SOCSummary(ctx(t), a.ID)
	wantSummary(t, "summary of a tenant with nothing", sum, err, zero)

	now := usNow()
	var alerts []persistence.Alert
	for sev, n := range map[string]int{"HIGH": 3, "MEDIUM": 2, "LOW": 1} {
		for range n {
			alerts = append(alerts, newAlert(a.ID, ag.ID, sev, now))
		}
	}
	for range 4 {
		alerts = append(alerts, newAlert(b.ID, bAg.ID, "INFO", now))
	}
	if err := s.AppendAlerts(ctx(t), alerts); err != nil {
		t.Fatal(err)
	}
	// Open: HIGH 2, LOW 1. Closed: HIGH 1, MEDIUM 2.
	for _, x := range []struct {
		sev    string
		closed bool
	}{{"HIGH", false}, {"HIGH", true}, {"LOW", false}, {"MEDIUM", true}, {"HIGH", false}, {"MEDIUM", true}} {
		in := mustOpenIncident(t, s, newIncident(a.ID, ag.ID, "runaway", x.sev, now))
		if x.closed {
			if _, err := s.CloseIncident(ctx(t), a.ID, in.ID, nil, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	bIn := mustOpenIncident(t, s, newIncident(b.ID, bAg.ID, "deny_storm", "MEDIUM", now))
	mustOpenIncident(t, s, newIncident(b.ID, bAg.ID, "deny_storm", "INFO", now))
	if _, err := s.CloseIncident(ctx(t), b.ID, bIn.ID, nil, now); err != nil {
		t.Fatal(err)
	}

	sum, err = s.SOCSummary(ctx(t), a.ID)
	wantSummary(t, "summary of a", sum, err, persistence.SOCSummary{
		AlertsBySeverity:    map[string]int64{"HIGH": 3, "MEDIUM": 2, "LOW": 1},
		IncidentsByStatus:   map[string]int64{persistence.IncidentOpen: 3, persistence.IncidentClosed: 3},
		IncidentsBySeverity: map[string]int64{"HIGH": 2, "LOW": 1},
		AlertsTotal:         6, IncidentsTotal: 6})
	sum, err = s.SOCSummary(ctx(t), b.ID)
	wantSummary(t, "summary of b", sum, err, persistence.SOCSummary{
		AlertsBySeverity:    map[string]int64{"INFO": 4},
		IncidentsByStatus:   map[string]int64{persistence.IncidentOpen: 1, persistence.IncidentClosed: 1},
		IncidentsBySeverity: map[string]int64{"INFO": 1},
		AlertsTotal:         4, IncidentsTotal: 2})
	sum, err = s.SOCSummary(ctx(t), empty.ID)
	wantSummary(t, "summary of an empty tenant", sum, err, zero)
	sum, err = s.SOCSummary(ctx(t), id())
	wantSummary(t, "summary of an unknown tenant", sum, err, zero)
}

// ---- backtest window ----

func testSOCDecisionsBetween(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	ag := mustAgent(t, s, a.ID, "bot")
	bAg := mustAgent(t, s, b.ID, "bot")

	from := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	to := from.Add(10 * time.Minute)
	at := func(tenantID, agentID string, ts time.Time) persistence.DecisionWrite {
		w := decisionWrite(tenantID, agentID, "allow", nil)
		w.Decision.CreatedAt, w.Receipt.CreatedAt = ts, ts
		return w
	}
	// Committed in time order (as the authorizer does), interleaved with
	// tenant b's inside the window.
	writes := []persistence.DecisionWrite{
		at(a.ID, ag.ID, from.Add(-time.Hour)),
		at(a.ID, ag.ID, from.Add(-time.Microsecond)), // just before: out
		at(a.ID, ag.ID, from),                        // at from: in
		at(b.ID, bAg.ID, from.Add(time.Second)),
		at(a.ID, ag.ID, from.Add(time.Minute)),
		at(a.ID, ag.ID, from.Add(5*time.Minute)),
		at(b.ID, bAg.ID, from.Add(6*time.Minute)),
		at(a.ID, ag.ID, to.Add(-time.Microsecond)), // just before to: in
		at(a.ID, ag.ID, to),                        // at to: out
		at(a.ID, ag.ID, to.Add(time.Hour)),
	}
	for _, w := range writes {
		if err := s.CommitDecisions(ctx(t), []persistence.DecisionWrite{w}, testSeal); err != nil {
			t.Fatalf("CommitDecisions: %v", err)
		}
	}
	decID := func(d persistence.Decision) string { return d.ID }
	in := []persistence.DecisionWrite{writes[7], writes[5], writes[4], writes[2]} // newest first
	want := make([]string, len(in))
	for i, w := range in {
		want[i] = w.Decision.ID
	}

	got, err := s.DecisionsBetween(ctx(t), a.ID, from, to, 100)
	wantOrder(t, "DecisionsBetween [from, to)", idsOf(got, decID), err, want)
	for i, d := range got {
		w := in[i]
		if d.TenantID != a.ID || d.AgentID != ag.ID || !d.CreatedAt.Equal(w.Decision.CreatedAt) || !isUTC(d.CreatedAt) ||
			d.Decision != "allow" || d.ReceiptID != w.Receipt.ID || d.ReceiptHash == "" || string(d.ToolCall) != `{"tool":"github"}` {
			t.Fatalf("DecisionsBetween row %d = %+v; want decision %s created %v with its receipt", i, d, w.Decision.ID, w.Decision.CreatedAt)
		}
		if i > 0 && (d.Seq >= got[i-1].Seq || d.CreatedAt.After(got[i-1].CreatedAt)) {
			t.Fatalf("DecisionsBetween not newest first: %v (seq %d) after %v (seq %d)", d.CreatedAt, d.Seq, got[i-1].CreatedAt, got[i-1].Seq)
		}
	}
	// The same instants in another zone select the same rows.
	zone := time.FixedZone("UTC+9", 9*3600)
	got, err = s.DecisionsBetween(ctx(t), a.ID, from.In(zone), to.In(zone), 100)
	wantOrder(t, "DecisionsBetween with bounds in UTC+9", idsOf(got, decID), err, want)
	// The limit keeps the newest.
	got, err = s.DecisionsBetween(ctx(t), a.ID, from, to, 2)
	wantOrder(t, "DecisionsBetween limit 2", idsOf(got, decID), err, want[:2])
	got, err = s.DecisionsBetween(ctx(t), a.ID, from, to, 1)
	wantOrder(t, "DecisionsBetween limit 1", idsOf(got, decID), err, want[:1])
	// Exact bounds: [from, from+1µs) holds only the one at from; [to, ...)
	// starts with the one at to; an empty range holds nothing.
	got, err = s.DecisionsBetween(ctx(t), a.ID, from, from.Add(time.Microsecond), 100)
	wantOrder(t, "DecisionsBetween [from, from+1µs)", idsOf(got, decID), err, []string{writes[2].Decision.ID})
	got, err = s.DecisionsBetween(ctx(t), a.ID, to, to.Add(time.Microsecond), 100)
	wantOrder(t, "DecisionsBetween [to, to+1µs)", idsOf(got, decID), err, []string{writes[8].Decision.ID})
	got, err = s.DecisionsBetween(ctx(t), a.ID, from, from, 100)
	wantOrder(t, "DecisionsBetween [from, from)", idsOf(got, decID), err, nil)
	// Tenant isolation.
	got, err = s.DecisionsBetween(ctx(t), b.ID, from, to, 100)
	wantOrder(t, "DecisionsBetween of b", idsOf(got, decID), err, []string{writes[6].Decision.ID, writes[3].Decision.ID})
	got, err = s.DecisionsBetween(ctx(t), id(), from.Add(-24*time.Hour), to.Add(24*time.Hour), 100)
	wantOrder(t, "DecisionsBetween of an unknown tenant", idsOf(got, decID), err, nil)
}

// ---- tenant deletion ----

func testSOCTenantDelete(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	ag := mustAgent(t, s, a.ID, "bot")
	bAg := mustAgent(t, s, b.ID, "bot")
	now := usNow()
	for _, tn := range []string{a.ID, b.ID} {
		mustPutRule(t, s, persistence.CustomRule{TenantID: tn, Key: "deny_burst", AlertName: "Deny burst", Severity: "HIGH",
			Enabled: true, Condition: json.RawMessage(socCondition), CreatedAt: now, UpdatedAt: now})
	}
	aAlert, bAlert := newAlert(a.ID, ag.ID, "HIGH", now), newAlert(b.ID, bAg.ID, "LOW", now)
	if err := s.AppendAlerts(ctx(t), []persistence.Alert{aAlert, bAlert, newAlert(a.ID, ag.ID, "LOW", now)}); err != nil {
		t.Fatal(err)
	}
	aOpen := mustOpenIncident(t, s, newIncident(a.ID, ag.ID, "runaway", "HIGH", now))
	aClosed := mustOpenIncident(t, s, newIncident(a.ID, ag.ID, "runaway", "LOW", now))
	if _, err := s.CloseIncident(ctx(t), a.ID, aClosed.ID, nil, now); err != nil {
		t.Fatal(err)
	}
	bInc := mustOpenIncident(t, s, newIncident(b.ID, bAg.ID, "deny_storm", "MEDIUM", now))

	if err := s.DeleteTenant(ctx(t), a.ID); err != nil {
		t.Fatalf("DeleteTenant: %v", err)
	}
	gone := func(what string) {
		t.Helper()
		rules, err := s.ListRules(ctx(t), a.ID)
		wantOrder(t, what+": ListRules", idsOf(rules, ruleKey), err, nil)
		alerts, err := s.ListAlerts(ctx(t), a.ID, persistence.AlertFilter{}, persistence.Page{Limit: 100})
		wantOrder(t, what+": ListAlerts", idsOf(alerts, alertID), err, nil)
		watch, err := s.ListAlerts(ctx(t), a.ID, persistence.AlertFilter{SinceSeq: 1}, persistence.Page{Limit: 100})
		wantOrder(t, what+": ListAlerts SinceSeq", idsOf(watch, alertID), err, nil)
		incs, err := s.ListIncidents(ctx(t), a.ID, persistence.IncidentFilter{}, persistence.Page{Limit: 100})
		wantOrder(t, what+": ListIncidents", idsOf(incs, incidentID), err, nil)
		for _, x := range []persistence.Incident{aOpen, aClosed} {
			_, err := s.GetIncident(ctx(t), a.ID, x.ID)
			wantErrMsg(t, what+": GetIncident", err, persistence.ErrNotFound)
		}
		sum, err := s.SOCSummary(ctx(t), a.ID)
		if err != nil || sum.AlertsTotal != 0 || sum.IncidentsTotal != 0 {
			t.Fatalf("%s: SOCSummary = %+v, %v; want zeroes", what, sum, err)
		}
	}
	gone("after DeleteTenant")
	// The rows are deleted, not merely hidden behind a missing tenant: a
	// tenant re-created with the same id starts empty.
	op := persistence.OperatorToken{ID: id(), TenantID: a.ID, Name: "admin", Role: persistence.RoleAdmin, CreatedAt: now}
	if err := s.CreateTenant(ctx(t), persistence.Tenant{ID: a.ID, Name: "a", CreatedAt: now}, op, hash(op.ID)); err != nil {
		t.Fatalf("CreateTenant with the deleted tenant's id: %v", err)
	}
	gone("after re-creating the tenant id")
	// Incident ids are unique across the table: a leftover row would make
	// this ErrConflict.
	if err := s.OpenIncidents(ctx(t), []persistence.Incident{aOpen}); err != nil {
		t.Fatalf("OpenIncident with a deleted incident's id: %v", err)
	}

	// Tenant b keeps everything.
	rules, err := s.ListRules(ctx(t), b.ID)
	wantOrder(t, "b's rules", idsOf(rules, ruleKey), err, []string{"deny_burst"})
	alerts, err := s.ListAlerts(ctx(t), b.ID, persistence.AlertFilter{}, persistence.Page{Limit: 100})
	wantOrder(t, "b's alerts", idsOf(alerts, alertID), err, []string{bAlert.ID})
	sameAlert(t, "b's alert", alerts[0], bAlert)
	sameIncident(t, "b's incident", mustGetIncident(t, s, b.ID, bInc.ID), bInc)
	sum, err := s.SOCSummary(ctx(t), b.ID)
	if err != nil || sum.AlertsTotal != 1 || sum.IncidentsTotal != 1 || sum.IncidentsByStatus[persistence.IncidentOpen] != 1 {
		t.Fatalf("b's SOCSummary after deleting a = %+v, %v", sum, err)
	}
}
