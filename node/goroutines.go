package node

import (
	"sync"
)

// Goroutines tracks a node's goroutines: Go refuses new ones once Close
// was called, Wait waits for those started.
type Goroutines struct {
	mu     sync.Mutex
	wg     sync.WaitGroup
	closed bool
}

// Go runs f on a new goroutine unless the tracker is closed, and reports
// whether it did.
func (g *Goroutines) Go(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Go(f)
	return true
}

// Close refuses further goroutines.
func (g *Goroutines) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
}

// Wait waits for every goroutine started.
func (g *Goroutines) Wait() { g.wg.Wait() }
