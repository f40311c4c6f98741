package actors

// The exporter's handle for the HTTP layer: its counters and the
// invalidation of its cached subscriptions.

import (
	"sync"
	"sync/atomic"

	"svc/messages"
)

// ExporterHandle is the part of the exporter that other layers hold and
// that outlives its restarts: the delivery counters /metrics reads, and the
// invalidation of the cached subscriptions that the API calls after every
// change. Safe for concurrent use.
type ExporterHandle struct {
	// Started counts deliveries started; each ends up Sent or Failed,
	// unless the exporter stops while it runs.
	Started atomic.Uint64
	// Sent counts deliveries that succeeded (a 2xx answer to an attempt).
	Sent atomic.Uint64
	// Failed counts deliveries that failed on every attempt.
	Failed atomic.Uint64
	// Dropped counts deliveries not attempted: MaxInFlight deliveries were
	// running, the body could not be encoded, or the tenant's subscriptions
	// could not be read (then each waiting export counts once).
	Dropped atomic.Uint64

	mu      sync.Mutex
	epoch   uint64
	all     uint64
	tenants map[string]uint64
}

// Invalidate makes the exporter read the tenant's subscriptions afresh for
// its next export. A nil handle ignores it.
func (h *ExporterHandle) Invalidate(tenantID string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.tenants == nil {
		h.tenants = map[string]uint64{}
	}
	h.epoch++
	h.tenants[tenantID] = h.epoch
}

// Drop applies an invalidation hub's webhooks (or every-cache) drop: it
// subscribes the handle to the hub (broadcast.Invalidations.Subscribe).
func (h *ExporterHandle) Drop(inv messages.Invalidation) {
	if inv.Kind == messages.CacheAll {
		h.InvalidateAll()
		return
	}
	h.Invalidate(inv.TenantID)
}

// InvalidateAll is Invalidate for every tenant.
func (h *ExporterHandle) InvalidateAll() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.epoch++
	h.all = h.epoch
	h.tenants = map[string]uint64{}
}

// generation changes whenever the tenant's cached subscriptions become
// invalid.
func (h *ExporterHandle) generation(tenantID string) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return max(h.all, h.tenants[tenantID])
}
