package e2e

// The MCP registry at scale and against hostile names (issue 35, items 7
// and 9): a tenant's servers stop at SVC_MCP_MAX_SERVERS_PER_TENANT; a node
// runs SVC_MCP_DISCOVERY_CONCURRENCY discoveries at once; a tool name with
// U+0000 (or another control or format character) is refused alike on
// SQLite and Postgres, the tool named, before anything is stored. The
// memory a discovery costs is measured by the benchmarks in actors
// (BenchmarkMCPDiscovery), not here.

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"svc/mcpclient/mcptest"
	"svc/testkit"
	"svc/testkit/gateway"
)

// A tenant registers at most SVC_MCP_MAX_SERVERS_PER_TENANT servers: one
// more is 409 mcp_server_limit with the limit; another tenant's count is
// its own, and deleting one makes room.
func TestE2EMCPServerLimit(t *testing.T) {
	t.Parallel()
	gateway.ForBackends(t, func(t *testing.T, backend string) {
		s := gateway.Start(t, backend, map[string]string{"SVC_MCP_MAX_SERVERS_PER_TENANT": "3"})
		_, admin := s.Tenant(t, "mcp-limit-"+testkit.Uniq())
		_, other := s.Tenant(t, "mcp-limit-other-"+testkit.Uniq())
		register := func(tok, key string) (*http.Response, []byte) {
			return s.Do(t, "POST", "/v2/mcp/servers", tok, map[string]any{"server_key": key, "transport": "stdio"})
		}
		for _, key := range []string{"one", "two", "three"} {
			s.Want(t, 201, "POST", "/v2/mcp/servers", admin, map[string]any{"server_key": key, "transport": "stdio"})
		}
		resp, raw := register(admin, "four")
		e := gateway.Envelope(t, raw, 409, "v2", "Conflict")
		if resp.StatusCode != 409 || gateway.Detail(e, "error") != "mcp_server_limit" || gateway.Detail(e, "limit") != 3.0 ||
			!strings.Contains(e["message"].(string), "SVC_MCP_MAX_SERVERS_PER_TENANT") {
			t.Errorf("a fourth server: %d %v", resp.StatusCode, e)
		}
		if list := testkit.Arr(t, s.Want(t, 200, "GET", "/v2/mcp/servers", admin, nil)); len(list) != 3 {
			t.Errorf("%d servers after a refused registration", len(list))
		}
		// A taken key is still AlreadyExists, at the limit too.
		gateway.Envelope(t, s.Want(t, 409, "POST", "/v2/mcp/servers", admin, map[string]any{"server_key": "one", "transport": "stdio"}), 409, "v2",
			"AlreadyExists")
		s.Want(t, 201, "POST", "/v2/mcp/servers", other, map[string]any{"server_key": "four", "transport": "stdio"})
		s.Want(t, 204, "DELETE", "/v2/mcp/servers/two", admin, nil)
		s.Want(t, 201, "POST", "/v2/mcp/servers", admin, map[string]any{"server_key": "four", "transport": "stdio"})
	})
}

// A discovered tool whose name holds U+0000 is refused on both backends
// alike (SQLite stored it, Postgres failed with a misleading error): 422
// mcp_discovery_failed naming the tool, recorded as the server's
// last_discovery_error, nothing pinned or stored. So are other control
// and format characters, from a server or in a stdio manifest.
func TestE2EMCPToolNameNul(t *testing.T) {
	t.Parallel()
	gateway.ForBackends(t, func(t *testing.T, backend string) {
		s := gateway.Start(t, backend, map[string]string{"SVC_ALLOW_PRIVATE_TARGETS": "true"})
		_, admin := s.Tenant(t, "mcp-nul-"+testkit.Uniq())
		for _, c := range []struct{ key, name, says string }{
			{"nul", "get\x00weather", `"get\x00weather"`},
			{"escape", "get\x1b[2Jweather", `"get\x1b[2Jweather"`},
			{"zwsp", "send\u200bemail", "U+200B"},
		} {
			srv := mcptest.Start(t, 0, mcpAdd, mcptest.Tool{Name: c.name, Description: "Gets the weather."})
			s.Want(t, 201, "POST", "/v2/mcp/servers", admin, map[string]any{"server_key": c.key, "transport": "http", "url": srv.URL})
			e := gateway.Envelope(t, s.Want(t, 422, "POST", "/v2/mcp/servers/"+c.key+"/discover", admin, nil), 422, "v2", "Invalid")
			msg, _ := e["message"].(string)
			if gateway.Detail(e, "error") != "mcp_discovery_failed" || !strings.Contains(msg, c.says) {
				t.Errorf("%s: %v", c.key, e)
			}
			got := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/mcp/servers/"+c.key, admin, nil))
			if lde, _ := got["last_discovery_error"].(string); !strings.Contains(lde, c.says) || got["pinned_hash"] != nil {
				t.Errorf("%s: recorded %v", c.key, got)
			}
			if tools := testkit.Arr(t, s.Want(t, 200, "GET", "/v2/mcp/servers/"+c.key+"/tools", admin, nil)); len(tools) != 0 {
				t.Errorf("%s: tools stored: %v", c.key, tools)
			}
			// The server fixed: the next discovery pins what it lists.
			srv.Set(mcpAdd)
			if d := gateway.McpDiscover(t, s, admin, c.key, nil); d["first"] != true || d["tools"] != 1.0 {
				t.Errorf("%s after the fix: %v", c.key, d)
			}
		}
		// A stdio manifest's name with an escape character (valid JSON, so
		// the body decoder lets it through) is the manifest's to refuse.
		s.Want(t, 201, "POST", "/v2/mcp/servers", admin, map[string]any{"server_key": "local", "transport": "stdio"})
		e := gateway.Envelope(t, s.Want(t, 400, "POST", "/v2/mcp/servers/local/discover", admin,
			`{"tools":[{"name":"ok"},{"name":"bad\u001bname"}]}`), 400, "v2", "BadRequest")
		if gateway.Detail(e, "error") != "invalid_manifest" || !strings.Contains(e["message"].(string), `"bad\x1bname"`) {
			t.Errorf("stdio: %v", e)
		}
	})
}

// SVC_MCP_DISCOVERY_CONCURRENCY=1: while one discovery holds the node's
// only slot, another tenant's discover call waits for it, then runs.
func TestE2EMCPDiscoverySlots(t *testing.T) {
	t.Parallel()
	s := gateway.Start(t, "sqlite", map[string]string{"SVC_ALLOW_PRIVATE_TARGETS": "true", "SVC_MCP_DISCOVERY_CONCURRENCY": "1"})
	_, admin := s.Tenant(t, "mcp-slots-"+testkit.Uniq())
	_, other := s.Tenant(t, "mcp-slots-other-"+testkit.Uniq())
	held := mcptest.Start(t, 0, mcpAdd)
	quick := mcptest.Start(t, 0, mcpMul)
	s.Want(t, 201, "POST", "/v2/mcp/servers", admin, map[string]any{"server_key": "held", "transport": "http", "url": held.URL})
	s.Want(t, 201, "POST", "/v2/mcp/servers", other, map[string]any{"server_key": "quick", "transport": "http", "url": quick.URL})

	held.Hold()
	first, second := make(chan int, 1), make(chan int, 1)
	go func() {
		resp, _ := s.Do(t, "POST", "/v2/mcp/servers/held/discover", admin, nil)
		first <- resp.StatusCode
	}()
	select {
	case <-held.Arrived():
	case <-time.After(20 * time.Second):
		t.Fatal("the held discovery never listed the tools")
	}
	go func() {
		resp, _ := s.Do(t, "POST", "/v2/mcp/servers/quick/discover", other, nil)
		second <- resp.StatusCode
	}()
	// Unbounded, the quick server's discovery would be done in a moment;
	// with one slot it waits for the held one.
	select {
	case code := <-second:
		t.Fatalf("the second discovery finished (%d) while the only slot was taken", code)
	case <-time.After(2 * time.Second):
	}
	held.Release()
	if code := <-first; code != 200 {
		t.Errorf("the held discovery: %d", code)
	}
	if code := <-second; code != 200 {
		t.Errorf("the waiting discovery: %d", code)
	}
}
