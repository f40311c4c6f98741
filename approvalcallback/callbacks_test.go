package approvalcallback

import (
	"testing"
	"time"

	"svc/persistence"
)

// A callback's body is the approval's outcome: a decided approval as it
// was decided, one that expired undecided as EXPIRED at its expiry
// (CONTRACT §14).
func TestCallbackBody(t *testing.T) {
	expires := time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)
	decided := expires.Add(-time.Minute)
	tests := []struct {
		name     string
		approval persistence.Approval
		want     Body
	}{
		{name: "approved", approval: persistence.Approval{ID: "a", DecisionID: "d", Status: persistence.ApprovalApproved, ActionHash: "h",
			DecidedAt: &decided, ExpiresAt: expires},
			want: Body{ApprovalID: "a", DecisionID: "d", Status: persistence.ApprovalApproved, ActionHash: "h", DecidedAt: decided}},
		{name: "expired undecided", approval: persistence.Approval{ID: "a", DecisionID: "d", Status: persistence.ApprovalPending, ActionHash: "h",
			ExpiresAt: expires},
			want: Body{ApprovalID: "a", DecisionID: "d", Status: persistence.ApprovalExpired, ActionHash: "h", DecidedAt: expires}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := callbackBody(tc.approval); got != tc.want {
				t.Errorf("callbackBody = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The wait after a failed attempt: a second after the first, four after
// the later ones.
func TestCallbackBackoff(t *testing.T) {
	for n, want := range map[int]time.Duration{1: time.Second, 2: 4 * time.Second, 3: 4 * time.Second} {
		if got := callbackBackoff(n); got != want {
			t.Errorf("callbackBackoff(%d) = %v, want %v", n, got, want)
		}
	}
}
