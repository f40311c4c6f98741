package broadcast

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"svc/persistence/sharedstate"
)

// ApprovalWaitChannel is the shared-state channel on which a node that
// decided an approval tells every node, as "<tenant> <approval id>".
const ApprovalWaitChannel = "approval_decided"

// ApprovalWaits wakes the requests waiting for an approval to be decided
// (GET /approvals/:id?wait=N, CONTRACT §14), on every node: the node that
// decides publishes on the shared state, and every node closes the wake-up
// channel of the approval's waiters. A waiter re-reads the approval when it
// wakes, so a wake-up carries no state and a spurious one costs one read.
// Publishing is at most once; when the subscription breaks, notifications
// may have been missed, and every waiter is woken to re-read (Missed). Safe
// for concurrent use; it holds no goroutine of its own except Run.
type ApprovalWaits struct {
	shared sharedstate.State
	log    hclog.Logger

	mu      sync.Mutex
	waiting map[string]*approvalWaiters
	// missed is closed, and replaced, when notifications may have been
	// missed (the subscription ended or was made again).
	missed chan struct{}
	// closing is closed when the node shuts down (Close).
	closing   chan struct{}
	closeOnce sync.Once

	woken atomic.Uint64
}

// approvalWaiters are the requests waiting for one approval on this node.
type approvalWaiters struct {
	wake chan struct{}
	n    int
}

// NewApprovalWaits returns the hub over the shared state.
func NewApprovalWaits(shared sharedstate.State, log hclog.Logger) *ApprovalWaits {
	return &ApprovalWaits{shared: shared, log: log, waiting: map[string]*approvalWaiters{}, missed: make(chan struct{}),
		closing: make(chan struct{})}
}

// Close tells every waiter, and every later one, that the node is shutting
// down: they answer with the approval as it stands instead of holding the
// shutdown for the rest of their waits. Safe to call more than once.
func (w *ApprovalWaits) Close() { w.closeOnce.Do(func() { close(w.closing) }) }

// Closing is closed once Close has been called.
func (w *ApprovalWaits) Closing() <-chan struct{} { return w.closing }

// Wait registers a waiter for the tenant's approval. wake is closed when
// the approval is decided on any node; missed when notifications may have
// been missed. Register before reading the approval, so that a decision
// between the read and the wait is not lost. done must be called once.
func (w *ApprovalWaits) Wait(tenantID, id string) (wake, missed <-chan struct{}, done func()) {
	key := tenantID + " " + id
	w.mu.Lock()
	defer w.mu.Unlock()
	aw := w.waiting[key]
	if aw == nil {
		aw = &approvalWaiters{wake: make(chan struct{})}
		w.waiting[key] = aw
	}
	aw.n++
	var once sync.Once
	return aw.wake, w.missed, func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if aw.n--; aw.n == 0 && w.waiting[key] == aw {
				delete(w.waiting, key)
			}
		})
	}
}

// Waiting is the number of requests waiting on this node.
func (w *ApprovalWaits) Waiting() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, aw := range w.waiting {
		n += aw.n
	}
	return n
}

// Woken counts the approvals whose waiters were woken on this node.
func (w *ApprovalWaits) Woken() uint64 { return w.woken.Load() }

// Decided wakes the approval's waiters on this node and tells every other
// node. A publish that fails is tried again in the background after 0.2,
// 0.5 and 1 s, then logged: the other nodes' waiters then see the decision
// when their wait ends.
func (w *ApprovalWaits) Decided(ctx context.Context, tenantID, id string) {
	w.wake(tenantID + " " + id)
	msg := []byte(tenantID + " " + id)
	if w.shared.Publish(ctx, ApprovalWaitChannel, msg) == nil {
		return
	}
	detached := context.WithoutCancel(ctx) // the caller's request ends first
	go func() {
		var err error
		for _, d := range []time.Duration{200 * time.Millisecond, 500 * time.Millisecond, time.Second} {
			time.Sleep(d)
			pctx, cancel := context.WithTimeout(detached, 2*time.Second)
			err = w.shared.Publish(pctx, ApprovalWaitChannel, msg)
			cancel()
			if err == nil {
				return
			}
		}
		w.log.Warn("approval decision not published; waiters on other nodes see it when their wait ends", "approval_id", id, "error", err)
	}()
}

func (w *ApprovalWaits) wake(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if aw := w.waiting[key]; aw != nil {
		close(aw.wake)
		delete(w.waiting, key)
		w.woken.Add(1)
	}
}

// wakeAll tells every waiter that notifications may have been missed.
func (w *ApprovalWaits) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.missed)
	w.missed = make(chan struct{})
}

// Run applies the other nodes' decisions until ctx ends, waking every
// waiter when the subscription ends and again when it is made anew.
func (w *ApprovalWaits) Run(ctx context.Context) {
	follow(ctx, w.shared, ApprovalWaitChannel, func(raw []byte) {
		if key := string(raw); strings.Count(key, " ") == 1 {
			w.wake(key)
		}
	}, w.wakeAll)
}
