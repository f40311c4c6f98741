package process

// BenchmarkCompliancePackStreaming (issue 24): a tenant with many decisions
// (SVC_BENCH_PACK_DECISIONS, default 1,000,000) downloads its compliance
// evidence pack from the gateway process on SQLite while the process's
// resident size is sampled every 20 ms. It reports how far the RSS rose over
// its level just before the download, the pack's size and time, and checks
// the archive with `unzip -t` and `svc verify-pack`. Run it alone:
//
//	go test -run '^$' -bench BenchmarkCompliancePackStreaming -benchtime 1x ./cmd/svc/

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"svc/actors"
	"svc/persistence"
	"svc/persistence/sqlite"
	"svc/receipt"
	"svc/testkit/gateway"
)

func BenchmarkCompliancePackStreaming(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("SVC_BENCH_PACK_DECISIONS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("SVC_BENCH_PACK_DECISIONS=%q", v)
		}
	}
	seed, seedB64 := gateway.AzSeed(b)
	dir := b.TempDir()
	path := filepath.Join(dir, "pack.db")
	env := map[string]string{"SVC_RECEIPT_SIGNING_KEY": seedB64, "SVC_LOG_LEVEL": "error"}
	if v := os.Getenv("SVC_BENCH_PACK_GOGC"); v != "" {
		env["GOGC"] = v
	}

	// The tenant and an agent, through the API; then the decisions straight
	// into the store, sealed with the gateway's key, as the writer would.
	s := gateway.StartProcessOn(b, "sqlite://"+path, env)
	tenantID, admin := s.Tenant(b, "pack-bench")
	agentID, _ := s.Agent(b, admin, "pack-bench-agent", nil)
	s.Stop(b)
	populate(b, path, tenantID, agentID, seed, n)

	s = gateway.StartProcessOn(b, "sqlite://"+path, env)
	pid := s.Cmd.Process.Pid
	s.Want(b, 200, "GET", "/v2/decisions?limit=1", admin, nil)
	before := rssKiB(b, pid)
	var peak, heapPeak, goalPeak atomic.Int64
	peak.Store(before)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				if v := rssKiB(b, pid); v > peak.Load() {
					peak.Store(v)
				}
				if i%10 == 0 { // the Go heap, every 200 ms
					heap, goal := heapStats(s)
					heapPeak.Store(max(heapPeak.Load(), heap))
					goalPeak.Store(max(goalPeak.Load(), goal))
				}
			}
		}
	}()
	out := filepath.Join(dir, "compliance.zip")
	start := time.Now()
	size := download(b, s.Base+"/v2/compliance/evidence-pack", admin, out)
	took := time.Since(start)
	close(stop)
	<-sampled
	rise := float64(peak.Load()-before) / 1024
	b.ReportMetric(rise, "rss-rise-MiB")
	b.ReportMetric(float64(before)/1024, "rss-before-MiB")
	b.ReportMetric(float64(size)/(1<<20), "pack-MiB")
	b.ReportMetric(took.Seconds(), "download-s")
	b.Logf("%d decisions: pack %.1f MiB in %s; RSS %.1f MiB before, peak %.1f MiB (+%.1f MiB); Go heap in use at most %.1f MiB, heap goal at most %.1f MiB",
		n, float64(size)/(1<<20), took.Round(time.Millisecond), float64(before)/1024, float64(peak.Load())/1024, rise,
		float64(heapPeak.Load())/(1<<20), float64(goalPeak.Load())/(1<<20))

	if outp, err := exec.Command("unzip", "-t", out).CombinedOutput(); err != nil || !strings.Contains(string(outp), "No errors detected") {
		b.Fatalf("unzip -t: %v\n%s", err, tail(string(outp)))
	}
	vstart := time.Now()
	code, vout, verr := runSvcLong(b, "verify-pack", out)
	if code != 0 {
		b.Fatalf("svc verify-pack: exit %d\n%s%s", code, vout, verr)
	}
	b.Logf("unzip -t: no errors; svc verify-pack: VALID in %s", time.Since(vstart).Round(time.Millisecond))
	if rise > 64 {
		b.Errorf("RSS rose by %.1f MiB during the download, over the 64 MiB the pack may take", rise)
	}
}

// populate commits n decisions of one agent in batches, sealed with seed's
// key.
func populate(b *testing.B, path, tenantID, agentID string, seed []byte, n int) {
	b.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: path})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	signer, err := receipt.NewSigner(seed)
	if err != nil {
		b.Fatal(err)
	}
	seal := actors.NewSealer(signer, nil)
	start := time.Now()
	const batch = 512
	decisions := []string{"allow", "allow", "allow", "deny", "redact"}
	for i := 0; i < n; i += batch {
		ws := make([]persistence.DecisionWrite, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			at := time.Now().UTC().Truncate(time.Microsecond)
			dec := decisions[j%len(decisions)]
			d := persistence.Decision{ID: persistence.NewRecordID(), TenantID: tenantID, AgentID: agentID, Tool: "github",
				Action: "list_issues", ActionHash: fmt.Sprintf("%064x", j), Decision: dec, Reason: "bench " + dec, RiskScore: j % 100,
				CompositeRiskScore: j % 100, MatchedPolicyIDs: []string{"default_allow_read"}, RedactedFields: []string{},
				TrustLevel: "trusted_internal_signed", RootTrustLevel: "trusted_internal_signed", ToolCall: json.RawMessage(`{"tool":"github"}`),
				CreatedAt: at, AuditID: persistence.NewRecordID(), EventID: persistence.NewRecordID()}
			r := &persistence.Receipt{ID: persistence.NewRecordID(), TenantID: tenantID, DecisionID: d.ID, ActionHash: d.ActionHash,
				Decision: dec, CreatedAt: at}
			ws = append(ws, persistence.DecisionWrite{Decision: d, Receipt: r})
		}
		if err := st.CommitDecisions(ctx, ws, seal); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("populated %d decisions in %s", n, time.Since(start).Round(time.Millisecond))
}

// rssKiB reads a process's resident size.
func rssKiB(b *testing.B, pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kib, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kib
		}
	}
	return 0
}

// download streams GET url into a file and returns its size.
func download(b *testing.B, url, tok, out string) int64 {
	b.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != 200 {
		raw, _ := io.ReadAll(resp.Body)
		b.Fatalf("GET %s: %d %s", url, resp.StatusCode, raw)
	}
	f, err := os.Create(out)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	size, err := io.Copy(f, resp.Body)
	if err != nil {
		b.Fatalf("download: %v after %d bytes", err, size)
	}
	return size
}

// runSvcLong runs the binary to completion without runSvc's 20 s bound.
func runSvcLong(b *testing.B, args ...string) (int, string, string) {
	cmd := exec.Command(gateway.Binary(b), args...)
	cmd.Env = gateway.BaseEnv()
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	code := 0
	if err := cmd.Run(); err != nil {
		code = -1
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			code = ee.ExitCode()
		}
	}
	return code, out.String(), errb.String()
}

func tail(s string) string {
	if len(s) > 2000 {
		return s[len(s)-2000:]
	}
	return s
}

// heapStats reads the Go heap in use and the collector's goal from
// /metrics.
func heapStats(s *gateway.Server) (inuse, goal int64) {
	resp, err := http.Get(s.Base + "/metrics")
	if err != nil {
		return 0, 0
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		f, _ := strconv.ParseFloat(v, 64)
		switch name {
		case "go_memstats_heap_inuse_bytes":
			inuse = int64(f)
		case "go_memstats_next_gc_bytes":
			goal = int64(f)
		}
	}
	return inuse, goal
}
