package receipt_test

import (
	"bytes"
	"os"
	"strconv"
	"testing"

	"svc/receipt"
)

// BenchmarkVerifyExport verifies a signed export as `svc verify-receipts`
// does (one goroutine) and reports receipts per second.
// SVC_BENCH_EXPORT_RECEIPTS sets the chain's length (default 20,000;
// sealing 1,000,000 takes about a minute before the timer starts).
func BenchmarkVerifyExport(b *testing.B) {
	n := 20_000
	if v, err := strconv.Atoi(os.Getenv("SVC_BENCH_EXPORT_RECEIPTS")); err == nil && v > 0 {
		n = v
	}
	s := newSigner(b, 7)
	rs := buildChain(b, "3d2b1a00-0000-4000-8000-000000000001", n, s)
	var buf bytes.Buffer
	if err := receipt.WriteExport(&buf, "3d2b1a00-0000-4000-8000-000000000001", s,
		receipt.Head{Seq: rs[n-1].Seq, Hash: rs[n-1].ReceiptHash}, rs); err != nil {
		b.Fatal(err)
	}
	raw := buf.Bytes()
	b.SetBytes(int64(len(raw)))
	b.ResetTimer()
	for b.Loop() {
		rep, err := receipt.VerifyExport(bytes.NewReader(raw))
		if err != nil || !rep.Valid || rep.Checked != n {
			b.Fatalf("verify: %v valid %v checked %d of %d %v", err, rep.Valid, rep.Checked, n, rep.Errors)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "receipts/s")
}
