package storetest

import (
	"sync"
	"testing"
	"time"

	"svc/persistence"
)

// RunCodehost runs the code-host webhook contract: a delivery is claimed
// once by tenant and id and once by digest across tenants, the one in the
// way is returned, the window forgets, concurrent claims of one delivery
// record one, and the tenants' own webhook secrets are set, replaced,
// removed, audited and deleted with their tenant.
func RunCodehost(t *testing.T, open func(t *testing.T) persistence.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s persistence.Store)
	}{
		{"a delivery is claimed once by tenant and id, and once by digest", testCodehostClaim},
		{"deliveries before the window are forgotten", testCodehostWindow},
		{"concurrent claims of one delivery record one", testCodehostConcurrentClaims},
		{"a tenant's own webhook secret is set, replaced and removed", testCodehostSecret},
		{"deleting a tenant deletes its deliveries and secret", testCodehostTenantDelete},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func delivery(tenantID, deliveryID, digest string, at time.Time) persistence.CodehostDelivery {
	return persistence.CodehostDelivery{TenantID: tenantID, DeliveryID: deliveryID, Digest: digest, EventID: id(),
		Event: "pull_request.opened", ReceivedAt: at.UTC().Truncate(time.Microsecond)}
}

// claim claims d and checks whether it was recorded and, when not, whose
// delivery was in the way.
func claim(t *testing.T, s persistence.Store, d persistence.CodehostDelivery, since time.Time, fresh bool, in persistence.CodehostDelivery) {
	t.Helper()
	got, ok, err := s.ClaimCodehostDelivery(ctx(t), d, since)
	if err != nil {
		t.Fatalf("claim %s/%s: %v", d.DeliveryID, d.Digest, err)
	}
	if ok != fresh {
		t.Fatalf("claim %s/%s recorded %v, want %v (in the way: %+v)", d.DeliveryID, d.Digest, ok, fresh, got)
	}
	if fresh {
		in = d
	}
	if got.TenantID != in.TenantID || got.DeliveryID != in.DeliveryID || got.Digest != in.Digest || got.EventID != in.EventID ||
		got.Event != in.Event || !got.ReceivedAt.Equal(in.ReceivedAt) {
		t.Fatalf("claim %s/%s returned %+v, want %+v", d.DeliveryID, d.Digest, got, in)
	}
}

func testCodehostClaim(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	now := time.Now()
	since := now.Add(-time.Hour)
	first := delivery(a.ID, "d1", "digest-1", now)
	claim(t, s, first, since, true, first)
	// The code host's retry: the same id and body.
	claim(t, s, delivery(a.ID, "d1", "digest-1", now), since, false, first)
	// The same id with another body: the first delivery is in the way.
	claim(t, s, delivery(a.ID, "d1", "digest-2", now), since, false, first)
	// The same body under a fresh id, or into another tenant.
	claim(t, s, delivery(a.ID, "d2", "digest-1", now), since, false, first)
	claim(t, s, delivery(b.ID, "d1", "digest-1", now), since, false, first)
	claim(t, s, delivery(b.ID, "d9", "digest-1", now), since, false, first)
	// Another tenant may use the same id for its own delivery.
	other := delivery(b.ID, "d1", "digest-b", now)
	claim(t, s, other, since, true, other)
	// An id of this tenant and a digest of another: the id's row first.
	claim(t, s, delivery(b.ID, "d1", "digest-1", now), since, false, other)
	fresh := delivery(a.ID, "d2", "digest-2", now)
	claim(t, s, fresh, since, true, fresh)
}

func testCodehostWindow(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	now := time.Now()
	old := delivery(a.ID, "d1", "digest-1", now.Add(-2*time.Hour))
	claim(t, s, old, now.Add(-3*time.Hour), true, old)
	// Still inside a window that reaches back to it.
	claim(t, s, delivery(a.ID, "d1", "digest-1", now), now.Add(-3*time.Hour), false, old)
	// Past it: forgotten, so the same id and digest are recorded again.
	again := delivery(a.ID, "d1", "digest-1", now)
	claim(t, s, again, now.Add(-time.Hour), true, again)
	claim(t, s, delivery(a.ID, "d2", "digest-1", now), now.Add(-time.Hour), false, again)
}

func testCodehostConcurrentClaims(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	now := time.Now()
	// Eight claims of one body: each under its own id, half of them into
	// another tenant. Exactly one records; the others see it.
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []persistence.CodehostDelivery
		seen    []persistence.CodehostDelivery
	)
	for i := range 8 {
		tenant := a.ID
		if i%2 == 1 {
			tenant = b.ID
		}
		d := delivery(tenant, "d"+string(rune('0'+i)), "digest-1", now)
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, ok, err := s.ClaimCodehostDelivery(ctx(t), d, now.Add(-time.Hour))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("claim %s: %v", d.DeliveryID, err)
			case ok:
				winners = append(winners, got)
			default:
				seen = append(seen, got)
			}
		}()
	}
	wg.Wait()
	if len(winners) != 1 || len(seen) != 7 {
		t.Fatalf("%d claims recorded, %d refused; want 1 and 7", len(winners), len(seen))
	}
	for _, d := range seen {
		if d.DeliveryID != winners[0].DeliveryID || d.EventID != winners[0].EventID {
			t.Fatalf("a refused claim saw %+v, want the winner %+v", d, winners[0])
		}
	}
}

func testCodehostSecret(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	secret := func(tenantID, want string) {
		t.Helper()
		got, err := s.CodehostWebhookSecret(ctx(t), tenantID)
		if err != nil || got != want {
			t.Fatalf("CodehostWebhookSecret(%s) = %q, %v; want %q", tenantID, got, err, want)
		}
	}
	secret(a.ID, "")
	secret(id(), "")
	if err := s.SetCodehostWebhookSecret(ctx(t), a.ID, "secret-one", time.Now(), audit(a.ID, "config_change", "tenant_settings_updated")); err != nil {
		t.Fatal(err)
	}
	secret(a.ID, "secret-one")
	secret(b.ID, "")
	if err := s.SetCodehostWebhookSecret(ctx(t), a.ID, "secret-two", time.Now()); err != nil {
		t.Fatal(err)
	}
	secret(a.ID, "secret-two")
	if err := s.SetCodehostWebhookSecret(ctx(t), a.ID, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	secret(a.ID, "")
	// Removing what is not there is not an error; an unknown tenant is.
	if err := s.SetCodehostWebhookSecret(ctx(t), a.ID, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	wantErr(t, s.SetCodehostWebhookSecret(ctx(t), id(), "secret", time.Now()), persistence.ErrNotFound)
	ev, err := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{EventType: "config_change"}, persistence.Page{Limit: 10})
	if err != nil || len(ev) != 1 || ev[0].Action != "tenant_settings_updated" {
		t.Fatalf("the audit of the change = %+v, %v", ev, err)
	}
}

func testCodehostTenantDelete(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	now := time.Now()
	if err := s.SetCodehostWebhookSecret(ctx(t), a.ID, "secret-a", now); err != nil {
		t.Fatal(err)
	}
	first := delivery(a.ID, "d1", "digest-1", now)
	claim(t, s, first, now.Add(-time.Hour), true, first)
	if err := s.DeleteTenant(ctx(t), a.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := s.CodehostWebhookSecret(ctx(t), a.ID); err != nil || got != "" {
		t.Fatalf("the deleted tenant's secret = %q, %v", got, err)
	}
	// Its delivery went with it.
	again := delivery(b.ID, "d1", "digest-1", now)
	claim(t, s, again, now.Add(-time.Hour), true, again)
}
