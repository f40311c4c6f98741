package broadcast

import (
	"context"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"svc/messages"
	"svc/persistence/sharedstate"
)

// InvalidationChannel is the shared-state channel invalidations travel on,
// as "<kind> <tenant> <key>".
const InvalidationChannel = "invalidate"

// Invalidations is the node's cache invalidation hub: a change drops the
// cached entry on this node and, published on the shared state, on every
// other node. Caches subscribe to their kinds. Safe for concurrent use.
type Invalidations struct {
	shared sharedstate.State
	log    hclog.Logger

	mu   sync.RWMutex
	subs []invalidationSub
}

type invalidationSub struct {
	kinds []messages.CacheKind
	drop  func(messages.Invalidation)
}

// NewInvalidations returns the hub over the shared state.
func NewInvalidations(shared sharedstate.State, log hclog.Logger) *Invalidations {
	return &Invalidations{shared: shared, log: log}
}

// Subscribe registers drop for invalidations of kinds, and of
// messages.CacheAll (then drop empties the whole cache). drop runs on the
// caller of Invalidate or on the hub's subscription goroutine: it must not
// block.
func (h *Invalidations) Subscribe(drop func(messages.Invalidation), kinds ...messages.CacheKind) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs = append(h.subs, invalidationSub{kinds: kinds, drop: drop})
}

// Invalidate drops the entry on this node and publishes the drop to every
// other node.
func (h *Invalidations) Invalidate(ctx context.Context, inv messages.Invalidation) {
	h.apply(inv)
	h.Broadcast(ctx, inv)
}

// Broadcast publishes the drop to the other nodes only (this node has
// applied the change already, as a base policy reload does).
func (h *Invalidations) Broadcast(ctx context.Context, inv messages.Invalidation) {
	msg := string(inv.Kind) + " " + orDash(inv.TenantID) + " " + orDash(inv.Key)
	if err := h.shared.Publish(ctx, InvalidationChannel, []byte(msg)); err != nil {
		h.log.Warn("invalidation not published; other nodes catch up within their check interval", "kind", inv.Kind, "error", err)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// apply runs the subscribers of inv's kind (every subscriber for CacheAll).
func (h *Invalidations) apply(inv messages.Invalidation) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, s := range h.subs {
		for _, k := range s.kinds {
			if k == inv.Kind || inv.Kind == messages.CacheAll {
				s.drop(inv)
				break
			}
		}
	}
}

// Run applies other nodes' invalidations until ctx ends, resubscribing
// when the subscription breaks, and dropping every cache when it breaks
// and when it is made again, since messages may have been missed.
func (h *Invalidations) Run(ctx context.Context) {
	follow(ctx, h.shared, InvalidationChannel, func(raw []byte) {
		parts := strings.SplitN(string(raw), " ", 3)
		if len(parts) == 3 {
			h.apply(messages.Invalidation{Kind: messages.CacheKind(parts[0]), TenantID: parts[1], Key: parts[2]})
		}
	}, func() { h.apply(messages.Invalidation{Kind: messages.CacheAll, TenantID: "-", Key: "-"}) })
}
