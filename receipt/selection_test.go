package receipt_test

import (
	"bytes"
	"strings"
	"testing"

	"svc/receipt"
)

// selection writes chosen links of a chain as a selection export.
func selection(t *testing.T, s *receipt.Signer, rs []receipt.Receipt) string {
	t.Helper()
	var buf bytes.Buffer
	last := rs[len(rs)-1]
	w, err := receipt.NewExportWriter(&buf, receipt.SelectionFormat, "t1", s, receipt.Head{Seq: last.Seq, Hash: last.ReceiptHash}, len(rs))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestSelectionExport(t *testing.T) {
	s := newSigner(t, 3)
	chain := buildChain(t, "t1", 10, s)
	pick := func(seqs ...int) []receipt.Receipt {
		var out []receipt.Receipt
		for _, q := range seqs {
			out = append(out, chain[q-1])
		}
		return out
	}
	verify := func(text string) receipt.Report {
		t.Helper()
		rep, err := receipt.VerifyExport(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	good := selection(t, s, pick(2, 3, 7))
	if rep := verify(good); !rep.Valid || rep.Checked != 3 || rep.HeadHash != chain[6].ReceiptHash {
		t.Fatalf("a selection of links 2, 3, 7: %+v", rep)
	}
	lines := strings.Split(strings.TrimSuffix(good, "\n"), "\n")

	for _, tc := range []struct {
		name, text, want string
	}{
		{"out of order", selection(t, s, pick(3, 2, 7)), "out of order"},
		{"a repeated link", selection(t, s, pick(2, 2, 7)), "out of order"},
		{"relabelled as a whole chain", editJSON(t, lines[0], func(m map[string]any) { m["format"] = receipt.ExportFormat }) + "\n" +
			strings.Join(lines[1:], "\n") + "\n", sigInvalid},
		{"a link dropped from the end", join(lines[:3]), "count mismatch"},
		{"a receipt's decision changed", lines[0] + "\n" + editJSON(t, lines[1], func(m map[string]any) { m["decision"] = "allow-x" }) + "\n" +
			strings.Join(lines[2:], "\n") + "\n", "hash mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := verify(tc.text)
			found := false
			for _, e := range rep.Errors {
				found = found || strings.Contains(e.Error, tc.want)
			}
			if rep.Valid || !found {
				t.Errorf("valid %v, errors %+v; want one containing %q", rep.Valid, rep.Errors, tc.want)
			}
		})
	}
	// A whole chain still needs every link from seq 1.
	whole := exportLines(t, "t1", s, chain)
	gap := append([]string{whole[0]}, whole[1:5]...)
	gap = append(gap, whole[6:]...)
	if rep := verify(join(gap)); rep.Valid {
		t.Error("a whole-chain export with a link missing verified")
	}
}
