package broadcast

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"svc/canonical"
	"svc/messages"
	"svc/persistence/sharedstate"
)

// FeedChannel is the shared-state channel of the live feed: every node
// publishes its items there and delivers everyone's to its own subscribers,
// so a stream on any node sees every node's events (CONTRACT §11).
const FeedChannel = "feed"

// Feed is the live SOC feed (SPEC 6.6): items published on any node reach
// the subscribers of their tenant on every node. Publishing never blocks;
// a subscriber whose bounded buffer is full is cut off (its channel is
// closed) instead of slowing the feed or the other subscribers.
type Feed struct {
	shared sharedstate.State
	log    hclog.Logger

	mu   sync.Mutex
	subs map[string]map[*FeedSub]struct{} // tenant -> subscribers

	out chan []byte // encoded items waiting for the publishing pump
	// lone: this node is the only one (its shared state is in process), so
	// every subscriber of the feed is one of its own.
	lone bool

	published, delivered, cut, failed atomic.Uint64
}

// FeedSub is one subscriber: C carries encoded {"type","data"} frames and
// is closed when the subscriber is cut off or cancels.
type FeedSub struct {
	C      chan []byte
	tenant string
	closed bool
}

// NewFeed returns a feed over the shared state's publish/subscribe. A
// lone node (no other node shares the state) skips the items of tenants
// without a subscriber: no one would receive them, and encoding every
// decision's event for no one was about 4% of a lone node's CPU at full
// load.
func NewFeed(shared sharedstate.State, log hclog.Logger, lone bool) *Feed {
	return &Feed{shared: shared, log: log, subs: map[string]map[*FeedSub]struct{}{}, out: make(chan []byte, 4096), lone: lone}
}

// watched reports whether the tenant has a subscriber on this node.
func (f *Feed) watched(tenantID string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs[tenantID]) > 0
}

// Subscribe adds a subscriber of the tenant's items with a buffer of size
// frames; cancel removes it.
func (f *Feed) Subscribe(tenantID string, size int) (*FeedSub, func()) {
	s := &FeedSub{C: make(chan []byte, max(size, 1)), tenant: tenantID}
	f.mu.Lock()
	if f.subs[tenantID] == nil {
		f.subs[tenantID] = map[*FeedSub]struct{}{}
	}
	f.subs[tenantID][s] = struct{}{}
	f.mu.Unlock()
	return s, func() { f.remove(s) }
}

func (f *Feed) remove(s *FeedSub) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if set := f.subs[s.tenant]; set != nil {
		delete(set, s)
		if len(set) == 0 {
			delete(f.subs, s.tenant)
		}
	}
	if !s.closed {
		s.closed = true
		close(s.C)
	}
}

// Publish queues an item for every node's subscribers of its tenant (on a
// lone node, only when the tenant has one). It never blocks: when the queue is full the item is counted as failed. On
// the shared channel an item is its tenant id, a newline, and the frame
// subscribers receive, encoded once: {"type":...,"data":...}.
func (f *Feed) Publish(item messages.FeedItem) {
	if f.lone && !f.watched(item.TenantID) {
		return
	}
	// The data is encoded on its own and the frame put together around it:
	// encoding the wrapper would make encoding/json re-scan and compact the
	// data's MarshalJSON output, which doubled the cost per event. (The
	// feed's data types are svc's own; their MarshalJSON is json.Marshal.)
	var data []byte
	var err error
	if m, ok := item.Data.(json.Marshaler); ok {
		data, err = m.MarshalJSON()
	} else {
		data, err = json.Marshal(item.Data)
	}
	if err != nil || strings.Contains(item.TenantID, "\n") {
		f.failed.Add(1)
		return
	}
	raw := make([]byte, 0, len(item.TenantID)+len(item.Type)+len(data)+24)
	raw = append(append(raw, item.TenantID...), '\n')
	raw = canonical.AppendString(append(raw, `{"type":`...), item.Type)
	raw = append(append(append(raw, `,"data":`...), data...), '}')
	select {
	case f.out <- raw:
		f.published.Add(1)
	default:
		f.failed.Add(1)
	}
}

// pump publishes queued items on the shared channel until ctx ends.
func (f *Feed) pump(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case raw := <-f.out:
			c, cancel := context.WithTimeout(ctx, time.Second)
			if err := f.shared.Publish(c, FeedChannel, raw); err != nil {
				f.failed.Add(1)
				f.log.Debug("feed item not published", "error", err)
			}
			cancel()
		}
	}
}

// Run publishes this node's items and delivers the shared channel's items
// to this node's subscribers until ctx ends, resubscribing when the
// subscription breaks.
func (f *Feed) Run(ctx context.Context) {
	go f.pump(ctx)
	follow(ctx, f.shared, FeedChannel, f.deliver, nil)
}

// deliver hands one published item to the local subscribers of its tenant.
func (f *Feed) deliver(raw []byte) {
	tenant, frame, ok := bytes.Cut(raw, []byte{'\n'})
	if !ok || len(tenant) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	set := f.subs[string(tenant)]
	for s := range set {
		select {
		case s.C <- frame:
			f.delivered.Add(1)
		default:
			// Behind: cut it off rather than wait or drop silently.
			f.cut.Add(1)
			delete(set, s)
			s.closed = true
			close(s.C)
		}
	}
}

// Stats reports items published, frames delivered, subscribers cut off
// for falling behind, and items that could not be published.
func (f *Feed) Stats() (published, delivered, cut, failed uint64) {
	return f.published.Load(), f.delivered.Load(), f.cut.Load(), f.failed.Load()
}
