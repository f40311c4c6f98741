package e2e

// The inline MCP proxy end to end (CONTRACT §15, issue 37): the official Go
// SDK's client, pointed at /v2/mcp/proxy/:server_key, in front of a go-sdk
// server of our own, on a lone node of each backend and on two nodes behind
// the round-robin balancer (every request of a session alternates between
// the nodes, so the session, the upstream's requests to the client and the
// client's answers cross nodes).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"svc/canonical"
	"svc/persistence/storetest"
	"svc/testkit"
	"svc/testkit/gateway"
)

func TestE2EMCPProxy(t *testing.T) {
	t.Parallel()
	gateway.ForModes(t, func(t *testing.T, backend string) {
		s := gateway.Start(t, backend, map[string]string{"SVC_ALLOW_PRIVATE_TARGETS": "true", "SVC_RATE_LIMIT_CAPACITY": "100000"})
		up := gateway.StartUpstream(t)
		_, admin := s.Tenant(t, "mcpproxy-"+testkit.Uniq())
		key := "up-" + testkit.Uniq()
		gateway.ProxyServer(t, s, admin, key, up.URL, "echo", "write", "slow", "ask")
		agentID, tok := s.Agent(t, admin, "mcp-agent", nil)
		seen := &gateway.ClientSeen{}
		cs := gateway.Connect(t, s.Base, key, tok, seen)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()

		t.Run("tools/list answers the approved tools only", func(t *testing.T) {
			res, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range res.Tools {
				names = append(names, tool.Name)
			}
			slices.Sort(names)
			if want := []string{"ask", "echo", "slow", "write"}; !slices.Equal(names, want) {
				t.Fatalf("tools/list through the proxy: %v, want %v (hang and big are pending)", names, want)
			}
		})

		t.Run("an allowed call is forwarded with the server's credentials only, and recorded", func(t *testing.T) {
			args := map[string]any{"text": "hi", "n": 1}
			res := gateway.CallTool(t, cs, "echo", args)
			if res.IsError || !strings.Contains(gateway.ResultText(res), `"text":"hi"`) {
				t.Fatalf("echo: %v %q", res.IsError, gateway.ResultText(res))
			}
			// The server record's credentials are never returned.
			for _, path := range []string{"/v2/mcp/servers/" + key, "/v2/mcp/servers"} {
				raw := s.Want(t, 200, "GET", path, admin, nil)
				if strings.Contains(string(raw), "upstream-secret") || !strings.Contains(string(raw), `"upstream_headers_set":true`) {
					t.Fatalf("GET %s: %s", path, raw)
				}
			}
			for _, h := range up.SawHeaders() {
				if h.Get("X-Upstream-Key") != "upstream-secret" {
					t.Errorf("a request reached the upstream without the server record's header: %v", h)
				}
				if a := h.Get("Authorization"); a != "" {
					t.Errorf("the upstream saw Authorization %q", a)
				}
				if c := h.Get("Cookie"); c != "" {
					t.Errorf("the upstream saw Cookie %q", c)
				}
			}
			hash, err := canonical.ActionHash(canonical.ToolCall{Tool: "mcp:" + key, Action: "echo", Parameters: map[string]any{"text": "hi", "n": 1.0}})
			if err != nil {
				t.Fatal(err)
			}
			var found map[string]any
			testkit.Eventually(t, 10*time.Second, "the proxied call's decision", func() bool {
				for _, d := range testkit.Arr(t, s.Want(t, 200, "GET", "/v2/decisions?limit=100", admin, nil)) {
					if d["action_hash"] == hash && d["agent_id"] == agentID {
						found = d
						return true
					}
				}
				return false
			})
			if found["decision"] != "allow" || found["tool"] != "mcp:"+key || found["mutates_state"] != false || testkit.Str(t, found, "receipt_id") == "" {
				t.Fatalf("the proxied call's decision: %v", found)
			}
			if rid, _ := found["run_id"].(string); rid == "" {
				t.Errorf("the proxied call has no run_id (the proxy session's): %v", found)
			}
			s.Want(t, 200, "GET", "/v2/receipts/"+testkit.Str(t, found, "receipt_id"), admin, nil)
		})

		t.Run("the run's evidence and the response's inspection", func(t *testing.T) {
			run := "mcp-run-" + testkit.Uniq()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "SSN 123-45-6789"},
				Meta: mcp.Meta{"svc/run_id": run}})
			if err != nil || res.IsError {
				t.Fatalf("echo with a run: %v %v", err, res)
			}
			g := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/graph/run/"+run, admin, nil))
			if nodes, _ := g["nodes"].([]any); len(nodes) == 0 || !strings.Contains(fmt.Sprint(nodes), "mcp:"+key) {
				t.Fatalf("the run's evidence graph: %v", g)
			}
			// Inspection off: no alert; on: the answer raises it (and is
			// relayed as it came).
			for _, a := range socAlerts(t, s, admin, "") {
				if a["rule_key"] == "mcp_response_sensitive_data" {
					t.Fatalf("an inspection alert before inspection was on: %v", a)
				}
			}
			s.Want(t, 200, "PATCH", "/v2/mcp/servers/"+key, admin, map[string]any{"inspection_enabled": true})
			testkit.Eventually(t, 10*time.Second, "the inspection's alert", func() bool {
				res := gateway.CallTool(t, cs, "echo", map[string]any{"text": "SSN 123-45-6789"})
				if res.IsError || !strings.Contains(gateway.ResultText(res), "123-45-6789") {
					t.Fatalf("the inspected answer was changed: %v %q", res.IsError, gateway.ResultText(res))
				}
				for _, a := range socAlerts(t, s, admin, "") {
					if a["rule_key"] == "mcp_response_sensitive_data" && a["agent_id"] == agentID {
						return true
					}
				}
				return false
			})
			s.Want(t, 200, "PATCH", "/v2/mcp/servers/"+key, admin, map[string]any{"inspection_enabled": false})
		})

		t.Run("a denied call is a tool result, not forwarded", func(t *testing.T) {
			rego := "package svc.policies.mcpdeny\n\n" +
				`results contains {"decision": "deny", "reason": "forbidden_path"} if input.tool_call.parameters.path == "/etc/passwd"` + "\n" +
				`results contains {"decision": "redact", "reason": "secret", "redact_fields": ["parameters.secret"]} if input.tool_call.parameters.secret` + "\n"
			s.Want(t, 201, "POST", "/v2/policies", admin, map[string]any{"name": "mcpdeny", "rego": rego})
			before := len(up.CallsOf("write"))
			var d map[string]any
			testkit.Eventually(t, 10*time.Second, "the tenant policy on every node", func() bool {
				res := gateway.CallTool(t, cs, "write", map[string]any{"path": "/etc/passwd"})
				if !res.IsError {
					return false
				}
				d = gateway.DecisionOf(t, res)
				return d["reason"] == "forbidden_path"
			})
			if d["decision"] != "deny" || testkit.Str(t, d, "decision_id") == "" || testkit.Str(t, d, "receipt_id") == "" {
				t.Fatalf("deny's structuredContent: %v", d)
			}
			for _, c := range up.CallsOf("write")[before:] {
				if c.Args["path"] == "/etc/passwd" {
					t.Fatalf("a denied call reached the upstream: %v", c)
				}
			}
			// redact: forwarded without the field.
			res := gateway.CallTool(t, cs, "echo", map[string]any{"text": "x", "secret": "s3cr3t"})
			if res.IsError || strings.Contains(gateway.ResultText(res), "s3cr3t") {
				t.Fatalf("a redacted call: isError %v, %q", res.IsError, gateway.ResultText(res))
			}
			calls := up.CallsOf("echo")
			if last := calls[len(calls)-1]; last.Args["text"] != "x" || last.Args["secret"] != nil {
				t.Fatalf("the upstream received %v, want the call without secret", last.Args)
			}
		})

		t.Run("require_approval, then the identical retry consumes the approval once", func(t *testing.T) {
			_, hiTok := s.Agent(t, admin, "hi-agent", map[string]any{"risk_tier": "high"})
			hi := gateway.Connect(t, s.Base, key, hiTok, nil)
			args := map[string]any{"path": "/tmp/a", "data": "1"}
			d := gateway.DecisionOf(t, gateway.CallTool(t, hi, "write", args))
			if d["decision"] != "require_approval" || testkit.Str(t, d, "approval_id") == "" || d["approval_expires_at"] == nil {
				t.Fatalf("require_approval's structuredContent: %v", d)
			}
			id := testkit.Str(t, d, "approval_id")
			s.Want(t, 200, "POST", "/v2/approvals/"+id+"/approve", admin, map[string]any{"approver_user_id": "alice"})
			before := len(up.CallsOf("write"))
			res := gateway.CallTool(t, hi, "write", args)
			if res.IsError || gateway.ResultText(res) != "written" {
				t.Fatalf("the approved retry: %v %q %v", res.IsError, gateway.ResultText(res), res.StructuredContent)
			}
			if n := len(up.CallsOf("write")) - before; n != 1 {
				t.Fatalf("the approved retry reached the upstream %d times", n)
			}
			ap := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/approvals/"+id, admin, nil))
			if ap["consumed_at"] == nil {
				t.Fatalf("the approval was not consumed: %v", ap)
			}
			// Once consumed, the same call asks again.
			if d := gateway.DecisionOf(t, gateway.CallTool(t, hi, "write", args)); d["decision"] != "require_approval" || d["approval_id"] == id {
				t.Fatalf("the call after the consumed approval: %v", d)
			}
			// Two identical calls at once after an approval, on two sessions
			// (on two nodes behind the balancer): it is consumed once, and
			// exactly one of them runs.
			hi2 := gateway.Connect(t, s.Base, key, hiTok, nil)
			race := map[string]any{"path": "/tmp/race"}
			rid := testkit.Str(t, gateway.DecisionOf(t, gateway.CallTool(t, hi, "write", race)), "approval_id")
			s.Want(t, 200, "POST", "/v2/approvals/"+rid+"/approve", admin, map[string]any{"approver_user_id": "alice"})
			before = len(up.CallsOf("write"))
			results := make(chan *mcp.CallToolResult, 2)
			for _, sess := range []*mcp.ClientSession{hi, hi2} {
				go func() {
					r, err := sess.CallTool(context.Background(), &mcp.CallToolParams{Name: "write", Arguments: race})
					if err != nil {
						r = &mcp.CallToolResult{IsError: true}
					}
					results <- r
				}()
			}
			ran := 0
			for range 2 {
				if r := <-results; !r.IsError {
					ran++
				}
			}
			if n := len(up.CallsOf("write")) - before; ran != 1 || n != 1 {
				t.Fatalf("two identical calls after one approval: %d ran, %d reached the upstream; want 1 and 1", ran, n)
			}
			// An edited approval is consumed by the edited arguments only.
			d = gateway.DecisionOf(t, gateway.CallTool(t, hi, "write", map[string]any{"path": "/tmp/b"}))
			eid := testkit.Str(t, d, "approval_id")
			s.Want(t, 200, "POST", "/v2/approvals/"+eid+"/edit", admin, map[string]any{"approver_user_id": "alice",
				"parameters": map[string]any{"path": "/tmp/b-safe"}})
			if d := gateway.DecisionOf(t, gateway.CallTool(t, hi, "write", map[string]any{"path": "/tmp/b"})); d["decision"] != "require_approval" {
				t.Fatalf("the original arguments after an edit: %v", d)
			}
			if res := gateway.CallTool(t, hi, "write", map[string]any{"path": "/tmp/b-safe"}); res.IsError {
				t.Fatalf("the edited arguments: %v", res.StructuredContent)
			}
		})

		t.Run("an approval is offered as a URL elicitation to a client that takes them", func(t *testing.T) {
			_, hiTok := s.Agent(t, admin, "hi-url-agent", map[string]any{"risk_tier": "high"})
			var mu sync.Mutex
			var offers []*mcp.ElicitParams
			var completed []string
			decide := "approve"
			opts := &mcp.ClientOptions{
				Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{},
					URL: &mcp.URLElicitationCapabilities{}}},
				ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					mu.Lock()
					offers = append(offers, r.Params)
					d := decide
					mu.Unlock()
					if d == "decline" {
						return &mcp.ElicitResult{Action: "decline"}, nil
					}
					// The person opens the page and approves.
					if resp, raw := s.Do(t, "POST", "/v2/approvals/"+r.Params.ElicitationID+"/approve", admin,
						map[string]any{"approver_user_id": "alice"}); resp.StatusCode != 200 {
						return nil, fmt.Errorf("approve: %d %s", resp.StatusCode, raw)
					}
					return &mcp.ElicitResult{Action: "accept"}, nil
				},
				ElicitationCompleteHandler: func(_ context.Context, r *mcp.ElicitationCompleteNotificationRequest) {
					mu.Lock()
					completed = append(completed, r.Params.ElicitationID)
					mu.Unlock()
				},
			}
			hi := gateway.ConnectWith(t, s.Base, key, hiTok, opts)
			before := len(up.CallsOf("write"))
			// One call: offered, approved by a person meanwhile, then run.
			res := gateway.CallTool(t, hi, "write", map[string]any{"path": "/tmp/offered"})
			if res.IsError || gateway.ResultText(res) != "written" {
				t.Fatalf("the offered call: %v %q %v", res.IsError, gateway.ResultText(res), res.StructuredContent)
			}
			if n := len(up.CallsOf("write")) - before; n != 1 {
				t.Fatalf("the approved call reached the upstream %d times", n)
			}
			mu.Lock()
			if len(offers) != 1 || offers[0].Mode != "url" || offers[0].ElicitationID == "" ||
				!strings.Contains(offers[0].URL, "/dashboard/#/approvals?approval_id="+offers[0].ElicitationID) {
				t.Fatalf("offers: %+v", offers)
			}
			id := offers[0].ElicitationID
			decide = "decline"
			mu.Unlock()
			if ap := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/approvals/"+id, admin, nil)); ap["consumed_at"] == nil {
				t.Fatalf("the offered approval was not consumed: %v", ap)
			}
			testkit.Eventually(t, 10*time.Second, "the elicitation's completion", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return slices.Contains(completed, id)
			})
			// Declined: the call ends with the pending approval, at once.
			start := time.Now()
			d := gateway.DecisionOf(t, gateway.CallTool(t, hi, "write", map[string]any{"path": "/tmp/declined"}))
			if d["decision"] != "require_approval" || time.Since(start) > 10*time.Second {
				t.Fatalf("the declined offer: %v after %s", d, time.Since(start))
			}
			if n := len(up.CallsOf("write")) - before; n != 1 {
				t.Fatalf("a declined call reached the upstream (%d calls)", n)
			}
		})

		t.Run("progress is relayed as it is sent", func(t *testing.T) {
			seen.Progress()
			start := time.Now()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}, Meta: mcp.Meta{"progressToken": "p-1"}})
			done := time.Now()
			if err != nil || res.IsError {
				t.Fatalf("slow: %v %v", err, res)
			}
			got := seen.Progress()
			if len(got) != 3 {
				t.Fatalf("%d progress notifications, want 3", len(got))
			}
			// The first came about 300 ms in, well before the answer at
			// about 1200 ms: not buffered until the end.
			if got[0].Sub(start) >= done.Sub(start)-200*time.Millisecond {
				t.Fatalf("the first progress arrived at %s, the answer at %s: buffered", got[0].Sub(start), done.Sub(start))
			}
			t.Logf("progress at %s, %s, %s; answer at %s", got[0].Sub(start), got[1].Sub(start), got[2].Sub(start), done.Sub(start))
		})

		t.Run("the upstream's requests reach the client and its answers the upstream", func(t *testing.T) {
			res := gateway.CallTool(t, cs, "ask", map[string]any{})
			if res.IsError || gateway.ResultText(res) != "accept/ada/sampled" {
				t.Fatalf("ask: %v %q", res.IsError, gateway.ResultText(res))
			}
		})

		t.Run("resources/read and prompts/get are decided and relayed", func(t *testing.T) {
			rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///greeting"})
			if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "hello" {
				t.Fatalf("resources/read: %v %v", rr, err)
			}
			gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": "ada"}})
			if err != nil || len(gp.Messages) != 1 {
				t.Fatalf("prompts/get: %v %v", gp, err)
			}
			for _, what := range []string{"mcp-resources:" + key, "mcp-prompts:" + key} {
				testkit.Eventually(t, 10*time.Second, what+"'s decision", func() bool {
					for _, d := range testkit.Arr(t, s.Want(t, 200, "GET", "/v2/decisions?limit=100", admin, nil)) {
						if d["tool"] == what && d["decision"] == "allow" && d["agent_id"] == agentID {
							return true
						}
					}
					return false
				})
			}
		})

		t.Run("bad input gets the documented error and forwards nothing", func(t *testing.T) {
			sess := gateway.Connect(t, s.Base, key, tok, nil)
			before := len(up.CallsOf("echo"))
			path := "/v2/mcp/proxy/" + key
			call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`
			mcpHdr := func(extra ...string) []string {
				return append([]string{"Mcp-Session-Id", sess.ID(), "Accept", "application/json, text/event-stream", "Content-Type", "application/json"}, extra...)
			}
			for _, c := range []struct {
				what   string
				token  string
				body   string
				hdr    []string
				status int
				code   float64 // the JSON-RPC error code, 0 for the API's envelope
			}{
				{"malformed JSON", tok, `{"jsonrpc":`, mcpHdr(), 400, -32700},
				{"a batch", tok, "[" + call + "]", mcpHdr(), 400, -32600},
				{"too large", tok, `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 9<<20) + `"}}`, mcpHdr(), 413, -32600},
				{"not JSON", tok, call, mcpHdr("Content-Type", "text/plain"), 415, -32600},
				{"Accept without event streams", tok, call, mcpHdr("Accept", "application/json"), 406, -32600},
				{"no session", tok, call, []string{"Accept", "application/json, text/event-stream", "Content-Type", "application/json"}, 400, -32600},
				{"an operator token", admin, call, mcpHdr(), 403, 0},
				{"no token", "", call, mcpHdr(), 401, 0},
				{"a browser on another site", tok, call, mcpHdr("Origin", "https://evil.example"), 403, 0},
			} {
				resp, raw := s.Do(t, "POST", path, c.token, c.body, c.hdr...)
				if resp.StatusCode != c.status {
					t.Errorf("%s: %d %.300s, want %d", c.what, resp.StatusCode, raw, c.status)
					continue
				}
				var m map[string]any
				_ = json.Unmarshal(raw, &m)
				if c.code != 0 {
					e, _ := m["error"].(map[string]any)
					if e == nil || e["code"] != c.code || m["jsonrpc"] != "2.0" {
						t.Errorf("%s: %.300s, want JSON-RPC error %v", c.what, raw, c.code)
					}
				} else if m["reason"] == nil {
					t.Errorf("%s: %.300s, want the error envelope", c.what, raw)
				}
			}
			// Another tenant's server key is unknown to this agent.
			_, adminB := s.Tenant(t, "mcpproxy-b-"+testkit.Uniq())
			keyB := "up-b-" + testkit.Uniq()
			gateway.ProxyServer(t, s, adminB, keyB, up.URL, "echo")
			if resp, raw := s.Do(t, "POST", "/v2/mcp/proxy/"+keyB, tok, call, mcpHdr()...); resp.StatusCode != 404 {
				t.Errorf("another tenant's server: %d %.300s", resp.StatusCode, raw)
			}
			if n := len(up.CallsOf("echo")) - before; n != 0 {
				t.Fatalf("%d bad requests reached the upstream", n)
			}
			// The session still works.
			if res := gateway.CallTool(t, sess, "echo", map[string]any{"text": "still"}); res.IsError {
				t.Fatalf("the session after bad input: %v", res.StructuredContent)
			}
		})

		t.Run("every protocol version the SDKs speak is relayed as negotiated", func(t *testing.T) {
			for _, v := range []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"} {
				init := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},`+
					`"clientInfo":{"name":"raw","version":"1"}}}`, v)
				req, _ := http.NewRequest("POST", s.Base+"/v2/mcp/proxy/"+key, strings.NewReader(init))
				req.Header.Set("Authorization", "Bearer "+tok)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				raw, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				sid := resp.Header.Get("Mcp-Session-Id")
				if resp.StatusCode != 200 || sid == "" || !strings.Contains(string(raw), `"protocolVersion":"`+v+`"`) {
					t.Fatalf("initialize %s: %d %q %s", v, resp.StatusCode, sid, raw)
				}
				if status, _ := gateway.RawMCPv(t, s.Base, key, tok, sid, v, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != 202 {
					t.Fatalf("%s: notifications/initialized answered %d", v, status)
				}
				status, m := gateway.RawMCPv(t, s.Base, key, tok, sid, v,
					`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"v`+v+`"}}}`)
				res, _ := m["result"].(map[string]any)
				if status != 200 || res == nil || res["isError"] == true || !strings.Contains(fmt.Sprint(res["content"]), "v"+v) {
					t.Fatalf("%s: tools/call: %d %v", v, status, m)
				}
			}
		})

		t.Run("a new client in front of an older server", func(t *testing.T) {
			old := gateway.StartUpstreamSpeaking(t, "2025-03-26")
			oldKey := "old-" + testkit.Uniq()
			gateway.ProxyServer(t, s, admin, oldKey, old.URL, "echo")
			oc := gateway.Connect(t, s.Base, oldKey, tok, nil)
			if v := oc.InitializeResult().ProtocolVersion; v != "2025-03-26" {
				t.Fatalf("negotiated %q, want the older server's 2025-03-26", v)
			}
			if res := gateway.CallTool(t, oc, "echo", map[string]any{"text": "old"}); res.IsError || !strings.Contains(gateway.ResultText(res), "old") {
				t.Fatalf("echo on the older server: %v %q", res.IsError, gateway.ResultText(res))
			}
		})

		t.Run("the session is the agent's own, and DELETE ends it everywhere", func(t *testing.T) {
			_, other := s.Agent(t, admin, "other-agent", nil)
			body := `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`
			hdr := []string{"Mcp-Session-Id", cs.ID(), "Accept", "application/json, text/event-stream", "Content-Type", "application/json"}
			if resp, raw := s.Do(t, "POST", "/v2/mcp/proxy/"+key, other, json.RawMessage(body), hdr...); resp.StatusCode != 404 {
				t.Fatalf("another agent with the session: %d %s", resp.StatusCode, raw)
			}
			if resp, raw := s.Do(t, "POST", "/v2/mcp/proxy/"+key, tok, json.RawMessage(body), hdr...); resp.StatusCode != 200 {
				t.Fatalf("the agent with its session: %d %s", resp.StatusCode, raw)
			}
			if resp, raw := s.Do(t, "POST", "/v2/mcp/proxy/nope-"+testkit.Uniq(), tok, json.RawMessage(body), hdr...); resp.StatusCode != 404 {
				t.Fatalf("an unknown server: %d %s", resp.StatusCode, raw)
			}
			if resp, raw := s.Do(t, "DELETE", "/v2/mcp/proxy/"+key, tok, nil, "Mcp-Session-Id", cs.ID()); resp.StatusCode != 204 {
				t.Fatalf("DELETE: %d %s", resp.StatusCode, raw)
			}
			for i := 0; i < 2; i++ { // both nodes behind the balancer
				if resp, raw := s.Do(t, "POST", "/v2/mcp/proxy/"+key, tok, json.RawMessage(body), hdr...); resp.StatusCode != 404 {
					t.Fatalf("the ended session: %d %s", resp.StatusCode, raw)
				}
			}
		})
	})
}

// TestE2EMCPProxyOutage: with the database's primary or Valkey cut off,
// the proxy forwards nothing: a call is answered with an error (a JSON-RPC
// error, or an HTTP error before the MCP layer when the token cannot be
// checked), and it goes on once the dependency is back.
func TestE2EMCPProxyOutage(t *testing.T) {
	t.Parallel()
	for _, cut := range []string{"postgres", "valkey"} {
		t.Run(cut, func(t *testing.T) {
			up := gateway.StartUpstream(t)
			// SVC_REQUEST_TIMEOUT_SECS bounds what svc does before it
			// forwards: a hanging dependency answers within it.
			env := map[string]string{"SVC_ALLOW_PRIVATE_TARGETS": "true", "SVC_RATE_LIMIT_CAPACITY": "100000", "SVC_REQUEST_TIMEOUT_SECS": "5"}
			var s *gateway.Server
			var proxy *azProxy
			if cut == "postgres" {
				direct := gateway.DBURLFor(t, "postgres")
				u, err := url.Parse(direct)
				if err != nil {
					t.Fatal(err)
				}
				proxy = azStartProxy(t, u.Host)
				viaProxy := *u
				viaProxy.Host = proxy.ln.Addr().String()
				s = gateway.StartOn(t, viaProxy.String(), env)
			} else {
				u, err := url.Parse(storetest.ValkeyURL(t))
				if err != nil {
					t.Fatal(err)
				}
				proxy = azStartProxy(t, u.Host)
				viaProxy := *u
				viaProxy.Host = proxy.ln.Addr().String()
				env["SVC_VALKEY_URL"] = viaProxy.String()
				s = gateway.StartCluster(t, env)
			}
			_, admin := s.Tenant(t, "mcpout-"+testkit.Uniq())
			key := "up-" + testkit.Uniq()
			gateway.ProxyServer(t, s, admin, key, up.URL, "echo", "write")
			_, tok := s.Agent(t, admin, "outage-agent", nil)
			cs := gateway.Connect(t, s.Base, key, tok, nil)
			if res := gateway.CallTool(t, cs, "write", map[string]any{"path": "/tmp/before"}); res.IsError {
				t.Fatalf("before the outage: %v", res.StructuredContent)
			}
			calls := len(up.CallsOf("write")) + len(up.CallsOf("echo"))

			proxy.cut()
			for _, tool := range []string{"write", "echo"} {
				msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":%q,"arguments":{"path":"/tmp/during"}}}`, tool)
				status, m := gateway.RawMCP(t, s.Base, key, tok, cs.ID(), msg)
				if status == 200 && (m == nil || m["error"] == nil) {
					t.Fatalf("%s with %s cut off: %d %v, want an error", tool, cut, status, m)
				}
				t.Logf("%s with %s cut off: %d %v", tool, cut, status, m)
			}
			if n := len(up.CallsOf("write")) + len(up.CallsOf("echo")); n != calls {
				t.Fatalf("%d calls reached the upstream while %s was cut off", n-calls, cut)
			}
			proxy.restore()
			testkit.Eventually(t, 30*time.Second, "the proxy serving again", func() bool {
				status, m := gateway.RawMCP(t, s.Base, key, tok, cs.ID(),
					`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"write","arguments":{"path":"/tmp/after"}}}`)
				res, _ := m["result"].(map[string]any)
				return status == 200 && res != nil && res["isError"] != true
			})
		})
	}
}

// TestE2EMCPProxyAgentBound: an agent token holds at most
// SVC_RATE_LIMIT_CAPACITY open proxy requests on a node (its event
// streams included), counted apart from its authorize calls; past it,
// 429 agent_concurrency, while another agent of the tenant is served.
func TestE2EMCPProxyAgentBound(t *testing.T) {
	t.Parallel()
	s := gateway.Start(t, "sqlite", map[string]string{"SVC_ALLOW_PRIVATE_TARGETS": "true", "SVC_RATE_LIMIT_CAPACITY": "2"})
	up := gateway.StartUpstream(t)
	_, admin := s.Tenant(t, "mcpbound-"+testkit.Uniq())
	key := "up-" + testkit.Uniq()
	gateway.ProxyServer(t, s, admin, key, up.URL, "echo")
	_, tok := s.Agent(t, admin, "greedy", nil)
	_, other := s.Agent(t, admin, "other", nil)
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	sessionOf := func(tok string) string {
		resp, raw := s.Do(t, "POST", "/v2/mcp/proxy/"+key, tok, init, "Accept", "application/json, text/event-stream", "Content-Type", "application/json")
		sid := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != 200 || sid == "" {
			t.Fatalf("initialize: %d %s", resp.StatusCode, raw)
		}
		return sid
	}
	session := func() string { return sessionOf(tok) }
	sid := session()
	// Two event streams held open (one per session, as the upstream
	// allows): the agent's two places.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, id := range []string{sid, session()} {
		req, _ := http.NewRequestWithContext(ctx, "GET", s.Base+"/v2/mcp/proxy/"+key, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", id)
		r, err := http.DefaultClient.Do(req)
		if err != nil || r.StatusCode != 200 {
			t.Fatalf("GET stream: %v %v", err, r)
		}
		defer r.Body.Close()
	}
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`
	status, m := gateway.RawMCP(t, s.Base, key, tok, sid, call)
	if status != 429 || gateway.Detail(m, "error") != "agent_concurrency" {
		t.Fatalf("a third request of the agent: %d %v, want 429 agent_concurrency", status, m)
	}
	// Its authorize calls are counted apart.
	gateway.AzDecide(t, s, tok, gateway.AzRead(nil), "allow", "")
	// Another agent of the tenant is served (one request at a time: its
	// own places are two as well).
	if status, m := gateway.RawMCP(t, s.Base, key, other, sessionOf(other), call); status != 200 || m["result"] == nil {
		t.Fatalf("another agent: %d %v", status, m)
	}
	// Closing the streams gives the places back.
	cancel()
	testkit.Eventually(t, 10*time.Second, "the agent's places back", func() bool {
		status, _ := gateway.RawMCP(t, s.Base, key, tok, sid, call)
		return status == 200
	})
}
