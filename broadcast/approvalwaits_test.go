package broadcast

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"svc/persistence/sharedstate"
)

// closed reports whether ch is closed within d.
func closed(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// TestApprovalWaitsAcrossNodes: two hubs on one shared state stand for two
// nodes; a decision on one wakes the other's waiters of that approval
// only, and a waiter that left is not kept.
func TestApprovalWaitsAcrossNodes(t *testing.T) {
	shared := sharedstate.NewMemory()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, b := NewApprovalWaits(shared, hclog.NewNullLogger()), NewApprovalWaits(shared, hclog.NewNullLogger())
	go a.Run(ctx)
	go b.Run(ctx)

	wake1, _, done1 := b.Wait("t1", "ap1")
	defer done1()
	wake1again, _, done1again := b.Wait("t1", "ap1")
	defer done1again()
	wake2, _, done2 := b.Wait("t1", "ap2")
	defer done2()
	wakeOther, _, doneOther := b.Wait("t2", "ap1") // the same id in another tenant
	defer doneOther()
	if n := b.Waiting(); n != 4 {
		t.Fatalf("Waiting %d, want 4", n)
	}
	// The subscription may not be made yet: decide until it is seen.
	deadline := time.Now().Add(10 * time.Second)
	for !closed(wake1, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a decision on the other node never woke the waiter")
		}
		a.Decided(ctx, "t1", "ap1")
	}
	if !closed(wake1again, time.Second) {
		t.Fatal("the second waiter of the approval was not woken")
	}
	if closed(wake2, 100*time.Millisecond) || closed(wakeOther, 100*time.Millisecond) {
		t.Fatal("a waiter of another approval was woken")
	}
	if b.Woken() != 1 {
		t.Fatalf("Woken %d, want 1", b.Woken())
	}
	done2()
	doneOther()
	done2() // twice is harmless
	if n := b.Waiting(); n != 0 {
		t.Fatalf("Waiting %d after every waiter left or was woken, want 0", n)
	}
}

// TestApprovalWaitsMissed: when the subscription ends, every waiter is
// told to read again.
func TestApprovalWaitsMissed(t *testing.T) {
	w := NewApprovalWaits(sharedstate.NewMemory(), hclog.NewNullLogger())
	_, missed, done := w.Wait("t1", "ap1")
	defer done()
	w.wakeAll()
	if !closed(missed, time.Second) {
		t.Fatal("missed not closed")
	}
	_, missed2, done2 := w.Wait("t1", "ap1")
	defer done2()
	if closed(missed2, 50*time.Millisecond) {
		t.Fatal("a new waiter sees the old missed signal")
	}
}
