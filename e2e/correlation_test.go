package e2e

// Correlation and behavioural baselines end to end (SPEC 6.2, 6.3), on one
// node and on two clustered nodes behind the round-robin balancer (issue
// 21): every incident kind at its exact threshold, the new-tool anomaly
// raised once per pair, the SSE incident stream, a node killed mid-storm,
// and the event-to-alert latency on two nodes.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/testkit"
	"svc/testkit/gateway"
)

// sseFrame is one server-sent event: its event name, its data decoded,
// and when it arrived.
type sseFrame struct {
	event string
	data  map[string]any
	at    time.Time
}

// sseStream is an open watch=true stream whose frames are collected.
type sseStream struct {
	mu     sync.Mutex
	frames []sseFrame
}

// sseOpen opens path (a watch=true list) with tok and collects its frames
// until the test ends.
func sseOpen(t testing.TB, s *gateway.Server, tok, path string) *sseStream {
	t.Helper()
	req, err := http.NewRequest("GET", s.Base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	st := &sseStream{}
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		var f sseFrame
		for sc.Scan() {
			switch l := sc.Text(); {
			case strings.HasPrefix(l, "event: "):
				f.event = strings.TrimPrefix(l, "event: ")
			case strings.HasPrefix(l, "data: "):
				_ = json.Unmarshal([]byte(strings.TrimPrefix(l, "data: ")), &f.data)
			case l == "" && f.data != nil:
				f.at = time.Now()
				st.mu.Lock()
				st.frames = append(st.frames, f)
				st.mu.Unlock()
				f = sseFrame{}
			}
		}
	}()
	return st
}

// find returns the frames whose data field key equals value.
func (st *sseStream) find(key, value string) []sseFrame {
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []sseFrame
	for _, f := range st.frames {
		if f.data[key] == value {
			out = append(out, f)
		}
	}
	return out
}

// noIncidents checks, once the pipeline settled, that the agent has no
// incident of kind.
func noIncidents(t testing.TB, s *gateway.Server, tok, agentID, kind string) {
	t.Helper()
	gateway.Settle(t, s)
	if l := gateway.IncidentsOf(t, s, tok, agentID, kind); len(l) != 0 {
		t.Fatalf("%s opened below its threshold: %v", kind, l)
	}
}

// agentAlerts counts the agent's alerts by name.
func agentAlerts(t testing.TB, s *gateway.Server, tok, agentID string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, a := range socAlerts(t, s, tok, "agent_id="+agentID) {
		out[fmt.Sprint(a["alert_name"])]++
	}
	return out
}

func TestE2ECorrelation(t *testing.T) {
	t.Parallel()
	gateway.ForModes(t, func(t *testing.T, backend string) {
		s := gateway.Start(t, backend, map[string]string{"SVC_RATE_LIMIT_CAPACITY": "100000"})
		_, admin := s.Tenant(t, "corr-"+testkit.Uniq())

		t.Run("runaway at its threshold; a pair's first use is alerted once", func(t *testing.T) {
			agentID, tok := s.Agent(t, admin, "corr-runaway-"+testkit.Uniq(), nil)
			for range 9 {
				gateway.AzDecide(t, s, tok, gateway.AzRead(nil), "allow", "")
			}
			noIncidents(t, s, admin, agentID, "runaway")
			gateway.AzDecide(t, s, tok, gateway.AzRead(nil), "allow", "")
			inc := gateway.WaitIncidents(t, s, admin, agentID, "runaway", 1)[0]
			if inc["severity"] != "HIGH" || len(gateway.AzStrings(inc["source_event_ids"])) != 10 {
				t.Errorf("runaway %v", inc)
			}
			// Ten calls of one pair, spread over the nodes: one new-tool
			// alert. A second pair: one more. Alerts are written by the
			// pipeline's flush: wait for them, then require no more.
			newTool := func() int { return agentAlerts(t, s, admin, agentID)["behavioral_anomaly_new_tool"] }
			testkit.Eventually(t, 15*time.Second, "one behavioral_anomaly_new_tool alert", func() bool { return newTool() >= 1 })
			if n := newTool(); n != 1 {
				t.Errorf("%d behavioral_anomaly_new_tool alerts for one pair, want 1", n)
			}
			for range 4 {
				gateway.AzDecide(t, s, tok, gateway.AzBody("github", "get_issue", false, gateway.AzSigned, nil), "allow", "")
			}
			gateway.Settle(t, s)
			testkit.Eventually(t, 15*time.Second, "two behavioral_anomaly_new_tool alerts", func() bool { return newTool() >= 2 })
			if n := newTool(); n != 2 {
				t.Errorf("%d behavioral_anomaly_new_tool alerts for two pairs, want 2", n)
			}
		})

		t.Run("repeated_approval at its threshold", func(t *testing.T) {
			agentID, tok := s.Agent(t, admin, "corr-approval-"+testkit.Uniq(), map[string]any{"risk_tier": "high"})
			for i := range 2 {
				gateway.AzDecide(t, s, tok, gateway.ApCall(map[string]any{"n": i}, nil), "require_approval", "")
			}
			noIncidents(t, s, admin, agentID, "repeated_approval")
			gateway.AzDecide(t, s, tok, gateway.ApCall(map[string]any{"n": 3}, nil), "require_approval", "")
			inc := gateway.WaitIncidents(t, s, admin, agentID, "repeated_approval", 1)[0]
			if inc["severity"] != "MEDIUM" || len(gateway.AzStrings(inc["source_event_ids"])) != 3 {
				t.Errorf("repeated_approval %v", inc)
			}
		})

		t.Run("trust_escalation: a deny after a require_approval", func(t *testing.T) {
			agentID, tok := s.Agent(t, admin, "corr-trust-"+testkit.Uniq(), map[string]any{"risk_tier": "high"})
			gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", "")
			gateway.AzDecide(t, s, tok, gateway.ApCall(map[string]any{"n": 1}, nil), "require_approval", "")
			noIncidents(t, s, admin, agentID, "trust_escalation") // a deny before it does not count
			gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", "")
			inc := gateway.WaitIncidents(t, s, admin, agentID, "trust_escalation", 1)[0]
			if inc["severity"] != "HIGH" || len(gateway.AzStrings(inc["source_event_ids"])) != 2 {
				t.Errorf("trust_escalation %v", inc)
			}
		})

		t.Run("the SSE incident stream carries a deny_storm opened on any node", func(t *testing.T) {
			agentID, tok := s.Agent(t, admin, "corr-sse-"+testkit.Uniq(), nil)
			st := sseOpen(t, s, admin, "/v2/incidents?watch=true")
			time.Sleep(200 * time.Millisecond) // the subscription is in place
			for range 5 {
				gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", "")
			}
			inc := gateway.WaitIncidents(t, s, admin, agentID, "deny_storm", 1)[0]
			testkit.Eventually(t, 5*time.Second, "the incident on the stream", func() bool {
				return len(st.find("incident_id", testkit.Str(t, inc, "incident_id"))) == 1
			})
			if f := st.find("incident_id", testkit.Str(t, inc, "incident_id"))[0]; f.event != "incident" || f.data["kind"] != "deny_storm" {
				t.Errorf("streamed incident %s %v", f.event, f.data)
			}
		})
	})
}

// TestE2EClusterDetectionLatency measures, on two nodes behind the
// balancer, the time from a decision to the alert or incident it raised,
// on the server's clock (both nodes share this machine's): new-tool alerts
// (every call a new pair: created_at minus the decision's created_at) and
// deny_storm incidents (opened_at minus the fifth deny's created_at). The
// alerts also reach an SSE stream held open on the balancer. It logs the
// figures and asserts only that every one arrived: timing is measured,
// never asserted (docs/development.md, "Testing").
func TestE2EClusterDetectionLatency(t *testing.T) {
	t.Parallel()
	s := gateway.Start(t, gateway.ClusterBackend, map[string]string{"SVC_RATE_LIMIT_CAPACITY": "100000"})
	_, admin := s.Tenant(t, "latency-"+testkit.Uniq())
	stream := sseOpen(t, s, admin, "/v2/alerts?watch=true")
	time.Sleep(200 * time.Millisecond)
	decidedAt := func(id string) time.Time {
		at, err := time.Parse(time.RFC3339Nano, testkit.Str(t, testkit.Obj(t, s.Want(t, 200, "GET", "/v2/decisions/"+id, admin, nil)), "created_at"))
		if err != nil {
			t.Fatal(err)
		}
		return at
	}
	stamp := func(m map[string]any, field string) time.Time {
		at, err := time.Parse(time.RFC3339Nano, testkit.Str(t, m, field))
		if err != nil {
			t.Fatal(err)
		}
		return at
	}

	agentID, tok := s.Agent(t, admin, "latency-tools", nil)
	const calls = 200
	for i := range calls {
		gateway.AzDecide(t, s, tok, gateway.AzBody("crm", fmt.Sprintf("list_%d", i), false, gateway.AzSigned, nil), "allow", "")
		time.Sleep(5 * time.Millisecond) // a steady stream, not a burst
	}
	var newTool []map[string]any
	testkit.Eventually(t, 15*time.Second, "a new-tool alert for every call", func() bool {
		newTool = newTool[:0]
		for _, a := range socAlerts(t, s, admin, "agent_id="+agentID) {
			if a["alert_name"] == "behavioral_anomaly_new_tool" {
				newTool = append(newTool, a)
			}
		}
		return len(newTool) >= calls
	})
	if len(newTool) != calls {
		t.Fatalf("%d new-tool alerts for %d new pairs", len(newTool), calls)
	}
	var alertLat []time.Duration
	for _, a := range newTool {
		alertLat = append(alertLat, stamp(a, "created_at").Sub(decidedAt(testkit.Str(t, a, "decision_id"))))
	}
	testkit.Eventually(t, 10*time.Second, "every new-tool alert on the SSE stream", func() bool {
		n := 0
		for _, f := range stream.find("alert_name", "behavioral_anomaly_new_tool") {
			if f.event == "alert" && f.data["agent_id"] == agentID {
				n++
			}
		}
		return n == calls
	})

	const storms = 20
	var incLat []time.Duration
	for range storms {
		stormAgent, stok := s.Agent(t, admin, "latency-storm-"+testkit.Uniq(), nil)
		var last map[string]any
		for range 5 {
			last = gateway.AzDecide(t, s, stok, gateway.AzUntrustedWrite(nil), "deny", "")
		}
		var inc map[string]any
		testkit.Eventually(t, 10*time.Second, "the storm's incident", func() bool {
			l := gateway.IncidentsOf(t, s, admin, stormAgent, "deny_storm")
			if len(l) > 0 {
				inc = l[0]
			}
			return len(l) > 0
		})
		incLat = append(incLat, stamp(inc, "opened_at").Sub(decidedAt(testkit.Str(t, last, "decision_id"))))
	}
	pct := func(d []time.Duration, p float64) time.Duration {
		d = slices.Clone(d)
		slices.Sort(d)
		return d[min(len(d)-1, int(float64(len(d))*p))]
	}
	t.Logf("two nodes, decision to alert: new-tool alerts n=%d p50 %v p99 %v max %v; deny_storm incidents n=%d p50 %v p99 %v max %v; CAS conflicts %v",
		len(alertLat), pct(alertLat, 0.5), pct(alertLat, 0.99), pct(alertLat, 1), len(incLat), pct(incLat, 0.5), pct(incLat, 0.99), pct(incLat, 1),
		gateway.MetricValue(t, s, "svc_soc_shared_conflicts_total"))
}
