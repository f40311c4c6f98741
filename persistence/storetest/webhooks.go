package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"svc/persistence"
)

// RunWebhooks runs the webhook-subscription contract: create, read, list
// with pagination, update (which resets the failure count and bumps the
// revision), delete, the deliverable listing, delivery results as single
// conditional updates (status transitions, dead stays dead, stale
// revisions, concurrent results all counted), tenant isolation and tenant
// deletion.
func RunWebhooks(t *testing.T, open func(t *testing.T) persistence.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s persistence.Store)
	}{
		{"create, get and list round-trip every field", testWebhookRoundTrip},
		{"list pages newest first with offset and cursor", testWebhookPages},
		{"update applies the patch, resets failures, bumps the revision", testWebhookUpdate},
		{"delete", testWebhookDelete},
		{"other tenants' subscriptions are not found", testWebhookIsolation},
		{"delivery results move healthy, degraded, dead", testWebhookTransitions},
		{"a stale revision or a deleted subscription records nothing", testWebhookStaleRevision},
		{"deliverable lists enabled, non-dead subscriptions of the tenant", testWebhookDeliverable},
		{"concurrent delivery results all count", testWebhookConcurrentResults},
		{"deleting a tenant deletes its subscriptions", testWebhookTenantDelete},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

// whNow is now at the storage's microsecond precision.
func whNow() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func whNew(tenantID, url, minSeverity, format string, enabled bool, at time.Time) persistence.WebhookSubscription {
	return persistence.WebhookSubscription{ID: id(), TenantID: tenantID, URL: url, MinSeverity: minSeverity, Format: format,
		Enabled: enabled, DeliverySecret: "svc_whsec_" + id(), CreatedAt: at, UpdatedAt: at}
}

func whCreate(t *testing.T, s persistence.Store, w persistence.WebhookSubscription, ev ...persistence.AuditEvent) persistence.WebhookSubscription {
	t.Helper()
	got, err := s.CreateWebhook(ctx(t), w, ev...)
	if err != nil {
		t.Fatalf("CreateWebhook: %v", err)
	}
	return got
}

func whGet(t *testing.T, s persistence.Store, tenantID, id string) persistence.WebhookSubscription {
	t.Helper()
	w, err := s.GetWebhook(ctx(t), tenantID, id)
	if err != nil {
		t.Fatalf("GetWebhook %s: %v", id, err)
	}
	return w
}

func whIDs(ws []persistence.WebhookSubscription) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.ID
	}
	return out
}

func whTimeEq(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b) && a.Location() == time.UTC
}

// whSame compares every stored field but Seq, which only has to be set.
func whSame(t *testing.T, what string, got, want persistence.WebhookSubscription) {
	t.Helper()
	var bad []string
	check := func(field string, ok bool, g, w any) {
		if !ok {
			bad = append(bad, fmt.Sprintf("%s = %v, want %v", field, g, w))
		}
	}
	check("Seq", got.Seq > 0, got.Seq, "> 0")
	check("ID", got.ID == want.ID, got.ID, want.ID)
	check("TenantID", got.TenantID == want.TenantID, got.TenantID, want.TenantID)
	check("URL", got.URL == want.URL, got.URL, want.URL)
	check("MinSeverity", got.MinSeverity == want.MinSeverity, got.MinSeverity, want.MinSeverity)
	check("Format", got.Format == want.Format, got.Format, want.Format)
	check("Enabled", got.Enabled == want.Enabled, got.Enabled, want.Enabled)
	check("DeliverySecret", got.DeliverySecret == want.DeliverySecret, got.DeliverySecret, want.DeliverySecret)
	check("ConsecutiveFailures", got.ConsecutiveFailures == want.ConsecutiveFailures, got.ConsecutiveFailures, want.ConsecutiveFailures)
	check("DeliveryStatus", got.DeliveryStatus == want.DeliveryStatus, got.DeliveryStatus, want.DeliveryStatus)
	check("Revision", got.Revision == want.Revision, got.Revision, want.Revision)
	check("CreatedAt", got.CreatedAt.Equal(want.CreatedAt) && got.CreatedAt.Location() == time.UTC, got.CreatedAt, want.CreatedAt)
	check("UpdatedAt", got.UpdatedAt.Equal(want.UpdatedAt) && got.UpdatedAt.Location() == time.UTC, got.UpdatedAt, want.UpdatedAt)
	check("LastDeliveryAt", whTimeEq(got.LastDeliveryAt, want.LastDeliveryAt), got.LastDeliveryAt, want.LastDeliveryAt)
	for _, b := range bad {
		t.Errorf("%s: %s", what, b)
	}
	if len(bad) > 0 {
		t.FailNow()
	}
}

func whRecord(t *testing.T, s persistence.Store, w persistence.WebhookSubscription, ok bool, at time.Time) int {
	t.Helper()
	n, err := s.RecordWebhookDelivery(ctx(t), w.TenantID, w.ID, w.Revision, ok, at)
	if err != nil {
		t.Fatalf("RecordWebhookDelivery(ok=%v): %v", ok, err)
	}
	return n
}

func testWebhookRoundTrip(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	at := whNow().Add(-time.Minute)
	w := whNew(a.ID, "https://siem.example.com/ingest?x=1", persistence.WebhookSeverityHigh, persistence.WebhookFormatCEF, false, at)
	// Whatever the caller puts in the counters, a new subscription starts
	// healthy at revision 1.
	w.ConsecutiveFailures, w.DeliveryStatus, w.Revision = 7, persistence.WebhookDead, 99
	created := whCreate(t, s, w, audit(a.ID, "config_change", "webhook_subscription_created"))
	want := w
	want.ConsecutiveFailures, want.DeliveryStatus, want.Revision = 0, persistence.WebhookHealthy, 1
	whSame(t, "CreateWebhook result", created, want)
	whSame(t, "GetWebhook", whGet(t, s, a.ID, w.ID), want)
	list, err := s.ListWebhooks(ctx(t), a.ID, persistence.Page{Limit: 10})
	if err != nil || len(list) != 1 {
		t.Fatalf("ListWebhooks = %v, %v", whIDs(list), err)
	}
	whSame(t, "ListWebhooks[0]", list[0], want)
	evs, err := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{EventType: "config_change"}, persistence.Page{Limit: 10})
	if err != nil || len(evs) != 1 || evs[0].Action != "webhook_subscription_created" {
		t.Fatalf("the audit event must be written with the subscription: %+v, %v", evs, err)
	}
	// Same id twice: a conflict, and nothing half-written.
	_, err = s.CreateWebhook(ctx(t), w)
	wantErr(t, err, persistence.ErrConflict)
	// Unknown and malformed ids are not found.
	for _, unknown := range []string{id(), "not-a-uuid"} {
		_, err = s.GetWebhook(ctx(t), a.ID, unknown)
		wantErr(t, err, persistence.ErrNotFound)
	}
}

func testWebhookPages(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	var made []string
	for i := range 5 {
		w := whCreate(t, s, whNew(a.ID, fmt.Sprintf("https://h%d.example.com/", i), persistence.WebhookSeverityInfo,
			persistence.WebhookFormatJSON, true, whNow()))
		made = append(made, w.ID)
	}
	newest := slices.Clone(made)
	slices.Reverse(newest)
	all, err := s.ListWebhooks(ctx(t), a.ID, persistence.Page{Limit: 10})
	if err != nil || !slices.Equal(whIDs(all), newest) {
		t.Fatalf("ListWebhooks = %v, %v; want newest first %v", whIDs(all), err, newest)
	}
	// Limit+1 rows are read so that the caller can tell more follow.
	first, err := s.ListWebhooks(ctx(t), a.ID, persistence.Page{Limit: 2})
	if err != nil || !slices.Equal(whIDs(first), newest[:3]) {
		t.Fatalf("page 1 = %v, %v; want %v", whIDs(first), err, newest[:3])
	}
	off, err := s.ListWebhooks(ctx(t), a.ID, persistence.Page{Limit: 2, Offset: 2})
	if err != nil || !slices.Equal(whIDs(off), newest[2:5]) {
		t.Fatalf("offset page = %v, %v; want %v", whIDs(off), err, newest[2:5])
	}
	after, err := s.ListWebhooks(ctx(t), a.ID, persistence.Page{Limit: 2, After: first[1].Seq})
	if err != nil || !slices.Equal(whIDs(after), newest[2:5]) {
		t.Fatalf("cursor page = %v, %v; want %v", whIDs(after), err, newest[2:5])
	}
}

func testWebhookUpdate(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	at := whNow().Add(-time.Hour)
	w := whCreate(t, s, whNew(a.ID, "https://old.example.com/", persistence.WebhookSeverityInfo, persistence.WebhookFormatJSON, true, at))
	for range 3 {
		whRecord(t, s, w, false, at.Add(time.Second))
	}
	delivered := at.Add(time.Second)

	// An empty patch changes no field but still resets and bumps.
	t1 := at.Add(time.Minute)
	got, err := s.UpdateWebhook(ctx(t), a.ID, w.ID, persistence.WebhookPatch{}, t1, audit(a.ID, "config_change", "webhook_subscription_updated"))
	if err != nil {
		t.Fatalf("UpdateWebhook: %v", err)
	}
	want := w
	want.Revision, want.UpdatedAt, want.LastDeliveryAt = 2, t1, &delivered
	whSame(t, "after an empty patch", got, want)

	// Every field at once.
	t2 := at.Add(2 * time.Minute)
	url, sev, format, enabled := "https://new.example.com/x", persistence.WebhookSeverityHigh, persistence.WebhookFormatCEF, false
	whRecord(t, s, got, false, t1)
	got, err = s.UpdateWebhook(ctx(t), a.ID, w.ID, persistence.WebhookPatch{URL: &url, MinSeverity: &sev, Format: &format, Enabled: &enabled}, t2)
	if err != nil {
		t.Fatalf("UpdateWebhook: %v", err)
	}
	want.URL, want.MinSeverity, want.Format, want.Enabled = url, sev, format, enabled
	want.Revision, want.UpdatedAt, want.LastDeliveryAt = 3, t2, &t1
	whSame(t, "after a full patch", got, want)
	whSame(t, "GetWebhook after the patch", whGet(t, s, a.ID, w.ID), want)

	// One field; the others stay.
	enabled = true
	got, err = s.UpdateWebhook(ctx(t), a.ID, w.ID, persistence.WebhookPatch{Enabled: &enabled}, t2)
	if err != nil || !got.Enabled || got.URL != url || got.Format != format || got.Revision != 4 {
		t.Fatalf("single-field patch = %+v, %v", got, err)
	}
	_, err = s.UpdateWebhook(ctx(t), a.ID, id(), persistence.WebhookPatch{}, t2, audit(a.ID, "config_change", "webhook_subscription_updated"))
	wantErr(t, err, persistence.ErrNotFound)
	evs, err := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{EventType: "config_change"}, persistence.Page{Limit: 10})
	if err != nil || len(evs) != 1 {
		t.Fatalf("audit events = %d, %v; want the one of the successful update with audit (not the failed one's)", len(evs), err)
	}
}

func testWebhookDelete(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	keep := whCreate(t, s, whNew(a.ID, "https://keep.example.com/", "info", "json", true, whNow()))
	w := whCreate(t, s, whNew(a.ID, "https://gone.example.com/", "info", "json", true, whNow()))
	if err := s.DeleteWebhook(ctx(t), a.ID, w.ID, audit(a.ID, "config_change", "webhook_subscription_deleted")); err != nil {
		t.Fatalf("DeleteWebhook: %v", err)
	}
	_, err := s.GetWebhook(ctx(t), a.ID, w.ID)
	wantErr(t, err, persistence.ErrNotFound)
	wantErr(t, s.DeleteWebhook(ctx(t), a.ID, w.ID), persistence.ErrNotFound)
	list, err := s.ListWebhooks(ctx(t), a.ID, persistence.Page{Limit: 10})
	if err != nil || !slices.Equal(whIDs(list), []string{keep.ID}) {
		t.Fatalf("ListWebhooks after delete = %v, %v", whIDs(list), err)
	}
}

func testWebhookIsolation(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	w := whCreate(t, s, whNew(a.ID, "https://a.example.com/", "info", "json", true, whNow()))
	_, err := s.GetWebhook(ctx(t), b.ID, w.ID)
	wantErr(t, err, persistence.ErrNotFound)
	url := "https://b.example.com/"
	_, err = s.UpdateWebhook(ctx(t), b.ID, w.ID, persistence.WebhookPatch{URL: &url}, whNow())
	wantErr(t, err, persistence.ErrNotFound)
	wantErr(t, s.DeleteWebhook(ctx(t), b.ID, w.ID), persistence.ErrNotFound)
	_, err = s.RecordWebhookDelivery(ctx(t), b.ID, w.ID, w.Revision, false, whNow())
	wantErr(t, err, persistence.ErrNotFound)
	for _, list := range []func() ([]persistence.WebhookSubscription, error){
		func() ([]persistence.WebhookSubscription, error) {
			return s.ListWebhooks(ctx(t), b.ID, persistence.Page{Limit: 10})
		},
		func() ([]persistence.WebhookSubscription, error) { return s.DeliverableWebhooks(ctx(t), b.ID) },
	} {
		got, err := list()
		if err != nil || len(got) != 0 {
			t.Fatalf("tenant b lists %v, %v", whIDs(got), err)
		}
	}
	whSame(t, "tenant a's row after tenant b's attempts", whGet(t, s, a.ID, w.ID), w)
}

func testWebhookTransitions(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	w := whCreate(t, s, whNew(a.ID, "https://a.example.com/", "info", "json", true, whNow()))
	status := func() (int, string) {
		got := whGet(t, s, a.ID, w.ID)
		return got.ConsecutiveFailures, got.DeliveryStatus
	}
	if n, st := status(); n != 0 || st != persistence.WebhookHealthy || whGet(t, s, a.ID, w.ID).LastDeliveryAt != nil {
		t.Fatalf("new subscription: %d %s, want 0 healthy and no last delivery", n, st)
	}
	at := whNow()
	if n := whRecord(t, s, w, false, at); n != 1 {
		t.Fatalf("first failure returned %d, want 1", n)
	}
	if n, st := status(); n != 1 || st != persistence.WebhookDegraded {
		t.Fatalf("after one failure: %d %s, want 1 degraded", n, st)
	}
	if got := whGet(t, s, a.ID, w.ID).LastDeliveryAt; got == nil || !got.Equal(at) {
		t.Fatalf("last_delivery_at = %v, want %v", got, at)
	}
	// A success resets.
	at2 := at.Add(time.Second)
	if n := whRecord(t, s, w, true, at2); n != 0 {
		t.Fatalf("success returned %d, want 0", n)
	}
	if n, st := status(); n != 0 || st != persistence.WebhookHealthy {
		t.Fatalf("after a success: %d %s, want 0 healthy", n, st)
	}
	if got := whGet(t, s, a.ID, w.ID).LastDeliveryAt; got == nil || !got.Equal(at2) {
		t.Fatalf("last_delivery_at = %v, want %v", got, at2)
	}
	// Degraded up to 9, dead at 10.
	for i := 1; i < persistence.WebhookDeadAfter; i++ {
		if n := whRecord(t, s, w, false, at2); n != i {
			t.Fatalf("failure %d returned %d", i, n)
		}
		if _, st := status(); st != persistence.WebhookDegraded {
			t.Fatalf("after %d failures: %s, want degraded", i, st)
		}
	}
	if n := whRecord(t, s, w, false, at2); n != persistence.WebhookDeadAfter {
		t.Fatalf("failure 10 returned %d", n)
	}
	if n, st := status(); n != 10 || st != persistence.WebhookDead {
		t.Fatalf("after 10 failures: %d %s, want 10 dead", n, st)
	}
	// A success that was in flight does not revive a dead subscription.
	if n := whRecord(t, s, w, true, at2); n != persistence.WebhookDeadAfter {
		t.Fatalf("success on a dead subscription returned %d, want it to stay 10", n)
	}
	if _, st := status(); st != persistence.WebhookDead {
		t.Fatalf("a success revived a dead subscription: %s", st)
	}
	// An update does.
	got, err := s.UpdateWebhook(ctx(t), a.ID, w.ID, persistence.WebhookPatch{}, whNow())
	if err != nil || got.ConsecutiveFailures != 0 || got.DeliveryStatus != persistence.WebhookHealthy {
		t.Fatalf("update of a dead subscription = %d %s, %v; want 0 healthy", got.ConsecutiveFailures, got.DeliveryStatus, err)
	}
	for _, c := range []struct {
		n    int
		want string
	}{{0, "healthy"}, {1, "degraded"}, {9, "degraded"}, {10, "dead"}, {11, "dead"}} {
		if got := persistence.WebhookDeliveryStatus(c.n); got != c.want {
			t.Errorf("WebhookDeliveryStatus(%d) = %s, want %s", c.n, got, c.want)
		}
	}
}

func testWebhookStaleRevision(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	w := whCreate(t, s, whNew(a.ID, "https://old.example.com/", "info", "json", true, whNow()))
	url := "https://new.example.com/"
	updated, err := s.UpdateWebhook(ctx(t), a.ID, w.ID, persistence.WebhookPatch{URL: &url}, whNow())
	if err != nil || updated.Revision != w.Revision+1 {
		t.Fatalf("UpdateWebhook = rev %d, %v", updated.Revision, err)
	}
	// A delivery to the old URL, started before the update, finishes after.
	for _, ok := range []bool{false, true} {
		_, err = s.RecordWebhookDelivery(ctx(t), a.ID, w.ID, w.Revision, ok, whNow())
		wantErr(t, err, persistence.ErrNotFound)
	}
	whSame(t, "after stale results", whGet(t, s, a.ID, w.ID), updated)
	if err := s.DeleteWebhook(ctx(t), a.ID, w.ID); err != nil {
		t.Fatal(err)
	}
	_, err = s.RecordWebhookDelivery(ctx(t), a.ID, w.ID, updated.Revision, false, whNow())
	wantErr(t, err, persistence.ErrNotFound)
}

func testWebhookDeliverable(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	on1 := whCreate(t, s, whNew(a.ID, "https://1.example.com/", "info", "json", true, whNow()))
	off := whCreate(t, s, whNew(a.ID, "https://2.example.com/", "info", "json", false, whNow()))
	dead := whCreate(t, s, whNew(a.ID, "https://3.example.com/", "high", "cef", true, whNow()))
	degraded := whCreate(t, s, whNew(a.ID, "https://4.example.com/", "high", "json", true, whNow()))
	whCreate(t, s, whNew(b.ID, "https://5.example.com/", "info", "json", true, whNow()))
	for range persistence.WebhookDeadAfter {
		whRecord(t, s, dead, false, whNow())
	}
	for range persistence.WebhookDeadAfter - 1 {
		whRecord(t, s, degraded, false, whNow())
	}
	got, err := s.DeliverableWebhooks(ctx(t), a.ID)
	if err != nil || !slices.Equal(whIDs(got), []string{on1.ID, degraded.ID}) {
		t.Fatalf("DeliverableWebhooks = %v, %v; want the enabled non-dead ones oldest first %v (not %s disabled, %s dead)",
			whIDs(got), err, []string{on1.ID, degraded.ID}, off.ID, dead.ID)
	}
	if got[1].DeliverySecret != degraded.DeliverySecret || got[1].ConsecutiveFailures != 9 || got[1].Revision != 1 {
		t.Fatalf("deliverable row lacks what delivery needs: %+v", got[1])
	}
	// Reviving the dead one and enabling the disabled one make them deliverable.
	enable := true
	for _, w := range []persistence.WebhookSubscription{off, dead} {
		if _, err := s.UpdateWebhook(ctx(t), a.ID, w.ID, persistence.WebhookPatch{Enabled: &enable}, whNow()); err != nil {
			t.Fatal(err)
		}
	}
	got, err = s.DeliverableWebhooks(ctx(t), a.ID)
	if err != nil || len(got) != 4 {
		t.Fatalf("after the updates DeliverableWebhooks = %v, %v; want all four", whIDs(got), err)
	}
}

func testWebhookConcurrentResults(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	w := whCreate(t, s, whNew(a.ID, "https://a.example.com/", "info", "json", true, whNow()))
	const n = 40
	c := ctx(t)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				_, err := s.RecordWebhookDelivery(c, a.ID, w.ID, w.Revision, false, whNow())
				if errors.Is(err, persistence.ErrBusy) {
					continue // SQLite's writer was busy: the result is retried, as the exporter would
				}
				errs <- err
				return
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("RecordWebhookDelivery: %v", err)
		}
	}
	got := whGet(t, s, a.ID, w.ID)
	if got.ConsecutiveFailures != n || got.DeliveryStatus != persistence.WebhookDead {
		t.Fatalf("after %d concurrent failures: %d %s; every result must count", n, got.ConsecutiveFailures, got.DeliveryStatus)
	}
}

func testWebhookTenantDelete(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	aw := whCreate(t, s, whNew(a.ID, "https://a.example.com/", "info", "json", true, whNow()))
	bw := whCreate(t, s, whNew(b.ID, "https://b.example.com/", "info", "json", true, whNow()))
	if err := s.DeleteTenant(ctx(t), a.ID); err != nil {
		t.Fatal(err)
	}
	_, err := s.GetWebhook(ctx(t), a.ID, aw.ID)
	wantErr(t, err, persistence.ErrNotFound)
	if got, err := s.DeliverableWebhooks(ctx(t), a.ID); err != nil || len(got) != 0 {
		t.Fatalf("the deleted tenant still has deliverable subscriptions: %v, %v", whIDs(got), err)
	}
	whSame(t, "the other tenant's subscription", whGet(t, s, b.ID, bw.ID), bw)
}
