package mcpregistry

import (
	"context"
	"errors"
	"sync"
)

// ErrBusy: every discovery slot of the node stayed taken while the
// caller waited.
var ErrBusy = errors.New("mcpregistry: every mcp discovery slot of the node is taken")

// Slots is the node's budget of discoveries over MCP in flight at once
// (SVC_MCP_DISCOVERY_CONCURRENCY), shared by the API's discover calls and
// the leader's re-discovery. It bounds what discoveries hold together
// (each up to the byte cap's answer and its tools) and the outbound
// connections they keep open. It is fair across tenants: when every slot
// is taken, a freed slot goes to the tenants that wait in turn, one slot
// each per round, and within a tenant to its longest waiter; a tenant
// with many waiting discoveries cannot hold back another tenant's one.
type Slots struct {
	size int
	mu   sync.Mutex
	free int
	// turn holds the tenants with waiters, in the order they are served;
	// waiting their waiters, oldest first.
	turn    []string
	waiting map[string][]*slotWaiter
}

type slotWaiter struct {
	ready chan struct{} // closed when the slot is handed over
}

// NewSlots returns a budget of n slots (at least 1).
func NewSlots(n int) *Slots {
	n = max(n, 1)
	return &Slots{size: n, free: n, waiting: map[string][]*slotWaiter{}}
}

// Acquire takes a slot for a discovery of tenantID's, waiting for one
// until ctx ends (ErrBusy, wrapping ctx's error). The caller calls
// release once.
func (s *Slots) Acquire(ctx context.Context, tenantID string) (release func(), err error) {
	s.mu.Lock()
	if s.free > 0 && len(s.turn) == 0 {
		s.free--
		s.mu.Unlock()
		return s.releaser(), nil
	}
	w := &slotWaiter{ready: make(chan struct{})}
	if len(s.waiting[tenantID]) == 0 {
		s.turn = append(s.turn, tenantID)
	}
	s.waiting[tenantID] = append(s.waiting[tenantID], w)
	s.mu.Unlock()

	select {
	case <-w.ready:
		return s.releaser(), nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-w.ready: // handed over as ctx ended: pass it on
		s.releaseLocked()
	default:
		s.drop(tenantID, w)
	}
	return nil, errors.Join(ErrBusy, ctx.Err())
}

// Size is how many slots there are.
func (s *Slots) Size() int { return s.size }

// Waiting is how many discoveries wait for a slot.
func (s *Slots) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, ws := range s.waiting {
		n += len(ws)
	}
	return n
}

func (s *Slots) releaser() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.releaseLocked()
		})
	}
}

// releaseLocked hands the slot to the next tenant in turn, or frees it.
func (s *Slots) releaseLocked() {
	if len(s.turn) == 0 {
		s.free++
		return
	}
	t := s.turn[0]
	s.turn = s.turn[1:]
	ws := s.waiting[t]
	w := ws[0]
	if len(ws) == 1 {
		delete(s.waiting, t)
	} else {
		s.waiting[t] = ws[1:]
		s.turn = append(s.turn, t) // its next waiter waits for the next round
	}
	close(w.ready)
}

// drop removes a waiter that gave up.
func (s *Slots) drop(tenantID string, w *slotWaiter) {
	ws := s.waiting[tenantID]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) > 0 {
		s.waiting[tenantID] = ws
		return
	}
	delete(s.waiting, tenantID)
	for i, t := range s.turn {
		if t == tenantID {
			s.turn = append(s.turn[:i:i], s.turn[i+1:]...)
			break
		}
	}
}
