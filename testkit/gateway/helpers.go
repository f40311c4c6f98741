package gateway

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/testkit"
)

// MetricValue reads one unlabelled sample from /metrics; for a cluster
// (startCluster) it is the sum over its nodes, each read directly rather
// than through the balancer.
func MetricValue(t testing.TB, s *Server, name string) float64 {
	t.Helper()
	if len(s.Peers) > 0 {
		var sum float64
		for _, p := range s.Peers {
			sum += MetricValue(t, p, name)
		}
		return sum
	}
	raw := s.Want(t, 200, "GET", "/metrics", "", nil)
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == name {
			var v float64
			if err := json.Unmarshal([]byte(f[1]), &v); err == nil {
				return v
			}
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

// WaitFor asks for the approval with ?wait=secs on s in the background.
func WaitFor(t testing.TB, s *Server, tok, id, secs string) <-chan WaitResult {
	t.Helper()
	out := make(chan WaitResult, 1)
	go func() {
		start := time.Now()
		resp, raw := s.Do(t, "GET", "/v2/approvals/"+id+"?wait="+secs, tok, nil)
		r := WaitResult{Status: resp.StatusCode, Header: resp.Header, Took: time.Since(start)}
		_ = json.Unmarshal(raw, &r.Body)
		out <- r
	}()
	return out
}

// Recv waits for a wait's answer, failing the test after limit.
func Recv(t testing.TB, ch <-chan WaitResult, limit time.Duration) WaitResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(limit):
		t.Fatalf("no answer to the wait within %s", limit)
		return WaitResult{}
	}
}

// WaitingOn waits until the node holds n approval waiters (its
// svc_approval_waiters gauge), so that a decision made next finds them
// waiting.
func WaitingOn(t testing.TB, s *Server, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, raw := s.Do(t, "GET", "/metrics", "", nil)
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(line, "svc_approval_waiters ") && strings.TrimPrefix(line, "svc_approval_waiters ") == strconv.Itoa(n) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node never held %d approval waiters", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// SlowBody opens a connection from src (a loopback address), sends the
// headers of an authorize call whose body never finishes, and returns the
// status line the server eventually answers ("" when the connection is
// closed without one).
func SlowBody(t testing.TB, base, src, tok string, started *sync.WaitGroup) string {
	u, _ := url.Parse(base)
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	conn, err := d.Dial("tcp", u.Host)
	started.Done()
	if err != nil {
		return "dial: " + err.Error()
	}
	defer func() { _ = conn.Close() }()
	body := `{"tool_call":{"tool":"github","action":"list_issues"},"source_trust":"trusted_internal_signed"}`
	_, err = fmt.Fprintf(conn, "POST /v2/authorize HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", u.Host, tok, len(body), body[:10])
	if err != nil {
		return "write: " + err.Error()
	}
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return ""
	}
	return strings.TrimSpace(line)
}

// StatusJob returns the job of that name in a GET /status body.
func StatusJob(t testing.TB, st map[string]any, name string) map[string]any {
	t.Helper()
	jobs, _ := st["jobs"].([]any)
	for _, j := range jobs {
		if m, _ := j.(map[string]any); m["job"] == name {
			return m
		}
	}
	return nil
}

// WaitIncidents waits until the agent has exactly n incidents of kind, and
// then for the pipeline to settle, and checks there are still n.
func WaitIncidents(t testing.TB, s *Server, tok, agentID, kind string, n int) []map[string]any {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("%d %s incident(s)", n, kind), func() bool {
		return len(IncidentsOf(t, s, tok, agentID, kind)) >= n
	})
	Settle(t, s)
	l := IncidentsOf(t, s, tok, agentID, kind)
	if len(l) != n {
		t.Fatalf("%d %s incidents, want %d: %v", len(l), kind, n, l)
	}
	return l
}

// WaitResult is one ?wait= request's answer and how long it took.
type WaitResult struct {
	Status int
	Body   map[string]any
	Header http.Header
	Took   time.Duration
}

// IncidentsOf lists an agent's incidents of one kind.
func IncidentsOf(t testing.TB, s *Server, tok, agentID, kind string) []map[string]any {
	t.Helper()
	return testkit.Arr(t, s.Want(t, 200, "GET", "/v2/incidents?limit=500&agent_id="+agentID+"&kind="+kind, tok, nil))
}

// Settle waits until the pipeline has processed every event published so
// far and written their alerts: its processed counter stops moving for
// 800 ms, longer than the pipeline's 500 ms flush interval.
func Settle(t testing.TB, s *Server) {
	t.Helper()
	last, stable := -1.0, 0
	testkit.Eventually(t, 10*time.Second, "the SOC pipeline to settle", func() bool {
		n := MetricValue(t, s, "svc_soc_events_processed_total")
		if n == last {
			stable++
		} else {
			last, stable = n, 0
		}
		return stable >= 8
	})
}

// OpTokenRE is an operator token's form (CONTRACT §1).
var OpTokenRE = regexp.MustCompile(`^svc_op_[A-Za-z0-9_-]{43}$`)
