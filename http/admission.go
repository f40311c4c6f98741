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
// SVC_BODY_READ_TIMEOUT_SECS of its headers (408 body_timeout after).
//
// Two counts bound a request. Its share: from the moment its caller is
// known until it ends, body included, a request counts against its
// tenant's SVC_MAX_CONCURRENT_PER_TENANT (429 tenant_concurrency past it);
// every call without a credential (the code host's and the chat platform's
// signed webhooks) counts against one more share of the same size, the
// strangers'. And its slot: once its body has arrived, a request takes one
// of the node's SVC_MAX_CONCURRENT_REQUESTS slots for its work (503
// overloaded when none is free). A body that drips holds only its sender's
// share, never a slot, so no set of tenants, each within its share, can
// shed another tenant by sending slowly: the slots are held only by work.
// When few slots are free (the last tenth), a tenant holding more than an
// even split of the slots among the tenants at work and one more is
// refused, so a tenant arriving at a busy node still finds a slot. An
// agent token holds at most SVC_RATE_LIMIT_CAPACITY authorize calls in
// flight on a node (429 agent_concurrency): more could not all be granted
// a rate token anyway, and they would hold its tenant's share while their
// bodies arrive.

// publicShare is the share key of the calls without a credential.
const publicShare = "\x00public"

// admission counts the requests in flight, per node and per tenant.
type admission struct {
	total     int
	perTenant int
	mu        sync.Mutex
	// held counts the node slots in use, working those of each tenant
	// ("" for a super-admin call); tenants counts each tenant's share.
	held    int
	working map[string]int
	tenants map[string]int
	// agents counts each agent token's authorize calls in flight.
	agents map[string]int
	// bodies counts request bodies being read; lastRefusal is when a
	// request was last refused for load (unix nanoseconds).
	bodies      atomic.Int64
	lastRefusal atomic.Int64
}

func newAdmission(total, perTenant int) *admission {
	return &admission{total: total, perTenant: perTenant, working: map[string]int{}, tenants: map[string]int{}, agents: map[string]int{}}
}

// reserve is the number of slots kept for tenants below an even split.
func (a *admission) reserve() int { return a.total / 10 }

// enter takes a node slot for tenant's work; false when none is free, or
// when only the reserve is free and tenant holds more than an even split
// of the slots among the tenants at work and one more.
func (a *admission) enter(tenant string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	free := a.total - a.held
	if free <= 0 {
		a.refused()
		return false
	}
	if free <= a.reserve() && tenant != "" {
		active := len(a.working)
		if a.working[tenant] == 0 {
			active++
		}
		if a.working[tenant]+1 > a.total/(active+1) {
			a.refused()
			return false
		}
	}
	a.held++
	a.working[tenant]++
	return true
}

func (a *admission) leave(tenant string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.held--
	if a.working[tenant]--; a.working[tenant] <= 0 {
		delete(a.working, tenant)
	}
}

// enterTenant counts a request of tenant against its share; false when the
// tenant holds its share already.
func (a *admission) enterTenant(tenant string) bool {
	return a.enterCounted(a.tenants, tenant, a.perTenant)
}

func (a *admission) leaveTenant(tenant string) { a.leaveCounted(a.tenants, tenant) }

// enterAgent counts an authorize call of an agent token against limit;
// false when it has limit calls in flight.
func (a *admission) enterAgent(agentID string, limit int) bool {
	return a.enterCounted(a.agents, agentID, limit)
}

func (a *admission) leaveAgent(agentID string) { a.leaveCounted(a.agents, agentID) }

func (a *admission) enterCounted(m map[string]int, key string, limit int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if m[key] >= limit {
		a.refused()
		return false
	}
	m[key]++
	return true
}

func (a *admission) leaveCounted(m map[string]int, key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if m[key]--; m[key] <= 0 {
		delete(m, key)
	}
}

func (a *admission) refused() { a.lastRefusal.Store(time.Now().UnixNano()) }

// inFlight is the number of node slots held.
func (a *admission) inFlight() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held
}

// busiestTenant is the largest share one tenant holds (its requests in
// flight, bodies still arriving included).
func (a *admission) busiestTenant() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	most := 0
	for t, n := range a.tenants {
		if t != publicShare {
			most = max(most, n)
		}
	}
	return most
}

// saturated reports whether the node is near its limit (nine slots in ten
// held) or refused a request for load within the last minute.
func (a *admission) saturated() bool {
	if a.inFlight()*10 >= a.total*9 {
		return true
	}
	last := a.lastRefusal.Load()
	return last != 0 && time.Since(time.Unix(0, last)) < time.Minute
}

// admitTenant counts the call against its tenant's share of the node's
// requests (publicShare for a call without a credential) until the request
// ends; a second call for the same request is a no-op. A call past its
// tenant's share is refused before its body is read. The node slot is
// taken once the body has arrived (takeSlot). A super-admin call (no
// tenant) counts against no share.
func (c *Call) admitTenant(tenantID string) *Error {
	if c.admitted || c.srv == nil || c.srv.adm == nil {
		return nil
	}
	if tenantID != "" {
		what := "requests in flight"
		if tenantID == publicShare {
			what = "requests without a credential in flight"
		}
		if e := c.srv.admitShare(c.srv.adm, tenantID, what); e != nil {
			return e
		}
		c.tenantHeld = tenantID
	}
	c.admitted = true
	return nil
}

// admitAgent counts an authorize call against its agent token's calls in
// flight on this node, at most SVC_RATE_LIMIT_CAPACITY (the token bucket's
// burst), or answers 429 agent_concurrency.
func (c *Call) admitAgent(agentID string) *Error {
	s := c.srv
	limit := max(1, int(s.cfg.RateLimitCapacity))
	if !s.adm.enterAgent(agentID, limit) {
		s.metrics.refused.WithLabelValues("agent_concurrency").Inc()
		e := apiErr("TooManyRequests", "agent_concurrency",
			"this agent token has %d authorize calls in flight on this node, its rate limit's burst (SVC_RATE_LIMIT_CAPACITY); retry later", limit)
		e.RetryAfter = 1
		return e
	}
	c.agentHeld = agentID
	return nil
}

// admitProxyAgent bounds an agent token's open MCP proxy requests on the
// node (SVC_RATE_LIMIT_CAPACITY, counted apart from its authorize calls):
// one agent's streams cannot take its tenant's whole share. 429
// agent_concurrency past it.
func (c *Call) admitProxyAgent(agentID string) *Error {
	s := c.srv
	limit := max(1, int(s.cfg.RateLimitCapacity))
	key := "mcp-proxy:" + agentID
	if !s.adm.enterAgent(key, limit) {
		s.metrics.refused.WithLabelValues("agent_concurrency").Inc()
		e := apiErr("TooManyRequests", "agent_concurrency",
			"this agent token has %d MCP proxy requests open on this node (SVC_RATE_LIMIT_CAPACITY); retry later", limit)
		e.RetryAfter = 1
		return e
	}
	c.agentHeld = key
	return nil
}

// takeSlot takes one of the node's SVC_MAX_CONCURRENT_REQUESTS slots for an
// admitted call until the request ends, or answers 503 overloaded; a
// no-op for a call not admitted (probes, streams) or holding one already.
func (c *Call) takeSlot() *Error {
	s := c.srv
	if !c.admitted || c.slotHeld || s == nil || s.adm == nil {
		return nil
	}
	if !s.adm.enter(c.tenantHeld) {
		s.metrics.shed.Inc()
		s.metrics.refused.WithLabelValues("overloaded").Inc()
		e := apiErr("ServiceUnavailable", "overloaded", "too many concurrent requests; retry later")
		e.RetryAfter = 1
		return e
	}
	c.slotHeld = true
	return nil
}

// release gives back what the request holds, when it ends.
func (c *Call) release() {
	s := c.srv
	if c.slotHeld {
		s.adm.leave(c.tenantHeld)
	}
	if c.tenantHeld != "" {
		s.adm.leaveTenant(c.tenantHeld)
	}
	if c.agentHeld != "" {
		s.adm.leaveAgent(c.agentHeld)
	}
	if c.streamHeld != "" {
		s.streamShare.leaveTenant(c.streamHeld)
	}
	if c.waiterHeld != "" {
		s.waiters.leave(c.waiterHeld)
	}
}

// admitShare takes one of tenant's SVC_MAX_CONCURRENT_PER_TENANT places in
// share (requests or streams), or answers 429 tenant_concurrency.
func (s *Server) admitShare(share *admission, tenant, what string) *Error {
	if share.enterTenant(tenant) {
		return nil
	}
	s.metrics.refused.WithLabelValues("tenant_concurrency").Inc()
	who := "this tenant has"
	if tenant == publicShare {
		who = "the node has"
	}
	e := apiErr("TooManyRequests", "tenant_concurrency",
		"%s %d %s, its share of this node (SVC_MAX_CONCURRENT_PER_TENANT); retry later", who, share.perTenant, what)
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
// body does not arrive in time. Once it has arrived, an admitted call takes
// its node slot (503 overloaded when none is free).
func (s *Server) readCapped(c *Call) ([]byte, *Error) {
	raw, err := io.ReadAll(http.MaxBytesReader(nil, c.R.Body, s.cfg.MaxBodyBytes))
	if err == nil {
		// The body is in: the call's work now takes a node slot.
		if e := c.takeSlot(); e != nil {
			return nil, e
		}
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
