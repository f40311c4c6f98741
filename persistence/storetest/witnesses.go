package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/persistence"
)

// testWitnesses: a tenant's witnesses are created with their audit event,
// unique by key and at most MaxWitnesses, listed oldest first and deleted
// per tenant; WitnessesBehind lists those behind their tenant's latest
// checkpoint that have not refused one; RecordWitness keeps an answer; and
// cosignatures added at once are all appended to the checkpoint's note.
func testWitnesses(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	at := time.Now().UTC().Truncate(time.Millisecond)
	witness := func(tenant string, n int) persistence.ReceiptWitness {
		return persistence.ReceiptWitness{ID: id(), TenantID: tenant, URL: fmt.Sprintf("https://w%d.test", n),
			Key: fmt.Sprintf("w%d.test+00000000+key%d", n, n), CreatedAt: at}
	}
	created, err := s.CreateWitness(ctx(t), witness(a.ID, 0), audit(a.ID, "config_change", "receipt_witness_created"))
	if err != nil || created.Status != persistence.WitnessPending || created.Size != 0 || created.CheckedAt != nil ||
		created.URL != "https://w0.test" || !created.CreatedAt.Equal(at) {
		t.Fatalf("CreateWitness = %+v, %v", created, err)
	}
	if ev, err := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{}, persistence.Page{Limit: 10}); err != nil || len(ev) != 2 ||
		ev[0].Action != "receipt_witness_created" {
		t.Fatalf("the creation's audit event (newest first, after the tenant's): %+v, %v", ev, err)
	}
	dup := witness(a.ID, 0)
	if _, err := s.CreateWitness(ctx(t), dup); !errors.Is(err, persistence.ErrConflict) {
		t.Errorf("a second witness with the same key: %v, want ErrConflict", err)
	}
	if _, err := s.CreateWitness(ctx(t), witness(b.ID, 0)); err != nil {
		t.Fatalf("another tenant's witness with that key: %v", err)
	}
	for n := 1; n < persistence.MaxWitnesses; n++ {
		if _, err := s.CreateWitness(ctx(t), witness(a.ID, n)); err != nil {
			t.Fatalf("witness %d: %v", n, err)
		}
	}
	if _, err := s.CreateWitness(ctx(t), witness(a.ID, 99)); !errors.Is(err, persistence.ErrConflict) {
		t.Errorf("witness %d: %v, want ErrConflict", persistence.MaxWitnesses+1, err)
	}
	ws, err := s.ListWitnesses(ctx(t), a.ID)
	if err != nil || len(ws) != persistence.MaxWitnesses || ws[0].ID != created.ID || ws[1].URL != "https://w1.test" {
		t.Fatalf("ListWitnesses = %d, %v", len(ws), err)
	}
	if err := s.DeleteWitness(ctx(t), b.ID, created.ID); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("another tenant deletes a's witness: %v, want ErrNotFound", err)
	}
	for _, w := range ws[2:] {
		if err := s.DeleteWitness(ctx(t), a.ID, w.ID); err != nil {
			t.Fatal(err)
		}
	}

	// No checkpoint yet: nobody is behind. Then a of 5 and b of 2.
	if behind, err := s.WitnessesBehind(ctx(t)); err != nil || len(behind) != 0 {
		t.Fatalf("WitnessesBehind without checkpoints = %+v, %v", behind, err)
	}
	for _, tn := range []struct {
		id   string
		size int64
	}{{a.ID, 5}, {b.ID, 2}} {
		if err := s.AppendLog(ctx(t), tn.id, 0, 0, tn.size, logHashes(tn.id[0], 0, tn.size)); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveCheckpoint(ctx(t), persistence.Checkpoint{TenantID: tn.id, Size: tn.size, Root: logHash(tn.id[0], tn.size),
			Note: "origin\n5\nroot\n\n— log sig\n", CreatedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RecordWitness(ctx(t), a.ID, ws[0].ID, 5, persistence.WitnessOK, "", at); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordWitness(ctx(t), b.ID, ws[1].ID, 1, persistence.WitnessOK, "", at); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("RecordWitness of another tenant's witness: %v, want ErrNotFound", err)
	}
	behind, err := s.WitnessesBehind(ctx(t))
	if err != nil || len(behind) != 2 || behind[0].TenantID == behind[1].TenantID {
		t.Fatalf("WitnessesBehind = %+v, %v; want a's second witness and b's", behind, err)
	}
	for _, w := range behind {
		if w.ID == ws[0].ID {
			t.Errorf("a witness that cosigned the latest checkpoint is listed behind")
		}
	}
	if err := s.RecordWitness(ctx(t), a.ID, ws[1].ID, 3, persistence.WitnessRefused, "refused: forked", at); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListWitnesses(ctx(t), a.ID)
	if err != nil || got[1].Size != 3 || got[1].Status != persistence.WitnessRefused || got[1].Error != "refused: forked" ||
		got[1].CheckedAt == nil || !got[1].CheckedAt.Equal(at) {
		t.Fatalf("the recorded answer: %+v, %v", got, err)
	}
	if behind, err := s.WitnessesBehind(ctx(t)); err != nil || len(behind) != 1 || behind[0].TenantID != b.ID {
		t.Fatalf("WitnessesBehind after a refusal = %+v, %v; want b's witness only", behind, err)
	}

	// Cosignatures of two witnesses added at once: both kept.
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			if err := s.AddCosignatures(ctx(t), a.ID, 5, fmt.Sprintf("— w%d.test cosig\n", i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	latest, err := s.LatestCheckpoint(ctx(t), a.ID)
	if err != nil || !strings.HasPrefix(latest.Note, "origin\n5\nroot\n\n— log sig\n") || !strings.Contains(latest.Note, "— w0.test cosig\n") ||
		!strings.Contains(latest.Note, "— w1.test cosig\n") {
		t.Fatalf("the cosigned note: %q, %v", latest.Note, err)
	}
	if err := s.AddCosignatures(ctx(t), a.ID, 4, "— w0.test cosig\n"); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("cosignatures of a checkpoint not kept: %v, want ErrNotFound", err)
	}
}
