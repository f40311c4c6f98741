package httpapi

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"svc/actors"
	"svc/broadcast"
	"svc/config"
	"svc/control"
	"svc/leader"
	"svc/mcpclient"
	"svc/mcpregistry"
	"svc/messages"
	"svc/outbound"
	"svc/persistence"
	"svc/persistence/sharedstate"
	"svc/persistence/sqlite"
	"svc/rules/manifest"
)

// A discovery's failures answer as they did when the handler mapped them
// itself, before discovery moved behind the control plane (issue 39): for
// each, the envelope the old mapping built (want, written as it wrote it)
// and the one served now are the same bytes, status and Retry-After.
func TestDiscoverFailuresAnswerAsBefore(t *testing.T) {
	tests := []struct {
		name, key, transport, body string
		fetch                      error
		fetched                    []manifest.Tool
		busy                       bool
		want                       *Error
	}{
		{name: "unknown server", key: "nope", want: notFound("mcp server")},
		{name: "stdio without its manifest", key: "kb", transport: persistence.MCPTransportStdio,
			want: invalidField("tools", "a stdio server's manifest is required: {\"tools\":[{\"name\",\"description\",\"inputSchema\"}]}")},
		{name: "http with a manifest", key: "web", transport: persistence.MCPTransportHTTP, body: `{"tools":[{"name":"a"}]}`,
			want: invalidField("tools", "an http server is discovered over MCP: send no manifest")},
		{name: "stdio manifest refused", key: "kb", transport: persistence.MCPTransportStdio, body: `{"tools":[{"name":""}]}`,
			want: badRequest("invalid_manifest", "%s", "manifest: invalid: tool 0 has no name")},
		{name: "http manifest refused", key: "web", transport: persistence.MCPTransportHTTP, fetched: []manifest.Tool{{}},
			want: apiErr("Invalid", "mcp_discovery_failed", "%s", "actors: mcp manifest refused: manifest: invalid: tool 0 has no name")},
		{name: "forbidden target", key: "web", transport: persistence.MCPTransportHTTP, fetch: outbound.ErrForbiddenTarget,
			want: apiErr("Invalid", "forbidden_target", "the mcp server's address may not be reached (CONTRACT §7)")},
		{name: "not an mcp server", key: "web", transport: persistence.MCPTransportHTTP, fetch: mcpclient.ErrProtocol,
			want: apiErr("Invalid", "mcp_discovery_failed", "%s", mcpclient.ErrProtocol.Error())},
		{name: "timeout", key: "web", transport: persistence.MCPTransportHTTP, fetch: mcpclient.ErrTimeout,
			want: apiErr("Timeout", "mcp_timeout", "the mcp server did not answer within %s", mcpclient.DefaultLimits.Timeout)},
		{name: "busy", key: "web", transport: persistence.MCPTransportHTTP, busy: true, want: func() *Error {
			e := apiErr("ServiceUnavailable", "mcp_discovery_busy", "every mcp discovery slot of the node stayed taken for %s; retry later",
				mcpregistry.SlotWait)
			e.RetryAfter = int(mcpregistry.SlotWait / time.Second)
			return e
		}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			slots := mcpregistry.NewSlots(1)
			s, tok := newDiscoveryServer(t, slots, func(context.Context, persistence.MCPServer) ([]manifest.Tool, error) { return tc.fetched, tc.fetch })
			if tc.transport != "" {
				now := time.Now().UTC()
				if _, err := fullStore(s.Server).CreateMCPServer(context.Background(), persistence.MCPServer{TenantID: s.tenantForTest, Key: tc.key,
					Transport: tc.transport, URL: map[bool]string{true: "http://mcp.example/"}[tc.transport == persistence.MCPTransportHTTP],
					TrustLevel: "untrusted_external", Status: persistence.MCPServerActive, CreatedAt: now, UpdatedAt: now}, 100); err != nil {
					t.Fatal(err)
				}
			}
			req := httptest.NewRequest("POST", "/v2/mcp/servers/"+tc.key+"/discover", strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+tok)
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			if tc.busy { // the node's one slot taken; the call waits for it until its deadline
				release, err := slots.Acquire(context.Background(), "another tenant")
				if err != nil {
					t.Fatal(err)
				}
				defer release()
				ctx, cancel := context.WithTimeout(req.Context(), 50*time.Millisecond)
				defer cancel()
				req = req.WithContext(ctx)
			}
			got := httptest.NewRecorder()
			s.ServeHTTP(got, req)
			want := httptest.NewRecorder()
			writeEnvelope(want, "v2", tc.want)
			if got.Code != want.Code || got.Body.String() != want.Body.String() || got.Header().Get("Retry-After") != want.Header().Get("Retry-After") {
				t.Fatalf("got %d %s (Retry-After %q)\nwant %d %s (Retry-After %q)", got.Code, got.Body, got.Header().Get("Retry-After"),
					want.Code, want.Body, want.Header().Get("Retry-After"))
			}
		})
	}
}

// A discovery through the route: the plane's answer as the handler shows
// it, and the operator's mcp_discovered event.
func TestDiscoverThroughThePlane(t *testing.T) {
	s, tok := newDiscoveryServer(t, nil, func(context.Context, persistence.MCPServer) ([]manifest.Tool, error) {
		return []manifest.Tool{{Name: "search", InputSchema: json.RawMessage(`{"type":"object"}`)}}, nil
	})
	now := time.Now().UTC()
	if _, err := fullStore(s.Server).CreateMCPServer(context.Background(), persistence.MCPServer{TenantID: s.tenantForTest, Key: "web",
		Transport: persistence.MCPTransportHTTP, URL: "http://mcp.example/", TrustLevel: "untrusted_external",
		Status: persistence.MCPServerActive, CreatedAt: now, UpdatedAt: now}, 100); err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("POST", "/v2/mcp/servers/web/discover", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	var out map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	if rec.Code != 200 || out["first"] != true || out["tools"] != float64(1) || out["history_id"] != nil {
		t.Fatalf("discover = %d %s", rec.Code, rec.Body)
	}
	evs, err := s.Store.ListAudit(context.Background(), s.tenantForTest, persistence.AuditFilter{EventType: "config_change"}, persistence.Page{Limit: 10})
	if err != nil || len(evs) != 1 || evs[0].Action != "mcp_discovered" || !strings.HasPrefix(evs[0].Actor, "operator:") {
		t.Fatalf("audit events %+v, %v", evs, err)
	}
}

// newDiscoveryServer is newTestServer with an MCP registry fetching with
// fetch, its discovery budget slots (nil: one), behind the plane and the
// proxy, and a tenant whose admin token it returns.
func newDiscoveryServer(t *testing.T, slots *mcpregistry.Slots, fetch mcpregistry.Fetch) (*discoveryServer, string) {
	t.Helper()
	cfg, err := config.Load(func(k string) (string, bool) {
		if k == "DATABASE_URL" {
			return "sqlite://:memory:", true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	store, err := sqlite.Open(context.Background(), sqlite.Options{Path: ":memory:"})
	if err != nil {
		t.Fatal(err)
	}
	shared := sharedstate.NewMemory()
	t.Cleanup(func() { _ = store.Close(); _ = shared.Close() })
	sys := actors.NewSystem(hclog.NewNullLogger())
	registry := actors.NewRegistry()
	bus := broadcast.NewEventBus(sys.Root, 8)
	mcp := mcpregistry.New(store, bus, nil, fetch, slots, hclog.NewNullLogger())
	plane := control.New(control.Deps{Config: cfg, Store: store, Registry: registry, MCP: mcp})
	s := New(Deps{Control: plane, Config: cfg, Store: store, Shared: shared, Registry: registry, Leader: &leader.Leadership{},
		Pool: &actors.PoolSample{}, Events: bus, Log: hclog.NewNullLogger(), MCP: mcp,
		Heartbeat: func(messages.Heartbeat) {}, Version: "test"})
	tenant, tok, err := control.NewTenant(context.Background(), store, "acme", "test")
	if err != nil {
		t.Fatal(err)
	}
	return &discoveryServer{Server: s, tenantForTest: tenant.ID}, tok
}

type discoveryServer struct {
	*Server
	tenantForTest string
}
