package process

// What an SDK relies on, end to end (CONTRACT §14): waiting for an
// approval without polling, whichever node decides it; an agent reading
// the receipts of its own calls; and the approval callback registered with
// SPEC 4.2's webhook field.

import (
	"testing"
	"time"

	"svc/testkit"
	"svc/testkit/gateway"
)

// TestE2EApprovalWaitShutdown: SIGTERM answers every waiting request at
// once (the approval as it stands) instead of holding the shutdown for the
// rest of their waits.
func TestE2EApprovalWaitShutdown(t *testing.T) {
	t.Parallel()
	s := gateway.StartProcessOn(t, gateway.DBURLFor(t, "sqlite"), map[string]string{"SVC_RATE_LIMIT_CAPACITY": "100000"})
	_, admin := s.Tenant(t, "ws-"+testkit.Uniq())
	tok, _, id := gateway.ApRequire(t, s, admin)
	ch := gateway.WaitFor(t, s, tok, id, "25")
	gateway.WaitingOn(t, s, 1)
	code, took := s.Stop(t)
	r := gateway.Recv(t, ch, 20*time.Second)
	if code != 0 || r.Status != 200 || r.Body["status"] != "PENDING" {
		t.Fatalf("SIGTERM with a waiter: exit %d after %s; the wait answered %d %v", code, took, r.Status, r.Body)
	}
	// The shutdown timeout is 20 s and the wait 25 s: a stop well under
	// either shows the waiter was answered, not waited for.
	if took > 10*time.Second || r.Took > 15*time.Second {
		t.Fatalf("SIGTERM with a waiter: exit after %s, the wait answered after %s", took, r.Took)
	}
	t.Logf("SIGTERM with a waiter: exit 0 after %s; the wait answered PENDING after %s (Retry-After %q)", took.Round(time.Millisecond), r.Took.Round(time.Millisecond), r.Header.Get("Retry-After"))
}
