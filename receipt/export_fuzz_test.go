package receipt_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"svc/receipt"
)

// Fuzz targets for the receipt export reader behind `svc verify-receipts`
// (issue 20). The seed corpus is the f.Add calls below plus
// testdata/fuzz/<target>/; `go test` runs both as ordinary tests,
// scripts/fuzz.sh fuzzes each target for a few seconds.

// fuzzExport writes an export of n receipts of tenant, signed by s (nil:
// unsigned), with the stored head at the last receipt.
func fuzzExport(t testing.TB, tenant string, n int, s *receipt.Signer) []byte {
	t.Helper()
	rs := buildChain(t, tenant, n, s)
	var head receipt.Head
	if n > 0 {
		head = receipt.Head{Seq: rs[n-1].Seq, Hash: rs[n-1].ReceiptHash}
	}
	var buf bytes.Buffer
	if err := receipt.WriteExport(&buf, tenant, s, head, rs); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// FuzzVerifyExport: VerifyExport never panics and never returns an error
// for input read from memory (an over-long line is a failure in the
// report); Valid is exactly "no errors", and no more than
// MaxReportedErrors of the receipts' failures are listed; a
// valid export holds Count receipts that VerifyChain accepts under the
// header's key, and, unsigned, the package's own writer writes them back
// as an export that verifies with the same tenant, count and head.
func FuzzVerifyExport(f *testing.F) {
	s := newSigner(f, 7)
	for _, n := range []int{0, 1, 3} {
		f.Add(fuzzExport(f, "t1", n, s))
		f.Add(fuzzExport(f, "t1", n, nil))
	}
	signed := fuzzExport(f, "tenant-\u00e9", 2, s)
	f.Add(bytes.ReplaceAll(signed, []byte("\n"), []byte("\r\n\n  ")))
	f.Add(bytes.Replace(signed, []byte(`"seq":2`), []byte(`"seq":2,"Seq":2`), 1))
	f.Add(bytes.Replace(signed, []byte(`"seq":1`), []byte(`"seq":1,"seq":1`), 1))
	f.Add(signed[:len(signed)/2])
	f.Add([]byte{})
	f.Add([]byte("\n\n"))
	f.Add([]byte(`{"format":"svc-receipts-export-1","tenant_id":"t","count":0}` + "\n"))
	f.Add([]byte(`{"format":"svc-receipts-export-1","tenant_id":"t","count":-1,"head_seq":null}`))
	f.Add([]byte(`{"format":"svc-receipts-export-1","tenant_id":"t","count":1,"public_key":"AAAA","header_signature":""}` + "\n[]\n"))
	f.Add([]byte("{\"format\":\"svc-receipts-export-1\",\"tenant_id\":\"t\",\"count\":1}\n{\"seq\":1,\"tenant_id\":\"\xff\"}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := receipt.VerifyExport(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("input %q: VerifyExport error %v; only a failing reader may fail it", data, err)
		}
		if rep.Valid != (len(rep.Errors) == 0) || rep.Valid != (rep.ErrorCount == 0) || rep.ErrorCount < len(rep.Errors) {
			t.Fatalf("input %q: Valid %v with %d errors listed, %d counted", data, rep.Valid, len(rep.Errors), rep.ErrorCount)
		}
		if receiptErrs := len(rep.Errors) - countIndex(rep.Errors, -1); receiptErrs > receipt.MaxReportedErrors {
			t.Fatalf("input %q: %d receipt errors listed, more than %d", data, receiptErrs, receipt.MaxReportedErrors)
		}
		if !rep.Valid {
			return
		}
		hdr, rs, ok := readExport(data)
		if !ok {
			t.Fatalf("input %q verified, but its lines do not decode", data)
		}
		if rep.Count != len(rs) || rep.Checked != len(rs) || rep.TenantID != hdr.TenantID || rep.TenantID == "" {
			t.Fatalf("input %q verified: report count %d checked %d tenant %q; the file holds %d receipts of %q",
				data, rep.Count, rep.Checked, rep.TenantID, len(rs), hdr.TenantID)
		}
		if checked, errs := receipt.VerifyChain(rs, rep.PublicKey, true); checked != len(rs) || len(errs) > 0 {
			t.Fatalf("input %q verified as an export, VerifyChain finds %v", data, errs)
		}
		if rep.PublicKey != nil {
			return // the header signature needs the key the export was made with
		}
		var head receipt.Head
		if len(rs) > 0 {
			head = receipt.Head{Seq: rs[len(rs)-1].Seq, Hash: rs[len(rs)-1].ReceiptHash}
		}
		var buf bytes.Buffer
		if err := receipt.WriteExport(&buf, rep.TenantID, nil, head, rs); err != nil {
			t.Fatalf("input %q: rewriting its receipts: %v", data, err)
		}
		again, err := receipt.VerifyExport(&buf)
		if err != nil || !again.Valid || again.TenantID != rep.TenantID || again.Count != rep.Count || again.HeadHash != rep.HeadHash {
			t.Fatalf("input %q verified, its receipts written back do not: %+v, %v", data, again, err)
		}
	})
}

// FuzzExportMutation: an export written by WriteExport verifies, and one
// byte of it replaced, inserted or deleted gives an export that either
// fails verification or says exactly what the original says (same header
// members, same receipts, as the verifier decodes them). Every byte of a
// hash, a signature, a seq or a header member is thus covered: changing it
// without detection fails the target. One exception is by design: an
// unsigned export with no receipts has nothing that authenticates its
// header's tenant_id, so that member alone may change there.
func FuzzExportMutation(f *testing.F) {
	f.Add(uint8(3), true, "t1", uint32(0), byte('x'), uint8(0))
	f.Add(uint8(1), true, "t1", uint32(300), byte('0'), uint8(0))
	f.Add(uint8(2), false, "tenant-\u00e9", uint32(500), byte('f'), uint8(1))
	f.Add(uint8(0), true, "t1", uint32(40), byte('2'), uint8(2))
	f.Add(uint8(0), false, "t1", uint32(30), byte('u'), uint8(0))
	f.Add(uint8(4), true, "acme", uint32(1200), byte('\n'), uint8(1))
	signer := newSigner(f, 7)
	f.Fuzz(func(t *testing.T, n uint8, signed bool, tenant string, pos uint32, b byte, op uint8) {
		if tenant == "" || !utf8.ValidString(tenant) || len(tenant) > 64 {
			tenant = "t1"
		}
		var s *receipt.Signer
		if signed {
			s = signer
		}
		orig := fuzzExport(t, tenant, int(n%5), s)
		rep, err := receipt.VerifyExport(bytes.NewReader(orig))
		if err != nil || !rep.Valid {
			t.Fatalf("export written by WriteExport does not verify: %+v, %v\n%s", rep, err, orig)
		}
		mut, what := mutate(orig, int(pos)%(len(orig)+1), b, op)
		if mut == nil {
			return
		}
		checkMutation(t, orig, mut, what, signed)
	})
}

// TestExportEveryByteMutation is FuzzExportMutation's property at every
// position of a signed and an unsigned export, deterministically: each
// byte with its lowest bit flipped, and each byte deleted.
func TestExportEveryByteMutation(t *testing.T) {
	for _, s := range []*receipt.Signer{newSigner(t, 7), nil} {
		orig := fuzzExport(t, "t1", 2, s)
		for pos := range len(orig) {
			if mut, what := mutate(orig, pos, orig[pos]^0x01, 0); mut != nil {
				checkMutation(t, orig, mut, what, s != nil)
			}
			if mut, what := mutate(orig, pos, 0, 2); mut != nil {
				checkMutation(t, orig, mut, what, s != nil)
			}
		}
	}
}

// mutate replaces (op%3 == 0), inserts before (1) or deletes (2) the byte
// at pos; it returns nil when the result is the original.
func mutate(orig []byte, pos int, b byte, op uint8) ([]byte, string) {
	mut := bytes.Clone(orig)
	var what string
	switch {
	case op%3 == 1:
		mut = append(mut[:pos], append([]byte{b}, orig[pos:]...)...)
		what = "insert " + quoteByte(b)
	case pos == len(orig):
		return nil, ""
	case op%3 == 2:
		mut = append(mut[:pos], orig[pos+1:]...)
		what = "delete " + quoteByte(orig[pos])
	default:
		if orig[pos] == b {
			return nil, ""
		}
		mut[pos] = b
		what = "replace " + quoteByte(orig[pos]) + " with " + quoteByte(b)
	}
	return mut, what + " at offset " + strconv.Itoa(pos)
}

func checkMutation(t *testing.T, orig, mut []byte, what string, signed bool) {
	t.Helper()
	rep, err := receipt.VerifyExport(bytes.NewReader(mut))
	if err != nil {
		t.Fatalf("%s: VerifyExport error %v", what, err)
	}
	if !rep.Valid {
		return // detected
	}
	oh, ors, ok1 := readExport(orig)
	mh, mrs, ok2 := readExport(mut)
	if !ok1 || !ok2 {
		t.Fatalf("%s: the mutated export verifies but does not decode\n%s", what, mut)
	}
	if !signed && len(ors) == 0 {
		mh.TenantID = oh.TenantID // nothing authenticates it (see FuzzExportMutation)
	}
	if !signed && mh.HeadSeq == nil {
		// An unsigned export without head_seq is the older form, whose head
		// is checked by head_hash alone (exportHeader.HeadSeq); dropping the
		// member is no change of what the file says.
		mh.HeadSeq = oh.HeadSeq
	}
	if !reflect.DeepEqual(oh, mh) {
		was, _ := json.Marshal(oh)
		now, _ := json.Marshal(mh)
		t.Fatalf("%s: the header changed and still verifies\n was %s\n now %s\n%s", what, was, now, mut)
	}
	if !reflect.DeepEqual(ors, mrs) {
		t.Fatalf("%s: the receipts changed and still verify\n was %+v\n now %+v\n%s", what, ors, mrs, mut)
	}
}

func quoteByte(b byte) string { return strconv.QuoteToASCII(string([]byte{b})) }

// exportHeader mirrors the header line (receipt's own type is unexported).
type exportHeader struct {
	Format          string  `json:"format"`
	TenantID        string  `json:"tenant_id"`
	KeyID           string  `json:"key_id"`
	PublicKey       *string `json:"public_key"`
	Count           *int    `json:"count"`
	HeadHash        string  `json:"head_hash"`
	HeadSeq         *int64  `json:"head_seq"`
	HeaderSignature *string `json:"header_signature"`
}

// readExport decodes an export as VerifyExport reads it (blank lines
// skipped, the first line the header, encoding/json's reading).
func readExport(data []byte) (h exportHeader, rs []receipt.Receipt, ok bool) {
	first := true
	for line := range strings.SplitSeq(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if first {
			first = false
			if json.Unmarshal([]byte(line), &h) != nil {
				return h, nil, false
			}
			continue
		}
		var r receipt.Receipt
		if json.Unmarshal([]byte(line), &r) != nil {
			return h, nil, false
		}
		rs = append(rs, r)
	}
	return h, rs, !first
}
