package actors

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/messages"
	"svc/persistence"
	"svc/persistence/sqlite"
)

// storeWithTenant opens a SQLite store in the test's directory with one
// tenant.
func storeWithTenant(t *testing.T) (persistence.Store, persistence.Tenant) {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(t.TempDir(), "svc.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	tenant := persistence.Tenant{ID: uuid.NewString(), Name: "t", CreatedAt: time.Now().UTC()}
	if err := store.CreateTenant(ctx, tenant, persistence.OperatorToken{ID: uuid.NewString(), TenantID: tenant.ID, Name: "admin",
		Role: persistence.RoleAdmin, CreatedAt: time.Now().UTC()}, []byte(uuid.NewString())); err != nil {
		t.Fatal(err)
	}
	return store, tenant
}

// countingMCP counts the registry reads that reach the real store.
type countingMCP struct {
	persistence.Store
	servers, tools atomic.Int64
	// afterTool, when set, runs once after a tool read, before the read's
	// answer is cached: a change and its drop racing the fill.
	afterTool func()
}

func (c *countingMCP) GetMCPServer(ctx context.Context, tenantID, key string) (persistence.MCPServer, error) {
	c.servers.Add(1)
	return c.Store.GetMCPServer(ctx, tenantID, key)
}

func (c *countingMCP) GetMCPTool(ctx context.Context, tenantID, server, tool string) (persistence.MCPTool, error) {
	c.tools.Add(1)
	t, err := c.Store.GetMCPTool(ctx, tenantID, server, tool)
	if f := c.afterTool; f != nil {
		c.afterTool = nil
		f()
	}
	return t, err
}

// The two SVC_MCP_*_CACHE_CAPACITY settings decide how often authorize
// reads the registry, a drop reads it again, and a fill racing a drop
// does not put a stale record back.
func TestMCPFactsCaches(t *testing.T) {
	ctx := context.Background()
	store, tenant := storeWithTenant(t)
	if _, err := store.CreateMCPServer(ctx, persistence.MCPServer{TenantID: tenant.ID, Key: "calc", Transport: "stdio", TrustLevel: "unknown"}, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.ApplyMCPDiscovery(ctx, tenant.ID, "calc", func(persistence.MCPServer, []persistence.MCPTool) (persistence.MCPDiscovery, error) {
		return persistence.MCPDiscovery{ManifestHash: "h", Pin: true, Upsert: []persistence.MCPTool{{Key: "add", Name: "add", Status: "approved",
			InputSchema: []byte(`{}`), Hash: "x"}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name                 string
		servers, tools       int
		wantServer, wantTool int64
	}{
		{"caches on", 8, 8, 1, 1},
		{"caches off", 0, 0, 5, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			counting := &countingMCP{Store: store}
			m, err := newMCPFacts(counting, c.servers, c.tools)
			if err != nil {
				t.Fatal(err)
			}
			for range 5 {
				in := m.input(ctx, tenant.ID, "calc", "add")
				if in.ServerStatus != "active" || in.ToolStatus != "approved" || in.TrustLevel != "unknown" {
					t.Fatalf("input %+v", in)
				}
			}
			if counting.servers.Load() != c.wantServer || counting.tools.Load() != c.wantTool {
				t.Errorf("store reads: %d servers, %d tools; want %d, %d", counting.servers.Load(), counting.tools.Load(), c.wantServer, c.wantTool)
			}
			// A change and its drop: the next call reads the new status.
			if _, err := store.SetMCPToolStatus(ctx, tenant.ID, "calc", "add", []string{"approved"}, "disabled"); err != nil {
				t.Fatal(err)
			}
			m.drop(messages.Invalidation{Kind: messages.CacheMCP, TenantID: tenant.ID, Key: "calc"})
			if in := m.input(ctx, tenant.ID, "calc", "add"); in.ToolStatus != "disabled" {
				t.Errorf("after the drop: %+v", in)
			}
			if _, err := store.SetMCPToolStatus(ctx, tenant.ID, "calc", "add", []string{"disabled"}, "approved"); err != nil {
				t.Fatal(err)
			}
			m.drop(messages.Invalidation{Kind: messages.CacheAll})
		})
	}
	// A fill that read before a drop is not cached: the tool is disabled
	// and dropped between the read and the fill, and the next call sees
	// disabled, not the approved that the racing read found.
	racing := &countingMCP{Store: store}
	m, _ := newMCPFacts(racing, 8, 8)
	racing.afterTool = func() {
		if _, err := store.SetMCPToolStatus(ctx, tenant.ID, "calc", "add", []string{"approved"}, "disabled"); err != nil {
			t.Fatal(err)
		}
		m.drop(messages.Invalidation{Kind: messages.CacheMCP, TenantID: tenant.ID, Key: "calc"})
	}
	if in := m.input(ctx, tenant.ID, "calc", "add"); in.ToolStatus != "approved" {
		t.Fatalf("the racing read: %+v", in)
	}
	if in := m.input(ctx, tenant.ID, "calc", "add"); in.ToolStatus != "disabled" {
		t.Errorf("a fill that raced a drop was cached: %+v", in)
	}
	// Unknown server and tool: empty statuses (the base policy denies).
	if in := m.input(ctx, tenant.ID, "nope", "add"); in.ServerStatus != "" || in.ToolStatus != "" || in.ServerKey != "nope" {
		t.Errorf("unknown server: %+v", in)
	}
	if in := m.input(ctx, tenant.ID, "calc", "nope"); in.ServerStatus != "active" || in.ToolStatus != "" {
		t.Errorf("unknown tool: %+v", in)
	}
}
