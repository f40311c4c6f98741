package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"svc/persistence"
)

// RunMCP runs the MCP registry contract: servers round-trip, a duplicate
// key conflicts, patches and conditional status changes, discoveries that
// pin, upsert, delete and record history from the state read inside their
// transaction (concurrent ones applied one after the other), tool status
// transitions, failures recorded, tenant isolation and deletion.
func RunMCP(t *testing.T, open func(t *testing.T) persistence.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s persistence.Store)
	}{
		{"create, get and list; a duplicate key conflicts", testMCPServers},
		{"a tenant's servers stop at the limit, also created at once", testMCPServerLimit},
		{"patch, conditional status, pin after a discovery only", testMCPPatch},
		{"discoveries pin, upsert, delete and record drift", testMCPDiscovery},
		{"tool status moves only from the given statuses", testMCPToolStatus},
		{"concurrent discoveries see each other's tools", testMCPConcurrentDiscovery},
		{"other tenants' servers are not found; deleting a server or tenant removes its rows", testMCPIsolation},
		{"sealed upstream credentials round-trip, are replaced, cleared and kept", testMCPUpstreamAuth},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func mcpServer(t *testing.T, s persistence.Store, tenantID, key string) persistence.MCPServer {
	t.Helper()
	srv, err := s.CreateMCPServer(ctx(t), persistence.MCPServer{TenantID: tenantID, Key: key, Transport: persistence.MCPTransportHTTP,
		URL: "https://mcp.example/" + key, TrustLevel: "untrusted_external"}, 0, audit(tenantID, "config_change", "mcp_server_registered"))
	if err != nil {
		t.Fatalf("CreateMCPServer: %v", err)
	}
	return srv
}

func mcpTool(name, status string) persistence.MCPTool {
	return persistence.MCPTool{Key: name, Name: name, Status: status, Description: "does " + name,
		InputSchema: json.RawMessage(`{"type":"object"}`), Hash: "h-" + name,
		Findings: []persistence.MCPFinding{{Tool: name, Category: "hidden_text", Count: 1}}}
}

// discover applies a discovery that upserts and deletes the given tools.
func discover(t *testing.T, s persistence.Store, tenantID, key, hash string, upsert []persistence.MCPTool, del []string,
	entry *persistence.MCPManifestEntry) (persistence.MCPServer, []persistence.MCPTool) {
	t.Helper()
	var seen []persistence.MCPTool
	srv, got, err := s.ApplyMCPDiscovery(ctx(t), tenantID, key, func(_ persistence.MCPServer, tools []persistence.MCPTool) (persistence.MCPDiscovery, error) {
		seen = tools
		return persistence.MCPDiscovery{ManifestHash: hash, Pin: hash == "pin-me", Upsert: upsert, Delete: del, Entry: entry}, nil
	})
	if err != nil {
		t.Fatalf("ApplyMCPDiscovery: %v", err)
	}
	if (entry == nil) != (got == nil) {
		t.Fatalf("entry %v, returned %v", entry, got)
	}
	return srv, seen
}

func testMCPServers(t *testing.T, s persistence.Store) {
	tn, _ := mustTenant(t, s, "mcp-"+id())
	srv := mcpServer(t, s, tn.ID, "weather")
	if srv.Status != persistence.MCPServerActive || srv.PinnedHash != "" || srv.LastDiscoveryAt != nil || srv.URL != "https://mcp.example/weather" ||
		srv.TrustLevel != "untrusted_external" || srv.InspectionEnabled || srv.Revision != 1 {
		t.Errorf("created %+v", srv)
	}
	_, err := s.CreateMCPServer(ctx(t), persistence.MCPServer{TenantID: tn.ID, Key: "weather", Transport: "stdio", TrustLevel: "unknown"}, 0)
	wantErr(t, err, persistence.ErrConflict)
	mcpServer(t, s, tn.ID, "alpha")
	list, err := s.ListMCPServers(ctx(t), tn.ID)
	if err != nil || len(list) != 2 || list[0].Key != "alpha" || list[1].Key != "weather" {
		t.Errorf("ListMCPServers: %v %+v", err, list)
	}
	all, err := s.ListAllMCPServers(ctx(t), persistence.MCPTransportHTTP)
	if err != nil || !slices.ContainsFunc(all, func(x persistence.MCPServer) bool { return x.TenantID == tn.ID && x.Key == "weather" }) {
		t.Errorf("ListAllMCPServers: %v", err)
	}
}

func testMCPServerLimit(t *testing.T, s persistence.Store) {
	tn, _ := mustTenant(t, s, "mcp-"+id())
	other, _ := mustTenant(t, s, "mcp-"+id())
	const limit = 4
	create := func(tenantID, key string) error {
		_, err := s.CreateMCPServer(ctx(t), persistence.MCPServer{TenantID: tenantID, Key: key, Transport: persistence.MCPTransportStdio,
			TrustLevel: "unknown"}, limit, audit(tenantID, "config_change", "mcp_server_registered"))
		return err
	}
	for i := range limit - 2 {
		if err := create(tn.ID, fmt.Sprintf("s%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// Eight at once for the last two places: two win, whatever the
	// interleaving.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = create(tn.ID, fmt.Sprintf("race%d", i))
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, persistence.ErrMCPServerLimit):
			t.Errorf("a creation past the limit: %v", err)
		}
	}
	list, err := s.ListMCPServers(ctx(t), tn.ID)
	if err != nil || won != 2 || len(list) != limit {
		t.Errorf("%d won, %d servers (%v), want 2 and %d", won, len(list), err, limit)
	}
	wantErr(t, create(tn.ID, "s0"), persistence.ErrConflict) // a taken key is a conflict first
	wantErr(t, create(tn.ID, "one-more"), persistence.ErrMCPServerLimit)
	if err := create(other.ID, "s0"); err != nil { // another tenant's count is its own
		t.Errorf("another tenant: %v", err)
	}
	if err := s.DeleteMCPServer(ctx(t), tn.ID, "s0"); err != nil {
		t.Fatal(err)
	}
	if err := create(tn.ID, "one-more"); err != nil {
		t.Errorf("after a deletion: %v", err)
	}
	if _, err := s.CreateMCPServer(ctx(t), persistence.MCPServer{TenantID: tn.ID, Key: "unlimited", Transport: persistence.MCPTransportStdio,
		TrustLevel: "unknown"}, 0); err != nil {
		t.Errorf("limit 0: %v", err)
	}
}

func testMCPPatch(t *testing.T, s persistence.Store) {
	tn, _ := mustTenant(t, s, "mcp-"+id())
	mcpServer(t, s, tn.ID, "srv")
	on, url, trust := true, "https://other.example/mcp", "trusted_internal_signed"
	got, err := s.UpdateMCPServer(ctx(t), tn.ID, "srv", persistence.MCPServerPatch{URL: &url, TrustLevel: &trust, InspectionEnabled: &on})
	if err != nil || got.URL != url || got.TrustLevel != trust || !got.InspectionEnabled || got.Revision != 2 {
		t.Fatalf("patch: %v %+v", err, got)
	}
	q := persistence.MCPServerQuarantined
	if got, err = s.UpdateMCPServer(ctx(t), tn.ID, "srv", persistence.MCPServerPatch{Status: &q, StatusFrom: []string{persistence.MCPServerActive}}); err != nil ||
		got.Status != q {
		t.Fatalf("quarantine: %v %+v", err, got)
	}
	_, err = s.UpdateMCPServer(ctx(t), tn.ID, "srv", persistence.MCPServerPatch{Status: &q, StatusFrom: []string{persistence.MCPServerActive}})
	wantErr(t, err, persistence.ErrStateConflict)
	_, err = s.UpdateMCPServer(ctx(t), tn.ID, "srv", persistence.MCPServerPatch{Pin: true})
	wantErr(t, err, persistence.ErrStateConflict) // nothing discovered yet
	discover(t, s, tn.ID, "srv", "pin-me", nil, nil, nil)
	discover(t, s, tn.ID, "srv", "second", nil, nil, nil)
	got, err = s.UpdateMCPServer(ctx(t), tn.ID, "srv", persistence.MCPServerPatch{Pin: true})
	if err != nil || got.PinnedHash != "second" || got.ManifestHash != "second" {
		t.Errorf("pin: %v %+v", err, got)
	}
	_, err = s.UpdateMCPServer(ctx(t), tn.ID, "nope", persistence.MCPServerPatch{Pin: true})
	wantErr(t, err, persistence.ErrNotFound)
}

func testMCPDiscovery(t *testing.T, s persistence.Store) {
	tn, _ := mustTenant(t, s, "mcp-"+id())
	mcpServer(t, s, tn.ID, "srv")
	srv, seen := discover(t, s, tn.ID, "srv", "pin-me", []persistence.MCPTool{mcpTool("add", "pending"), mcpTool("mul", "pending")}, nil, nil)
	if len(seen) != 0 || srv.PinnedHash != "pin-me" || srv.ManifestHash != "pin-me" || srv.LastDiscoveryAt == nil {
		t.Fatalf("first discovery: %+v (saw %d tools)", srv, len(seen))
	}
	tools, err := s.ListMCPTools(ctx(t), tn.ID, "srv")
	if err != nil || len(tools) != 2 || tools[0].Name != "add" || string(tools[0].InputSchema) != `{"type":"object"}` ||
		len(tools[0].Findings) != 1 || tools[0].Findings[0].Category != "hidden_text" {
		t.Fatalf("tools: %v %+v", err, tools)
	}
	entry := &persistence.MCPManifestEntry{ID: id(), ManifestHash: "drifted", PinnedHash: "pin-me", Added: []string{"sub"},
		Removed: []string{"mul"}, RiskScore: 45, EventID: id(), Findings: []persistence.MCPFinding{{Tool: "sub", Category: "new_url", Count: 2}}}
	sub := mcpTool("sub", "pending")
	sub.ReadOnly = true // annotations.readOnlyHint, read back for the MCP proxy's mutates_state
	srv, seen = discover(t, s, tn.ID, "srv", "drifted", []persistence.MCPTool{sub}, []string{"mul"}, entry)
	if len(seen) != 2 || srv.PinnedHash != "pin-me" || srv.ManifestHash != "drifted" {
		t.Errorf("drift: %+v (saw %d tools)", srv, len(seen))
	}
	tools, _ = s.ListMCPTools(ctx(t), tn.ID, "srv")
	if names := []string{tools[0].Name, tools[1].Name}; len(tools) != 2 || !slices.Equal(names, []string{"add", "sub"}) {
		t.Errorf("after drift: %+v", tools)
	}
	if len(tools) == 2 && (tools[0].ReadOnly || !tools[1].ReadOnly) {
		t.Errorf("read_only after drift: add %v (want false), sub %v (want true)", tools[0].ReadOnly, tools[1].ReadOnly)
	}
	if got, err := s.GetMCPTool(ctx(t), tn.ID, "srv", "sub"); err != nil || !got.ReadOnly {
		t.Errorf("GetMCPTool(sub): %v read_only %v, want true", err, got.ReadOnly)
	}
	hist, err := s.ListMCPHistory(ctx(t), tn.ID, "srv", persistence.Page{Limit: 10})
	if err != nil || len(hist) != 1 {
		t.Fatalf("history: %v %+v", err, hist)
	}
	h := hist[0]
	if h.ID != entry.ID || h.ManifestHash != "drifted" || h.PinnedHash != "pin-me" || !slices.Equal(h.Added, []string{"sub"}) ||
		!slices.Equal(h.Removed, []string{"mul"}) || len(h.Changed) != 0 || h.Changed == nil || h.RiskScore != 45 || h.EventID != entry.EventID ||
		len(h.Findings) != 1 || h.Findings[0] != entry.Findings[0] || h.DiscoveredAt.IsZero() {
		t.Errorf("history entry %+v", h)
	}
	// A failing plan writes nothing.
	boom := errors.New("boom")
	_, _, err = s.ApplyMCPDiscovery(ctx(t), tn.ID, "srv", func(persistence.MCPServer, []persistence.MCPTool) (persistence.MCPDiscovery, error) {
		return persistence.MCPDiscovery{}, boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("failing plan: %v", err)
	}
	if err := s.FailMCPDiscovery(ctx(t), tn.ID, "srv", "timeout", whNow()); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetMCPServer(ctx(t), tn.ID, "srv"); got.LastDiscoveryError != "timeout" || got.ManifestHash != "drifted" {
		t.Errorf("after a failure: %+v", got)
	}
	if _, err := s.ListMCPHistory(ctx(t), tn.ID, "srv", persistence.Page{Limit: 10, Offset: 1}); err != nil {
		t.Error(err)
	}
}

func testMCPToolStatus(t *testing.T, s persistence.Store) {
	tn, _ := mustTenant(t, s, "mcp-"+id())
	mcpServer(t, s, tn.ID, "srv")
	discover(t, s, tn.ID, "srv", "pin-me", []persistence.MCPTool{mcpTool("add", "pending")}, nil, nil)
	got, err := s.SetMCPToolStatus(ctx(t), tn.ID, "srv", "add", []string{"pending", "disabled"}, "approved", audit(tn.ID, "config_change", "mcp_tool_approved"))
	if err != nil || got.Status != "approved" {
		t.Fatalf("approve: %v %+v", err, got)
	}
	_, err = s.SetMCPToolStatus(ctx(t), tn.ID, "srv", "add", []string{"pending", "disabled"}, "approved")
	wantErr(t, err, persistence.ErrStateConflict)
	_, err = s.SetMCPToolStatus(ctx(t), tn.ID, "srv", "nope", []string{"pending"}, "approved")
	wantErr(t, err, persistence.ErrNotFound)
	if tool, err := s.GetMCPTool(ctx(t), tn.ID, "srv", "add"); err != nil || tool.Status != "approved" {
		t.Errorf("GetMCPTool: %v %+v", err, tool)
	}
}

func testMCPConcurrentDiscovery(t *testing.T, s persistence.Store) {
	tn, _ := mustTenant(t, s, "mcp-"+id())
	mcpServer(t, s, tn.ID, "srv")
	var wg sync.WaitGroup
	var mu sync.Mutex
	var seen []int
	for i := range 4 {
		wg.Go(func() {
			name := fmt.Sprintf("tool%d", i)
			_, _, err := s.ApplyMCPDiscovery(ctx(t), tn.ID, "srv", func(_ persistence.MCPServer, tools []persistence.MCPTool) (persistence.MCPDiscovery, error) {
				mu.Lock()
				seen = append(seen, len(tools))
				mu.Unlock()
				return persistence.MCPDiscovery{ManifestHash: name, Upsert: []persistence.MCPTool{mcpTool(name, "pending")}}, nil
			})
			if err != nil && !errors.Is(err, persistence.ErrBusy) {
				t.Errorf("discovery %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	tools, _ := s.ListMCPTools(ctx(t), tn.ID, "srv")
	// Each committed plan saw the tools of every discovery committed
	// before it: the counts it saw are 0, 1, 2, 3 in some order (a plan
	// retried after a conflict is called again and counted again).
	slices.Sort(seen)
	for i := range len(tools) {
		if !slices.Contains(seen, i) {
			t.Errorf("%d tools stored; the plans saw %v", len(tools), seen)
		}
	}
}

func testMCPIsolation(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "mcp-a-"+id())
	b, _ := mustTenant(t, s, "mcp-b-"+id())
	mcpServer(t, s, a.ID, "srv")
	discover(t, s, a.ID, "srv", "pin-me", []persistence.MCPTool{mcpTool("add", "pending")}, nil,
		&persistence.MCPManifestEntry{ID: id(), ManifestHash: "x", PinnedHash: "y", EventID: id()})
	_, err := s.GetMCPServer(ctx(t), b.ID, "srv")
	wantErr(t, err, persistence.ErrNotFound)
	_, err = s.GetMCPTool(ctx(t), b.ID, "srv", "add")
	wantErr(t, err, persistence.ErrNotFound)
	if tools, err := s.ListMCPTools(ctx(t), b.ID, "srv"); err != nil || len(tools) != 0 {
		t.Errorf("tools of another tenant: %v %v", err, tools)
	}
	wantErr(t, s.DeleteMCPServer(ctx(t), b.ID, "srv"), persistence.ErrNotFound)
	if err := s.DeleteMCPServer(ctx(t), a.ID, "srv", audit(a.ID, "config_change", "mcp_server_deleted")); err != nil {
		t.Fatal(err)
	}
	if tools, _ := s.ListMCPTools(ctx(t), a.ID, "srv"); len(tools) != 0 {
		t.Errorf("a deleted server's tools remain: %v", tools)
	}
	mcpServer(t, s, a.ID, "srv") // the key is free again, with no history
	if h, _ := s.ListMCPHistory(ctx(t), a.ID, "srv", persistence.Page{Limit: 5}); len(h) != 0 {
		t.Errorf("history survived the delete: %v", h)
	}
	discover(t, s, a.ID, "srv", "pin-me", []persistence.MCPTool{mcpTool("add", "pending")}, nil, nil)
	if err := s.DeleteTenant(ctx(t), a.ID); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.ListMCPServers(ctx(t), a.ID); len(list) != 0 {
		t.Errorf("a deleted tenant's servers remain: %v", list)
	}
	if tools, _ := s.ListMCPTools(ctx(t), a.ID, "srv"); len(tools) != 0 {
		t.Errorf("a deleted tenant's tools remain: %v", tools)
	}
}

// testMCPUpstreamAuth: a server's sealed upstream credentials round-trip
// byte for byte through every read; a patch replaces them, clears them
// with an empty slice, and leaves them alone when it does not name them;
// every such change grows the revision.
func testMCPUpstreamAuth(t *testing.T, s persistence.Store) {
	tn, _ := mustTenant(t, s, "mcp-"+id())
	sealed := []byte{0x00, 0x9f, 0xff, 's', 'e', 'a', 'l', 'e', 'd', 0x00}
	srv, err := s.CreateMCPServer(ctx(t), persistence.MCPServer{TenantID: tn.ID, Key: "auth", Transport: persistence.MCPTransportHTTP,
		URL: "https://mcp.example/auth", TrustLevel: "untrusted_external", UpstreamAuth: sealed}, 0)
	if err != nil || !bytes.Equal(srv.UpstreamAuth, sealed) || srv.Revision != 1 {
		t.Fatalf("created with credentials: %v, %x, revision %d", err, srv.UpstreamAuth, srv.Revision)
	}
	plain := mcpServer(t, s, tn.ID, "plain")
	if plain.UpstreamAuth != nil {
		t.Fatalf("created without credentials: %x; want nil", plain.UpstreamAuth)
	}
	// want checks every read of the server.
	want := func(what string, auth []byte, revision int64) {
		t.Helper()
		got, err := s.GetMCPServer(ctx(t), tn.ID, "auth")
		if err != nil || !bytes.Equal(got.UpstreamAuth, auth) || (auth == nil) != (got.UpstreamAuth == nil) || got.Revision != revision {
			t.Fatalf("%s: GetMCPServer: %v, %x, revision %d; want %x, revision %d", what, err, got.UpstreamAuth, got.Revision, auth, revision)
		}
		list, err := s.ListMCPServers(ctx(t), tn.ID)
		if err != nil || len(list) != 2 || list[0].Key != "auth" || !bytes.Equal(list[0].UpstreamAuth, auth) || list[1].UpstreamAuth != nil {
			t.Fatalf("%s: ListMCPServers: %v, %+v", what, err, list)
		}
		all, err := s.ListAllMCPServers(ctx(t), persistence.MCPTransportHTTP)
		i := slices.IndexFunc(all, func(x persistence.MCPServer) bool { return x.TenantID == tn.ID && x.Key == "auth" })
		if err != nil || i < 0 || !bytes.Equal(all[i].UpstreamAuth, auth) {
			t.Fatalf("%s: ListAllMCPServers: %v, %+v", what, err, all)
		}
	}
	want("created", sealed, 1)

	url := "https://mcp.example/moved"
	if got, err := s.UpdateMCPServer(ctx(t), tn.ID, "auth", persistence.MCPServerPatch{URL: &url}); err != nil ||
		!bytes.Equal(got.UpstreamAuth, sealed) || got.Revision != 2 {
		t.Fatalf("a patch not naming them: %v, %x, revision %d", err, got.UpstreamAuth, got.Revision)
	}
	want("after a patch not naming them", sealed, 2)

	resealed := []byte("resealed \x00 credentials")
	if got, err := s.UpdateMCPServer(ctx(t), tn.ID, "auth", persistence.MCPServerPatch{UpstreamAuth: &resealed}); err != nil ||
		!bytes.Equal(got.UpstreamAuth, resealed) || got.Revision != 3 {
		t.Fatalf("replaced: %v, %x, revision %d", err, got.UpstreamAuth, got.Revision)
	}
	want("replaced", resealed, 3)

	discover(t, s, tn.ID, "auth", "pin-me", []persistence.MCPTool{mcpTool("search", "pending")}, nil, nil)
	want("after a discovery", resealed, 4)

	empty := []byte{}
	if got, err := s.UpdateMCPServer(ctx(t), tn.ID, "auth", persistence.MCPServerPatch{UpstreamAuth: &empty}); err != nil ||
		got.UpstreamAuth != nil || got.Revision != 5 {
		t.Fatalf("cleared: %v, %x, revision %d", err, got.UpstreamAuth, got.Revision)
	}
	want("cleared", nil, 5)

	if got, err := s.UpdateMCPServer(ctx(t), tn.ID, "auth", persistence.MCPServerPatch{UpstreamAuth: &sealed}); err != nil ||
		!bytes.Equal(got.UpstreamAuth, sealed) || got.Revision != 6 {
		t.Fatalf("set again: %v, %x, revision %d", err, got.UpstreamAuth, got.Revision)
	}
	want("set again", sealed, 6)
}
