package sharedstate

import (
	"sync"
	"sync/atomic"
)

// subscriber is the buffer of one Subscribe call.
type subscriber struct {
	ch chan []byte
}

// fanout is the set of local subscribers of one channel. Delivery never
// blocks: a full buffer drops the message and counts it in dropped.
//
// Sends happen under the read lock and closes under the write lock, so a
// channel is never sent on after it was closed.
type fanout struct {
	dropped *atomic.Uint64

	mu     sync.RWMutex
	subs   map[*subscriber]struct{}
	closed bool
}

func newFanout(dropped *atomic.Uint64) *fanout {
	return &fanout{dropped: dropped, subs: make(map[*subscriber]struct{})}
}

// add registers a new subscriber; it returns nil once the fanout is closed.
func (f *fanout) add() *subscriber {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	s := &subscriber{ch: make(chan []byte, SubscriberBuffer)}
	f.subs[s] = struct{}{}
	return s
}

// remove unregisters s and closes its channel (once), and returns how many
// subscribers are left.
func (f *fanout) remove(s *subscriber) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.subs[s]; ok {
		delete(f.subs, s)
		close(s.ch)
	}
	return len(f.subs)
}

// closeAll closes every subscriber's channel and refuses new ones.
func (f *fanout) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for s := range f.subs {
		delete(f.subs, s)
		close(s.ch)
	}
}

// deliver gives every subscriber its own copy of msg, or counts a drop when
// its buffer is full.
func deliver[T ~string | ~[]byte](f *fanout, msg T) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for s := range f.subs {
		if len(s.ch) == cap(s.ch) {
			f.dropped.Add(1)
			continue
		}
		b := make([]byte, len(msg))
		copy(b, msg)
		select {
		case s.ch <- b:
		default:
			f.dropped.Add(1)
		}
	}
}
