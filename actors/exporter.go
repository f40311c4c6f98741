package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"svc/messages"
	"svc/persistence"
	"svc/webhooksign"
)

// Headers of a webhook-export delivery, beside its signature in
// webhooksign.Header (the HMAC-SHA256 of the body under the subscription's
// delivery secret).
const (
	// ExportDeliveryHeader is a UUID per delivery, the same on each of its
	// attempts, so that a receiver can drop a repeated attempt.
	ExportDeliveryHeader = "X-Svc-Delivery-ID"
	// ExportSubscriptionHeader names the subscription, so that a receiver
	// of several knows which secret verifies the signature.
	ExportSubscriptionHeader = "X-Svc-Subscription-ID"
)

// Exporter defaults (SPEC 6.5).
const (
	defaultExportAttempts    = 3
	defaultExportBackoff     = 200 * time.Millisecond
	defaultExportTimeout     = 5 * time.Second
	defaultExportMaxInFlight = 32
	defaultExportCacheTTL    = 5 * time.Second
	// exportMaxWaiting bounds the exports of one tenant that wait while its
	// subscriptions load; more are dropped.
	exportMaxWaiting = 1024
	// exportMaxTenants bounds the cached tenants; past it, expired entries
	// are swept.
	exportMaxTenants = 10_000
)

// ExportPost sends one delivery body to target with the given headers and
// returns the answer's HTTP status (0 when there was none). The transport
// layer provides it (outbound.ExportPoster): actors do no HTTP
// themselves. Errors must not carry the target URL.
type ExportPost func(ctx context.Context, target string, body []byte, header map[string]string) (int, error)

// ExporterOptions configures the webhook exporter. Zero values take the
// defaults.
type ExporterOptions struct {
	// Post delivers one attempt. Nil disables the exporter: it ignores
	// every trigger.
	Post ExportPost
	// Attempts per delivery (default 3), the first Backoff after the first
	// failure (default 200 ms, doubling: 200 ms, 400 ms), and the Timeout
	// of each attempt (default 5 s).
	Attempts int
	Backoff  time.Duration
	Timeout  time.Duration
	// MaxInFlight bounds concurrent deliveries (default 32); beyond it a
	// delivery is dropped and counted.
	MaxInFlight int
	// CacheTTL is how long a tenant's subscriptions are used without a
	// database read (default 5 s). Changes made through the API invalidate
	// them at once on every node (ExporterHandle.Invalidate).
	CacheTTL time.Duration
	// Version is the device version of CEF lines (the build version).
	Version string
	// Died, when set, is called (off the mailbox) each time a recorded
	// delivery result leaves a subscription dead. The node broadcasts it
	// as a webhooks invalidation, so that other nodes, whose cached copy
	// still counts fewer failures, stop delivering to it at once instead
	// of after their CacheTTL.
	Died func(tenantID, subscriptionID string)
	// Now is the exporter's clock (default time.Now).
	Now func() time.Time
	// Sleep waits out a backoff, or returns ctx's error (tests record the
	// waits instead).
	Sleep func(ctx context.Context, d time.Duration) error
}

// exporter is the webhook-export actor (SPEC 6.5). It sees the chat
// notifier's triggers: subscribed to the event bus, it takes every deny
// and require_approval decision, and it is sent the SOC pipeline's
// Notifications of HIGH alerts and incidents. For each, it picks the
// tenant's enabled, non-dead subscriptions whose min_severity admits the
// export and starts one detached delivery per subscription (up to Attempts
// signed POSTs with backoff). Each delivery's final result is recorded in
// the store by one conditional update, which moves the subscription
// between healthy, degraded and dead; a dead subscription gets nothing
// until it is updated.
//
// The tenant's subscriptions are cached for CacheTTL and invalidated
// through the ExporterHandle; loading them runs off the mailbox, and the
// tenant's exports wait for the load in order. Nothing here ever blocks
// authorize: triggers arrive through the non-blocking bus or a Send.
type exporter struct {
	store  persistence.WebhookStore
	opts   ExporterOptions
	handle *ExporterHandle
	log    hclog.Logger

	// ctx is cancelled when the actor stops, abandoning open deliveries.
	ctx    context.Context
	cancel context.CancelFunc

	tenants  map[string]*exportTenant
	inFlight int
}

// exportTenant is one tenant's cached subscriptions.
type exportTenant struct {
	subs     []persistence.WebhookSubscription
	gen      uint64
	loadedAt time.Time
	loading  bool
	waiting  []Export
	// dead holds the subscriptions (id → revision) a recorded delivery
	// found dead. Dead is final until an update bumps the revision, so a
	// load whose read preceded that record, and still lists them as
	// deliverable, is corrected instead of reviving them.
	dead map[string]int64
}

// exportLoaded brings a tenant's subscriptions back to the actor.
type exportLoaded struct {
	owner    *exporter
	tenantID string
	subs     []persistence.WebhookSubscription
	err      error
}

// exportDone reports a finished delivery back to the actor.
type exportDone struct {
	owner    *exporter
	tenantID string
	subID    string
	revision int64
	// ok is the delivery's result; abandoned when the actor stopped
	// while it ran.
	ok        bool
	abandoned bool
	// failures is the subscription's count after this result; recorded
	// false when the store did not take it (the subscription was updated
	// or deleted meanwhile, or the database failed).
	failures int
	recorded bool
}

// NewExporter returns the producer of the exporter actor. handle may be
// nil.
func NewExporter(store persistence.WebhookStore, handle *ExporterHandle, opts ExporterOptions, log hclog.Logger) actor.Producer {
	if opts.Attempts <= 0 {
		opts.Attempts = defaultExportAttempts
	}
	if opts.Backoff <= 0 {
		opts.Backoff = defaultExportBackoff
	}
	if opts.Timeout <= 0 {
		opts.Timeout = defaultExportTimeout
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = defaultExportMaxInFlight
	}
	if opts.CacheTTL <= 0 {
		opts.CacheTTL = defaultExportCacheTTL
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Sleep == nil {
		opts.Sleep = sleepContext
	}
	if handle == nil {
		handle = &ExporterHandle{}
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return func() actor.Actor {
		return &exporter{store: store, opts: opts, handle: handle, log: log}
	}
}

// Receive implements actor.Actor.
func (x *exporter) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		x.ctx, x.cancel = context.WithCancel(context.Background())
		x.tenants = map[string]*exportTenant{}
	case *messages.AseEvent:
		if e, ok := ExportFromEvent(m); ok {
			x.export(ctx, e)
		}
	case *messages.Notification:
		x.export(ctx, ExportFromNotification(*m))
	case exportLoaded:
		x.loaded(ctx, m)
	case exportDone:
		x.done(m)
	case *actor.Stopping, *actor.Restarting:
		if x.cancel != nil {
			x.cancel()
		}
	}
}

// export sends e to the tenant's matching subscriptions, loading them
// first when the cache has none that are current.
func (x *exporter) export(ctx actor.Context, e Export) {
	if x.opts.Post == nil || e.TenantID == "" {
		return
	}
	now := x.opts.Now()
	gen := x.handle.generation(e.TenantID)
	t := x.tenants[e.TenantID]
	switch {
	case t != nil && t.loading:
		if len(t.waiting) >= exportMaxWaiting {
			x.handle.Dropped.Add(1)
			return
		}
		t.waiting = append(t.waiting, e)
		return
	case t != nil && t.gen == gen && now.Sub(t.loadedAt) < x.opts.CacheTTL:
		x.dispatch(ctx, e.TenantID, t, e)
		return
	case t == nil:
		x.sweep(now)
		t = &exportTenant{}
		x.tenants[e.TenantID] = t
	}
	// gen is read before the load starts: an invalidation racing with it
	// leaves the loaded entry stale, never wrongly current.
	t.loading, t.gen, t.waiting = true, gen, append(t.waiting[:0], e)
	self, root, store, tenantID := ctx.Self(), ctx.ActorSystem().Root, x.store, e.TenantID
	go func() {
		c, cancel := ioContext(10 * time.Second)
		defer cancel()
		subs, err := store.DeliverableWebhooks(c, tenantID)
		root.Send(self, exportLoaded{owner: x, tenantID: tenantID, subs: subs, err: err})
	}()
}

// sweep forgets expired tenants once the cache is large.
func (x *exporter) sweep(now time.Time) {
	if len(x.tenants) < exportMaxTenants {
		return
	}
	for id, t := range x.tenants {
		if !t.loading && now.Sub(t.loadedAt) >= x.opts.CacheTTL {
			delete(x.tenants, id)
		}
	}
}

func (x *exporter) loaded(ctx actor.Context, m exportLoaded) {
	if m.owner != x {
		return // loaded for an earlier incarnation of this actor
	}
	t := x.tenants[m.tenantID]
	if t == nil || !t.loading {
		return
	}
	waiting := t.waiting
	t.loading, t.waiting = false, nil
	if m.err != nil {
		t.loadedAt = time.Time{} // the next export loads again
		x.handle.Dropped.Add(uint64(len(waiting)))
		x.log.Warn("webhook subscriptions could not be read; exports dropped", "tenant_id", m.tenantID,
			"exports", len(waiting), "error", m.err)
		return
	}
	t.subs, t.loadedAt = m.subs, x.opts.Now()
	listed := map[string]int64{}
	for i := range t.subs {
		sub := &t.subs[i]
		if rev, ok := t.dead[sub.ID]; ok && rev == sub.Revision && sub.ConsecutiveFailures < persistence.WebhookDeadAfter {
			sub.ConsecutiveFailures = persistence.WebhookDeadAfter
			sub.DeliveryStatus = persistence.WebhookDeliveryStatus(sub.ConsecutiveFailures)
			listed[sub.ID] = rev
		}
	}
	t.dead = listed // a load that no longer lists one has read it dead (or updated)
	for _, e := range waiting {
		x.dispatch(ctx, m.tenantID, t, e)
	}
}

// dispatch starts one detached delivery of e per matching subscription.
func (x *exporter) dispatch(ctx actor.Context, tenantID string, t *exportTenant, e Export) {
	bodies := map[string][2]string{} // format: body, content type
	for i := range t.subs {
		sub := t.subs[i]
		if !sub.Enabled || sub.ConsecutiveFailures >= persistence.WebhookDeadAfter || !ExportAdmitted(sub.MinSeverity, e.Severity) {
			continue
		}
		if x.inFlight >= x.opts.MaxInFlight {
			x.handle.Dropped.Add(1)
			continue
		}
		rendered, ok := bodies[sub.Format]
		if !ok {
			body, ctype, err := RenderExport(e, sub.Format, x.opts.Version, x.opts.Now())
			if err != nil {
				x.handle.Dropped.Add(1)
				x.log.Error("export not encodable; delivery dropped", "subscription_id", sub.ID, "format", sub.Format, "error", err)
				continue
			}
			rendered = [2]string{string(body), ctype}
			bodies[sub.Format] = rendered
		}
		x.inFlight++
		x.handle.Started.Add(1)
		x.start(ctx, tenantID, sub, []byte(rendered[0]), rendered[1])
	}
}

// start runs one delivery in a goroutine: the attempts, then the result
// recorded in the store, then a report to the actor.
func (x *exporter) start(ctx actor.Context, tenantID string, sub persistence.WebhookSubscription, body []byte, ctype string) {
	header := map[string]string{
		"Content-Type":           ctype,
		"User-Agent":             "svc-webhook/" + x.opts.Version,
		webhooksign.Header:       webhooksign.Sign(sub.DeliverySecret, body),
		ExportDeliveryHeader:     uuid.NewString(),
		ExportSubscriptionHeader: sub.ID,
	}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	base, opts, store, log := x.ctx, x.opts, x.store, x.log
	res := exportDone{owner: x, tenantID: tenantID, subID: sub.ID, revision: sub.Revision}
	go func() {
		defer func() { root.Send(self, res) }()
		ok, err := deliverExport(base, opts, sub.URL, body, header)
		if base.Err() != nil {
			res.abandoned = true // the actor stopped: not a failure of the subscriber
			return
		}
		res.ok = ok
		if !ok {
			log.Debug("webhook delivery failed", "subscription_id", sub.ID, "attempts", opts.Attempts, "error", err)
		}
		c, cancel := ioContext(10 * time.Second)
		defer cancel()
		n, rerr := store.RecordWebhookDelivery(c, tenantID, sub.ID, sub.Revision, ok, opts.Now().UTC())
		switch {
		case rerr == nil:
			res.failures, res.recorded = n, true
			if n >= persistence.WebhookDeadAfter && opts.Died != nil {
				opts.Died(tenantID, sub.ID)
			}
		case errors.Is(rerr, persistence.ErrNotFound):
			// Updated or deleted while the delivery ran: its result no
			// longer counts.
		default:
			log.Warn("webhook delivery result not recorded", "subscription_id", sub.ID, "ok", ok, "error", rerr)
		}
	}()
}

// deliverExport makes up to opts.Attempts attempts, waiting opts.Backoff,
// then twice that, and so on, between them. It reports whether one got a
// 2xx answer, and otherwise the last attempt's error.
func deliverExport(base context.Context, opts ExporterOptions, target string, body []byte, header map[string]string) (bool, error) {
	var last error
	for attempt := range opts.Attempts {
		if attempt > 0 {
			if err := opts.Sleep(base, opts.Backoff<<(attempt-1)); err != nil {
				return false, err
			}
		}
		c, cancel := context.WithTimeout(base, opts.Timeout)
		status, err := opts.Post(c, target, body, header)
		cancel()
		switch {
		case err != nil:
			last = err
		case status < 200 || status > 299:
			last = fmt.Errorf("actors: webhook subscriber answered %d", status)
		default:
			return true, nil
		}
	}
	return false, last
}

func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// done counts a finished delivery (here, after its result is recorded and
// before the next trigger is handled, so that Sent and Failed never run
// ahead of the cached state) and updates the cached subscription.
func (x *exporter) done(m exportDone) {
	switch {
	case m.abandoned:
	case m.ok:
		x.handle.Sent.Add(1)
	default:
		x.handle.Failed.Add(1)
	}
	if m.owner != x {
		return // started by an earlier incarnation of this actor
	}
	x.inFlight--
	if !m.recorded {
		return
	}
	t := x.tenants[m.tenantID]
	if t == nil {
		return
	}
	if m.failures >= persistence.WebhookDeadAfter {
		if t.dead == nil {
			t.dead = map[string]int64{}
		}
		t.dead[m.subID] = m.revision
	}
	for i := range t.subs {
		sub := &t.subs[i]
		if sub.ID != m.subID || sub.Revision != m.revision {
			continue
		}
		wasDead := sub.ConsecutiveFailures >= persistence.WebhookDeadAfter
		sub.ConsecutiveFailures = m.failures
		sub.DeliveryStatus = persistence.WebhookDeliveryStatus(m.failures)
		if !wasDead && m.failures >= persistence.WebhookDeadAfter {
			x.log.Warn("webhook subscription is dead: no more deliveries until it is updated", "tenant_id", m.tenantID,
				"subscription_id", m.subID, "consecutive_failures", m.failures)
		}
	}
}
