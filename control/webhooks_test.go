package control_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"svc/actors"
	"svc/broadcast"
	"svc/config"
	"svc/control"
	"svc/messages"
	"svc/outbound"
	"svc/persistence"
	"svc/persistence/sharedstate"
)

// opsPlane is a plane over the fixture's SQLite store whose webhook, rule
// and incident writes fail with failWith while it is set, with a real
// invalidation hub whose drops are recorded together with the number of
// audit events committed when each arrived (so a drop before the commit
// shows).
type opsPlane struct {
	f        *fixture
	plane    *control.Plane
	store    *opsStore
	registry *actors.Registry
	drops    *opsDrops
}

type opsStore struct {
	persistence.Store
	mu       sync.Mutex
	failWith error
}

func (s *opsStore) setFail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failWith = err
}

func (s *opsStore) fail() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failWith
}

func (s *opsStore) CreateWebhook(ctx context.Context, w persistence.WebhookSubscription, audit ...persistence.AuditEvent) (persistence.WebhookSubscription, error) {
	if err := s.fail(); err != nil {
		return persistence.WebhookSubscription{}, err
	}
	return s.Store.CreateWebhook(ctx, w, audit...)
}

func (s *opsStore) UpdateWebhook(ctx context.Context, tenantID, id string, p persistence.WebhookPatch, at time.Time, audit ...persistence.AuditEvent) (persistence.WebhookSubscription, error) {
	if err := s.fail(); err != nil {
		return persistence.WebhookSubscription{}, err
	}
	return s.Store.UpdateWebhook(ctx, tenantID, id, p, at, audit...)
}

func (s *opsStore) DeleteWebhook(ctx context.Context, tenantID, id string, audit ...persistence.AuditEvent) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.DeleteWebhook(ctx, tenantID, id, audit...)
}

func (s *opsStore) PutRule(ctx context.Context, r persistence.CustomRule, audit ...persistence.AuditEvent) (persistence.CustomRule, error) {
	if err := s.fail(); err != nil {
		return persistence.CustomRule{}, err
	}
	return s.Store.PutRule(ctx, r, audit...)
}

func (s *opsStore) DeleteRule(ctx context.Context, tenantID, key string, audit ...persistence.AuditEvent) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.DeleteRule(ctx, tenantID, key, audit...)
}

func (s *opsStore) CloseIncident(ctx context.Context, tenantID, id string, reason *string, at time.Time, audit ...persistence.AuditEvent) (persistence.Incident, error) {
	if err := s.fail(); err != nil {
		return persistence.Incident{}, err
	}
	return s.Store.CloseIncident(ctx, tenantID, id, reason, at, audit...)
}

// opsDrops records each invalidation as "<kind> <tenant> <key> after <n>
// audit events".
type opsDrops struct {
	mu  sync.Mutex
	got []string
}

func (d *opsDrops) add(s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, s)
}

func (d *opsDrops) take() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.got
	d.got = nil
	return out
}

func newOpsPlane(t *testing.T, allowPrivate bool) *opsPlane {
	t.Helper()
	f := newFixture(t)
	shared := sharedstate.NewMemory()
	t.Cleanup(func() { _ = shared.Close() })
	hub := broadcast.NewInvalidations(shared, hclog.NewNullLogger())
	o := &opsPlane{f: f, store: &opsStore{Store: f.store.Store}, registry: actors.NewRegistry(), drops: &opsDrops{}}
	hub.Subscribe(func(inv messages.Invalidation) {
		// The drop runs on the writer's goroutine: what the store shows now
		// is what was committed before it.
		n := -1
		if evs, err := f.store.ListAudit(context.Background(), f.op.TenantID, persistence.AuditFilter{}, persistence.Page{Limit: 100}); err == nil {
			n = len(evs)
		}
		o.drops.add(fmt.Sprintf("%s %s %s after %d", inv.Kind, inv.TenantID, inv.Key, n))
	}, messages.CacheWebhooks, messages.CacheSOCRules)
	o.plane = control.New(control.Deps{Config: &config.Config{AllowPrivateTargets: allowPrivate}, Store: o.store, Registry: o.registry,
		Invalidations: hub})
	return o
}

func (o *opsPlane) health(t *testing.T) actors.State {
	t.Helper()
	c, ok := o.registry.Get(control.ComponentAuditWriter)
	if !ok {
		t.Fatal("no audit writer health entry")
	}
	return c.State
}

// wantDrops checks the drops since the last call: one of kind for the
// fixture's tenant per committed change, each after that change's audit
// event (the audit counts given) was committed.
func (o *opsPlane) wantDrops(t *testing.T, kind messages.CacheKind, auditCounts ...int) {
	t.Helper()
	var want []string
	for _, n := range auditCounts {
		want = append(want, fmt.Sprintf("%s %s - after %d", kind, o.f.op.TenantID, n))
	}
	if got := o.drops.take(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("cache drops %q, want %q", got, want)
	}
}

func ptr[T any](v T) *T { return &v }

// Creating, updating and deleting a subscription: each records its
// config_change event (never the URL's path or the secret) in the write,
// drops the exporter's cache once committed, and marks the audit writer
// ok; unknown subscriptions are NotFound and drop nothing.
func TestWebhookChanges(t *testing.T) {
	o := newOpsPlane(t, false)
	ctx := context.Background()
	created, secret, err := o.plane.CreateWebhook(ctx, o.f.op, control.WebhookSettings{URL: ptr("https://siem.example.com/in?key=s3cret")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, control.DeliveryKeyPrefix) || created.MinSeverity != persistence.WebhookSeverityInfo ||
		created.Format != persistence.WebhookFormatJSON || !created.Enabled || created.TenantID != o.f.op.TenantID {
		t.Fatalf("created %+v with secret %q", created, secret)
	}
	ev := o.f.audit(t)[0]
	if ev.EventType != "config_change" || ev.Action != "webhook_subscription_created" || ev.Actor != "operator:test" ||
		fmt.Sprint(ev.Details) != fmt.Sprintf("map[action:webhook_subscription_created enabled:true format:json min_severity:info subscription_id:%s url_host:siem.example.com]", created.ID) {
		t.Fatalf("create event %+v", ev)
	}
	o.wantDrops(t, messages.CacheWebhooks, 1)

	updated, err := o.plane.UpdateWebhook(ctx, o.f.op, created.ID, control.WebhookSettings{MinSeverity: ptr(" HIGH"), Format: ptr("CEF"),
		Enabled: ptr(false)})
	if err != nil || updated.MinSeverity != "high" || updated.Format != "cef" || updated.Enabled {
		t.Fatalf("update: %+v %v", updated, err)
	}
	ev = o.f.audit(t)[0]
	if ev.Action != "webhook_subscription_updated" ||
		fmt.Sprint(ev.Details) != fmt.Sprintf("map[action:webhook_subscription_updated enabled:false format:cef min_severity:high subscription_id:%s]", created.ID) {
		t.Fatalf("update event %+v", ev)
	}
	if _, err := o.plane.UpdateWebhook(ctx, o.f.op, created.ID, control.WebhookSettings{URL: ptr("http://hooks.example.com:8080/x")}); err != nil {
		t.Fatal(err)
	}
	if ev = o.f.audit(t)[0]; ev.Details["url_host"] != "hooks.example.com:8080" {
		t.Fatalf("url update event %+v", ev)
	}
	o.wantDrops(t, messages.CacheWebhooks, 2, 3)

	unknown := uuid.NewString()
	if _, err := o.plane.UpdateWebhook(ctx, o.f.op, unknown, control.WebhookSettings{}); refusal(t, err).Kind != control.NotFound ||
		refusal(t, err).What != "webhook subscription" {
		t.Fatalf("update of an unknown subscription: %v", err)
	}
	if r := refusal(t, o.plane.DeleteWebhook(ctx, o.f.op, unknown)); r.Kind != control.NotFound || r.What != "webhook subscription" {
		t.Fatalf("delete of an unknown subscription: %+v", r)
	}
	other := control.Operator{TenantID: uuid.NewString(), Actor: "operator:x"}
	if r := refusal(t, o.plane.DeleteWebhook(ctx, other, created.ID)); r.Kind != control.NotFound {
		t.Fatalf("another tenant's subscription: %+v", r)
	}
	o.wantDrops(t, messages.CacheWebhooks)

	if err := o.plane.DeleteWebhook(ctx, o.f.op, created.ID); err != nil {
		t.Fatal(err)
	}
	if ev = o.f.audit(t)[0]; ev.Action != "webhook_subscription_deleted" || ev.Details["subscription_id"] != created.ID {
		t.Fatalf("delete event %+v", ev)
	}
	o.wantDrops(t, messages.CacheWebhooks, 4)
	if _, err := o.f.store.GetWebhook(ctx, o.f.op.TenantID, created.ID); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("the deleted subscription reads %v", err)
	}
}

// The settings a subscription may not take are refused before anything is
// written, naming the field; an address outbound requests may not reach
// is forbidden_target.
func TestWebhookRefusals(t *testing.T) {
	strict, lenient := newOpsPlane(t, false), newOpsPlane(t, true)
	ctx := context.Background()
	long := "https://e.com/" + strings.Repeat("a", 2048)
	for _, c := range []struct {
		name          string
		allowPrivate  bool
		settings      control.WebhookSettings
		field, code   string
		message       string
		wantForbidden bool
	}{
		{name: "no url", settings: control.WebhookSettings{}, field: "url", code: "invalid_field", message: "is required"},
		{name: "blank url", settings: control.WebhookSettings{URL: ptr(" ")}, field: "url", code: "invalid_field", message: "is required"},
		{name: "too long", settings: control.WebhookSettings{URL: &long}, field: "url", code: "invalid_field", message: "must be at most 2048 bytes"},
		{name: "white space", settings: control.WebhookSettings{URL: ptr("https://e.com/a b")}, field: "url", code: "invalid_field",
			message: "must not contain white space"},
		{name: "relative", settings: control.WebhookSettings{URL: ptr("/hook")}, field: "url", code: "invalid_field",
			message: "must be an absolute http or https URL"},
		{name: "ftp", settings: control.WebhookSettings{URL: ptr("ftp://e.com/x")}, field: "url", code: "invalid_field",
			message: `scheme must be http or https, not "ftp"`},
		{name: "no host", settings: control.WebhookSettings{URL: ptr("https:///x")}, field: "url", code: "invalid_field", message: "must name a host"},
		{name: "loopback", settings: control.WebhookSettings{URL: ptr("http://127.0.0.1:9/x")}, field: "url", code: "forbidden_target",
			message: "httpapi: outbound target address not allowed: 127.0.0.1 is loopback or private (SVC_ALLOW_PRIVATE_TARGETS is false)"},
		{name: "localhost", settings: control.WebhookSettings{URL: ptr("http://api.localhost/x")}, field: "url", code: "forbidden_target",
			message: "httpapi: outbound target address not allowed: api.localhost is loopback (SVC_ALLOW_PRIVATE_TARGETS is false)"},
		{name: "private v6", settings: control.WebhookSettings{URL: ptr("http://[fd00::1]/")}, field: "url", code: "forbidden_target",
			message: "httpapi: outbound target address not allowed: fd00::1 is loopback or private (SVC_ALLOW_PRIVATE_TARGETS is false)"},
		{name: "metadata even when private is allowed", allowPrivate: true, settings: control.WebhookSettings{URL: ptr("http://169.254.169.254/latest")},
			field: "url", code: "forbidden_target",
			message: "httpapi: outbound target address not allowed: 169.254.169.254 is link-local, multicast or unspecified"},
		{name: "min_severity", settings: control.WebhookSettings{URL: ptr("https://e.com"), MinSeverity: ptr("medium")}, field: "min_severity",
			code: "invalid_field", message: "must be info or high"},
		{name: "format", settings: control.WebhookSettings{URL: ptr("https://e.com"), Format: ptr("")}, field: "format", code: "invalid_field",
			message: "must be json or cef"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := strict
			if c.allowPrivate {
				o = lenient
			}
			before := len(o.f.audit(t))
			_, _, err := o.plane.CreateWebhook(ctx, o.f.op, c.settings)
			r := refusal(t, err)
			if r.Kind != control.Invalid || r.Field != c.field || r.Message != c.message {
				t.Fatalf("refusal %+v", r)
			}
			if code := r.Code; c.code == "forbidden_target" && (code != c.code || r.Details["error"] != c.code) {
				t.Fatalf("refusal %+v, want %s", r, c.code)
			}
			if n := len(o.f.audit(t)); n != before {
				t.Fatalf("a refused change recorded %d audit events", n-before)
			}
			o.wantDrops(t, messages.CacheWebhooks)
		})
	}
	// With SVC_ALLOW_PRIVATE_TARGETS, loopback and private addresses are
	// admitted; an update is admitted as a creation is.
	w, _, err := lenient.plane.CreateWebhook(ctx, lenient.f.op, control.WebhookSettings{URL: ptr("http://127.0.0.1:9/x")})
	if err != nil {
		t.Fatalf("loopback with private targets allowed: %v", err)
	}
	if _, err := strict.plane.UpdateWebhook(ctx, strict.f.op, w.ID, control.WebhookSettings{URL: ptr("http://10.0.0.1/")}); refusal(t, err).Field != "url" {
		t.Fatalf("update to a private address: %v", err)
	}
}

// A write that fails for storage reasons marks the audit writer degraded
// and drops nothing; the next success marks it ok.
func TestWebhookStorageFailure(t *testing.T) {
	o := newOpsPlane(t, false)
	ctx := context.Background()
	w, _, err := o.plane.CreateWebhook(ctx, o.f.op, control.WebhookSettings{URL: ptr("https://e.com/")})
	if err != nil {
		t.Fatal(err)
	}
	o.drops.take()
	o.store.setFail(fmt.Errorf("write: %w", persistence.ErrUnavailable))
	for name, err := range map[string]error{
		"create": func() error {
			_, _, err := o.plane.CreateWebhook(ctx, o.f.op, control.WebhookSettings{URL: ptr("https://e.com/")})
			return err
		}(),
		"update": func() error {
			_, err := o.plane.UpdateWebhook(ctx, o.f.op, w.ID, control.WebhookSettings{})
			return err
		}(),
		"delete": o.plane.DeleteWebhook(ctx, o.f.op, w.ID),
	} {
		if !errors.Is(err, persistence.ErrUnavailable) {
			t.Fatalf("%s while the store fails: %v", name, err)
		}
	}
	if got := o.health(t); got != actors.StateDegraded {
		t.Fatalf("health after storage failures %q", got)
	}
	o.wantDrops(t, messages.CacheWebhooks)
	o.store.setFail(nil)
	if _, err := o.plane.UpdateWebhook(ctx, o.f.op, w.ID, control.WebhookSettings{}); err != nil {
		t.Fatal(err)
	}
	if got := o.health(t); got != actors.StateOK {
		t.Fatalf("health after a success %q", got)
	}
	o.wantDrops(t, messages.CacheWebhooks, 2)
}

// The outbound address rules of target admission.
func TestCheckTargetHost(t *testing.T) {
	tests := []struct {
		name         string
		host         string
		allowPrivate bool
		refused      bool
	}{
		{name: "public address", host: "93.184.216.34"},
		{name: "a name is left to the dial-time check", host: "hooks.example.com"},
		{name: "metadata", host: "169.254.169.254", allowPrivate: true, refused: true},
		{name: "IPv6 link-local", host: "fe80::1", allowPrivate: true, refused: true},
		{name: "unspecified", host: "0.0.0.0", allowPrivate: true, refused: true},
		{name: "multicast", host: "224.0.0.1", allowPrivate: true, refused: true},
		{name: "loopback", host: "127.0.0.1", refused: true},
		{name: "loopback allowed", host: "127.0.0.1", allowPrivate: true},
		{name: "IPv6 loopback", host: "::1", refused: true},
		{name: "IPv4-mapped loopback", host: "::ffff:127.0.0.1", refused: true},
		{name: "private", host: "10.1.2.3", refused: true},
		{name: "shared", host: "100.64.0.1", refused: true},
		{name: "localhost", host: "LocalHost.", refused: true},
		{name: "a .localhost name", host: "api.localhost", refused: true},
		{name: "localhost allowed", host: "localhost", allowPrivate: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := outbound.CheckTargetHost(tc.host, tc.allowPrivate)
			if (err != nil) != tc.refused {
				t.Fatalf("CheckTargetHost(%q, %v) = %v, want refused %v", tc.host, tc.allowPrivate, err, tc.refused)
			}
			if err != nil && !errors.Is(err, outbound.ErrForbiddenTarget) {
				t.Fatalf("error %v is not ErrForbiddenTarget", err)
			}
		})
	}
}
