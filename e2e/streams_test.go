package e2e

// Live streams end to end (SPEC 4.1, 6.6; CONTRACT §7): the WebSocket feed,
// the watch=true server-sent events, one-time stream tickets, tenant
// isolation, and stalled subscribers that never slow the others or
// authorize.

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"svc/testkit"
	"svc/testkit/gateway"

	"github.com/coder/websocket"
)

// wsDial opens the live feed with a bearer token (or "" and a query).
func wsDial(t testing.TB, s *gateway.Server, token, query string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(s.Base, "http") + "/v1/ws/events" + query
	return websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h})
}

// wsCollector reads frames into a list until the connection ends.
type wsCollector struct {
	mu     sync.Mutex
	frames []map[string]any
}

func collect(c *websocket.Conn) *wsCollector {
	col := &wsCollector{}
	go func() {
		for {
			_, raw, err := c.Read(context.Background())
			if err != nil {
				return
			}
			var m map[string]any
			if json.Unmarshal(raw, &m) == nil {
				col.mu.Lock()
				col.frames = append(col.frames, m)
				col.mu.Unlock()
			}
		}
	}()
	return col
}

// has reports a frame of the type whose data has key == value.
func (c *wsCollector) has(typ, key, value string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.frames {
		d, _ := f["data"].(map[string]any)
		if f["type"] == typ && d[key] == value {
			return true
		}
	}
	return false
}

func TestE2EStreams(t *testing.T) {
	t.Parallel()
	gateway.ForModes(t, func(t *testing.T, backend string) {
		s := gateway.Start(t, backend, map[string]string{"SVC_RATE_LIMIT_CAPACITY": "1000000", "SVC_RATE_LIMIT_REFILL_RATE": "1000000"})
		_, admin := s.Tenant(t, "streams-"+testkit.Uniq())
		_, other := s.Tenant(t, "streams-other-"+testkit.Uniq())
		agentID, tok := s.Agent(t, admin, "streamer", nil)

		t.Run("websocket feed", func(t *testing.T) {
			conn, _, err := wsDial(t, s, admin, "")
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = conn.CloseNow() }()
			col := collect(conn)
			otherConn, _, err := wsDial(t, s, other, "")
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = otherConn.CloseNow() }()
			otherCol := collect(otherConn)
			time.Sleep(100 * time.Millisecond) // the subscriptions are in place
			deny := gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", "")
			testkit.Eventually(t, 5*time.Second, "the event and its alert on the feed", func() bool {
				return col.has("event", "agent_id", agentID) && col.has("alert", "decision_id", testkit.Str(t, deny, "decision_id"))
			})
			if otherCol.has("event", "agent_id", agentID) {
				t.Error("another tenant's feed received this tenant's event")
			}
			// The decision's event names its records by id and hash (SPEC 2.2).
			col.mu.Lock()
			var evidence map[string]any
			for _, f := range col.frames {
				d, _ := f["data"].(map[string]any)
				if ev, _ := d["evidence"].(map[string]any); f["type"] == "event" && ev["decision_id"] == deny["decision_id"] {
					evidence = ev
				}
			}
			col.mu.Unlock()
			for _, f := range []string{"receipt_id", "receipt_hash", "action_hash"} {
				if evidence == nil || evidence[f] == nil || evidence[f] != deny[f] {
					t.Errorf("the decision's event evidence %s = %v, want the answer's %v", f, evidence[f], deny[f])
				}
			}
			// Agent tokens and missing credentials are refused.
			if _, resp, err := wsDial(t, s, tok, ""); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Errorf("agent token on the feed: %v %v", err, resp)
			}
			if _, resp, err := wsDial(t, s, "", "?token="+admin); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("a token in the query string must not authenticate: %v %v", err, resp)
			}
		})

		t.Run("stream tickets", func(t *testing.T) {
			tk := testkit.Obj(t, s.Want(t, 201, "POST", "/v2/stream-tickets", admin, nil))
			if tk["expires_in"] != float64(60) || len(testkit.Str(t, tk, "ticket")) < 20 {
				t.Fatalf("ticket %v", tk)
			}
			conn, _, err := wsDial(t, s, "", "?ticket="+testkit.Str(t, tk, "ticket"))
			if err != nil {
				t.Fatalf("ticket dial: %v", err)
			}
			_ = conn.CloseNow()
			if _, resp, err := wsDial(t, s, "", "?ticket="+testkit.Str(t, tk, "ticket")); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("a used ticket: %v %v", err, resp)
			}
			s.Want(t, 403, "POST", "/v2/stream-tickets", tok, nil)
			// A ticket is not a credential for ordinary endpoints.
			tk2 := testkit.Obj(t, s.Want(t, 201, "POST", "/v2/stream-tickets", admin, nil))
			s.Want(t, 401, "GET", "/v2/alerts?ticket="+testkit.Str(t, tk2, "ticket"), "", nil)
		})

		t.Run("watch=true server-sent events", func(t *testing.T) {
			old := gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", "")
			waitAlert(t, s, admin, testkit.Str(t, old, "decision_id"), "confused_deputy_block")
			req, _ := http.NewRequest("GET", s.Base+"/v2/alerts?watch=true&severity=high", nil)
			req.Header.Set("Authorization", "Bearer "+admin)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("watch: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			lines := make(chan string, 1000)
			go func() {
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			fresh := gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", "")
			deadline := time.After(8 * time.Second)
			var got []string
			for done := false; !done; {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("stream ended; lines %v", got)
					}
					got = append(got, l)
					// The event ends at its blank line.
					done = l == "" && strings.Contains(strings.Join(got, "\n"), testkit.Str(t, fresh, "decision_id"))
				case <-deadline:
					t.Fatalf("no alert for the new decision within 8 s; lines %v", got)
				}
			}
			all := strings.Join(got, "\n")
			if !strings.Contains(all, "event: alert") || !strings.Contains(all, "id: ") || !strings.Contains(all, "data: {") {
				t.Errorf("SSE framing: %s", all)
			}
			if strings.Contains(all, testkit.Str(t, old, "decision_id")) {
				t.Errorf("an alert created before the request was streamed: %s", all)
			}
			if strings.Contains(all, `"severity":"INFO"`) {
				t.Errorf("the severity filter was not applied: %s", all)
			}
			s.Want(t, 400, "GET", "/v2/alerts?watch=maybe", admin, nil)
		})

		t.Run("stalled subscribers do not slow the others or authorize", func(t *testing.T) {
			// A WebSocket client and an SSE client that never read.
			stalledWS, _, err := wsDial(t, s, admin, "")
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = stalledWS.CloseNow() }()
			raw, err := net.Dial("tcp", strings.TrimPrefix(s.Base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = raw.Close() }()
			_, _ = raw.Write([]byte("GET /v2/incidents?watch=true HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + admin + "\r\n\r\n"))
			healthy, _, err := wsDial(t, s, admin, "")
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = healthy.CloseNow() }()
			col := collect(healthy)
			time.Sleep(100 * time.Millisecond)

			// Enough traffic to fill the stalled client's buffers many times.
			c := gateway.AzClient(16)
			body := gateway.AzJSON(t, gateway.AzUntrustedWrite(nil))
			var failures atomic.Int64
			var wg sync.WaitGroup
			for range 16 {
				wg.Go(func() {
					for range 200 {
						if r := gateway.AzSend(c, s.Base, tok, body); r.Err != nil || r.Status != 200 {
							failures.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if n := failures.Load(); n != 0 {
				t.Fatalf("%d authorize calls failed while subscribers were stalled", n)
			}
			marker := gateway.AzDecide(t, s, tok, gateway.AzRead(map[string]any{"nonce": "marker-" + testkit.Uniq()}), "allow", "")
			testkit.Eventually(t, 10*time.Second, "the healthy subscriber to see the marker's event", func() bool {
				col.mu.Lock()
				defer col.mu.Unlock()
				for _, f := range col.frames {
					d, _ := f["data"].(map[string]any)
					if ev, _ := d["evidence"].(map[string]any); f["type"] == "event" && ev["decision_id"] == marker["decision_id"] {
						return true
					}
				}
				return false
			})
			t.Logf("3200 calls answered with a stalled WebSocket and a stalled SSE client; subscribers cut so far: %v",
				gateway.MetricValue(t, s, "svc_stream_subscribers_cut_total"))
		})
	})
}

// TestE2EStreamCap: streams hold no request slot, but at most
// SVC_MAX_CONCURRENT_REQUESTS are open at once; one more is 503 (the
// tenant's share is the whole node here; TestE2EStreamShare tests shares).
func TestE2EStreamCap(t *testing.T) {
	t.Parallel()
	s := gateway.Start(t, "sqlite", map[string]string{"SVC_MAX_CONCURRENT_REQUESTS": "2", "SVC_MAX_CONCURRENT_PER_TENANT": "2"})
	_, admin := s.Tenant(t, "streams-cap-"+testkit.Uniq())
	var conns []*websocket.Conn
	for range 2 {
		c, _, err := wsDial(t, s, admin, "")
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	testkit.Eventually(t, 5*time.Second, "two open streams", func() bool { return gateway.MetricValue(t, s, "svc_streams_open") == 2 })
	if _, resp, err := wsDial(t, s, admin, ""); err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a third stream: %v %v, want 503", err, resp)
	}
	// Ordinary requests are not affected by open streams.
	s.Want(t, 200, "GET", "/v2/alerts", admin, nil)
	_ = conns[0].CloseNow()
	testkit.Eventually(t, 5*time.Second, "a stream slot to free", func() bool {
		c, _, err := wsDial(t, s, admin, "")
		if err == nil {
			_ = c.CloseNow()
		}
		return err == nil
	})
	_ = conns[1].CloseNow()
}

// A node that shuts down ends its open streams first: the WebSocket feed
// with close status 1001 (going away) and a watch stream as if its client
// had left, so that clients reconnect elsewhere at once and the shutdown
// does not wait for its timeout with streams holding it open.
func TestE2EStreamsEndOnShutdown(t *testing.T) {
	t.Parallel()
	s := gateway.Start(t, "sqlite", map[string]string{"SVC_SHUTDOWN_TIMEOUT_SECS": "30"})
	_, admin := s.Tenant(t, "streams-shutdown-"+testkit.Uniq())
	ws, _, err := wsDial(t, s, admin, "")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ws.CloseNow() }()
	req, err := http.NewRequest("GET", s.Base+"/v2/alerts?watch=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v2/alerts?watch=true: %v %v", resp, err)
	}
	defer func() { _ = resp.Body.Close() }()
	sseEnded := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		sseEnded <- err
	}()
	wsEnded := make(chan error, 1)
	go func() {
		_, _, err := ws.Read(context.Background())
		wsEnded <- err
	}()
	if code, _ := s.Stop(t); code != 0 {
		t.Errorf("shutdown exit %d", code)
	}
	select {
	case err := <-wsEnded:
		if st := websocket.CloseStatus(err); st != websocket.StatusGoingAway {
			t.Errorf("the feed ended with %v (status %d), want close status 1001", err, st)
		}
	case <-time.After(10 * time.Second):
		t.Error("the feed was still open after the shutdown")
	}
	select {
	case err := <-sseEnded:
		if err != nil {
			t.Errorf("the watch stream ended with %v, want its end", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("the watch stream was still open after the shutdown")
	}
	if log := s.Stderr.String(); strings.Contains(log, "did not finish in time") {
		t.Errorf("the shutdown waited for its timeout:\n%s", log)
	}
}
