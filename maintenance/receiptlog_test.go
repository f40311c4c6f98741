package maintenance

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"svc/outbound"
	"svc/persistence"
	"svc/receipt"
	"svc/receiptlog"
	"svc/receiptlog/witnesstest"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// logged is a maintained store whose receipts are signed and logged.
type logged struct {
	maintained
	signer *receipt.Signer
	keys   receiptlog.Keys
	m      *Maintenance
}

func newLogged(t *testing.T, st maintained) logged {
	t.Helper()
	signer, err := receipt.NewSigner(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	origin, err := receiptlog.Origin("svc", st.tenantID)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := receiptlog.NewKeys(origin, signer.PublicKey(), signer.SignNote)
	if err != nil {
		t.Fatal(err)
	}
	m := New(st.store, Options{PublicKey: signer.PublicKey(), LogOrigin: "svc"}, hclog.NewNullLogger())
	return logged{maintained: st, signer: signer, keys: keys, m: m}
}

// publish appends the committed receipts to the log and signs a
// checkpoint, as the leader's job does.
func (l logged) publish(t *testing.T) persistence.Checkpoint {
	t.Helper()
	c, err := receiptlog.Publish(context.Background(), l.store, l.tenantID, l.keys, time.Now())
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	return c
}

// broken runs an integrity pass and returns the tenant's break (0, "" for
// none).
func (l logged) broken(t *testing.T) (int64, string) {
	t.Helper()
	p, err := l.m.CheckReceipts(context.Background())
	if err != nil {
		t.Fatalf("CheckReceipts: %v", err)
	}
	for _, b := range p.Broken {
		if b.TenantID == l.tenantID {
			return b.BrokenSeq, b.BrokenError
		}
	}
	return 0, ""
}

// rewriteTail replaces the receipts after seq with n new ones, sealed,
// signed and linked onto seq as the gateway would: a chain that verifies.
// The integrity job's own state is reset too, as an insider would.
func (l logged) rewriteTail(t *testing.T, seq int64, n int) {
	t.Helper()
	rs, err := l.store.ReceiptRange(context.Background(), l.tenantID, seq, seq, 1)
	if err != nil || len(rs) != 1 {
		t.Fatalf("receipt %d: %v", seq, err)
	}
	l.exec(t, `DELETE FROM decisions WHERE tenant_id = $1 AND receipt_seq > $2`, l.tenantID, seq)
	l.exec(t, `UPDATE receipt_heads SET seq = $2, hash = $3 WHERE tenant_id = $1`, l.tenantID, seq, rs[0].Hash)
	if n > 0 {
		l.commit(t, l.signer, n)
	}
	l.exec(t, `DELETE FROM receipt_checks WHERE tenant_id = $1`, l.tenantID)
}

// witnessed starts a witness (litewitness) following the tenant's log and
// configures it for the tenant, as an operator would.
func (l logged) witnessed(t *testing.T) persistence.ReceiptWitness {
	t.Helper()
	w := witnesstest.Start(t, "witness.test/w1")
	w.Follow(t, l.keys.Signer.Name(), l.keys.VerifierKey)
	rec, err := l.store.CreateWitness(context.Background(), persistence.ReceiptWitness{ID: uuid.NewString(), TenantID: l.tenantID,
		URL: w.URL, Key: w.Key, CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// ask has the witness asked to cosign the latest checkpoint, as the
// leader's job does, and returns what it answered and the witness as then
// stored.
func (l logged) ask(t *testing.T, id string) (persistence.ReceiptWitness, error) {
	t.Helper()
	ctx := context.Background()
	ws, err := l.store.ListWitnesses(ctx, l.tenantID)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.ID != id {
			continue
		}
		latest, err := l.store.LatestCheckpoint(ctx, l.tenantID)
		if err != nil {
			t.Fatal(err)
		}
		answer := receiptlog.AskWitness(ctx, l.store, outbound.Exchanger(true), w, latest, time.Now())
		after, err := l.store.ListWitnesses(ctx, l.tenantID)
		if err != nil || len(after) != len(ws) {
			t.Fatalf("witnesses after asking: %+v, %v", after, err)
		}
		for _, a := range after {
			if a.ID == id {
				return a, answer
			}
		}
	}
	t.Fatalf("no witness %s", id)
	return persistence.ReceiptWitness{}, nil
}

// refused requires the witness to have refused the latest checkpoint, and
// the witness's record to say so.
func (l logged) refused(t *testing.T, id, what string) {
	t.Helper()
	w, err := l.ask(t, id)
	var refusal *receiptlog.RefusedError
	if !errors.As(err, &refusal) || w.Status != persistence.WitnessRefused || !strings.Contains(w.Error, "refused") {
		t.Fatalf("%s: the witness answered %v and is %s (%s), want a refusal", what, err, w.Status, w.Error)
	}
}

// TestReceiptLogIntegrity: the integrity pass catches what the chain
// alone cannot: a tail rewritten, re-signed and relinked (the log's leaves
// differ), and the same with the log rebuilt and re-signed (the new
// checkpoint is not consistent with the earlier one).
func TestReceiptLogIntegrity(t *testing.T) {
	onBothBackends(t, func(t *testing.T, st maintained) {
		l := newLogged(t, st)
		witness := l.witnessed(t)
		l.commit(t, l.signer, 9)
		first := l.publish(t)
		if first.Size != 9 {
			t.Fatalf("checkpoint of %d", first.Size)
		}
		l.cosigned(t, witness.ID, 9)
		// An answer whose record was lost (the witness cosigned 9, the
		// record says 0): asked again, the witness names its size, is asked
		// from it and cosigns the same checkpoint again: no refusal, and
		// the checkpoint keeps one cosignature of it.
		l.exec(t, `UPDATE receipt_witnesses SET size = 0 WHERE id = $1`, witness.ID)
		l.cosigned(t, witness.ID, 9)
		if c, err := l.store.LatestCheckpoint(context.Background(), l.tenantID); err != nil || strings.Count(c.Note, "— witness.test/w1 ") != 1 {
			t.Fatalf("the checkpoint's cosignatures: %v\n%s", err, c.Note)
		}
		l.commit(t, l.signer, 1)
		saved := l.publish(t) // an auditor keeps it
		if saved.Size != 10 {
			t.Fatalf("checkpoint of %d", saved.Size)
		}
		// Untouched, the log proves the two consistent.
		proof, err := receiptlog.Consistency(context.Background(), l.store, l.tenantID, 9, 10)
		if err != nil || tlog.CheckTree(proof, 10, saved.Root, 9, first.Root) != nil {
			t.Fatalf("the untouched log's checkpoints of 9 and 10 are not proven consistent: %v", err)
		}
		l.cosigned(t, witness.ID, 10)
		if seq, why := l.broken(t); seq != 0 {
			t.Fatalf("an untouched log is broken at %d: %s", seq, why)
		}

		// Receipts 8 to 10 rewritten: the chain verifies, the log does not.
		l.rewriteTail(t, 7, 3)
		if seq, why := l.broken(t); seq != 8 || !strings.Contains(why, "leaf") {
			t.Fatalf("a rewritten tail: broken at %d (%s), want 8", seq, why)
		}
		// The log rebuilt from the rewritten chain and its checkpoint of 10
		// signed again: it is not consistent with the checkpoint of 9.
		l.exec(t, `DELETE FROM receipt_log_hashes WHERE tenant_id = $1`, l.tenantID)
		l.exec(t, `DELETE FROM receipt_log WHERE tenant_id = $1`, l.tenantID)
		l.exec(t, `DELETE FROM receipt_checkpoints WHERE tenant_id = $1 AND tree_size = 10`, l.tenantID)
		if c := l.publish(t); c.Size != 10 {
			t.Fatalf("the rebuilt log's checkpoint is of %d", c.Size)
		}
		l.exec(t, `DELETE FROM receipt_checks WHERE tenant_id = $1`, l.tenantID)
		if seq, why := l.broken(t); seq != 10 || !strings.Contains(why, "not consistent") {
			t.Fatalf("a rebuilt log: broken at %d (%s), want 10", seq, why)
		}
		// The witness cosigned the honest checkpoint of 10: it refuses the
		// rebuilt one (another root at its size), and the next larger one
		// (no consistency proof from its 10 verifies).
		l.refused(t, witness.ID, "the rebuilt checkpoint of 10")
		l.commit(t, l.signer, 2)
		if c := l.publish(t); c.Size != 12 {
			t.Fatalf("checkpoint of %d", c.Size)
		}
		l.refused(t, witness.ID, "a checkpoint of 12 grown from the rebuilt log")
		l.inconsistent(t, saved, 12)
	})
}

// inconsistent requires the log's consistency proof from the saved
// checkpoint to the latest, of size, not to verify against the saved root:
// what an auditor who kept saved sees.
func (l logged) inconsistent(t *testing.T, saved persistence.Checkpoint, size int64) {
	t.Helper()
	ctx := context.Background()
	latest, err := l.store.LatestCheckpoint(ctx, l.tenantID)
	if err != nil || latest.Size != size {
		t.Fatalf("latest checkpoint %d, %v; want %d", latest.Size, err, size)
	}
	proof, err := receiptlog.Consistency(ctx, l.store, l.tenantID, saved.Size, latest.Size)
	if err != nil {
		return // no proof at all: caught as well
	}
	if err := tlog.CheckTree(proof, latest.Size, latest.Root, saved.Size, saved.Root); err == nil {
		t.Fatalf("the tampered log's checkpoint of %d is proven consistent with the saved one of %d", latest.Size, saved.Size)
	}
}

// cosigned asks the witness to cosign the latest checkpoint, of size, and
// requires its cosignature in the checkpoint kept, verifiable with its key.
func (l logged) cosigned(t *testing.T, id string, size int64) {
	t.Helper()
	w, err := l.ask(t, id)
	if err != nil || w.Status != persistence.WitnessOK || w.Size != size || w.CheckedAt == nil {
		t.Fatalf("the witness answered %v and is %+v, want ok at %d", err, w, size)
	}
	latest, err := l.store.LatestCheckpoint(context.Background(), l.tenantID)
	if err != nil {
		t.Fatal(err)
	}
	v, err := receiptlog.WitnessVerifier(w.Key)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open([]byte(latest.Note), note.VerifierList(v, l.keys.Verifier))
	if err != nil || len(n.Sigs) != 2 {
		t.Fatalf("the checkpoint of %d kept is not cosigned: %v\n%s", latest.Size, err, latest.Note)
	}
}

// TestReceiptLogIntegrityRemovedTail: receipts removed from the end of the
// chain, its head moved back to match: the log still holds them.
func TestReceiptLogIntegrityRemovedTail(t *testing.T) {
	onBothBackends(t, func(t *testing.T, st maintained) {
		l := newLogged(t, st)
		witness := l.witnessed(t)
		l.commit(t, l.signer, 6)
		saved := l.publish(t)
		l.cosigned(t, witness.ID, 6)
		l.rewriteTail(t, 4, 0)
		if seq, why := l.broken(t); seq != 5 || !strings.Contains(why, "removed") {
			t.Fatalf("a removed tail: broken at %d (%s), want 5", seq, why)
		}
		// The log rebuilt from the shortened chain, and the witness's
		// record reset as an insider would: the witness says it cosigned 6.
		l.exec(t, `DELETE FROM receipt_log_hashes WHERE tenant_id = $1`, l.tenantID)
		l.exec(t, `DELETE FROM receipt_log WHERE tenant_id = $1`, l.tenantID)
		l.exec(t, `DELETE FROM receipt_checkpoints WHERE tenant_id = $1`, l.tenantID)
		l.exec(t, `UPDATE receipt_witnesses SET size = 0, status = 'ok' WHERE tenant_id = $1`, l.tenantID)
		if c := l.publish(t); c.Size != 4 {
			t.Fatalf("the shortened log's checkpoint is of %d", c.Size)
		}
		l.refused(t, witness.ID, "a checkpoint of 4 after one of 6")
		// Regrown past the witness's size with other receipts: refused too.
		l.commit(t, l.signer, 5)
		if c := l.publish(t); c.Size != 9 {
			t.Fatalf("checkpoint of %d", c.Size)
		}
		l.refused(t, witness.ID, "a checkpoint of 9 regrown from 4")
		l.inconsistent(t, saved, 9)
	})
}
