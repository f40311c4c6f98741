package storetest

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"svc/persistence"
)

// testApprovalCallbacks: a callback written with its approval is due once
// the approval is decided or expired, never before; an attempt is claimed
// by one caller at a time, at most MaxCallbackAttempts in all; a finished
// callback is due no more; the approval's deletion takes its callback.
func testApprovalCallbacks(t *testing.T, s persistence.Store) {
	tn, _ := mustTenant(t, s, "a")
	ag := mustAgent(t, s, tn.ID, "bot")
	now := usNow()
	write := func(ttl time.Duration) persistence.Approval {
		w := approvalWrite(tn.ID, ag.ID, now, ttl)
		w.Approval.Callback = &persistence.ApprovalCallback{URL: "https://agent.example/cb", Secret: "s3cret"}
		if err := s.CommitDecisions(ctx(t), []persistence.DecisionWrite{w}, testSeal); err != nil {
			t.Fatalf("CommitDecisions with a callback: %v", err)
		}
		return *w.Approval
	}
	plain := mustApproval(t, s, tn.ID, ag.ID, time.Hour) // no callback
	pending, decided, expiring := write(time.Hour), write(time.Hour), write(time.Minute)
	mustDecide(t, s, tn.ID, decided.ID, persistence.ApprovalRejected, now.Add(time.Second))
	mustDecide(t, s, tn.ID, plain.ID, persistence.ApprovalApproved, now.Add(time.Second))

	due, err := s.DueCallbacks(ctx(t), now.Add(2*time.Second), 10)
	if err != nil || len(due) != 1 || due[0].Approval.ID != decided.ID || due[0].Callback.URL != "https://agent.example/cb" ||
		due[0].Callback.Secret != "s3cret" || due[0].Approval.Status != persistence.ApprovalRejected || due[0].Attempts != 0 {
		t.Fatalf("due before the expiry: %+v, %v; want the rejected one only", due, err)
	}
	if _, err := s.DueCallback(ctx(t), tn.ID, pending.ID, now.Add(2*time.Second)); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("a pending approval's callback is due: %v", err)
	}
	later := now.Add(2 * time.Minute)
	if d, err := s.DueCallback(ctx(t), tn.ID, expiring.ID, later); err != nil || d.Approval.EffectiveStatus(later) != persistence.ApprovalExpired {
		t.Fatalf("an expired approval's callback: %+v, %v", d, err)
	}

	// Concurrent claims of one attempt: exactly one wins.
	var won atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ok, err := s.ClaimCallbackAttempt(ctx(t), decided.ID, later, later.Add(30*time.Second)); err == nil && ok {
				won.Add(1)
			}
		}()
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d concurrent claims won, want 1", won.Load())
	}
	if d, err := s.DueCallbacks(ctx(t), later, 10); err != nil || len(d) != 1 || d[0].Approval.ID != expiring.ID {
		t.Fatalf("a claimed callback is due: %+v, %v", d, err)
	}
	// Past its claim, two more attempts, then no more.
	at := later
	for i := 2; i <= persistence.MaxCallbackAttempts; i++ {
		at = at.Add(time.Minute)
		if ok, err := s.ClaimCallbackAttempt(ctx(t), decided.ID, at, at.Add(30*time.Second)); err != nil || !ok {
			t.Fatalf("attempt %d not claimed: %v", i, err)
		}
	}
	at = at.Add(time.Minute)
	if ok, err := s.ClaimCallbackAttempt(ctx(t), decided.ID, at, at.Add(30*time.Second)); err != nil || ok {
		t.Fatalf("an attempt past %d was claimed (%v)", persistence.MaxCallbackAttempts, err)
	}
	// A retry time holds the callback back until then; a finished one is
	// never due again.
	if err := s.RetryCallbackAt(ctx(t), expiring.ID, later.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if d, _ := s.DueCallbacks(ctx(t), later, 10); len(d) != 0 {
		t.Fatalf("due before its retry time: %+v", d)
	}
	if err := s.FinishCallback(ctx(t), expiring.ID, "delivered", 204, later); err != nil {
		t.Fatal(err)
	}
	if d, _ := s.DueCallbacks(ctx(t), later.Add(30*time.Minute), 10); len(d) != 0 {
		t.Fatalf("a finished callback is due: %+v", d)
	}
	if n, err := s.DeleteStaleApprovals(ctx(t), later.Add(3*time.Hour)); err != nil || n < 3 {
		t.Fatalf("DeleteStaleApprovals: %d, %v", n, err)
	}
	if ok, err := s.ClaimCallbackAttempt(ctx(t), expiring.ID, later.Add(4*time.Hour), later.Add(5*time.Hour)); err != nil || ok {
		t.Fatalf("a deleted approval's callback was claimed (%v)", err)
	}
}
