package cli_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/tlog"

	"svc/receipt"
	"svc/receiptlog"
	"svc/testkit/gateway"
)

// signedChain seals n receipts signed with s; from seq keep on, their
// decision is decision (a rewritten tail, re-signed and relinked).
func signedChain(t *testing.T, s *receipt.Signer, n, keep int, decision string) ([]receipt.Receipt, string) {
	t.Helper()
	rs := make([]receipt.Receipt, n)
	prev := ""
	for i := range rs {
		d := "allow"
		if i >= keep {
			d = decision
		}
		r, err := receipt.Seal(receipt.Receipt{ReceiptID: fmt.Sprintf("r%d", i+1), TenantID: "t", DecisionID: fmt.Sprintf("d%d", i+1),
			Seq: int64(i + 1), ActionHash: strings.Repeat("a", 64), Decision: d, CreatedAt: "2026-11-28T00:00:00.000000Z"}, prev, s)
		if err != nil {
			t.Fatal(err)
		}
		rs[i], prev = r, r.ReceiptHash
	}
	var b bytes.Buffer
	if err := receipt.WriteExport(&b, "t", s, receipt.Head{Seq: int64(n), Hash: prev}, rs); err != nil {
		t.Fatal(err)
	}
	return rs, writeTemp(t, "export.jsonl", b.Bytes())
}

// checkpointOf signs the tree of the first size receipts of rs, its root
// computed by transparency-dev/merkle.
func checkpointOf(t *testing.T, keys receiptlog.Keys, rs []receipt.Receipt, size int) string {
	t.Helper()
	rng := (&compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}).NewEmptyRange(0)
	for _, r := range rs[:min(size, len(rs))] {
		h, err := receiptlog.LeafHash(r.ReceiptHash)
		if err != nil {
			t.Fatal(err)
		}
		if err := rng.Append(h[:], nil); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := rng.GetRootHash(nil)
	if err != nil {
		t.Fatal(err)
	}
	var root tlog.Hash
	copy(root[:], raw)
	note, err := receiptlog.SignCheckpoint(keys.Signer.Name(), int64(size), root, keys.Signer)
	if err != nil {
		t.Fatal(err)
	}
	return note
}

// TestE2EVerifyReceiptsAgainstACheckpoint: an auditor's checkpoint catches
// a tail rewritten, re-signed and relinked, which the chain alone cannot;
// a checkpoint larger than the export names the missing receipts; a
// changed or foreign checkpoint does not verify.
func TestE2EVerifyReceiptsAgainstACheckpoint(t *testing.T) {
	t.Parallel()
	s, err := receipt.NewSigner(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	pub := base64.StdEncoding.EncodeToString(s.PublicKey())
	keys, err := receiptlog.NewKeys("svc/t", s.PublicKey(), s.SignNote)
	if err != nil {
		t.Fatal(err)
	}
	chain, export := signedChain(t, s, 6, 6, "allow")
	cp4 := writeTemp(t, "cp4.txt", []byte(checkpointOf(t, keys, chain, 4)))
	run := func(export, cp string, wantValid bool, want string) {
		t.Helper()
		code, out, errOut := gateway.RunCLI("verify-receipts", "-public-key", pub, "-checkpoint", cp, export)
		if (code == 0) != wantValid || !strings.Contains(out, want) || !strings.Contains(out, map[bool]string{true: "\nVALID\n", false: "\nINVALID\n"}[wantValid]) {
			t.Errorf("checkpoint %s: exit %d, want valid %v and %q:\n%s%s", cp, code, wantValid, want, out, errOut)
		}
	}
	run(export, cp4, true, "checkpoint: svc/t, 4 receipts\n")
	cp6 := writeTemp(t, "cp6.txt", []byte(checkpointOf(t, keys, chain, 6)))
	run(export, cp6, true, "checkpoint: svc/t, 6 receipts\n")

	// Receipts 4 to 6 rewritten, re-signed and relinked: the chain
	// verifies, the checkpoint of 4 does not.
	_, rewritten := signedChain(t, s, 6, 3, "deny")
	if code, out, _ := gateway.RunCLI("verify-receipts", "-public-key", pub, rewritten); code != 0 {
		t.Fatalf("the rewritten chain should verify as a chain:\n%s", out)
	}
	run(rewritten, cp4, false, "error: checkpoint: the export's first 4 receipts are not the tree the checkpoint signs")
	// A checkpoint of the first 3 receipts still holds for it.
	run(rewritten, writeTemp(t, "cp3.txt", []byte(checkpointOf(t, keys, chain, 3))), true, "checkpoint: svc/t, 3 receipts\n")

	// A checkpoint of 9: receipts 7 to 9 are missing from the export.
	nine := strings.Replace(checkpointOf(t, keys, chain, 6), "\n6\n", "\n9\n", 1)
	k9 := checkpointOf(t, keys, append(append([]receipt.Receipt{}, chain...), chain[:3]...), 9) // a tree of 9, signed
	run(export, writeTemp(t, "cp9.txt", []byte(k9)), false, "receipts 7 to 9 are missing")
	// Its size changed by hand: the signature fails.
	run(export, writeTemp(t, "cp9-forged.txt", []byte(nine)), false, "error: checkpoint: its signature does not verify")
	// Signed by another key.
	other, err := receipt.NewSigner(bytes.Repeat([]byte{8}, 32))
	if err != nil {
		t.Fatal(err)
	}
	otherKeys, err := receiptlog.NewKeys("svc/t", other.PublicKey(), other.SignNote)
	if err != nil {
		t.Fatal(err)
	}
	run(export, writeTemp(t, "cp-other.txt", []byte(checkpointOf(t, otherKeys, chain, 4))), false, "its signature does not verify")
}
