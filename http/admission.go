package httpapi

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Admission: who may hold the node's work, and for how long a client may
// take to send it. Headers must arrive within SVC_HEADER_READ_TIMEOUT_SECS
// (http.Server.ReadHeaderTimeout) and a body within
// SVC_BODY_READ_TIMEOUT_SECS of its headers (408 body_timeout after), so a
// slow client holds a slot for a bounded time. Of the
// SVC_MAX_CONCURRENT_REQUESTS slots, one tenant holds at most
// SVC_MAX_CONCURRENT_PER_TENANT once its credential is known (429
// tenant_concurrency past it): a tenant flooding the node, with slow bodies
// or fast calls, from one address or many, leaves the other tenants the
// rest. Callers without a valid credential are answered before their body
// is read, so they hold a slot only for the time of that answer.

// admission counts the requests in flight, per node and per tenant.
type admission struct {
	slots     chan struct{}
	perTenant int
	mu        sync.Mutex
	tenants   map[string]int
	// bodies counts request bodies being read; lastRefusal is when a
	// request was last refused for load (unix nanoseconds).
	bodies      atomic.Int64
	lastRefusal atomic.Int64
}

func newAdmission(total, perTenant int) *admission {
	return &admission{slots: make(chan struct{}, total), perTenant: perTenant, tenants: map[string]int{}}
}

// enter takes a node slot; false when all are held.
func (a *admission) enter() bool {
	select {
	case a.slots <- struct{}{}:
		return true
	default:
		a.refused()
		return false
	}
}

func (a *admission) leave() { <-a.slots }

// enterTenant counts a request of tenant against its share; false when the
// tenant holds its share already.
func (a *admission) enterTenant(tenant string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.tenants[tenant] >= a.perTenant {
		a.refused()
		return false
	}
	a.tenants[tenant]++
	return true
}

func (a *admission) leaveTenant(tenant string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.tenants[tenant]--; a.tenants[tenant] <= 0 {
		delete(a.tenants, tenant)
	}
}

func (a *admission) refused() { a.lastRefusal.Store(time.Now().UnixNano()) }

// inFlight is the number of node slots held.
func (a *admission) inFlight() int { return len(a.slots) }

// busiestTenant is the largest number of slots one tenant holds.
func (a *admission) busiestTenant() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	most := 0
	for _, n := range a.tenants {
		most = max(most, n)
	}
	return most
}

// saturated reports whether the node is near its limit (nine slots in ten
// held) or refused a request for load within the last minute.
func (a *admission) saturated() bool {
	if a.inFlight()*10 >= cap(a.slots)*9 {
		return true
	}
	last := a.lastRefusal.Load()
	return last != 0 && time.Since(time.Unix(0, last)) < time.Minute
}

// admitTenant counts the call against its tenant's share of the node's
// requests, then takes one of the node's slots, both until the request
// ends; a second call for the same request is a no-op. The share comes
// first: a call past its tenant's share is refused without ever holding a
// node slot, so however fast one tenant's calls arrive, they hold at most
// its share of the slots and the rest stay free for the others. A
// super-admin call (no tenant) takes a node slot only.
func (c *Call) admitTenant(tenantID string) *Error {
	if c.slotHeld || c.srv == nil || c.srv.adm == nil {
		return nil
	}
	if tenantID != "" {
		if e := c.srv.admitShare(c.srv.adm, tenantID, "requests in flight"); e != nil {
			return e
		}
		c.tenantHeld = tenantID
	}
	if e := c.takeSlot(); e != nil {
		if c.tenantHeld != "" {
			c.srv.adm.leaveTenant(c.tenantHeld)
			c.tenantHeld = ""
		}
		return e
	}
	return nil
}

// takeSlot takes one of the node's SVC_MAX_CONCURRENT_REQUESTS slots until
// the request ends, or answers 503 overloaded.
func (c *Call) takeSlot() *Error {
	s := c.srv
	if !s.adm.enter() {
		s.metrics.shed.Inc()
		s.metrics.refused.WithLabelValues("overloaded").Inc()
		e := apiErr("ServiceUnavailable", "overloaded", "too many concurrent requests; retry later")
		e.RetryAfter = 1
		return e
	}
	c.slotHeld = true
	return nil
}

// admitShare takes one of tenant's SVC_MAX_CONCURRENT_PER_TENANT places in
// share (requests or streams), or answers 429 tenant_concurrency.
func (s *Server) admitShare(share *admission, tenant, what string) *Error {
	if share.enterTenant(tenant) {
		return nil
	}
	s.metrics.refused.WithLabelValues("tenant_concurrency").Inc()
	e := apiErr("TooManyRequests", "tenant_concurrency",
		"this tenant has %d %s, its share of this node (SVC_MAX_CONCURRENT_PER_TENANT); retry later", share.perTenant, what)
	e.RetryAfter = 1
	return e
}

// deadlineBody is a request body that must arrive before a deadline set on
// the connection. Once it has been read to its end (or failed) the
// deadline is lifted: the server's background read of the idle connection
// must not hit it, which would cancel the request's context while the
// handler still works.
type deadlineBody struct {
	io.ReadCloser
	rc       *http.ResponseController
	deadline time.Time
	adm      *admission
	done     atomic.Bool
}

// limitBodyTime sets the body deadline of r on w's connection; the
// returned func ends the body's accounting (idempotent).
func (s *Server) limitBodyTime(w http.ResponseWriter, r *http.Request) func() {
	if r.Body == nil || r.Body == http.NoBody || s.cfg.BodyReadTimeout <= 0 {
		return func() {}
	}
	rc := http.NewResponseController(w)
	deadline := time.Now().Add(s.cfg.BodyReadTimeout)
	if rc.SetReadDeadline(deadline) != nil {
		return func() {} // a connection without deadlines (a test recorder)
	}
	b := &deadlineBody{ReadCloser: r.Body, rc: rc, deadline: deadline, adm: s.adm}
	s.adm.bodies.Add(1)
	r.Body = b
	return b.finish
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		if err == io.EOF {
			_ = b.rc.SetReadDeadline(time.Time{})
		}
		b.finish()
	}
	return n, err
}

func (b *deadlineBody) finish() {
	if b.done.CompareAndSwap(false, true) {
		b.adm.bodies.Add(-1)
	}
}

// expired reports whether err is the body deadline passing.
func (b *deadlineBody) expired(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) ||
		!time.Now().Before(b.deadline)
}

// readCapped reads the request body under SVC_MAX_BODY_LIMIT_BYTES and the
// body deadline: 400 body_too_large over the cap, 408 body_timeout when the
// body does not arrive in time.
func (s *Server) readCapped(c *Call) ([]byte, *Error) {
	raw, err := io.ReadAll(http.MaxBytesReader(nil, c.R.Body, s.cfg.MaxBodyBytes))
	if err == nil {
		return raw, nil
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, badRequest("body_too_large", "request body exceeds %d bytes", s.cfg.MaxBodyBytes)
	}
	if b, ok := c.R.Body.(*deadlineBody); ok && b.expired(err) {
		s.metrics.refused.WithLabelValues("body_timeout").Inc()
		e := apiErr("RequestTimeout", "body_timeout", "the request body did not arrive within %s (SVC_BODY_READ_TIMEOUT_SECS)", s.cfg.BodyReadTimeout)
		return nil, e
	}
	return nil, badRequest("invalid_body", "could not read the request body")
}
