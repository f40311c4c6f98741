package receiptlog_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/tlog"

	"svc/persistence"
	"svc/persistence/postgres"
	"svc/persistence/sqlite"
	"svc/persistence/storetest"
	"svc/receiptlog"
)

// onBoth runs fn on a fresh SQLite store and a fresh Postgres database.
func onBoth(t *testing.T, fn func(t *testing.T, s persistence.Store)) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			var s persistence.Store
			var err error
			if backend == "sqlite" {
				s, err = sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(t.TempDir(), "svc.db")})
			} else {
				s, err = postgres.Open(context.Background(), postgres.Options{URL: storetest.PostgresURL(t)})
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			fn(t, s)
		})
	}
}

// independent is the tree as transparency-dev/merkle computes it from the
// chain's receipt hashes: the roots of every size, and the leaf hashes.
type independent struct {
	roots  [][]byte // roots[m-1]: the tree of m leaves
	leaves [][]byte
}

func rebuild(t *testing.T, s persistence.Store, tenantID string) independent {
	t.Helper()
	rs, err := s.ReceiptRange(context.Background(), tenantID, 1, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var in independent
	rf := &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	cr := rf.NewEmptyRange(0)
	for _, r := range rs {
		h, err := hex.DecodeString(r.Hash)
		if err != nil {
			t.Fatal(err)
		}
		leaf := rfc6962.DefaultHasher.HashLeaf(h)
		in.leaves = append(in.leaves, leaf)
		if err := cr.Append(leaf, nil); err != nil {
			t.Fatal(err)
		}
		root, err := cr.GetRootHash(nil)
		if err != nil {
			t.Fatal(err)
		}
		in.roots = append(in.roots, root)
	}
	return in
}

func raw(hs []tlog.Hash) [][]byte {
	out := make([][]byte, len(hs))
	for i := range hs {
		out[i] = hs[i][:]
	}
	return out
}

// TestTreeAndProofsAreRFC6962: a tree appended in uneven batches has, at
// every size, the root transparency-dev/merkle computes from the chain, and
// every inclusion and consistency proof served verifies with its verifier.
func TestTreeAndProofsAreRFC6962(t *testing.T) {
	onBoth(t, func(t *testing.T, s persistence.Store) {
		ctx := context.Background()
		tenantID, commit := storetest.Chain(t, s)
		size := int64(0)
		for _, n := range []int{1, 2, 5, 13, 1, 24} { // 46 receipts
			commit(n)
			for _, limit := range []int{7, 1000} {
				got, err := receiptlog.Append(ctx, s, tenantID, limit)
				if err != nil {
					t.Fatalf("Append: %v", err)
				}
				size = got
			}
		}
		if size != 46 {
			t.Fatalf("tree of %d leaves, want 46", size)
		}
		in := rebuild(t, s, tenantID)
		for m := int64(1); m <= size; m++ {
			root, err := receiptlog.Root(ctx, s, tenantID, m)
			if err != nil || string(root[:]) != string(in.roots[m-1]) {
				t.Fatalf("root of %d: %x, %v; want %x", m, root, err, in.roots[m-1])
			}
			for seq := int64(1); seq <= m; seq++ {
				p, err := receiptlog.Inclusion(ctx, s, tenantID, seq, m)
				if err != nil {
					t.Fatalf("inclusion of %d in %d: %v", seq, m, err)
				}
				if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(seq-1), uint64(m), in.leaves[seq-1], raw(p), in.roots[m-1]); err != nil {
					t.Fatalf("inclusion of %d in %d does not verify: %v", seq, m, err)
				}
			}
			for from := int64(1); from <= m; from++ {
				p, err := receiptlog.Consistency(ctx, s, tenantID, from, m)
				if err != nil {
					t.Fatalf("consistency %d→%d: %v", from, m, err)
				}
				if err := proof.VerifyConsistency(rfc6962.DefaultHasher, uint64(from), uint64(m), raw(p), in.roots[from-1], in.roots[m-1]); err != nil {
					t.Fatalf("consistency %d→%d does not verify: %v", from, m, err)
				}
			}
		}
		// Beyond the tree, and outside it.
		for _, c := range [][2]int64{{1, size + 1}, {0, size}, {size + 1, size}, {5, 0}} {
			if _, err := receiptlog.Inclusion(ctx, s, tenantID, c[0], c[1]); !errors.Is(err, receiptlog.ErrBeyondTree) {
				t.Errorf("inclusion of %d in %d: %v, want ErrBeyondTree", c[0], c[1], err)
			}
		}
		for _, c := range [][2]int64{{1, size + 1}, {0, 3}, {4, 3}} {
			if _, err := receiptlog.Consistency(ctx, s, tenantID, c[0], c[1]); !errors.Is(err, receiptlog.ErrBeyondTree) {
				t.Errorf("consistency %d→%d: %v, want ErrBeyondTree", c[0], c[1], err)
			}
		}
	})
}

// TestConcurrentAppendsBuildOneTree: appenders racing on one tenant (two
// nodes' jobs) leave the same tree as one would.
func TestConcurrentAppendsBuildOneTree(t *testing.T) {
	onBoth(t, func(t *testing.T, s persistence.Store) {
		ctx := context.Background()
		tenantID, commit := storetest.Chain(t, s)
		commit(300)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					size, err := receiptlog.Append(ctx, s, tenantID, 17)
					if err != nil && !errors.Is(err, persistence.ErrConflict) {
						t.Errorf("Append: %v", err)
						return
					}
					if size == 300 {
						return
					}
				}
			})
		}
		wg.Wait()
		in := rebuild(t, s, tenantID)
		for _, m := range []int64{1, 17, 34, 255, 256, 257, 300} {
			root, err := receiptlog.Root(ctx, s, tenantID, m)
			if err != nil || string(root[:]) != string(in.roots[m-1]) {
				t.Fatalf("root of %d: %x, %v; want %x", m, root, err, in.roots[m-1])
			}
		}
	})
}

// TestCheckpointIsASignedNote: a checkpoint opens with its verifier key,
// and its signature line verifies by C2SP signed-note's own rules (the
// key hash and an Ed25519 signature over the text), checked here by hand.
func TestCheckpointIsASignedNote(t *testing.T) {
	pub, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	origin, err := receiptlog.Origin("svc.example/receipts", "tenant-1")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := receiptlog.NewKeys(origin, pub, func(m []byte) []byte { return ed25519.Sign(key, m) })
	if err != nil {
		t.Fatal(err)
	}
	root := tlog.RecordHash([]byte("root"))
	signed, err := receiptlog.SignCheckpoint(origin, 42, root, keys.Signer)
	if err != nil {
		t.Fatal(err)
	}
	text := origin + "\n42\n" + base64.StdEncoding.EncodeToString(root[:]) + "\n"
	if !strings.HasPrefix(signed, text+"\n— "+origin+" ") {
		t.Fatalf("checkpoint:\n%s", signed)
	}
	sig, err := base64.StdEncoding.DecodeString(strings.TrimSuffix(strings.TrimPrefix(signed, text+"\n— "+origin+" "), "\n"))
	if err != nil || len(sig) != 4+ed25519.SignatureSize {
		t.Fatalf("signature line: %v", err)
	}
	kh := sha256.Sum256(append([]byte(origin+"\n\x01"), pub...))
	if binary.BigEndian.Uint32(sig[:4]) != binary.BigEndian.Uint32(kh[:4]) || !ed25519.Verify(pub, []byte(text), sig[4:]) {
		t.Fatal("the signature line does not verify by hand")
	}
	if !strings.HasPrefix(keys.VerifierKey, origin+"+") {
		t.Fatalf("verifier key %q", keys.VerifierKey)
	}
	cp, err := receiptlog.OpenCheckpoint([]byte(signed), keys.VerifierKey, origin)
	if err != nil || cp.Size != 42 || cp.Root != root || cp.Origin != origin {
		t.Fatalf("OpenCheckpoint = %+v, %v", cp, err)
	}
	tampered := strings.Replace(signed, "\n42\n", "\n43\n", 1)
	if _, err := receiptlog.OpenCheckpoint([]byte(tampered), keys.VerifierKey, origin); err == nil {
		t.Fatal("a checkpoint with a changed size opened")
	}
	if _, err := receiptlog.OpenCheckpoint([]byte(signed), keys.VerifierKey, "other/origin"); err == nil {
		t.Fatal("a checkpoint of another origin opened")
	}
	if _, err := receiptlog.Origin("has space", "t"); err == nil {
		t.Fatal("an origin with a space was accepted")
	}
}
