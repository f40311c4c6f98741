package receiptlog_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"svc/persistence"
	"svc/persistence/storetest"
	"svc/receiptlog"
)

// TestPublishSignsWhatTheChainHolds: a pass appends the committed
// receipts and signs a checkpoint of them, once per size; the store lists
// the tenant as behind until then; a later checkpoint is proven consistent
// with the earlier one by transparency-dev/merkle's verifier.
func TestPublishSignsWhatTheChainHolds(t *testing.T) {
	onBoth(t, func(t *testing.T, s persistence.Store) {
		ctx := context.Background()
		pub, key, err := ed25519.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		tenantID, commit := storetest.Chain(t, s)
		origin, err := receiptlog.Origin("svc.test/receipts", tenantID)
		if err != nil {
			t.Fatal(err)
		}
		keys, err := receiptlog.NewKeys(origin, pub, func(m []byte) []byte { return ed25519.Sign(key, m) })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := receiptlog.Publish(ctx, s, tenantID, keys, time.Now()); !errors.Is(err, persistence.ErrNotFound) {
			t.Fatalf("a tenant without receipts: %v, want ErrNotFound", err)
		}
		commit(9)
		behind(t, s, tenantID, true)
		first, err := receiptlog.Publish(ctx, s, tenantID, keys, time.Now())
		if err != nil || first.Size != 9 {
			t.Fatalf("Publish = %+v, %v", first, err)
		}
		behind(t, s, tenantID, false)
		cp, err := receiptlog.OpenCheckpoint([]byte(first.Note), keys.VerifierKey, origin)
		if err != nil || cp.Size != 9 || cp.Root != first.Root {
			t.Fatalf("the checkpoint does not open: %+v, %v", cp, err)
		}
		again, err := receiptlog.Publish(ctx, s, tenantID, keys, time.Now())
		if err != nil || again.Size != 9 || again.Note != first.Note {
			t.Fatalf("a pass without new receipts signed %+v, %v", again, err)
		}
		commit(40)
		// Two nodes' passes at once: one checkpoint of the new size.
		var wg sync.WaitGroup
		got := make([]persistence.Checkpoint, 2)
		for i := range got {
			wg.Go(func() {
				c, err := receiptlog.Publish(ctx, s, tenantID, keys, time.Now())
				if err != nil {
					t.Errorf("Publish: %v", err)
				}
				got[i] = c
			})
		}
		wg.Wait()
		if got[0].Size != 49 || got[0].Note != got[1].Note {
			t.Fatalf("racing passes: %d %q and %d %q", got[0].Size, got[0].Note, got[1].Size, got[1].Note)
		}
		earlier, err := s.CheckpointsBefore(ctx, tenantID, 49, 10)
		if err != nil || len(earlier) != 1 || earlier[0].Size != 9 {
			t.Fatalf("checkpoints before 49: %+v, %v", earlier, err)
		}
		p, err := receiptlog.Consistency(ctx, s, tenantID, 9, 49)
		if err != nil {
			t.Fatal(err)
		}
		if err := proof.VerifyConsistency(rfc6962.DefaultHasher, 9, 49, raw(p), first.Root[:], got[0].Root[:]); err != nil {
			t.Fatalf("the checkpoints are not proven consistent: %v", err)
		}
	})
}

func behind(t *testing.T, s persistence.Store, tenantID string, want bool) {
	t.Helper()
	ids, err := s.LogsBehind(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(ids, tenantID) != want {
		t.Fatalf("LogsBehind = %v; tenant %s behind: want %v", ids, tenantID, want)
	}
}
