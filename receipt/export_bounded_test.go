package receipt_test

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"svc/receipt"
)

// Issue 35 item 5: `svc verify-receipts` kept every failure, so 20 million
// malformed lines took 7 GiB. These tests feed VerifyExport inputs made as
// they are read (no file, nothing held whole) and check what it keeps.

// generated reads a head, then line repeated n times, then a tail, each
// built as it is read.
type generated struct {
	head, line, tail string
	n                int
	pos              int // the offset in the current part
	part             int // 0 head, 1 lines, 2 tail, 3 done
}

func (g *generated) Read(p []byte) (int, error) {
	total := 0
	for total < len(p) {
		var src string
		switch g.part {
		case 0:
			src = g.head
		case 1:
			if g.n == 0 {
				g.part++
				continue
			}
			src = g.line
		case 2:
			src = g.tail
		default:
			if total == 0 {
				return 0, io.EOF
			}
			return total, nil
		}
		k := copy(p[total:], src[g.pos:])
		total += k
		g.pos += k
		if g.pos == len(src) {
			g.pos = 0
			if g.part == 1 {
				g.n--
			} else {
				g.part++
			}
		}
	}
	return total, nil
}

func countIndex(errs []receipt.ChainError, index int) int {
	n := 0
	for _, e := range errs {
		if e.Index == index {
			n++
		}
	}
	return n
}

// An export of 300,000 malformed lines lists the first MaxReportedErrors
// failures, in order, and counts them all.
func TestVerifyExportListsTheFirstErrorsAndCountsAll(t *testing.T) {
	const n = 300_000
	for _, tc := range []struct {
		name      string
		count     int // the header's
		wantTotal int
		wantFile  []string // failures of the file, after the receipts'
	}{
		{name: "count matches", count: n, wantTotal: n},
		{name: "count off by one", count: n + 1, wantTotal: n + 1, wantFile: []string{"count mismatch"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &generated{head: fmt.Sprintf(`{"format":"svc-receipts-export-1","tenant_id":"t","count":%d}`+"\n", tc.count), line: "x\n", n: n}
			rep, err := receipt.VerifyExport(in)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Valid || rep.Checked != 0 || rep.Count != tc.count {
				t.Errorf("valid %v, checked %d, count %d", rep.Valid, rep.Checked, rep.Count)
			}
			if rep.ErrorCount != tc.wantTotal {
				t.Errorf("ErrorCount %d, want %d", rep.ErrorCount, tc.wantTotal)
			}
			if len(rep.Errors) != receipt.MaxReportedErrors+len(tc.wantFile) {
				t.Fatalf("%d errors listed, want %d then %q", len(rep.Errors), receipt.MaxReportedErrors, tc.wantFile)
			}
			for i, e := range rep.Errors[:receipt.MaxReportedErrors] {
				if e.Index != i || !strings.HasPrefix(e.Error, "malformed receipt: ") {
					t.Fatalf("error %d: %+v, want line %d malformed", i, e, i)
				}
			}
			for i, want := range tc.wantFile {
				if e := rep.Errors[receipt.MaxReportedErrors+i]; e.Index != -1 || e.Error != want {
					t.Errorf("file error %d: %+v, want %q", i, e, want)
				}
			}
		})
	}
}

// Signed receipts whose signatures fail (found when their batch settles,
// up to 64 receipts late) mixed with malformed lines: the failures listed
// are still the first ones in file order, as an export short enough to
// list them all shows.
func TestVerifyExportListsTheFirstErrorsInOrder(t *testing.T) {
	s, other := newSigner(t, 1), newSigner(t, 2)
	rs := buildChain(t, "t1", 400, s)
	forged := buildChain(t, "t1", 400, other)
	lines := exportLines(t, "t1", s, rs)
	for i := range rs {
		switch {
		case i%7 == 3:
			lines[1+i] = "{not json"
		case i%5 == 1: // another key's signature over the same hash
			lines[1+i] = editJSON(t, lines[1+i], func(m map[string]any) { m["signature"] = *forged[i].Signature })
		}
	}
	rep, err := receipt.VerifyExport(strings.NewReader(join(lines)))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Errors) != receipt.MaxReportedErrors {
		t.Fatalf("%d errors listed, want %d", len(rep.Errors), receipt.MaxReportedErrors)
	}
	// The same failures one receipt at a time, up to the 100th.
	var want []receipt.ChainError
	for i := 0; len(want) < receipt.MaxReportedErrors; i++ {
		switch {
		case i%7 == 3:
			want = append(want, receipt.ChainError{Index: i, Error: "malformed receipt: *"})
		case i%5 == 1:
			want = append(want, receipt.ChainError{Index: i, ReceiptID: rs[i].ReceiptID, Error: "invalid signature"})
		}
	}
	for i, e := range rep.Errors {
		w := want[i]
		prefix, wild := strings.CutSuffix(w.Error, "*")
		matches := e.Error == w.Error || wild && strings.HasPrefix(e.Error, prefix)
		if e.Index != w.Index || e.ReceiptID != w.ReceiptID || !matches {
			t.Fatalf("error %d: %+v, want %+v", i, e, w)
		}
	}
	if rep.ErrorCount <= receipt.MaxReportedErrors {
		t.Errorf("ErrorCount %d, want more than the %d listed", rep.ErrorCount, receipt.MaxReportedErrors)
	}
}

// A line longer than 1 MiB is a failure at its place, read past without
// being held: the lines after it are verified, and a 64 MiB line costs
// about as much memory as a short one.
func TestVerifyExportOverLongLine(t *testing.T) {
	s := newSigner(t, 1)
	lines := exportLines(t, "t1", s, buildChain(t, "t1", 5, s))
	before, after := join(lines[:3]), join(lines[4:])
	in := &generated{head: before, line: strings.Repeat("a", 64<<10), n: 1 << 10, tail: "\n" + after} // 64 MiB, one line
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	rep, err := receipt.VerifyExport(in)
	runtime.ReadMemStats(&m1)
	if err != nil {
		t.Fatal(err)
	}
	checkErrs(t, rep.Errors, []wantErr{{2, "malformed receipt: line longer than 1048576 bytes"}})
	if rep.Checked != 4 || rep.ErrorCount != 1 || rep.Valid {
		t.Errorf("checked %d, %d errors, valid %v", rep.Checked, rep.ErrorCount, rep.Valid)
	}
	if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 8<<20 {
		t.Errorf("verifying an export with a 64 MiB line allocated %d MiB", alloc>>20)
	}
}

// A failure's text quoting the input (a 500 KiB key, a 500 KiB receipt
// id) is cut short.
func TestVerifyExportClipsQuotedText(t *testing.T) {
	lines := exportLines(t, "t1", nil, buildChain(t, "t1", 3, nil))
	lines[1] = `{"` + strings.Repeat("k", 500<<10) + `":1}`
	lines[2] = editJSON(t, lines[2], func(m map[string]any) {
		m["receipt_id"] = strings.Repeat("r", 500<<10)
	})
	rep, err := receipt.VerifyExport(strings.NewReader(join(lines)))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Errors) < 2 {
		t.Fatalf("errors %d, want at least 2", len(rep.Errors))
	}
	for _, e := range rep.Errors {
		if len(e.Error) > 300 || len(e.ReceiptID) > 300 {
			t.Errorf("an error of %d bytes, receipt id of %d bytes: %.80s...", len(e.Error), len(e.ReceiptID), e.Error)
		}
	}
}
