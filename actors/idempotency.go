package actors

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"svc/messages"
	"svc/persistence"
)

// Idempotency (SPEC 4.2 rule 2): a request_id is claimed in the shared
// state while its call is decided, and its answer remembered.

// claimRequest implements rule 2 (idempotency): the first call with a
// request_id claims it atomically (SET NX) and evaluates; later ones get
// its answer, waiting while it is in flight.
func (a *Authorizer) claimRequest(ctx context.Context, m *messages.Authorize, key string) (messages.AuthorizeOutcome, bool) {
	ok, err := a.shared.SetNX(ctx, key, "pending", a.opt.IdempotencyTTL)
	if err != nil {
		return *sharedFailure(a.log, err), true
	}
	if ok {
		// The claim is ours. A decision committed before the shared state
		// was lost is still the answer.
		d, err := a.store.FindDecisionByRequest(ctx, m.TenantID, m.AgentID, *m.Request.RequestID)
		if err == nil {
			resp := responseFromDecision(d, m.Request.RequestID)
			if d.Decision == "require_approval" {
				// The approval to present goes with the answer (CONTRACT §4);
				// one deleted since (SVC_APPROVAL_RETENTION_DAYS) is left out.
				if ap, err := a.store.ApprovalForDecision(ctx, m.TenantID, d.ID); err == nil {
					expires := ap.ExpiresAt
					resp.ApprovalID, resp.ApprovalExpiresAt = ap.ID, &expires
				} else if !errors.Is(err, persistence.ErrNotFound) {
					a.releaseRequest(key)
					return failure(messages.RefusalStoreUnavailable, "database_unavailable", "the database is unavailable", 1), true
				}
			}
			a.rememberResponse(key, resp)
			return messages.AuthorizeOutcome{Response: resp}, true
		}
		if !errors.Is(err, persistence.ErrNotFound) {
			a.releaseRequest(key)
			return failure(messages.RefusalStoreUnavailable, "database_unavailable", "the database is unavailable", 1), true
		}
		return messages.AuthorizeOutcome{}, false
	}
	for {
		v, found, err := a.shared.Get(ctx, key)
		if err != nil {
			return *sharedFailure(a.log, err), true
		}
		if found && v != "pending" {
			var resp messages.AuthorizeResponse
			if json.Unmarshal([]byte(v), &resp) == nil {
				return messages.AuthorizeOutcome{Response: &resp}, true
			}
		}
		if !found {
			// The first call failed and released its claim: try again.
			return a.claimRequest(ctx, m, key)
		}
		select {
		case <-ctx.Done():
			return failure(messages.RefusalInFlight, "request_in_flight", "a call with this request_id is still being decided", 0), true
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func (a *Authorizer) rememberResponse(key string, resp *messages.AuthorizeResponse) {
	if key == "" {
		return
	}
	raw, err := json.Marshal(resp)
	if err != nil {
		return
	}
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.shared.Set(c, key, string(raw), a.opt.IdempotencyTTL); err != nil {
		a.log.Warn("idempotent answer not recorded; the decision row still answers a retry", "error", err)
	}
}

func (a *Authorizer) releaseRequest(key string) {
	if key == "" {
		return
	}
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = a.shared.Del(c, key)
}

func responseFromDecision(d persistence.Decision, requestID *string) *messages.AuthorizeResponse {
	return &messages.AuthorizeResponse{Decision: d.Decision, Reason: d.Reason, CompositeRiskScore: d.CompositeRiskScore,
		RootTrustLevel: d.RootTrustLevel, RedactedFields: nonNil(d.RedactedFields), DecisionID: d.ID, ActionHash: d.ActionHash,
		RiskScore: d.RiskScore, MatchedPolicies: nonNil(d.MatchedPolicyIDs), ReceiptID: d.ReceiptID, ReceiptHash: d.ReceiptHash,
		RequestID: requestID}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
