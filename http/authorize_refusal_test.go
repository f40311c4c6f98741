package httpapi

import (
	"testing"

	"svc/messages"
)

// Each authorize refusal keeps the status and reason it has always been
// answered with (CONTRACT §4, §10); an unknown one is a 500.
func TestRefusalStatuses(t *testing.T) {
	for _, tc := range []struct {
		r      messages.Refusal
		status int
		reason string
	}{
		{messages.RefusalInvalid, 400, "BadRequest"},
		{messages.RefusalNotPermitted, 403, "Forbidden"},
		{messages.RefusalThrottled, 429, "TooManyRequests"},
		{messages.RefusalInFlight, 409, "Conflict"},
		{messages.RefusalStoreUnavailable, 500, "InternalError"},
		{messages.RefusalUnavailable, 503, "ServiceUnavailable"},
		{messages.Refusal(0), 500, "InternalError"},
		{messages.Refusal(200), 500, "InternalError"},
	} {
		if got, reason := RefusalStatus(tc.r), refusalReason(tc.r); got != tc.status || reason != tc.reason {
			t.Errorf("refusal %d: %d %s, want %d %s", tc.r, got, reason, tc.status, tc.reason)
		}
	}
	if len(refusalReasons) != int(messages.RefusalUnavailable) {
		t.Errorf("%d refusals mapped, %d defined", len(refusalReasons), messages.RefusalUnavailable)
	}
}
