// Command waitload measures what agents waiting for approvals do to a node
// (issue 36, CONTRACT §14): it registers -waiters high-tier agents in one
// tenant, each with a pending approval, and a bystander agent in that
// tenant and in another. It then runs the same authorize load from the two
// bystanders (-workers goroutines each) twice for -duration: first with no
// one waiting, then while every waiting agent holds GET
// /v2/approvals/:id?wait=25 open, asking again the moment an answer comes,
// as an SDK does. It prints, per phase, the bystanders' answers by status
// and their latency percentiles, and the node's waiter gauge and memory.
//
//	waitload -url http://127.0.0.1:8080 -admin-token $SVC_ADMIN_TOKEN -waiters 10000 -duration 30s
//
// Start the server with a rate limit that does not throttle the
// bystanders (SVC_RATE_LIMIT_CAPACITY and SVC_RATE_LIMIT_REFILL_RATE
// 100000) and the default SVC_MAX_CONCURRENT_REQUESTS and
// SVC_MAX_CONCURRENT_PER_TENANT, which the waiters must not use up.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	base := flag.String("url", "http://127.0.0.1:8080", "svc base URL")
	admin := flag.String("admin-token", os.Getenv("SVC_ADMIN_TOKEN"), "super-admin token")
	waiters := flag.Int("waiters", 10000, "agents waiting for an approval at once")
	workers := flag.Int("workers", 8, "concurrent authorize callers per bystander")
	duration := flag.Duration("duration", 30*time.Second, "length of each phase")
	flag.Parse()
	if err := run(*base, *admin, *waiters, *workers, *duration); err != nil {
		fmt.Fprintln(os.Stderr, "waitload:", err)
		os.Exit(1)
	}
}

var client = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 20000, MaxConnsPerHost: 0,
	IdleConnTimeout: 2 * time.Minute}}

func call(method, u, tok string, in any) (int, map[string]any, error) {
	var rd io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		return 0, nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m, nil
}

func tenant(base, admin, name string) (string, error) {
	st, m, err := call("POST", base+"/v2/tenants", admin, map[string]any{"name": name})
	if err != nil {
		return "", fmt.Errorf("create tenant: %w", err)
	}
	tok, _ := m["operator_token"].(string)
	if st != 201 || tok == "" {
		return "", fmt.Errorf("create tenant: %d %v", st, m)
	}
	return tok, nil
}

func agent(base, op, name, tier string) (string, error) {
	st, m, err := call("POST", base+"/v2/agents", op, map[string]any{"name": name, "risk_tier": tier})
	if err != nil {
		return "", fmt.Errorf("create agent: %w", err)
	}
	tok, _ := m["agent_token"].(string)
	if st != 201 || tok == "" {
		return "", fmt.Errorf("create agent: %d %v", st, m)
	}
	return tok, nil
}

var (
	readCall = map[string]any{"tool_call": map[string]any{"tool": "github", "action": "list_issues"}, "source_trust": "trusted_internal_signed"}
	askCall  = map[string]any{"tool_call": map[string]any{"tool": "crm", "action": "update_contact", "parameters": map[string]any{"x": 1}},
		"mutates_state": true, "source_trust": "trusted_internal_signed"}
)

// pending is a waiting agent: its token and its approval.
type pending struct{ tok, id string }

func run(base, admin string, waiters, workers int, d time.Duration) error {
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	opW, err := tenant(base, admin, "waiting-"+stamp)
	if err != nil {
		return err
	}
	opB, err := tenant(base, admin, "bystander-"+stamp)
	if err != nil {
		return err
	}
	byW, err := agent(base, opW, "bystander", "low")
	if err != nil {
		return err
	}
	byB, err := agent(base, opB, "bystander", "low")
	if err != nil {
		return err
	}
	start := time.Now()
	ps := make([]pending, waiters)
	var next atomic.Int64
	var setupErr atomic.Value
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= waiters || setupErr.Load() != nil {
					return
				}
				tok, err := agent(base, opW, "w"+strconv.Itoa(i), "high")
				if err != nil {
					setupErr.Store(err)
					return
				}
				st, m, err := call("POST", base+"/v2/authorize", tok, askCall)
				if err != nil {
					setupErr.Store(fmt.Errorf("ask approval: %w", err))
					return
				}
				id, _ := m["approval_id"].(string)
				if st != 200 || m["decision"] != "require_approval" || id == "" {
					setupErr.Store(fmt.Errorf("ask approval: %d %v", st, m))
					return
				}
				ps[i] = pending{tok, id}
			}
		}()
	}
	wg.Wait()
	if err, _ := setupErr.Load().(error); err != nil {
		return err
	}
	fmt.Printf("setup: %d agents with a pending approval in %s\n", waiters, time.Since(start).Round(time.Millisecond))

	report("no one waiting", measure(base, []string{byW, byB}, workers, d), base)

	ctx, stop := context.WithCancel(context.Background())
	var answers, pendingAnswers, otherAnswers, failures atomic.Int64
	var hold sync.WaitGroup
	for _, p := range ps {
		hold.Add(1)
		go func() {
			defer hold.Done()
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v2/approvals/"+p.id+"?wait=25", nil)
				req.Header.Set("Authorization", "Bearer "+p.tok)
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						failures.Add(1)
						time.Sleep(time.Second)
					}
					continue
				}
				raw, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				answers.Add(1)
				if resp.StatusCode == 200 && strings.Contains(string(raw), `"PENDING"`) {
					pendingAnswers.Add(1)
					if resp.Header.Get("Retry-After") != "" {
						time.Sleep(time.Second)
					}
				} else {
					otherAnswers.Add(1)
					time.Sleep(time.Second)
				}
			}
		}()
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		n := gauge(base, "svc_approval_waiters")
		if n >= float64(waiters) || time.Now().After(deadline) {
			fmt.Printf("waiters held by the node: %.0f of %d\n", n, waiters)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	r := measure(base, []string{byW, byB}, workers, d)
	r.waiters = gauge(base, "svc_approval_waiters")
	report(fmt.Sprintf("%d agents waiting", waiters), r, base)
	stop()
	hold.Wait()
	fmt.Printf("wait answers: %d (PENDING %d, other %d), transport failures %d\n", answers.Load(), pendingAnswers.Load(),
		otherAnswers.Load(), failures.Load())
	return nil
}

// result is one phase's bystander answers.
type result struct {
	byStatus [2]map[int]int
	lat      [2][]time.Duration
	waiters  float64
}

// measure runs workers authorize callers per bystander token for d.
func measure(base string, toks []string, workers int, d time.Duration) result {
	var r result
	var mu sync.Mutex
	for i := range toks {
		r.byStatus[i] = map[int]int{}
	}
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for i, tok := range toks {
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(end) {
					t0 := time.Now()
					st, _, err := call("POST", base+"/v2/authorize", tok, readCall)
					took := time.Since(t0)
					if err != nil {
						st = -1
					}
					mu.Lock()
					r.byStatus[i][st]++
					r.lat[i] = append(r.lat[i], took)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return r
}

func report(phase string, r result, base string) {
	fmt.Printf("== %s\n", phase)
	for i, who := range []string{"bystander of the waiting tenant", "bystander of another tenant"} {
		l := r.lat[i]
		slices.Sort(l)
		pct := func(p float64) time.Duration {
			if len(l) == 0 {
				return 0
			}
			return l[min(len(l)-1, int(p*float64(len(l))))]
		}
		fmt.Printf("  %s: %d calls %v, p50 %s p99 %s max %s\n", who, len(l), r.byStatus[i], pct(0.5).Round(10*time.Microsecond),
			pct(0.99).Round(10*time.Microsecond), pct(1).Round(time.Millisecond))
	}
	fmt.Printf("  node: svc_approval_waiters %.0f, svc_http_requests_refused_total %.0f, go_memstats_heap_inuse_bytes %.0f MiB, process_resident_memory_bytes %.0f MiB\n",
		gauge(base, "svc_approval_waiters"), sum(base, "svc_http_requests_refused_total"),
		gauge(base, "go_memstats_heap_inuse_bytes")/(1<<20), gauge(base, "process_resident_memory_bytes")/(1<<20))
}

// metrics returns the lines of /metrics.
func metrics(base string) []string {
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		return nil
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	return strings.Split(string(raw), "\n")
}

// gauge is the value of an unlabelled metric (-1 when absent).
func gauge(base, name string) float64 {
	for _, line := range metrics(base) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

// sum adds every series of a metric.
func sum(base, name string) float64 {
	var total float64
	for _, line := range metrics(base) {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			f, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			total += f
		}
	}
	return total
}
