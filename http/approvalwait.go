package httpapi

import (
	"context"
	"strconv"
	"strings"
	"time"

	"svc/persistence"
)

// Waiting for an approval (CONTRACT §14): GET /approvals/:id?wait=N holds
// the request until the approval is no longer PENDING, whichever node
// decided it, or until N seconds (at most maxApprovalWait) have passed, or
// the approval expires. A waiting request gives back its node slot and its
// tenant's share (SVC_MAX_CONCURRENT_REQUESTS, SVC_MAX_CONCURRENT_PER_TENANT):
// it takes a waiter's place instead, from the moment it is authenticated
// (Route.Waits), so that ten thousand waiting agents, all asking again at
// once when their waits end, shed no one's authorize calls. Waiters have
// their own bound per node (SVC_APPROVAL_MAX_WAITERS, split evenly among
// the waiting tenants once the last tenth is reached); a request that
// finds no place is admitted as any other and answers at once, with
// Retry-After, as a plain read would.

// maxApprovalWait is the longest wait a request may ask for; larger values
// mean this (CONTRACT §14), below SVC_REQUEST_TIMEOUT_SECS's default.
const maxApprovalWait = 25 * time.Second

// waitGrace is kept between the end of a wait and the request's own
// deadline, for the last read and the answer.
const waitGrace = time.Second

// waitParam parses ?wait=N: 0 when absent; a non-negative integer number
// of seconds in decimal digits (any larger than 25, however large, means
// 25); anything else (a sign, a fraction, an empty value) is 400.
func waitParam(c *Call) (time.Duration, error) {
	q := c.R.URL.Query()
	if !q.Has("wait") {
		return 0, nil
	}
	raw := q.Get("wait")
	if raw == "" || strings.Trim(raw, "0123456789") != "" {
		return 0, badRequest("invalid_wait", "wait must be an integer number of seconds from 0 to 25 (larger values mean 25), not %q", raw)
	}
	n, err := strconv.ParseUint(raw, 10, 32)
	if err != nil { // digits beyond the range: larger than 25
		return maxApprovalWait, nil
	}
	return min(time.Duration(n)*time.Second, maxApprovalWait), nil
}

// readApproval reads the call's approval as its principal may see it: an
// agent only its own (another's is the same 404 as an unknown id).
func (s *Server) readApproval(ctx context.Context, c *Call) (persistence.Approval, error) {
	a, err := s.Store.GetApproval(ctx, c.Principal.TenantID, c.Param("approval_id"))
	if err != nil {
		return a, orNotFound(err, "approval")
	}
	if c.Principal.Kind == KindAgent && a.AgentID != c.Principal.AgentID {
		return a, notFound("approval")
	}
	return a, nil
}

// waitApproval holds the call until a is no longer PENDING or the wait
// ends, and returns the approval as it then reads.
func (s *Server) waitApproval(c *Call, a persistence.Approval, wait time.Duration) (persistence.Approval, error) {
	ctx := c.Ctx()
	tenant, id := c.Principal.TenantID, c.Param("approval_id")
	deadline := time.Now().Add(wait)
	if a.ExpiresAt.Before(deadline) {
		deadline = a.ExpiresAt // it reads EXPIRED from then on
	}
	if d, ok := ctx.Deadline(); ok && d.Add(-waitGrace).Before(deadline) {
		deadline = d.Add(-waitGrace)
	}
	select {
	case <-s.Waits.Closing(): // shutting down: no new waits
		return a, nil
	default:
	}
	if !time.Now().Before(deadline) {
		return a, nil
	}
	if c.waiterHeld == "" { // no waiter's place was free when it arrived
		s.metrics.refused.WithLabelValues("approval_waiters").Inc()
		c.header.Set("Retry-After", "1")
		return a, nil
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		// Registered before the read, so that a decision made between the
		// read and the wait still wakes this one.
		wake, missed, done := s.Waits.Wait(tenant, id)
		cur, err := s.readApproval(ctx, c)
		if err != nil || cur.EffectiveStatus(time.Now()) != persistence.ApprovalPending {
			done()
			return cur, err
		}
		select {
		case <-wake:
		case <-missed:
		case <-timer.C:
			done()
			return s.readApproval(ctx, c)
		case <-s.Waits.Closing():
			done()
			return s.readApproval(ctx, c)
		case <-ctx.Done():
			done()
			return cur, ctx.Err()
		}
		done()
	}
}
