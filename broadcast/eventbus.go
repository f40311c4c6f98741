package broadcast

import (
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"svc/messages"
)

// EventBus is the non-blocking publisher of SOC events (SPEC 6.1): a
// bounded channel drained by one pump that forwards each event to the
// subscribed actors. Publish never blocks and never fails; when the channel
// is full the event is counted as dropped.
type EventBus struct {
	ch        chan messages.AseEvent
	dropped   atomic.Uint64
	published atomic.Uint64
	root      *actor.RootContext

	mu   sync.RWMutex
	subs []*actor.PID
}

// NewEventBus returns a bus holding at most size queued events.
func NewEventBus(root *actor.RootContext, size int) *EventBus {
	return &EventBus{ch: make(chan messages.AseEvent, size), root: root}
}

// Publish queues ev, or counts it as dropped when the queue is full.
func (b *EventBus) Publish(ev messages.AseEvent) {
	select {
	case b.ch <- ev:
		b.published.Add(1)
	default:
		b.dropped.Add(1)
	}
}

// Subscribe adds an actor that receives every event as *messages.AseEvent.
func (b *EventBus) Subscribe(pid *actor.PID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.subs = append(b.subs, pid)
}

// Dropped counts events lost to a full queue.
func (b *EventBus) Dropped() uint64 { return b.dropped.Load() }

// Published counts events queued.
func (b *EventBus) Published() uint64 { return b.published.Load() }

// Depth is the number of queued events.
func (b *EventBus) Depth() int { return len(b.ch) }

// Run forwards queued events to the subscribers until stop is closed, then
// forwards what is still queued and returns.
func (b *EventBus) Run(stop <-chan struct{}) {
	for {
		select {
		case ev := <-b.ch:
			b.deliver(ev)
		case <-stop:
			for {
				select {
				case ev := <-b.ch:
					b.deliver(ev)
				default:
					return
				}
			}
		}
	}
}

func (b *EventBus) deliver(ev messages.AseEvent) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	for _, pid := range b.subs {
		e := ev
		b.root.Send(pid, &e)
	}
}
