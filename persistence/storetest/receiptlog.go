package storetest

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"svc/persistence"
)

// RunReceiptLog runs the contract of the receipt log's storage (CONTRACT
// §17): an append-only array of 32-byte hashes per tenant, appended only
// from the size its writer read, read back by index across chunks; and
// the signed checkpoints, kept and listed.
func RunReceiptLog(t *testing.T, open func(t *testing.T) persistence.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s persistence.Store)
	}{
		{"hashes append across chunks and read back by index, per tenant", testLogAppend},
		{"an append from a stale size is refused and writes nothing", testLogConflict},
		{"checkpoints are kept, the latest read and the earlier listed", testCheckpoints},
		{"witnesses are kept per tenant, listed when behind, and their cosignatures appended", testWitnesses},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

// logHash is the test's hash at index i: distinct for every index and
// tenant byte.
func logHash(tenant byte, i int64) [32]byte {
	return sha256.Sum256([]byte(fmt.Sprintf("%c/%d", tenant, i)))
}

func logHashes(tenant byte, from, to int64) []byte {
	var b []byte
	for i := from; i < to; i++ {
		h := logHash(tenant, i)
		b = append(b, h[:]...)
	}
	return b
}

func testLogAppend(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	if leaves, hashes, err := s.LogSize(ctx(t), a.ID); err != nil || leaves != 0 || hashes != 0 {
		t.Fatalf("an empty log: %d leaves, %d hashes, %v", leaves, hashes, err)
	}
	// Appends of odd sizes that cross the chunk boundaries (256 hashes),
	// the last chunk partial in between.
	var leaves, stored int64
	for _, n := range []int64{1, 700, 1000, 2, 1500} {
		if err := s.AppendLog(ctx(t), a.ID, leaves, stored, leaves+n/2+1, logHashes('a', stored, stored+n)); err != nil {
			t.Fatalf("AppendLog %d after %d: %v", n, stored, err)
		}
		leaves, stored = leaves+n/2+1, stored+n
	}
	if err := s.AppendLog(ctx(t), b.ID, 0, 0, 3, logHashes('b', 0, 5)); err != nil {
		t.Fatalf("AppendLog of b: %v", err)
	}
	if l, h, err := s.LogSize(ctx(t), a.ID); err != nil || l != leaves || h != stored {
		t.Fatalf("LogSize = %d, %d, %v; want %d, %d", l, h, err, leaves, stored)
	}
	idx := []int64{stored - 1, 0, 255, 256, 1023, 1024, 2047, 2048, 700, 1, stored - 1}
	got, err := s.LogHashes(ctx(t), a.ID, idx)
	if err != nil || len(got) != len(idx) {
		t.Fatalf("LogHashes: %d, %v", len(got), err)
	}
	for k, i := range idx {
		if got[k] != logHash('a', i) {
			t.Errorf("hash %d = %x, want %x", i, got[k], logHash('a', i))
		}
	}
	if got, err := s.LogHashes(ctx(t), b.ID, []int64{4, 0}); err != nil || got[0] != logHash('b', 4) || got[1] != logHash('b', 0) {
		t.Fatalf("b's hashes: %x, %v", got, err)
	}
	for _, i := range []int64{stored, stored + 5000, -1} {
		if _, err := s.LogHashes(ctx(t), a.ID, []int64{0, i}); !errors.Is(err, persistence.ErrNotFound) {
			t.Errorf("hash %d of %d stored: %v, want ErrNotFound", i, stored, err)
		}
	}
	if _, err := s.LogHashes(ctx(t), b.ID, []int64{5}); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("b's hash 5 of 5: %v, want ErrNotFound (a's are not b's)", err)
	}
}

func testLogConflict(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	if err := s.AppendLog(ctx(t), a.ID, 0, 0, 2, logHashes('a', 0, 3)); err != nil {
		t.Fatal(err)
	}
	// Another writer read the empty log, and one read it at 2 leaves but
	// with the wrong hash count: both refused.
	for _, st := range [][2]int64{{0, 0}, {2, 2}, {1, 3}} {
		err := s.AppendLog(ctx(t), a.ID, st[0], st[1], 3, logHashes('x', st[1], st[1]+2))
		if !errors.Is(err, persistence.ErrConflict) {
			t.Errorf("append from %d leaves, %d hashes: %v, want ErrConflict", st[0], st[1], err)
		}
	}
	if err := s.AppendLog(ctx(t), a.ID, 2, 3, 3, []byte("not whole hashes")); !errors.Is(err, persistence.ErrInvalidInput) {
		t.Errorf("a partial hash: %v, want ErrInvalidInput", err)
	}
	got, err := s.LogHashes(ctx(t), a.ID, []int64{0, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != logHash('a', int64(i)) {
			t.Errorf("hash %d was overwritten: %x", i, got[i])
		}
	}
	if _, err := s.LogHashes(ctx(t), a.ID, []int64{3}); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("a refused append stored hash 3: %v", err)
	}
	if l, h, err := s.LogSize(ctx(t), a.ID); err != nil || l != 2 || h != 3 {
		t.Errorf("after refused appends: %d leaves, %d hashes, %v", l, h, err)
	}
}

func testCheckpoints(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	if _, err := s.LatestCheckpoint(ctx(t), a.ID); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("no checkpoint yet: %v", err)
	}
	at := time.Now().UTC().Truncate(time.Millisecond)
	cp := func(tenant string, size int64) persistence.Checkpoint {
		return persistence.Checkpoint{TenantID: tenant, Size: size, Root: logHash(tenant[0], size),
			Note: "svc/" + tenant + "\n" + strconv.FormatInt(size, 10) + "\nroot\n\n— sig\n", CreatedAt: at.Add(time.Duration(size) * time.Second)}
	}
	for _, c := range []persistence.Checkpoint{cp(a.ID, 3), cp(a.ID, 1), cp(a.ID, 7), cp(b.ID, 9)} {
		if err := s.SaveCheckpoint(ctx(t), c); err != nil {
			t.Fatalf("SaveCheckpoint %d: %v", c.Size, err)
		}
	}
	if err := s.SaveCheckpoint(ctx(t), cp(a.ID, 7)); !errors.Is(err, persistence.ErrConflict) {
		t.Errorf("a second checkpoint of size 7: %v, want ErrConflict", err)
	}
	latest, err := s.LatestCheckpoint(ctx(t), a.ID)
	if err != nil || latest.Size != 7 || latest.Root != cp(a.ID, 7).Root || latest.Note != cp(a.ID, 7).Note ||
		!latest.CreatedAt.Equal(cp(a.ID, 7).CreatedAt) || latest.TenantID != a.ID {
		t.Fatalf("LatestCheckpoint = %+v, %v", latest, err)
	}
	before, err := s.CheckpointsBefore(ctx(t), a.ID, 7, 10)
	if err != nil || len(before) != 2 || before[0].Size != 3 || before[1].Size != 1 || before[1].Root != cp(a.ID, 1).Root {
		t.Fatalf("CheckpointsBefore(7) = %+v, %v", before, err)
	}
	if one, err := s.CheckpointsBefore(ctx(t), a.ID, 100, 1); err != nil || len(one) != 1 || one[0].Size != 7 {
		t.Fatalf("CheckpointsBefore(100, 1) = %+v, %v", one, err)
	}
}

// Chain makes a tenant with an agent in s and returns its id and a
// function that commits n more decisions, each with its receipt linked to
// the chain (by the test sealer, not signed): receipts for the packages
// that build on the chain, such as the receipt log.
func Chain(t *testing.T, s persistence.Store) (tenantID string, commit func(n int)) {
	t.Helper()
	tn, _ := mustTenant(t, s, "chain")
	ag := mustAgent(t, s, tn.ID, "chain-agent")
	return tn.ID, func(n int) {
		t.Helper()
		ws := make([]persistence.DecisionWrite, n)
		for i := range ws {
			ws[i] = decisionWrite(tn.ID, ag.ID, "allow", nil)
		}
		if err := s.CommitDecisions(ctx(t), ws, testSeal); err != nil {
			t.Fatalf("commit %d decisions: %v", n, err)
		}
	}
}
