package approvalcallback

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"svc/persistence"
	"svc/webhooksign"
)

// TimestampHeader carries an approval callback's sending time (Unix
// seconds); its signature travels in webhooksign.Header, made as a webhook
// export's is (webhooksign.Sign), under the agent's secret (CONTRACT §14).
const TimestampHeader = "X-Svc-Timestamp"

// callbackClaim is how long one attempt holds its callback: its POST is
// bounded by callbackTimeout, well inside.
const (
	callbackClaim   = 30 * time.Second
	callbackTimeout = 10 * time.Second
)

// callbackBackoff is the wait after a failed attempt n (1-based).
func callbackBackoff(n int) time.Duration {
	if n <= 1 {
		return time.Second
	}
	return 4 * time.Second
}

// Body is what an approval callback POSTs (CONTRACT §14). For an
// approval that expired undecided, status is EXPIRED and decided_at its
// expiry.
type Body struct {
	ApprovalID string    `json:"approval_id"`
	DecisionID string    `json:"decision_id"`
	Status     string    `json:"status"`
	ActionHash string    `json:"action_hash"`
	DecidedAt  time.Time `json:"decided_at"`
}

// callbackBody is the outcome of a due callback's approval: its decision,
// or EXPIRED when it was never decided.
func callbackBody(a persistence.Approval) Body {
	b := Body{ApprovalID: a.ID, DecisionID: a.DecisionID, Status: a.Status, ActionHash: a.ActionHash, DecidedAt: a.ExpiresAt.UTC()}
	if a.Status == persistence.ApprovalPending {
		b.Status = persistence.ApprovalExpired
	} else if a.DecidedAt != nil {
		b.DecidedAt = a.DecidedAt.UTC()
	}
	return b
}

// Callbacks delivers the callbacks agents register with a call
// that needs approval (SPEC 4.2 webhook, CONTRACT §14): when the approval
// is approved, rejected or edited on this node, the node POSTs the outcome
// at once (Decided); the leader's sweep (Sweep, run by the job actors.NewApprovalCallbackSweep) sends
// those of expired approvals and retries what a stopped node left. Each
// attempt is claimed in the database first, so that every callback is
// tried at most persistence.MaxCallbackAttempts times in all. The posts
// go through the outbound transport (CONTRACT §7's address rules); the
// secret and the URL never reach the log.
type Callbacks struct {
	store persistence.ApprovalCallbackStore
	post  Post
	log   hclog.Logger
	ctx   context.Context
	// sem bounds the deliveries in flight on this node.
	sem       chan struct{}
	mu        sync.Mutex
	inFlight  map[string]bool
	delivered atomic.Uint64
	failed    atomic.Uint64
}

// Post sends one callback body to target with the given headers and
// returns the response status (the node's outbound.ExportPoster, which
// applies CONTRACT §7's address rules).
type Post func(ctx context.Context, target string, body []byte, header map[string]string) (int, error)

// New returns the deliverer; deliveries stop when ctx ends.
func New(ctx context.Context, store persistence.ApprovalCallbackStore, post Post, log hclog.Logger) *Callbacks {
	return &Callbacks{store: store, post: post, log: log, ctx: ctx, sem: make(chan struct{}, 16), inFlight: map[string]bool{}}
}

// Stats counts the callbacks delivered and those that failed every attempt
// on this node.
func (c *Callbacks) Stats() (delivered, failed uint64) {
	return c.delivered.Load(), c.failed.Load()
}

// Decided starts the delivery of the approval's callback, if it has one.
func (c *Callbacks) Decided(a persistence.Approval) {
	go func() {
		ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
		due, err := c.store.DueCallback(ctx, a.TenantID, a.ID, time.Now().UTC())
		cancel()
		if err != nil {
			if !errors.Is(err, persistence.ErrNotFound) && c.ctx.Err() == nil {
				c.log.Warn("approval callback not read; the leader's sweep retries it", "approval_id", a.ID, "error", err)
			}
			return
		}
		c.deliver(due)
	}()
}

// Sweep delivers every callback due, each on its own goroutine (bounded),
// and returns how many it started: those of approvals that expired
// undecided, and those a node left with attempts to go.
func (c *Callbacks) Sweep(ctx context.Context) (int, error) {
	due, err := c.store.DueCallbacks(ctx, time.Now().UTC(), 100)
	if err != nil {
		return 0, err
	}
	for _, d := range due {
		go c.deliver(d)
	}
	return len(due), nil
}

// deliver makes the callback's remaining attempts, each claimed first.
func (c *Callbacks) deliver(d persistence.DueCallback) {
	id := d.Approval.ID
	c.mu.Lock()
	if c.inFlight[id] {
		c.mu.Unlock()
		return
	}
	c.inFlight[id] = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.inFlight, id)
		c.mu.Unlock()
	}()
	select {
	case c.sem <- struct{}{}:
		defer func() { <-c.sem }()
	case <-c.ctx.Done():
		return
	}
	body, err := json.Marshal(callbackBody(d.Approval))
	if err != nil {
		c.log.Error("approval callback body", "approval_id", id, "error", err)
		return
	}
	signature := webhooksign.Sign(d.Callback.Secret, body)
	for attempt := d.Attempts + 1; attempt <= persistence.MaxCallbackAttempts; attempt++ {
		now := time.Now().UTC()
		ok, err := c.store.ClaimCallbackAttempt(c.ctx, id, now, now.Add(callbackClaim))
		if err != nil || !ok {
			return // done, out of attempts, claimed elsewhere, or the store failed (the sweep retries)
		}
		status, err := c.attempt(d.Callback.URL, body, signature)
		if err == nil && status >= 200 && status < 300 {
			c.finish(id, "delivered", status)
			c.delivered.Add(1)
			return
		}
		why := fmt.Sprintf("status %d", status)
		if err != nil {
			why = err.Error()
		}
		if attempt == persistence.MaxCallbackAttempts {
			c.finish(id, "failed", status)
			c.failed.Add(1)
			c.log.Warn("approval callback failed its last attempt", "approval_id", id, "attempts", attempt, "last", why)
			return
		}
		next := time.Now().UTC().Add(callbackBackoff(attempt))
		if err := c.store.RetryCallbackAt(c.ctx, id, next); err != nil {
			return
		}
		c.log.Debug("approval callback attempt failed", "approval_id", id, "attempt", attempt, "error", why)
		select {
		case <-time.After(time.Until(next) + 10*time.Millisecond):
		case <-c.ctx.Done():
			return
		}
	}
}

func (c *Callbacks) attempt(url string, body []byte, signature string) (int, error) {
	ctx, cancel := context.WithTimeout(c.ctx, callbackTimeout)
	defer cancel()
	return c.post(ctx, url, body, map[string]string{"Content-Type": "application/json",
		webhooksign.Header: signature, TimestampHeader: strconv.FormatInt(time.Now().Unix(), 10)})
}

func (c *Callbacks) finish(id, outcome string, status int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.store.FinishCallback(ctx, id, outcome, status, time.Now().UTC()); err != nil {
		c.log.Warn("approval callback outcome not recorded", "approval_id", id, "outcome", outcome, "error", err)
	}
}
