package cli_test

// svc verify-receipts and svc verify-pack on files made by hand, no
// server (issue 35, items 5 and 6).

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"svc/evidencepack"
	"svc/evidencepack/packtest"
	"svc/receipt"
	"svc/testkit/gateway"
)

// writeTemp writes b to a new file and returns its path.
func writeTemp(t *testing.T, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// outputLines splits output into its lines.
func outputLines(out string) []string { return strings.Split(strings.TrimSuffix(out, "\n"), "\n") }

// 300,000 malformed lines: the first 100 failures are listed, all are
// counted, and the output stays small (it was one line per failure: 2 GB
// for 20 million lines, in 7 GiB of memory).
func TestE2EVerifyReceiptsListsTheFirstErrors(t *testing.T) {
	t.Parallel()
	const n = 300_000
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `{"format":"svc-receipts-export-1","tenant_id":"t","count":%d}`+"\n", n)
	buf.WriteString(strings.Repeat("x\n", n))
	code, out, errOut := gateway.RunCLI("verify-receipts", writeTemp(t, "malformed.jsonl", buf.Bytes()))
	ls := outputLines(out)
	listed := 0
	for _, l := range ls {
		if strings.HasPrefix(l, "error: index ") {
			listed++
		}
	}
	if code != 1 || listed != receipt.MaxReportedErrors || len(out) > 64<<10 ||
		!strings.Contains(out, fmt.Sprintf("\nerrors: %d (the first %d of the receipts' are listed)\nINVALID\n", n, receipt.MaxReportedErrors)) {
		t.Errorf("exit %d, %d errors listed, %d bytes of output:\n%.2000s\n%s", code, listed, len(out), out, errOut)
	}
	if !strings.HasPrefix(ls[5], "error: index 0 receipt : malformed receipt: ") || !strings.HasPrefix(ls[104], "error: index 99 receipt : ") {
		t.Errorf("the errors listed are not the first ones:\n%s\n%s", ls[5], ls[104])
	}

	// A valid export: the same report as before, with the count line.
	var valid bytes.Buffer
	rs := make([]receipt.Receipt, 3)
	prev := ""
	for i := range rs {
		r, err := receipt.Seal(receipt.Receipt{ReceiptID: fmt.Sprintf("r%d", i+1), TenantID: "t", DecisionID: fmt.Sprintf("d%d", i+1),
			Seq: int64(i + 1), ActionHash: strings.Repeat("a", 64), Decision: "allow", CreatedAt: "2026-11-27T00:00:00.000000Z"}, prev, nil)
		if err != nil {
			t.Fatal(err)
		}
		rs[i], prev = r, r.ReceiptHash
	}
	if err := receipt.WriteExport(&valid, "t", nil, receipt.Head{Seq: 3, Hash: prev}, rs); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = gateway.RunCLI("verify-receipts", writeTemp(t, "valid.jsonl", valid.Bytes()))
	if want := fmt.Sprintf("tenant_id: t\nreceipts: 3\nchecked: 3\nhead_hash: %s\nkey_id: (unsigned)\nerrors: 0\nVALID\n", prev); code != 0 || out != want {
		t.Errorf("exit %d\n%s%s\nwant\n%s", code, out, errOut, want)
	}
}

// packMember is one file of a pack made by hand.
type packMember struct{ name, content string }

// handPack writes a pack as anyone can (packtest.Craft) into a file.
func handPack(t *testing.T, kind string, s *receipt.Signer, members ...packMember) string {
	t.Helper()
	ms := make([]packtest.Member, len(members))
	for i, m := range members {
		ms[i] = packtest.Member{Name: m.name, Content: m.content}
	}
	return writeTemp(t, "pack.zip", packtest.Craft(t, kind, s, ms...))
}

// A pack whose members climb out of the directory it is unpacked into and
// that holds none of its kind's files is INVALID (it was VALID); a valid
// pack says what it proves about its origin.
func TestE2EVerifyPackRefusesHostilePacks(t *testing.T) {
	t.Parallel()
	hostile := handPack(t, evidencepack.KindIncident, nil,
		packMember{"../../x", "x"}, packMember{"/abs", "x"}, packMember{`..\..\x`, "x"}, packMember{"a/../../b", "x"})
	gateway.VerifyPackCLI(t, hostile, false, `error: "../../x": unsafe file name`)
	gateway.VerifyPackCLI(t, hostile, false, `error: "a/../../b": unsafe file name`)
	gateway.VerifyPackCLI(t, hostile, false, "error: incident.json: missing (a pack of kind incident holds it")

	required, _ := evidencepack.RequiredFiles(evidencepack.KindIncident)
	var all []packMember
	for _, name := range required {
		all = append(all, packMember{name, "[]\n"})
	}
	gateway.VerifyPackCLI(t, handPack(t, evidencepack.KindIncident, nil, all[1:]...), false, "error: incident.json: missing (a pack of kind incident")
	gateway.VerifyPackCLI(t, handPack(t, "other", nil, all...), false, `manifest.json: unknown kind "other"`)

	// A name that holds a line break cannot print a verdict of its own.
	code, out, _ := gateway.RunCLI("verify-pack", handPack(t, evidencepack.KindIncident, nil, append(all, packMember{"x\nVALID", "x"})...))
	for _, l := range outputLines(out) {
		if l == "VALID" {
			t.Errorf("exit %d, a member's name printed a line:\n%s", code, out)
		}
	}

	// Valid packs, and what each proves.
	unsigned := handPack(t, evidencepack.KindIncident, nil, all...)
	gateway.VerifyPackCLI(t, unsigned, true, "\norigin: NOT PROVEN: the pack is unsigned, so VALID shows its integrity only")
	gateway.VerifyPackCLI(t, unsigned, true, "anyone can make such a pack, and nothing in it shows who made it\nVALID\n")
	s, err := receipt.NewSigner(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	if err != nil {
		t.Fatal(err)
	}
	signed := handPack(t, evidencepack.KindIncident, s, all...)
	gateway.VerifyPackCLI(t, signed, true, "\norigin: signed with key_id "+s.KeyID()+", the key its own manifest names")
	gateway.VerifyPackCLI(t, signed, true, "\norigin: signed with the -public-key given (key_id "+s.KeyID()+")\nVALID\n",
		"-public-key", base64.StdEncoding.EncodeToString(s.PublicKey()))
	var w bytes.Buffer
	p := evidencepack.NewWriter(&w, evidencepack.KindCompliance, "t1", nil, time.Now())
	cr, _ := evidencepack.RequiredFiles(evidencepack.KindCompliance)
	for _, name := range cr {
		f, err := p.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(f, "[]\n")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	gateway.VerifyPackCLI(t, writeTemp(t, "compliance.zip", w.Bytes()), true, "kind: compliance\ntenant_id: t1\nfiles: 10\nkey_id: (unsigned)\norigin: NOT PROVEN")
}
