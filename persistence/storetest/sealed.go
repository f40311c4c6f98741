package storetest

import (
	"sync/atomic"
	"testing"

	"svc/persistence"
)

// keepSeal is testSeal as the real sealer behaves: receipts sealed ahead of
// time (a lone node seals on arrival) are kept when they continue the head
// read in the transaction, and resealed otherwise; resealed counts the
// runs it resealed.
type keepSeal struct{ resealed atomic.Int64 }

func (k *keepSeal) seal(tenantID string, head persistence.ChainHead, rs []*persistence.Receipt) error {
	if persistence.Continues(head, rs) {
		return nil
	}
	k.resealed.Add(1)
	return testSeal(tenantID, head, rs)
}

// preseal seals ws's receipts ahead of time against *head, as the writer
// does, and advances it.
func preseal(head *persistence.ChainHead, ws []persistence.DecisionWrite) {
	rs := make([]*persistence.Receipt, len(ws))
	for i := range ws {
		rs[i] = ws[i].Receipt
	}
	_ = testSeal("", *head, rs)
	*head = persistence.ChainHead{Seq: rs[len(rs)-1].Seq, Hash: rs[len(rs)-1].Hash}
}

// RunSealedAhead runs the contract for receipts sealed before their group
// commit (a lone node seals on arrival): kept when they continue the head,
// resealed, never forked, when not. advances says the store writes such
// receipts with a conditional head advance (Postgres) and counts it
// (HeadAdvances), which the tests then check too.
func RunSealedAhead(t *testing.T, open func(t *testing.T) persistence.Store, advances bool) {
	tests := []struct {
		name            string
		fn              func(t *testing.T, s persistence.Store)
		advanced, moved int64 // group commits written with a conditional advance, and rewritten
	}{
		{"runs that continue the head are kept", testSealedKept, 4, 0},
		{"runs sealed against a stale or missing head are resealed", testSealedStale, 1, 3},
		// The failed group commit is written with its heads locked first:
		// its unknown tenant's receipt is not sealed ahead.
		{"a run after a failed one is resealed", testSealedAfterFailure, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			tc.fn(t, s)
			if !advances {
				return
			}
			h, ok := s.(interface{ HeadAdvances() (int64, int64) })
			if !ok {
				t.Fatal("the store does not report its head advances")
			}
			last, moved := h.HeadAdvances()
			if last != tc.advanced || moved != tc.moved {
				t.Fatalf("%d group commits advanced their heads conditionally (want %d), %d were rewritten (want %d)",
					last, tc.advanced, moved, tc.moved)
			}
		})
	}
}

// verifySealedChain checks the tenant's stored chain: seqs 1..n, each linked to
// the one before, the head at the last, and every receipt in want stored
// with the hash its caller holds.
func verifySealedChain(t *testing.T, s persistence.Store, tenantID string, n int, want []persistence.DecisionWrite) {
	t.Helper()
	rs, err := s.ReceiptRange(ctx(t), tenantID, 1, 0, 100000)
	if err != nil || len(rs) != n {
		t.Fatalf("receipts = %d, %v; want %d", len(rs), err, n)
	}
	byID := map[string]persistence.Receipt{}
	prev := ""
	for i, r := range rs {
		if r.Seq != int64(i+1) || r.PrevHash != prev {
			t.Fatalf("chain forked or has a gap at index %d: %+v", i, r)
		}
		prev = r.Hash
		byID[r.ID] = r
	}
	if h, err := s.ChainHead(ctx(t), tenantID); err != nil || h.Seq != int64(n) || h.Hash != prev {
		t.Fatalf("head = %+v, %v; want seq %d", h, err, n)
	}
	for _, w := range want {
		if got := byID[w.Receipt.ID]; got.Hash != w.Receipt.Hash || got.Seq != w.Receipt.Seq {
			t.Fatalf("receipt %s stored as seq %d %s, its caller holds seq %d %s", w.Receipt.ID, got.Seq, got.Hash, w.Receipt.Seq, w.Receipt.Hash)
		}
	}
}

func batch(tenantID string, n int) []persistence.DecisionWrite {
	ws := make([]persistence.DecisionWrite, n)
	for i := range ws {
		ws[i] = decisionWrite(tenantID, "agent", "allow", nil)
	}
	return ws
}

func testSealedKept(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	var k keepSeal
	var ha, hb persistence.ChainHead
	var all []persistence.DecisionWrite
	for _, n := range []int{1, 3, 2} { // the first creates the head
		ws := batch(a.ID, n)
		preseal(&ha, ws)
		if err := s.CommitDecisions(ctx(t), ws, k.seal); err != nil {
			t.Fatal(err)
		}
		all = append(all, ws...)
	}
	// Two tenants in one group commit.
	wa, wb := batch(a.ID, 2), batch(b.ID, 3)
	preseal(&ha, wa)
	preseal(&hb, wb)
	if err := s.CommitDecisions(ctx(t), append(append([]persistence.DecisionWrite{}, wb...), wa...), k.seal); err != nil {
		t.Fatal(err)
	}
	if n := k.resealed.Load(); n != 0 {
		t.Fatalf("%d runs that continued the head were resealed", n)
	}
	verifySealedChain(t, s, a.ID, 8, append(all, wa...))
	verifySealedChain(t, s, b.ID, 3, wb)
}

func testSealedStale(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	var k keepSeal
	var h persistence.ChainHead
	first := batch(a.ID, 4)
	preseal(&h, first)
	if err := s.CommitDecisions(ctx(t), first, k.seal); err != nil {
		t.Fatal(err)
	}
	// Sealed against seq 2 while the head is at 4: resealed as 5 and 6.
	stale := batch(a.ID, 2)
	old := persistence.ChainHead{Seq: first[1].Receipt.Seq, Hash: first[1].Receipt.Hash}
	preseal(&old, stale)
	if err := s.CommitDecisions(ctx(t), stale, k.seal); err != nil {
		t.Fatal(err)
	}
	// Sealed ahead of the head (seq 9 onwards while it is at 6).
	ahead := batch(a.ID, 1)
	far := persistence.ChainHead{Seq: 8, Hash: "not-a-hash"}
	preseal(&far, ahead)
	if err := s.CommitDecisions(ctx(t), ahead, k.seal); err != nil {
		t.Fatal(err)
	}
	// A tenant without a head yet, sealed as if it had one.
	b, _ := mustTenant(t, s, "b")
	nohead := batch(b.ID, 2)
	far = persistence.ChainHead{Seq: 4, Hash: "x"}
	preseal(&far, nohead)
	if err := s.CommitDecisions(ctx(t), nohead, k.seal); err != nil {
		t.Fatal(err)
	}
	if n := k.resealed.Load(); n != 3 {
		t.Fatalf("resealed %d runs, want 3", n)
	}
	verifySealedChain(t, s, a.ID, 7, append(append(first, stale...), ahead...))
	verifySealedChain(t, s, b.ID, 2, nohead)
}

func testSealedAfterFailure(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	var k keepSeal
	var h persistence.ChainHead
	failed := append(batch(a.ID, 2), decisionWrite("no-such-tenant", "agent", "allow", nil))
	rs := []*persistence.Receipt{failed[0].Receipt, failed[1].Receipt}
	_ = testSeal("", h, rs)
	h = persistence.ChainHead{Seq: 2, Hash: rs[1].Hash}
	if err := s.CommitDecisions(ctx(t), failed, k.seal); err == nil {
		t.Fatal("a group commit with a write for an unknown tenant committed")
	}
	next := batch(a.ID, 3) // sealed as 3..5, continuing the failed run
	preseal(&h, next)
	if err := s.CommitDecisions(ctx(t), next, k.seal); err != nil {
		t.Fatal(err)
	}
	verifySealedChain(t, s, a.ID, 3, next)
}
