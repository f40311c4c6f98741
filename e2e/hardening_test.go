package e2e

// Issue 20's hardening, end to end on both backends: strict JSON (exact
// keys, no duplicates), U+0000 refused alike everywhere before any work,
// and bodies that must arrive in time without one tenant starving another.

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/testkit"
	"svc/testkit/gateway"
)

func TestE2EStrictJSON(t *testing.T) {
	t.Parallel()
	gateway.ForModes(t, func(t *testing.T, backend string) {
		s := gateway.Start(t, backend, nil)
		_, admin := s.Tenant(t, "strict-"+testkit.Uniq())
		_, tok := s.Agent(t, admin, "strict-agent", nil)
		before := len(testkit.Arr(t, s.Want(t, 200, "GET", "/v2/decisions?limit=500", admin, nil)))

		// A duplicate key at any depth is 400 invalid_json, reason
		// duplicate_key, with its path; nothing is decided or recorded.
		dups := []struct{ body, path string }{
			{`{"tool_call":{"tool":"github","action":"create_issue"},"mutates_state":true,` +
				`"source_trust":"untrusted_external","source_trust":"trusted_internal_signed"}`, "source_trust"},
			{`{"tool_call":{"tool":"github","action":"list_issues","tool":"shell"},"source_trust":"trusted_internal_signed"}`, "tool_call.tool"},
			{`{"tool_call":{"tool":"github","action":"list_issues","parameters":{"a":[{"b":1,"b":2}]}},"source_trust":"trusted_internal_signed"}`,
				"tool_call.parameters.a.0.b"},
		}
		for _, d := range dups {
			_, raw := s.Do(t, "POST", "/v2/authorize", tok, d.body)
			e := gateway.Envelope(t, raw, 400, "v2", "BadRequest")
			if gateway.Detail(e, "error") != "invalid_json" || gateway.Detail(e, "reason") != "duplicate_key" || gateway.Detail(e, "path") != d.path {
				t.Errorf("%s: details %v, want invalid_json duplicate_key at %s", d.body, e["details"], d.path)
			}
		}
		// Elsewhere too: an operator endpoint and a nested duplicate.
		_, raw := s.Do(t, "POST", "/v2/agents", admin, `{"name":"dup-a","name":"dup-b"}`)
		if e := gateway.Envelope(t, raw, 400, "v2", "BadRequest"); gateway.Detail(e, "reason") != "duplicate_key" {
			t.Errorf("POST /agents duplicate: %v", e["details"])
		}

		// Keys match exactly: a case variant is an unknown key, ignored. A
		// mutating call whose only trust key is "Source_Trust" is decided as
		// one without source_trust (unknown), never as the variant's level.
		variant := `{"tool_call":{"tool":"github","action":"create_issue"},"mutates_state":true,"Source_Trust":"trusted_internal_signed"}`
		missing := `{"tool_call":{"tool":"github","action":"create_issue"},"mutates_state":true}`
		exact := `{"tool_call":{"tool":"github","action":"create_issue"},"mutates_state":true,"source_trust":"trusted_internal_signed"}`
		mv, mm, me := gateway.AzWant(t, s, tok, variant, 200), gateway.AzWant(t, s, tok, missing, 200), gateway.AzWant(t, s, tok, exact, 200)
		if mv["decision"] != mm["decision"] || mv["reason"] != mm["reason"] {
			t.Errorf("case-variant key read as a value: %v / %v, want as missing %v / %v", mv["decision"], mv["reason"], mm["decision"], mm["reason"])
		}
		if me["decision"] != "allow" || mv["decision"] == "allow" {
			t.Errorf("exact key decided %v, variant %v: want allow and not allow", me["decision"], mv["decision"])
		}
		// The bypass: untrusted first, a case-variant trusted second.
		bypass := `{"tool_call":{"tool":"github","action":"create_issue"},"mutates_state":true,` +
			`"source_trust":"untrusted_external","Source_Trust":"trusted_internal_unsigned"}`
		if m := gateway.AzWant(t, s, tok, bypass, 200); m["decision"] == "allow" {
			t.Errorf("case-variant trust key bypassed the policy: %v", m)
		}
		after := len(testkit.Arr(t, s.Want(t, 200, "GET", "/v2/decisions?limit=500", admin, nil)))
		if after != before+4 {
			t.Errorf("decisions recorded: %d, want %d (the 4 well-formed calls only)", after-before, 4)
		}
	})
}

func TestE2ENULRefused(t *testing.T) {
	t.Parallel()
	gateway.ForModes(t, func(t *testing.T, backend string) {
		s := gateway.Start(t, backend, nil)
		_, admin := s.Tenant(t, "nul-"+testkit.Uniq())
		agentID, tok := s.Agent(t, admin, "nul-agent", nil)
		before := len(testkit.Arr(t, s.Want(t, 200, "GET", "/v2/decisions?limit=500", admin, nil)))

		// In any string of an authorize body, read-only (the early answer
		// path) or not: 400 nul_character naming the field, nothing decided.
		bodies := []struct{ body, field string }{
			{`{"tool_call":{"tool":"github","action":"list_issues"},"resource":"repo\u0000x","source_trust":"trusted_internal_signed"}`, "resource"},
			{`{"tool_call":{"tool":"github","action":"list_issues"},"trace":{"run_id":"run\u0000"},"source_trust":"trusted_internal_signed"}`, "trace.run_id"},
			{`{"tool_call":{"tool":"git\u0000hub","action":"list_issues"},"source_trust":"trusted_internal_signed"}`, "tool_call.tool"},
			{`{"tool_call":{"tool":"github","action":"list_issues","parameters":{"q":["a","\u0000"]}},"source_trust":"trusted_internal_signed"}`, "tool_call.parameters.q.1"},
			{`{"tool_call":{"tool":"github","action":"list_issues"},"request_id":"r\u0000","source_trust":"trusted_internal_signed"}`, "request_id"},
			{`{"tool_call":{"tool":"github","action":"list_issues"},"unknown_field":"\u0000","source_trust":"trusted_internal_signed"}`, "unknown_field"},
		}
		for _, b := range bodies {
			for i := 0; i < 3; i++ {
				_, raw := s.Do(t, "POST", "/v2/authorize", tok, b.body)
				e := gateway.Envelope(t, raw, 400, "v2", "BadRequest")
				if gateway.Detail(e, "error") != "nul_character" || gateway.Detail(e, "field") != b.field {
					t.Fatalf("%s: details %v, want nul_character at %s", b.body, e["details"], b.field)
				}
			}
		}
		// Operator bodies, path ids and query values alike.
		_, raw := s.Do(t, "POST", "/v2/agents", admin, `{"name":"a\u0000b"}`)
		if e := gateway.Envelope(t, raw, 400, "v2", "BadRequest"); gateway.Detail(e, "error") != "nul_character" || gateway.Detail(e, "field") != "name" {
			t.Errorf("POST /agents: %v", e["details"])
		}
		_, raw = s.Do(t, "PATCH", "/v2/agents/"+agentID, admin, `{"allowed_environments":["prod","\u0000"]}`)
		if e := gateway.Envelope(t, raw, 400, "v2", "BadRequest"); gateway.Detail(e, "field") != "allowed_environments.1" {
			t.Errorf("PATCH /agents: %v", e["details"])
		}
		for _, p := range []string{"/v2/agents/%00", "/v2/agents/" + agentID + "%00", "/v2/decisions/%00", "/v2/approvals/%00", "/v2/agents/%FF"} {
			_, raw := s.Do(t, "GET", p, admin, nil)
			gateway.Envelope(t, raw, 404, "v2", "NotFound")
		}
		for _, q := range []struct{ path, field, code string }{
			{"/v2/alerts?agent_id=%00", "agent_id", "nul_character"},
			{"/v2/decisions?q=a%00b", "q", "nul_character"},
			{"/v2/audit/events?action=%00", "action", "nul_character"},
			{"/v2/decisions?agent_id=%FF", "agent_id", "invalid_query"},
			{"/v2/agents?x%00=1", "x\x00", "nul_character"},
		} {
			_, raw := s.Do(t, "GET", q.path, admin, nil)
			e := gateway.Envelope(t, raw, 400, "v2", "BadRequest")
			if gateway.Detail(e, "error") != q.code || gateway.Detail(e, "field") != q.field {
				t.Errorf("%s: details %v, want %s at %q", q.path, e["details"], q.code, q.field)
			}
		}
		// Nothing was decided, and what was accepted still reads back.
		after := len(testkit.Arr(t, s.Want(t, 200, "GET", "/v2/decisions?limit=500", admin, nil)))
		if after != before {
			t.Errorf("%d decisions recorded from NUL calls, want 0", after-before)
		}
		if m := gateway.AzWant(t, s, tok, gateway.AzRead(nil), 200); m["decision"] != "allow" {
			t.Fatalf("clean call after the NUL ones: %v", m)
		} else {
			s.Want(t, 200, "GET", "/v2/decisions/"+testkit.Str(t, m, "decision_id"), admin, nil)
		}
		if logs := s.Logs(); strings.Contains(logs, "request failed") {
			t.Errorf("a NUL reached the store (request failed logged):\n%s", logs)
		}
	})
}

// Two tenants flood the node with 520 bodies each that never arrive, each
// from its own address (past its share of 500 of the 1,000 slots, so
// together they would hold every slot if a body held one); a third
// tenant's calls from another address keep answering 200 throughout
// (issue 35: they got 503 for as long as the bodies were held). Each flood
// holds at most its tenant's share, for at most
// SVC_BODY_READ_TIMEOUT_SECS, and shows on /readyz and /metrics.
func TestE2ESlowBodyFlood(t *testing.T) {
	t.Parallel()
	gateway.ForBackends(t, func(t *testing.T, backend string) {
		const perTenant, flood = 520, 1040
		s := gateway.Start(t, backend, map[string]string{"SVC_BODY_READ_TIMEOUT_SECS": "4", "SVC_HEADER_READ_TIMEOUT_SECS": "2",
			"SVC_RATE_LIMIT_CAPACITY": "100000"})
		var floodToks []string
		for i := range 2 {
			_, admin := s.Tenant(t, fmt.Sprintf("flood-%d-%s", i, testkit.Uniq()))
			_, tok := s.Agent(t, admin, "flooder", nil)
			floodToks = append(floodToks, tok)
		}
		_, adminB := s.Tenant(t, "flood-b-"+testkit.Uniq())
		_, tokB := s.Agent(t, adminB, "bystander", nil)

		measure := func(n int) (statuses map[int]int, p50, p99 time.Duration) {
			statuses = map[int]int{}
			lat := make([]time.Duration, 0, n)
			for i := 0; i < n; i++ {
				start := time.Now()
				resp, _, _ := gateway.AzPost(t, s, tokB, gateway.AzRead(nil))
				lat = append(lat, time.Since(start))
				statuses[resp.StatusCode]++
			}
			slices.Sort(lat)
			return statuses, lat[len(lat)/2], lat[len(lat)*99/100]
		}
		quiet, q50, q99 := measure(200)
		if quiet[200] != 200 {
			t.Fatalf("before the flood: %v", quiet)
		}

		var started, done sync.WaitGroup
		lines := make(chan string, flood)
		started.Add(flood)
		done.Add(flood)
		for i := 0; i < flood; i++ {
			go func() {
				defer done.Done()
				lines <- gateway.SlowBody(t, s.Base, fmt.Sprintf("127.0.0.%d", 2+i/perTenant), floodToks[i/perTenant], &started)
			}()
		}
		started.Wait()
		// The headers land (slower under -race on a loaded machine): the
		// node reports itself saturated once the tenant holds its share.
		var ready map[string]any
		for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			ready = testkit.Obj(t, s.Want(t, 200, "GET", "/readyz", "", nil))
			if ready["load"] == "saturated" || time.Now().After(deadline) {
				break
			}
		}
		during, d50, d99 := measure(200)
		metrics := string(s.Want(t, 200, "GET", "/metrics", "", nil))
		done.Wait()
		close(lines)

		if during[200] != 200 {
			t.Errorf("the other tenant during the flood: %v, want 200 x 200", during)
		}
		answers := map[string]int{}
		for l := range lines {
			answers[l]++
		}
		timeouts, refused := answers["HTTP/1.1 408 Request Timeout"], answers["HTTP/1.1 429 Too Many Requests"]
		if timeouts+refused != flood || timeouts == 0 || refused < 2*(perTenant-500) {
			t.Errorf("flood answers %v: want every slow body answered 408 (held, then cut off) or 429 (past the tenant's share)", answers)
		}
		if busiest, _ := ready["busiest_tenant_in_flight"].(float64); ready["load"] != "saturated" || busiest < 1 {
			t.Errorf("/readyz during the flood: load %v, busiest tenant %v", ready["load"], ready["busiest_tenant_in_flight"])
		}
		for _, want := range []string{`svc_http_requests_refused_total{reason="tenant_concurrency"}`, "svc_http_bodies_in_flight", "svc_http_saturated 1"} {
			if !strings.Contains(metrics, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
		after := string(s.Want(t, 200, "GET", "/metrics", "", nil))
		if !strings.Contains(after, `svc_http_requests_refused_total{reason="body_timeout"} `) ||
			strings.Contains(after, `svc_http_requests_refused_total{reason="body_timeout"} 0`) {
			t.Errorf("/metrics counts no body timeouts after the flood")
		}
		t.Logf("%s: other tenant p50/p99 %v/%v quiet, %v/%v under a flood of %d slow bodies (answers %v)",
			backend, q50, q99, d50, d99, flood, answers)

		// Headers that do not arrive in time close the connection.
		conn, err := net.Dial("tcp", strings.TrimPrefix(s.Base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		_, _ = fmt.Fprintf(conn, "GET /livez HTTP/1.1\r\nHost: x\r\n")
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		buf := make([]byte, 512)
		if _, err := conn.Read(buf); err != nil && isTimeout(err) {
			t.Errorf("slow headers: connection still open after 30 s")
		}
		resp, _ := s.Do(t, "GET", "/livez", "", nil)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("livez after the flood: %d", resp.StatusCode)
		}
	})
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Streams are shared the same way: one tenant holds at most its share of
// the node's streams, and another tenant still opens one.
func TestE2EStreamShare(t *testing.T) {
	t.Parallel()
	s := gateway.Start(t, "sqlite", map[string]string{"SVC_MAX_CONCURRENT_REQUESTS": "6", "SVC_MAX_CONCURRENT_PER_TENANT": "3"})
	_, adminA := s.Tenant(t, "streams-a-"+testkit.Uniq())
	_, adminB := s.Tenant(t, "streams-b-"+testkit.Uniq())
	open := func(tok string) *http.Response {
		req, err := http.NewRequest("GET", s.Base+"/v2/alerts?watch=true", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := s.Client.Do(req)
		if err != nil {
			t.Fatalf("open stream: %v", err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	for i := 0; i < 3; i++ {
		if resp := open(adminA); resp.StatusCode != 200 {
			t.Fatalf("tenant A stream %d: %d", i+1, resp.StatusCode)
		}
	}
	resp := open(adminA)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("tenant A's fourth stream: %d, want 429 with Retry-After", resp.StatusCode)
	}
	if resp := open(adminB); resp.StatusCode != 200 {
		t.Fatalf("tenant B's stream beside A's three: %d", resp.StatusCode)
	}
}
