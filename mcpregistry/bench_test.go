package mcpregistry

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"svc/mcpclient"
	"svc/mcpclient/mcptest"
	"svc/persistence"
	"svc/persistence/sqlite"
	"svc/rules/manifest"
)

// The cost of one discovery of a manifest within every cap (400 tools
// whose descriptions are 16 KiB: 6.4 MB), from the MCP exchange to the
// commit, served by a real MCP server (the official Go SDK's) in a
// process of its own, so that B/op counts the gateway's allocations only:
//
//	go test -run XXX -bench MCPDiscovery -benchtime 5x ./mcpregistry/
//
// Measured on this 2-core machine (go1.26; the gateway's figures, SQLite
// store included; the manifest is 400 × 16 KiB = 6.55 MB):
//
//	                                   before (ba6245f)      after
//	first discovery, B/op              285.0 MB (43.5 ×)     16.5 MB (2.5 ×)
//	again, no drift, B/op              328.0 MB (50.1 ×)     15.6 MB (2.4 ×)
//	20 at once, B/op (all 20)          5.4 GB                329 MB
//	20 at once, peak heap, GOGC=100    587-621 MiB           52 MiB (4 slots); 244 MiB (20 slots)
//	20 at once, peak heap, GOGC=400    1340-1584 MiB         115 MiB (4 slots); 288 MiB (20 slots)
//
// (GOGC=400 is SVC_GC_PERCENT's default; before, there were no slots: both
// columns ran unbounded.) TestMCPDiscoveryCostsAFewManifests holds one
// discovery under 5 times its manifest.
//
// Before, the SDK read the answer's one SSE line into a growing buffer,
// decoded the JSON-RPC message, then the result into its types (a schema
// as map[string]any, encoded again by mcpclient), and the hashes encoded
// every tool with encoding/json and parsed it again for RFC 8785 (about 20
// times a tool's size, for each of three hashes per tool). Now mcpclient
// reads the tools off the wire one at a time (listTap), and the hashes are
// written directly (manifest.Tool.appendJCS), the stored tools' hashes
// read rather than computed again.

// mcpHelperEnv makes TestMCPHelperServer serve instead of skipping.
const mcpHelperEnv = "SVC_TEST_MCP_HELPER_TOOLS"

// bigManifest is a manifest within every cap: n tools whose descriptions
// are 16 KiB each.
func bigManifest(n, variant int) []mcptest.Tool {
	tools := make([]mcptest.Tool, n)
	for i := range tools {
		head := fmt.Sprintf("Tool %d (v%d). ", i, variant)
		tools[i] = mcptest.Tool{Name: fmt.Sprintf("tool_%03d", i), Description: head + strings.Repeat("Reads the ledger. ", (16<<10-len(head))/18),
			Schema: `{"type":"object","properties":{"q":{"type":"string","description":"the query"}}}`}
	}
	return tools
}

// TestMCPHelperServer is the MCP server the discovery benchmarks start in
// a process of their own: it serves servers bigManifest servers (one per
// variant) and prints their URLs, one a line, until its stdin closes.
func TestMCPHelperServer(t *testing.T) {
	var n int
	if _, err := fmt.Sscan(os.Getenv(mcpHelperEnv), &n); err != nil || n == 0 {
		t.Skip("the discovery benchmarks' helper process")
	}
	for i := range n {
		fmt.Println(mcptest.Start(t, 0, bigManifest(400, i)...).URL)
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// helperServers starts the helper process with n servers and returns
// their URLs.
func helperServers(b testing.TB, n int) []string {
	cmd := exec.Command(os.Args[0], "-test.run=^TestMCPHelperServer$") //nolint:gosec // G702: the test binary itself, run again as the helper server
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", mcpHelperEnv, n))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	urls := make([]string, 0, n)
	for len(urls) < n && lines.Scan() {
		if u := lines.Text(); strings.HasPrefix(u, "http://") {
			urls = append(urls, u)
		}
	}
	if len(urls) < n {
		b.Fatalf("the helper server printed %d urls", len(urls))
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return urls
}

func registryOver(store persistence.Store, slots int) *Registry {
	fetch := func(ctx context.Context, srv persistence.MCPServer) ([]manifest.Tool, error) {
		return mcpclient.Tools(ctx, http.DefaultClient, srv.URL, "bench", mcpclient.DefaultLimits)
	}
	return New(store, discardEvents{}, nil, fetch, NewSlots(slots), hclog.NewNullLogger())
}

// benchStore opens a SQLite store with one tenant.
func benchStore(b testing.TB, dir string) (persistence.Store, string) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(dir, "svc.db")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	tenant := persistence.Tenant{ID: uuid.NewString(), Name: "t", CreatedAt: time.Now().UTC()}
	if err := store.CreateTenant(ctx, tenant, persistence.OperatorToken{ID: uuid.NewString(), TenantID: tenant.ID, Name: "admin",
		Role: persistence.RoleAdmin, CreatedAt: time.Now().UTC()}, []byte(uuid.NewString())); err != nil {
		b.Fatal(err)
	}
	return store, tenant.ID
}

func register(b testing.TB, store persistence.Store, tenantID, key, url string) {
	if _, err := store.CreateMCPServer(context.Background(), persistence.MCPServer{TenantID: tenantID, Key: key,
		Transport: persistence.MCPTransportHTTP, URL: url, TrustLevel: "untrusted_external"}, 0); err != nil {
		b.Fatal(err)
	}
}

// One discovery of a 6.4 MB manifest (400 tools of 16 KiB) allocates a
// small multiple of it, the first (every tool scanned and written) and
// one that finds no change: before listTap and the direct hashes, about
// 45 and 50 times (BenchmarkMCPDiscovery).
func TestMCPDiscoveryCostsAFewManifests(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a helper process")
	}
	url := helperServers(t, 1)[0]
	store, tenantID := benchStore(t, t.TempDir())
	reg := registryOver(store, 1)
	register(t, store, tenantID, "big", url)
	const manifestBytes = 400 * 16 << 10
	for _, pass := range []string{"first", "again"} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		d, err := reg.Discover(context.Background(), tenantID, "big", nil, nil)
		runtime.ReadMemStats(&after)
		if err != nil || d.Tools != 400 {
			t.Fatalf("%s: %v, %d tools", pass, err, d.Tools)
		}
		got := float64(after.TotalAlloc-before.TotalAlloc) / manifestBytes
		t.Logf("%s discovery: %.1f times the manifest", pass, got)
		if got > 5 {
			t.Errorf("%s discovery allocated %.1f times the manifest, want at most 5", pass, got)
		}
	}
}

// serial names the benchmarks' servers apart.
var serial atomic.Int64

// BenchmarkMCPDiscovery is one discovery of a 400 × 16 KiB manifest: the
// first (every tool scanned and written) and a later one of the same
// manifest (no drift). B/op is what the gateway allocates for one.
func BenchmarkMCPDiscovery(b *testing.B) {
	url := helperServers(b, 1)[0]
	store, tenantID := benchStore(b, b.TempDir())
	reg := registryOver(store, 4)
	ctx := context.Background()
	b.Run("first", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			key := fmt.Sprintf("first-%d", serial.Add(1))
			register(b, store, tenantID, key, url)
			if _, err := reg.Discover(ctx, tenantID, key, nil, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	register(b, store, tenantID, "again", url)
	if _, err := reg.Discover(ctx, tenantID, "again", nil, nil); err != nil {
		b.Fatal(err)
	}
	b.Run("again", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := reg.Discover(ctx, tenantID, "again", nil, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkMCPDiscoveryConcurrent runs 20 discover calls at once, each of
// its own server's 400 × 16 KiB manifest, through the node's slots (4, the
// default, and 20: as if unbounded), and reports the peak of the live heap
// above what it was before (sampled every millisecond).
func BenchmarkMCPDiscoveryConcurrent(b *testing.B) {
	const n = 20
	urls := helperServers(b, n)
	for _, slots := range []int{4, n} {
		b.Run(fmt.Sprintf("slots=%d", slots), func(b *testing.B) {
			store, tenantID := benchStore(b, b.TempDir())
			reg := registryOver(store, slots)
			ctx := context.Background()
			var peak uint64
			b.ReportAllocs()
			for range b.N {
				runtime.GC()
				base := heapLive()
				stop, sampled := make(chan struct{}), make(chan uint64)
				go func() {
					top := uint64(0)
					tk := time.NewTicker(time.Millisecond)
					defer tk.Stop()
					for {
						select {
						case <-stop:
							sampled <- top
							return
						case <-tk.C:
							if h := heapLive(); h > base {
								top = max(top, h-base)
							}
						}
					}
				}()
				var wg sync.WaitGroup
				for j, u := range urls {
					key := fmt.Sprintf("c-%d-%d", serial.Add(1), j)
					register(b, store, tenantID, key, u)
					wg.Add(1)
					go func() {
						defer wg.Done()
						if _, err := reg.Discover(ctx, tenantID, key, nil, nil); err != nil {
							b.Error(err)
						}
					}()
				}
				wg.Wait()
				close(stop)
				peak = max(peak, <-sampled)
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
		})
	}
}

// heapLive is the heap's bytes in live and not yet swept objects.
func heapLive() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
