package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"svc/testkit"
	"svc/testkit/gateway"
)

// TestE2EProbes covers the unversioned operational endpoints.
func TestE2EProbes(t *testing.T) {
	t.Parallel()
	gateway.ForBackends(t, func(t *testing.T, backend string) {
		s := gateway.Start(t, backend, nil)

		t.Run("livez", func(t *testing.T) {
			s.Want(t, 200, "GET", "/livez", "", nil)
		})
		t.Run("health", func(t *testing.T) {
			m := testkit.Obj(t, s.Want(t, 200, "GET", "/health", "", nil))
			if m["status"] != "ok" || m["db"] != "up" {
				t.Errorf("/health = %v", m)
			}
		})
		t.Run("readyz", func(t *testing.T) {
			m := testkit.Obj(t, s.Want(t, 200, "GET", "/readyz", "", nil))
			dead, ok := m["dead_background_tasks"].([]any)
			if m["background_tasks"] != "up" || !ok || len(dead) != 0 {
				t.Errorf("/readyz = %v; want background_tasks up and dead_background_tasks []", m)
			}
			if _, ok := m["audit_writer"]; !ok {
				t.Errorf("/readyz lacks audit_writer: %v", m)
			}
		})
		t.Run("startupz", func(t *testing.T) {
			s.Want(t, 200, "GET", "/startupz", "", nil)
		})
		t.Run("metrics", func(t *testing.T) {
			names := []string{"db_pool_connections_active", "db_pool_connections_idle", "db_pool_connections_max",
				"db_pool_connections_size", "db_pool_acquire_wait_seconds"}
			cases := []struct {
				name    string
				headers []string
			}{
				{"identity encoding", []string{"Accept-Encoding", "identity"}},
				// Go's client asks for gzip and decompresses transparently
				// when the server declares Content-Encoding: gzip; a
				// Prometheus scraper does the same.
				{"gzip negotiated", nil},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					resp, raw := s.Do(t, "GET", "/metrics", "", nil, tc.headers...)
					if resp.StatusCode != 200 {
						t.Fatalf("/metrics: %d", resp.StatusCode)
					}
					if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
						t.Errorf("/metrics Content-Type %q", ct)
					}
					if len(raw) > 2 && raw[0] == 0x1f && raw[1] == 0x8b {
						t.Fatalf("/metrics body is gzip-compressed without Content-Encoding: gzip (Content-Encoding %q)", resp.Header.Get("Content-Encoding"))
					}
					for _, name := range names {
						if !regexp.MustCompile(`(?m)^` + name + `(\{[^}]*\})? `).Match(raw) {
							t.Errorf("/metrics lacks a %s sample", name)
						}
					}
				})
			}
		})
		t.Run("debug runtime", func(t *testing.T) {
			m := testkit.Obj(t, s.Want(t, 200, "GET", s.Debug+"/debug/runtime", "", nil))
			for _, f := range []string{"active_tasks_count", "workers_count", "total_poll_count", "global_queue_depth",
				"scheduler_utilization", "uptime_secs", "goroutines_running", "goroutines_waiting", "threads",
				"scheduling_latency_p99_secs", "agent_actors", "background_tasks_up", "event_bus_queue_depth", "goroutines_created"} {
				if _, ok := m[f].(float64); !ok {
					t.Errorf("/debug/runtime %s = %v, want a number", f, m[f])
				}
			}
			// The figures mean what README says: Ps, goroutines (more than
			// those running), the supervised tasks up, a utilization share.
			num := func(f string) float64 { v, _ := m[f].(float64); return v }
			if num("workers_count") != float64(runtime.GOMAXPROCS(0)) && s.Node != nil {
				t.Errorf("workers_count %v, GOMAXPROCS %d", m["workers_count"], runtime.GOMAXPROCS(0))
			}
			if num("active_tasks_count") < 10 || num("active_tasks_count") < num("goroutines_running") || num("background_tasks_up") < 10 ||
				num("scheduler_utilization") < 0 || num("scheduler_utilization") > 1 || num("total_poll_count") < num("active_tasks_count") {
				t.Errorf("/debug/runtime figures: %v", m)
			}
		})
		t.Run("debug endpoints are not on the API listener", func(t *testing.T) {
			resp, _ := s.Do(t, "GET", "/debug/runtime", "", nil)
			if resp.StatusCode == 200 {
				t.Errorf("/debug/runtime answered 200 on the API listener")
			}
			resp, _ = s.Do(t, "POST", "/debug/tasks/heartbeat_flusher/fail", "", nil)
			if resp.StatusCode < 400 {
				t.Errorf("fault injection answered %d on the API listener", resp.StatusCode)
			}
		})
	})
}

// TestE2ESupervision kills the heartbeat flusher past its restart budget.
func TestE2ESupervision(t *testing.T) {
	t.Parallel()
	gateway.ForBackends(t, func(t *testing.T, backend string) {
		s := gateway.Start(t, backend, nil)

		t.Run("unknown task", func(t *testing.T) {
			resp, raw := s.Do(t, "POST", s.Debug+"/debug/tasks/no_such_task/fail", "", nil)
			if resp.StatusCode != 404 {
				t.Fatalf("unknown task: %d %s", resp.StatusCode, raw)
			}
		})

		t.Run("restart budget exhausted", func(t *testing.T) {
			resp, raw := s.Do(t, "POST", s.Debug+"/debug/tasks/heartbeat_flusher/fail", "", nil)
			if resp.StatusCode != 202 {
				t.Fatalf("first fault: %d %s", resp.StatusCode, raw)
			}
			ready := func() (int, map[string]any) {
				resp, raw := s.Do(t, "GET", "/readyz", "", nil)
				return resp.StatusCode, testkit.Obj(t, raw)
			}
			for i := 0; i < 10; i++ {
				if code, _ := ready(); code == 503 {
					break
				}
				time.Sleep(300 * time.Millisecond) // pace faults past the 100 ms doubling backoff
				s.Do(t, "POST", s.Debug+"/debug/tasks/heartbeat_flusher/fail", "", nil)
			}
			var body map[string]any
			testkit.Eventually(t, 20*time.Second, "/readyz 503", func() bool {
				var code int
				code, body = ready()
				return code == 503
			})
			dead, _ := body["dead_background_tasks"].([]any)
			if body["background_tasks"] != "down" || !slices.Contains(dead, any("heartbeat_flusher")) {
				t.Errorf("/readyz = %v; want background_tasks down and heartbeat_flusher dead", body)
			}
			// Liveness is unaffected.
			s.Want(t, 200, "GET", "/livez", "", nil)
		})
	})
}

// heldCall is a request whose body the test holds back after its first
// five bytes, so that the server holds it (its tenant's share, its agent's
// place) until finish sends the rest.
type heldCall struct {
	t          testing.TB
	addr, path string
	token      string
	body       []byte
	conn       net.Conn
	br         *bufio.Reader
}

// holdCall sends path's headers and the first bytes of body.
func holdCall(t testing.TB, s *gateway.Server, path, token string, body []byte) *heldCall {
	h := &heldCall{t: t, addr: strings.TrimPrefix(s.Base, "http://"), path: path, token: token, body: body}
	h.open()
	t.Cleanup(func() { _ = h.conn.Close() })
	return h
}

func (h *heldCall) open() {
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		h.t.Fatal(err)
	}
	h.conn, h.br = c, bufio.NewReader(c)
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		h.path, h.token, len(h.body), h.body[:5])
}

// held reports whether the server still holds the call. On a busy machine
// another request may reach the server before the held call's headers do,
// and the held call is then the one refused, at once: then it is sent
// again and held reports false.
func (h *heldCall) held() bool {
	_ = h.conn.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := h.br.Peek(1); err == nil {
		_ = h.conn.Close()
		h.open()
		return false
	}
	_ = h.conn.SetReadDeadline(time.Time{})
	return true
}

// finish sends the rest of the body and returns the call's status.
func (h *heldCall) finish() int {
	fmt.Fprintf(h.conn, "%s", h.body[5:])
	_ = h.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	r, err := http.ReadResponse(h.br, nil)
	if err != nil {
		h.t.Fatalf("the held call: %v", err)
	}
	_ = r.Body.Close()
	return r.StatusCode
}

// TestE2ELoadShedding holds the only request slot's tenant share with a
// request whose body never completes: the holder's own tenant gets 429
// tenant_concurrency, and another tenant's call is served, since a body
// still arriving holds its tenant's share and never a node slot (issue
// 35: two tenants' slow bodies within their shares filled every slot).
// The 503 of a node whose slots are all at work is
// TestLoadSheddingAnswers503 (http).
func TestE2ELoadShedding(t *testing.T) {
	t.Parallel()
	gateway.ForBackends(t, func(t *testing.T, backend string) {
		s := gateway.Start(t, backend, map[string]string{"SVC_MAX_CONCURRENT_REQUESTS": "1"})
		_, admin := s.Tenant(t, "shed-"+testkit.Uniq())
		_, other := s.Tenant(t, "shed-other-"+testkit.Uniq())
		s.Want(t, 200, "GET", "/v2/agents", admin, nil)

		slow := holdCall(t, s, "/v2/agents", admin, []byte(`{"name":"slow-agent"}`))
		var resp *http.Response
		var raw []byte
		testkit.Eventually(t, 10*time.Second, "a 429 for the slow call's tenant while its body is held", func() bool {
			if !slow.held() {
				return false
			}
			// The slow call's own tenant is past its share (one of one).
			resp, raw = s.Do(t, "GET", "/v2/agents", admin, nil)
			return resp.StatusCode == 429
		})
		gateway.Envelope(t, raw, 429, "v2", "TooManyRequests")
		if resp.Header.Get("Retry-After") == "" || gateway.Detail(testkit.Obj(t, raw), "error") != "tenant_concurrency" {
			t.Errorf("429 %v %s", resp.Header, raw)
		}
		// Another tenant, within its own share, finds the node's only slot
		// free: the body still arriving holds none.
		s.Want(t, 200, "GET", "/v2/agents", other, nil)
		s.Want(t, 200, "GET", "/livez", "", nil) // probes are not shed

		if code := slow.finish(); code != 201 {
			t.Errorf("slow request: %d, want 201", code)
		}
		testkit.Eventually(t, 5*time.Second, "the slot to be released", func() bool {
			resp, _ := s.Do(t, "GET", "/v2/agents", admin, nil)
			return resp.StatusCode == 200
		})
	})
}

// TestE2EAgentConcurrency: an agent token has at most its rate limit's
// burst (SVC_RATE_LIMIT_CAPACITY, here 1) of authorize calls in flight on
// a node, counted before the body is read (the rate token is taken only
// once it has arrived): while one call's body is held, the token's next
// call is 429 agent_concurrency, another agent of the same tenant is
// served, and the held call is answered once its body arrives. Per node,
// so on a lone node of each backend.
func TestE2EAgentConcurrency(t *testing.T) {
	t.Parallel()
	gateway.ForBackends(t, func(t *testing.T, backend string) {
		s := gateway.Start(t, backend, map[string]string{"SVC_RATE_LIMIT_CAPACITY": "1", "SVC_RATE_LIMIT_REFILL_RATE": "100"})
		_, admin := s.Tenant(t, "agent-inflight-"+testkit.Uniq())
		_, tok := s.Agent(t, admin, "held", nil)
		_, other := s.Agent(t, admin, "other", nil)
		raw, err := json.Marshal(gateway.AzRead(nil))
		if err != nil {
			t.Fatal(err)
		}
		first := holdCall(t, s, "/v2/authorize", tok, raw)
		var resp *http.Response
		var m map[string]any
		testkit.Eventually(t, 10*time.Second, "429 agent_concurrency while the first call's body is held", func() bool {
			if !first.held() {
				return false
			}
			resp, m, _ = gateway.AzPost(t, s, tok, gateway.AzRead(nil))
			return resp.StatusCode == http.StatusTooManyRequests
		})
		if gateway.Detail(m, "error") != "agent_concurrency" || resp.Header.Get("Retry-After") == "" {
			t.Errorf("429 %v %v", resp.Header, m)
		}
		gateway.AzWant(t, s, other, gateway.AzRead(nil), 200)
		if code := first.finish(); code != 200 {
			t.Errorf("the held call: %d, want 200", code)
		}
		testkit.Eventually(t, 5*time.Second, "the token's calls in flight to be released", func() bool {
			resp, _, _ := gateway.AzPost(t, s, tok, gateway.AzRead(nil))
			return resp.StatusCode == 200
		})
	})
}
