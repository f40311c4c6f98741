package svcsdk

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// WaitForApproval waits until the approval d asked for is decided
// (long-polling GET /v2/approvals/:id?wait=N, N ≤ 25). The deadline is the
// earlier of d.ApprovalExpiresAt (plus 1 s of slack) and timeout (0: the
// client's WithApprovalTimeout, and when that is 0 too, the expiry alone).
// PENDING answers that came back early are followed by polls 1 to 5 s apart;
// transient failures are retried until the deadline.
//
// On APPROVED it returns the Approval with Call (the call to present: the
// identifiers as asked, the approved parameters) and Edited set; Call must
// hash to the approval's action_hash, and an approval for another tool,
// action or resource is refused (*ActionHashMismatch). Errors:
// *ApprovalRejected, *ApprovalExpired (EXPIRED, or the deadline passed while
// PENDING), *ActionHashMismatch, *SvcAuthError, *SvcError, *SvcUnavailable
// (only failures until the deadline), or the context's error (a cancelled
// context ends the wait at once).
func (c *Client) WaitForApproval(ctx context.Context, d *Decision, timeout time.Duration) (*Approval, error) {
	if d == nil {
		return nil, &SvcError{ErrorCode: "no_approval_id", Message: "svc: no approval_id to wait for"}
	}
	return c.wait(ctx, d.ApprovalID, d, d.ExpiresAt(), timeout)
}

// WaitForApprovalID is [Client.WaitForApproval] by approval id, when the
// Decision is not at hand: the Approval's Call is then the approval's own
// tool_call, checked against its action_hash.
func (c *Client) WaitForApprovalID(ctx context.Context, approvalID string, timeout time.Duration) (*Approval, error) {
	return c.wait(ctx, approvalID, nil, time.Time{}, timeout)
}

func (c *Client) wait(ctx context.Context, aid string, decision *Decision, expires time.Time, timeout time.Duration) (*Approval, error) {
	if aid == "" {
		return nil, &SvcError{ErrorCode: "no_approval_id", Message: "svc: no approval_id to wait for"}
	}
	var asked *ToolCall
	if decision != nil {
		asked = decision.ToolCall
	}
	if timeout <= 0 {
		timeout = c.approvalTimeout
	}
	var userDeadline time.Time // zero: none
	if timeout > 0 {
		userDeadline = time.Now().Add(timeout)
	}
	deadline := func() time.Time {
		if expires.IsZero() {
			return userDeadline
		}
		// A second of slack, so that svc's own EXPIRED answer usually ends the wait.
		exp := expires.Add(time.Second)
		if userDeadline.IsZero() || exp.Before(userDeadline) {
			return exp
		}
		return userDeadline
	}
	remainingTime := func() (time.Duration, bool) {
		dl := deadline()
		if dl.IsZero() {
			return 0, false
		}
		return time.Until(dl), true
	}
	sleepBounded := func(d time.Duration) error {
		if rem, ok := remainingTime(); ok && d > rem {
			d = rem
		}
		return sleep(ctx, d)
	}
	var last *Approval
	transient := ""
	failures, polls := 0, 0
	path := "/approvals/" + url.PathEscape(aid)
	for {
		if err := ctxErr(ctx); err != nil {
			return nil, err
		}
		rem, bounded := remainingTime()
		if bounded && rem <= 0 {
			if transient != "" && (last == nil || last.Status == StatusPending) {
				return nil, &SvcUnavailable{SvcError{ErrorCode: "svc_unavailable",
					Message: fmt.Sprintf("svc: approval %s: no answer before the deadline (%s)", aid, transient)}}
			}
			return nil, &ApprovalExpired{SvcError: SvcError{ErrorCode: "approval_wait_deadline",
				Message: fmt.Sprintf("svc: approval %s was not decided before the deadline", aid)}, Approval: last, Decision: decision}
		}
		wait := maxWait
		if bounded && rem < maxWait*time.Second {
			wait = int(rem / time.Second)
		}
		reqTimeout := time.Duration(wait)*time.Second + min(10*time.Second, c.timeout+5*time.Second)
		t0 := time.Now()
		rctx, cancel := context.WithTimeout(ctx, reqTimeout)
		resp, err := c.send(rctx, http.MethodGet, fmt.Sprintf("%s?wait=%d", path, wait), nil, false)
		cancel()
		if err != nil {
			if e := ctxErr(ctx); e != nil {
				return nil, e
			}
			transient, failures = err.Error(), failures+1
			if err := sleepBounded(Backoff(failures, 500*time.Millisecond, 5*time.Second) + 100*time.Millisecond); err != nil {
				return nil, err
			}
			continue
		}
		c.observe(resp)
		polls++
		if ShouldRetry(resp.status) {
			transient, failures = fmt.Sprintf("HTTP %d", resp.status), failures+1
			delay := Backoff(failures, 500*time.Millisecond, 5*time.Second) + 100*time.Millisecond
			if ra, ok := RetryAfter(resp.header.Get("Retry-After"), time.Now()); ok {
				delay = ra
			}
			if err := sleepBounded(delay); err != nil {
				return nil, err
			}
			continue
		}
		var a *Approval
		m, isObj := resp.JSON().(map[string]any)
		switch {
		case resp.status == 304 && last != nil:
			a = last
		case resp.status == 200 && isObj:
			a = approvalFromBody(m)
		case resp.status == 200:
			return nil, &SvcError{Status: 200, ErrorCode: "unreadable_answer", Header: resp.header,
				Message: fmt.Sprintf("svc: approval %s: the answer is not a JSON object", aid)}
		default:
			return nil, fromResponse(resp.status, resp.JSON(), resp.header, fmt.Sprintf("svc: approval %s: ", aid))
		}
		transient, failures, last = "", 0, a
		if t := parseTime(a.ExpiresAt); !t.IsZero() {
			expires = t
		}
		switch a.Status {
		case StatusApproved:
			return c.approved(a, asked, decision)
		case StatusRejected:
			msg := fmt.Sprintf("svc: approval %s was rejected", aid)
			if a.Reason != nil && *a.Reason != "" {
				msg += ": " + *a.Reason
			}
			return nil, &ApprovalRejected{SvcError: SvcError{ErrorCode: "approval_rejected", Message: msg}, Approval: a, Decision: decision}
		case StatusExpired:
			return nil, &ApprovalExpired{SvcError: SvcError{ErrorCode: "approval_expired",
				Message: fmt.Sprintf("svc: approval %s expired", aid)}, Approval: a, Decision: decision}
		case StatusPending:
		default:
			return nil, &SvcError{Status: resp.status, Body: a.Raw, ErrorCode: "unknown_approval_status",
				Message: fmt.Sprintf("svc: approval %s: unknown status %q", aid, a.Status)}
		}
		elapsed := time.Since(t0)
		if elapsed < time.Duration(max(0, float64(wait)-0.5)*float64(time.Second)) || wait == 0 {
			// Answered early while PENDING: a busy node (Retry-After), or a
			// server without ?wait. Poll gently: 1 to 5 s with jitter.
			delay := min(5*time.Second, time.Second+Backoff(min(polls, 3), 500*time.Millisecond, 4*time.Second))
			if ra, ok := RetryAfter(resp.header.Get("Retry-After"), time.Now()); ok {
				delay = ra
			}
			if wait == 0 {
				delay = min(delay, 250*time.Millisecond)
			}
			if err := sleepBounded(delay); err != nil {
				return nil, err
			}
		}
	}
}

// approved checks an APPROVED approval against the call asked and sets Call
// and Edited. The call to present must hash (svc-jcs-1) to the approval's
// action_hash.
func (c *Client) approved(a *Approval, asked *ToolCall, decision *Decision) (*Approval, error) {
	tc := a.ToolCall
	if tc == nil {
		return nil, &SvcError{ErrorCode: "unreadable_answer", Body: a.Raw, Message: fmt.Sprintf("svc: approval %s has no tool_call", a.ApprovalID)}
	}
	var params map[string]any
	switch p := tc["parameters"].(type) {
	case nil:
		params = map[string]any{}
	case map[string]any:
		params = p
	default:
		return nil, &SvcError{ErrorCode: "unreadable_answer", Message: fmt.Sprintf("svc: approval %s: tool_call.parameters is not an object", a.ApprovalID)}
	}
	params = copyJSON(params)
	var resource *string
	resOK := true
	switch r := tc["resource"].(type) {
	case nil:
	case string:
		resource = &r
	default:
		resOK = false
	}
	var call ToolCall
	var local string
	var certain bool
	unreadable := func(err error) error {
		return &SvcError{ErrorCode: "unreadable_answer", Message: fmt.Sprintf("svc: approval %s: tool_call has no canonical form: %v", a.ApprovalID, err)}
	}
	if asked == nil {
		tool, ok1 := tc["tool"].(string)
		action, ok2 := tc["action"].(string)
		if !ok1 || !ok2 || !resOK {
			return nil, unreadable(fmt.Errorf("tool, action and resource must be strings"))
		}
		call = ToolCall{Tool: tool, Action: action, Resource: resource, Parameters: params}
		h, err := NormalizedActionHash(call)
		if err != nil {
			return nil, unreadable(err)
		}
		local, certain = h, call.certain()
		a.Edited = false
	} else {
		tool, _ := tc["tool"].(string)
		action, _ := tc["action"].(string)
		sameRes := resOK && ((resource == nil && asked.Resource == nil) ||
			(resource != nil && asked.Resource != nil && *resource == *asked.Resource))
		sameTarget := tc["tool"] != nil && tc["action"] != nil && NormalizeIdentifier(asked.Tool) == tool &&
			NormalizeIdentifier(asked.Action) == action && sameRes
		certain = asked.certain()
		if !sameTarget && certain {
			return nil, &ActionHashMismatch{SvcError: SvcError{ErrorCode: "action_hash_mismatch",
				Message: fmt.Sprintf("svc: approval %s is for another call (%v/%v)", a.ApprovalID, tc["tool"], tc["action"])},
				Remote: a.ActionHash}
		}
		call = ToolCall{Tool: asked.Tool, Action: asked.Action, Resource: asked.Resource, Parameters: params}
		askedParams := asked.Parameters
		if askedParams == nil {
			askedParams = map[string]any{}
		}
		a.Edited = !sameJSON(askedParams, params)
		h, err := ActionHash(call)
		if err != nil {
			return nil, unreadable(err)
		}
		local = h
	}
	a.Call = &call
	if a.ActionHash != local {
		if certain {
			return nil, &ActionHashMismatch{SvcError: SvcError{ErrorCode: "action_hash_mismatch",
				Message: fmt.Sprintf("svc: approval %s: action_hash %s does not match the approved call's %s", a.ApprovalID, a.ActionHash, local)},
				Local: local, Remote: a.ActionHash}
		}
		c.warn("svc: approval %s: action_hash %s differs from the local %s; identifiers beyond this toolchain's Unicode tables, so the server's is trusted",
			a.ApprovalID, a.ActionHash, local)
		if decision != nil {
			decision.HashMismatch = true
		}
	}
	return a, nil
}

// copyJSON deep-copies a JSON object.
func copyJSON(m map[string]any) map[string]any {
	v, err := jsonValue(m)
	if err != nil {
		return m
	}
	out, _ := v.(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	return out
}
