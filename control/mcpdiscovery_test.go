package control_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"svc/actors"
	"svc/broadcast"
	"svc/control"
	"svc/mcpclient"
	"svc/mcpregistry"
	"svc/outbound"
	"svc/persistence"
	"svc/rules/manifest"
)

// discovering is a plane over the fixture's store whose MCP dependency is
// a real registry (its drops recorded), fetching with fetch, its discovery
// budget slots.
type discovering struct {
	*fixture
	plane *control.Plane
	drops *recordedDrops
	slots *mcpregistry.Slots
	fetch func(srv persistence.MCPServer) ([]manifest.Tool, error)
	store persistence.MCPStore
}

// recordingRegistry is the node's registry, its cache drops recorded.
type recordingRegistry struct {
	*mcpregistry.Registry
	drops *recordedDrops
}

func (r recordingRegistry) Changed(ctx context.Context, tenantID, key string) {
	r.drops.Changed(ctx, tenantID, key)
}

// failingApply fails every discovery's write (the database going away).
type failingApply struct{ persistence.MCPStore }

func (failingApply) ApplyMCPDiscovery(context.Context, string, string, persistence.MCPDiscoveryPlan) (persistence.MCPServer,
	*persistence.MCPManifestEntry, error) {
	return persistence.MCPServer{}, nil, persistence.ErrUnavailable
}

func newDiscovering(t *testing.T, store func(persistence.MCPStore) persistence.MCPStore) *discovering {
	t.Helper()
	f := newFixture(t)
	d := &discovering{fixture: f, drops: &recordedDrops{}, slots: mcpregistry.NewSlots(1), store: f.store}
	if store != nil {
		d.store = store(f.store)
	}
	reg := mcpregistry.New(d.store, broadcast.NewEventBus(nil, 8), nil, func(_ context.Context, srv persistence.MCPServer) ([]manifest.Tool, error) {
		return d.fetch(srv)
	}, d.slots, hclog.NewNullLogger())
	d.plane = control.New(control.Deps{Store: f.store, Registry: f.registry, MCP: recordingRegistry{Registry: reg, drops: d.drops}})
	return d
}

func (d *discovering) server(t *testing.T, key, transport string) {
	t.Helper()
	now := time.Now().UTC()
	srv := persistence.MCPServer{TenantID: d.op.TenantID, Key: key, Transport: transport, TrustLevel: "untrusted_external",
		Status: persistence.MCPServerActive, CreatedAt: now, UpdatedAt: now}
	if transport == persistence.MCPTransportHTTP {
		srv.URL = "http://mcp.example/" + key
	}
	if _, err := d.fixture.store.CreateMCPServer(context.Background(), srv, 100); err != nil {
		t.Fatal(err)
	}
}

// discoveries are the tenant's mcp_discovered events.
func (d *discovering) discoveries(t *testing.T) []persistence.AuditEvent {
	t.Helper()
	var out []persistence.AuditEvent
	for _, e := range d.audit(t) {
		if e.Action == "mcp_discovered" {
			out = append(out, e)
		}
	}
	return out
}

func tool(name, desc string) manifest.Tool {
	return manifest.Tool{Name: name, Description: desc, InputSchema: json.RawMessage(`{"type":"object"}`)}
}

// An operator's discovery: the registry's run inside the plane's audited
// write. The mcp_discovered event is the operator's and names what was
// found; the server's caches are dropped once committed; the audit
// writer's health is settled. A second manifest that differs drifts.
func TestDiscoverMCPServer(t *testing.T) {
	d := newDiscovering(t, nil)
	ctx := context.Background()
	d.server(t, "kb", persistence.MCPTransportStdio)
	got, err := d.plane.DiscoverMCPServer(ctx, d.op, "kb", []manifest.Tool{tool("search", "find things")})
	if err != nil {
		t.Fatal(err)
	}
	if !got.First || got.Tools != 1 || got.Server.Key != "kb" || got.Server.PinnedHash == "" || got.Entry != nil {
		t.Fatalf("the first discovery: %+v", got)
	}
	evs := d.discoveries(t)
	if len(evs) != 1 || evs[0].EventType != "config_change" || evs[0].Actor != d.op.Actor || evs[0].TenantID != d.op.TenantID ||
		evs[0].Details["server_key"] != "kb" || evs[0].Details["first"] != true || fmt.Sprint(evs[0].Details["tools"]) != "1" {
		t.Fatalf("the discovery's audit events: %+v", evs)
	}
	if drops := d.drops.list(); !slices.Equal(drops, []string{d.op.TenantID + "/kb"}) {
		t.Fatalf("drops after the discovery: %v", drops)
	}
	if d.health(t) != actors.StateOK {
		t.Fatalf("health %s after a discovery", d.health(t))
	}

	got, err = d.plane.DiscoverMCPServer(ctx, d.op, "kb", []manifest.Tool{tool("search", "find things"), tool("delete", "remove things")})
	if err != nil {
		t.Fatal(err)
	}
	if got.First || got.Entry == nil || !slices.Equal(got.Drift.Added, []string{"delete"}) {
		t.Fatalf("a drifted discovery: %+v", got)
	}
	if evs := d.discoveries(t); len(evs) != 2 || len(d.drops.list()) != 2 {
		t.Fatalf("after the drift: events %+v, drops %v", evs, d.drops.list())
	}
}

// A discovery whose write fails is not audited, drops nothing and marks
// the audit writer degraded; the next one that commits marks it ok.
func TestDiscoverMCPServerStorageFailure(t *testing.T) {
	d := newDiscovering(t, func(s persistence.MCPStore) persistence.MCPStore { return failingApply{s} })
	d.server(t, "kb", persistence.MCPTransportStdio)
	_, err := d.plane.DiscoverMCPServer(context.Background(), d.op, "kb", []manifest.Tool{tool("search", "")})
	if !errors.Is(err, persistence.ErrUnavailable) || d.health(t) != actors.StateDegraded {
		t.Fatalf("error %v, health %s", err, d.health(t))
	}
	if len(d.discoveries(t)) != 0 || len(d.drops.list()) != 0 {
		t.Fatalf("a failed write: events %v, drops %v", d.discoveries(t), d.drops.list())
	}
}

// Each failure is a typed refusal (http/ maps them to the statuses the
// handler answered before discovery moved here), with no event, no drop
// and the health left as it is; but a busy node, which reports the audit
// writer degraded as it did before the move.
func TestDiscoverMCPServerRefusals(t *testing.T) {
	noName := []manifest.Tool{{Name: "", InputSchema: json.RawMessage(`{}`)}}
	tests := []struct {
		name      string
		transport string
		tools     []manifest.Tool
		fetch     error
		fetched   []manifest.Tool
		busy      bool
		want      control.Refusal
	}{
		{name: "unknown server", want: control.Refusal{Kind: control.NotFound, What: "mcp server"}},
		{name: "stdio without its manifest", transport: persistence.MCPTransportStdio,
			want: control.Refusal{Kind: control.Invalid, Code: "invalid_field", Field: "tools",
				Message: `a stdio server's manifest is required: {"tools":[{"name","description","inputSchema"}]}`}},
		{name: "http with a manifest", transport: persistence.MCPTransportHTTP, tools: []manifest.Tool{tool("a", "")},
			want: control.Refusal{Kind: control.Invalid, Code: "invalid_field", Field: "tools", Message: "an http server is discovered over MCP: send no manifest"}},
		{name: "stdio manifest refused", transport: persistence.MCPTransportStdio, tools: noName,
			want: control.Refusal{Kind: control.Invalid, What: "mcp server", Code: "invalid_manifest", Message: "manifest: invalid: tool 0 has no name"}},
		{name: "http manifest refused", transport: persistence.MCPTransportHTTP, fetched: noName,
			want: control.Refusal{Kind: control.Unprocessable, What: "mcp server", Code: "mcp_discovery_failed",
				Message: "actors: mcp manifest refused: manifest: invalid: tool 0 has no name"}},
		{name: "forbidden target", transport: persistence.MCPTransportHTTP, fetch: fmt.Errorf("dial: %w", outbound.ErrForbiddenTarget),
			want: control.Refusal{Kind: control.Unprocessable, What: "mcp server", Code: "forbidden_target",
				Message: "the mcp server's address may not be reached (CONTRACT §7)"}},
		{name: "not an mcp server", transport: persistence.MCPTransportHTTP, fetch: fmt.Errorf("%w: garbage", mcpclient.ErrProtocol),
			want: control.Refusal{Kind: control.Unprocessable, What: "mcp server", Code: "mcp_discovery_failed",
				Message: mcpclient.ErrProtocol.Error() + ": garbage"}},
		{name: "too large", transport: persistence.MCPTransportHTTP, fetch: mcpclient.ErrTooLarge,
			want: control.Refusal{Kind: control.Unprocessable, What: "mcp server", Code: "mcp_discovery_failed", Message: mcpclient.ErrTooLarge.Error()}},
		{name: "timeout", transport: persistence.MCPTransportHTTP, fetch: mcpclient.ErrTimeout,
			want: control.Refusal{Kind: control.Timeout, What: "mcp server", Code: "mcp_timeout",
				Message: "the mcp server did not answer within " + mcpclient.DefaultLimits.Timeout.String()}},
		{name: "busy", transport: persistence.MCPTransportHTTP, busy: true,
			want: control.Refusal{Kind: control.Unavailable, What: "mcp server", Code: "mcp_discovery_busy",
				Message: "every mcp discovery slot of the node stayed taken for 10s; retry later", RetryAfter: 10 * time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDiscovering(t, nil)
			d.fetch = func(persistence.MCPServer) ([]manifest.Tool, error) { return tc.fetched, tc.fetch }
			if tc.transport != "" {
				d.server(t, "srv", tc.transport)
			}
			ctx := context.Background()
			if tc.busy {
				release, err := d.slots.Acquire(ctx, "another tenant")
				if err != nil {
					t.Fatal(err)
				}
				defer release()
				// Long enough for the reads before the slot wait on a busy
				// machine (50 ms failed once in CI under load), short enough
				// for a test.
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Second)
				defer cancel()
			}
			_, err := d.plane.DiscoverMCPServer(ctx, d.op, "srv", tc.tools)
			r := refusal(t, err)
			if r.Kind != tc.want.Kind || r.What != tc.want.What || r.Code != tc.want.Code || r.Field != tc.want.Field ||
				r.Message != tc.want.Message || r.RetryAfter != tc.want.RetryAfter || r.Details != nil {
				t.Fatalf("refusal %+v, want %+v", *r, tc.want)
			}
			if len(d.discoveries(t)) != 0 || len(d.drops.list()) != 0 {
				t.Fatalf("a refused discovery: events %v, drops %v", d.discoveries(t), d.drops.list())
			}
			want := actors.StateOK
			if tc.busy {
				want = actors.StateDegraded
			}
			if c, _ := d.registry.Get(control.ComponentAuditWriter); c.State != want ||
				(tc.busy && !strings.HasPrefix(c.Detail, "ServiceUnavailable: every mcp discovery slot")) {
				t.Fatalf("health %+v, want %s", c, want)
			}
		})
	}
}

// A plane whose MCP dependency does not discover (tests that need none)
// says so rather than panicking.
func TestDiscoverMCPServerWithoutRegistry(t *testing.T) {
	f := newFixture(t)
	if _, err := f.plane.DiscoverMCPServer(context.Background(), f.op, "kb", nil); err == nil {
		t.Fatal("a plane without a registry discovered")
	}
}
