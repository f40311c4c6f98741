package e2e

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"svc/testkit"
	"svc/testkit/gateway"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkMCPProxyOverhead is what the inline MCP proxy adds to a
// tools/call (issue 37: at most 1 ms at p50 on a lone SQLite node): the
// go-sdk client calls the read-only echo tool of the same go-sdk upstream
// directly and through the proxy, alternately, and reports each one's p50
// and p99 and the difference of the p50s. Run, for example:
//
//	bash scripts/testenv.sh -- go test -run '^$' -bench MCPProxyOverhead -benchtime 2000x -count 3 ./cmd/svc/
func BenchmarkMCPProxyOverhead(b *testing.B) {
	s := gateway.Start(b, "sqlite", map[string]string{"SVC_ALLOW_PRIVATE_TARGETS": "true", "SVC_RATE_LIMIT_CAPACITY": "1000000",
		"SVC_RATE_LIMIT_REFILL_RATE": "1000000", "SVC_LOG_LEVEL": "error"})
	up := gateway.StartUpstream(b)
	_, admin := s.Tenant(b, "mcpbench-"+testkit.Uniq())
	key := "bench-" + testkit.Uniq()
	gateway.ProxyServer(b, s, admin, key, up.URL, "echo")
	_, tok := s.Agent(b, admin, "bench-agent", nil)
	proxied := gateway.Connect(b, s.Base, key, tok, nil)
	ctx := context.Background()
	dc, err := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: up.URL, HTTPClient: &http.Client{Transport: &http.Transport{}}, MaxRetries: -1}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = dc.Close() })
	call := func(cs *mcp.ClientSession, i int) time.Duration {
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "bench", "i": i % 50}})
		if err != nil || res.IsError {
			b.Fatalf("echo: %v %v", err, res)
		}
		return time.Since(start)
	}
	for i := range 200 { // warm up both roads
		call(dc, i)
		call(proxied, i)
	}
	direct, viaProxy := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		direct = append(direct, call(dc, i))
		viaProxy = append(viaProxy, call(proxied, i))
	}
	b.StopTimer()
	pct := func(d []time.Duration, p float64) float64 {
		slices.Sort(d)
		return float64(d[int(p*float64(len(d)-1))].Microseconds()) / 1000
	}
	dp50, dp99, pp50, pp99 := pct(direct, .5), pct(direct, .99), pct(viaProxy, .5), pct(viaProxy, .99)
	b.ReportMetric(dp50, "direct-p50-ms")
	b.ReportMetric(dp99, "direct-p99-ms")
	b.ReportMetric(pp50, "proxied-p50-ms")
	b.ReportMetric(pp99, "proxied-p99-ms")
	b.ReportMetric(pp50-dp50, "added-p50-ms")
}
