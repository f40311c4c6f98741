package e2e

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"svc/testkit"
	"svc/testkit/gateway"
)

// BenchmarkAuthorizeWithGate is the authorize latency of the code-host
// tool's calls on a pull request with the Security Gate off, and with it
// on and a code host that never answers (every gate call waits out its
// 10 s timeout, every worker slot stays busy): the gate takes decisions
// from the event bus, off the authorize path, so p50 and p99 should stay
// within noise. Run alternately, for example:
//
//	bash scripts/testenv.sh -- go test -run '^$' -bench AuthorizeWithGate -benchtime 3000x -count 4 ./cmd/svc/
func BenchmarkAuthorizeWithGate(b *testing.B) {
	for _, mode := range []string{"off", "hanging"} {
		b.Run(mode, func(b *testing.B) {
			env := map[string]string{"SVC_RATE_LIMIT_CAPACITY": "1000000", "SVC_RATE_LIMIT_REFILL_RATE": "1000000", "SVC_LOG_LEVEL": "error"}
			if mode == "hanging" {
				host := newFakeCodeHost(b)
				host.setMode("hang")
				env["SVC_CODEHOST_APP_TOKEN"], env["SVC_CODEHOST_API_URL"], env["SVC_ALLOW_PRIVATE_TARGETS"] = "ghs_bench", host.srv.URL, "true"
			}
			s := gateway.Start(b, "sqlite", env)
			_, admin := s.Tenant(b, "gate-bench-"+testkit.Uniq())
			_, tok := s.Agent(b, admin, "gate-bench-agent", nil)
			call := func() time.Duration {
				start := time.Now()
				resp, _, raw := gateway.AzPost(b, s, tok, gateCall("read", fmt.Sprintf("acme/widgets#%d", 1+time.Now().UnixNano()%50), false, gateway.AzSigned))
				if resp.StatusCode != 200 {
					b.Errorf("authorize: %d %s", resp.StatusCode, raw) // not Fatal: the workers are not the benchmark's goroutine
				}
				return time.Since(start)
			}
			for range 200 { // warm up: caches, actors, the gate's slots filled
				call()
			}
			lat := make([]time.Duration, b.N)
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for range 8 {
				wg.Go(func() {
					for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
						lat[i] = call()
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			slices.Sort(lat)
			pct := func(p float64) float64 {
				return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
			}
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			if mode == "hanging" {
				b.ReportMetric(gateway.MetricValue(b, s, "svc_gate_dropped_total"), "gate-dropped")
			}
		})
	}
}
