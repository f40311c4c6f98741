// Command slowflood measures what slow request bodies from several tenants
// do to another tenant (issue 35). It creates -tenants flooding tenants
// (each with one agent) and a bystander tenant through the super-admin
// token, then has each flooding tenant open -per-tenant POST /v2/authorize
// requests from its own loopback address (127.0.0.<10+i>) that send their
// headers and the first bytes of the body and then hold, re-opening each
// one the moment the server answers it, for -duration. Meanwhile the
// bystander sends authorize calls one after another. It prints the
// bystander's answers (per status) and latency percentiles, and how the
// server answered the held requests.
//
//	slowflood -url http://127.0.0.1:8080 -admin-token $SVC_ADMIN_TOKEN -tenants 2 -per-tenant 520 -duration 30s
//
// Start the server with SVC_RATE_LIMIT_CAPACITY high enough for
// -per-tenant calls of one token in flight (e.g. 100000), or the agent's own
// in-flight limit refuses most of the flood before its share does.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	base := flag.String("url", "http://127.0.0.1:8080", "svc base URL")
	admin := flag.String("admin-token", os.Getenv("SVC_ADMIN_TOKEN"), "super-admin token")
	tenants := flag.Int("tenants", 2, "flooding tenants")
	perTenant := flag.Int("per-tenant", 520, "slow requests each flooding tenant holds open")
	duration := flag.Duration("duration", 30*time.Second, "how long the flood lasts")
	flag.Parse()
	if err := run(*base, *admin, *tenants, *perTenant, *duration); err != nil {
		fmt.Fprintln(os.Stderr, "slowflood:", err)
		os.Exit(1)
	}
}

const body = `{"tool_call":{"tool":"github","action":"list_issues"},"source_trust":"trusted_internal_signed"}`

func call(method, u, tok string, in any, hdr ...string) (int, map[string]any, error) {
	var rd io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out, nil
}

// agentToken creates a tenant and an agent in it.
func agentToken(base, admin, name string) (string, error) {
	st, t, err := call("POST", base+"/v2/tenants", admin, map[string]any{"name": name})
	if err != nil {
		return "", fmt.Errorf("create tenant: %w", err)
	}
	if st != 201 {
		return "", fmt.Errorf("create tenant: %d %v", st, t)
	}
	id, _ := t["tenant_id"].(string)
	if id == "" {
		id, _ = t["id"].(string)
	}
	st, a, err := call("POST", base+"/v2/agents", admin, map[string]any{"name": name + "-agent"}, "X-Svc-Tenant-ID", id)
	if err != nil {
		return "", fmt.Errorf("create agent: %w", err)
	}
	if st != 201 {
		return "", fmt.Errorf("create agent: %d %v", st, a)
	}
	tok, _ := a["agent_token"].(string)
	return tok, nil
}

// hold sends one slow request from src and returns the status line the
// server answers it with ("" when the connection just closed).
func hold(host, src, tok string) string {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	conn, err := d.Dial("tcp", host)
	if err != nil {
		time.Sleep(100 * time.Millisecond)
		return "dial error"
	}
	defer func() { _ = conn.Close() }()
	if _, err := fmt.Fprintf(conn, "POST /v2/authorize HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", host, tok, len(body), body[:10]); err != nil {
		return "write error"
	}
	_ = conn.SetReadDeadline(time.Now().Add(120 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "closed"
	}
	return strings.TrimSpace(line)
}

func run(base, admin string, tenants, perTenant int, duration time.Duration) error {
	u, err := url.Parse(base)
	if err != nil {
		return err
	}
	stamp := time.Now().Format("150405")
	var toks []string
	for i := range tenants {
		tok, err := agentToken(base, admin, fmt.Sprintf("flood-%s-%d", stamp, i))
		if err != nil {
			return err
		}
		toks = append(toks, tok)
	}
	bystander, err := agentToken(base, admin, "bystander-"+stamp)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	held := map[string]int{}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i, tok := range toks {
		src := fmt.Sprintf("127.0.0.%d", 10+i)
		for range perTenant {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					line := hold(u.Host, src, tok)
					mu.Lock()
					held[line]++
					mu.Unlock()
				}
			}()
		}
	}
	time.Sleep(2 * time.Second) // the headers land
	statuses := map[int]int{}
	var lat []time.Duration
	client := &http.Client{Timeout: 30 * time.Second}
	for deadline := time.Now().Add(duration); time.Now().Before(deadline); {
		req, _ := http.NewRequest("POST", base+"/v2/authorize", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+bystander)
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := client.Do(req)
		lat = append(lat, time.Since(start))
		if err != nil {
			statuses[0]++
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		statuses[resp.StatusCode]++
		time.Sleep(10 * time.Millisecond)
	}
	_, ready, _ := call("GET", base+"/readyz", "", nil)
	stop.Store(true)
	wg.Wait()
	slices.Sort(lat)
	fmt.Printf("flood: %d tenants x %d slow bodies for %s\n", tenants, perTenant, duration)
	fmt.Printf("bystander: %d calls, statuses %v, p50 %v, p99 %v, max %v\n", len(lat), statuses,
		lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])
	fmt.Printf("held requests answered: %v\n", held)
	fmt.Printf("/readyz at the end: load %v, in_flight_requests %v, busiest_tenant_in_flight %v, bodies_in_flight %v\n",
		ready["load"], ready["in_flight_requests"], ready["busiest_tenant_in_flight"], ready["bodies_in_flight"])
	return nil
}
