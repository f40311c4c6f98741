package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"

	"svc/messages"
	"svc/persistence"
	"svc/rules/policy"
)

// mcpFacts reads the MCP registry for the authorize path (CONTRACT §8: the
// policy input's mcp object) through two bounded caches, one of servers
// and one of tools (SVC_MCP_SERVER_CACHE_CAPACITY and
// SVC_MCP_TOOL_CACHE_CAPACITY; 0 disables one). Every change to a server
// or its tools drops both on every node (messages.CacheMCP).
//
// A fill that read the store before a drop must not put back what the drop
// removed: each cache has a generation that every drop advances, and a
// fill that started under an older generation is not cached.
type mcpFacts struct {
	store   persistence.MCPStore
	servers *lru.Cache[string, mcpServerEntry]
	tools   *lru.Cache[string, mcpToolEntry]
	gen     atomic.Uint64
}

type mcpServerEntry struct {
	server persistence.MCPServer
	found  bool
}

type mcpToolEntry struct {
	status   string // "" when the server has no such tool
	readOnly bool   // annotations.readOnlyHint as discovered
}

func newMCPFacts(store persistence.MCPStore, serverCap, toolCap int) (*mcpFacts, error) {
	m := &mcpFacts{store: store}
	var err error
	if serverCap > 0 {
		if m.servers, err = lru.New[string, mcpServerEntry](serverCap); err != nil {
			return nil, fmt.Errorf("actors: mcp server cache: %w", err)
		}
	}
	if toolCap > 0 {
		if m.tools, err = lru.New[string, mcpToolEntry](toolCap); err != nil {
			return nil, fmt.Errorf("actors: mcp tool cache: %w", err)
		}
	}
	return m, nil
}

// input is the policy input's mcp object for a call of "mcp:<serverKey>"
// with action toolKey (normalized). An unknown server has an empty
// server_status and an unknown tool an empty tool_status, which the base
// policy denies (mcp_unknown_tool); so does a store that cannot be read.
func (m *mcpFacts) input(ctx context.Context, tenantID, serverKey, toolKey string) *policy.MCPInput {
	in := &policy.MCPInput{ServerKey: serverKey}
	srv, ok, _ := m.server(ctx, tenantID, serverKey)
	if !ok {
		return in
	}
	in.ServerStatus, in.TrustLevel = srv.Status, srv.TrustLevel
	t, _ := m.tool(ctx, tenantID, serverKey, toolKey)
	in.ToolStatus = t.status
	return in
}

// server is the tenant's server key (found false when there is none); a
// store that cannot be read is an error, and nothing is cached.
func (m *mcpFacts) server(ctx context.Context, tenantID, key string) (persistence.MCPServer, bool, error) {
	ck := tenantID + "\x00" + key
	if m.servers != nil {
		if e, ok := m.servers.Get(ck); ok {
			return e.server, e.found, nil
		}
	}
	gen := m.gen.Load()
	srv, err := m.store.GetMCPServer(ctx, tenantID, key)
	if err != nil && !errors.Is(err, persistence.ErrNotFound) {
		return srv, false, err // a transient failure is not cached
	}
	e := mcpServerEntry{server: srv, found: err == nil}
	if m.servers != nil && m.gen.Load() == gen {
		m.servers.Add(ck, e)
	}
	return e.server, e.found, nil
}

// tool is the server's tool toolKey (status "" when there is none); a
// store that cannot be read is an error, and nothing is cached.
func (m *mcpFacts) tool(ctx context.Context, tenantID, serverKey, toolKey string) (mcpToolEntry, error) {
	ck := tenantID + "\x00" + serverKey + "\x00" + toolKey
	if m.tools != nil {
		if e, ok := m.tools.Get(ck); ok {
			return e, nil
		}
	}
	gen := m.gen.Load()
	t, err := m.store.GetMCPTool(ctx, tenantID, serverKey, toolKey)
	if err != nil && !errors.Is(err, persistence.ErrNotFound) {
		return mcpToolEntry{}, err
	}
	e := mcpToolEntry{status: t.Status, readOnly: t.ReadOnly}
	if m.tools != nil && m.gen.Load() == gen {
		m.tools.Add(ck, e)
	}
	return e, nil
}

// drop applies an invalidation: a server (Key) with every cached tool of
// it, or everything.
func (m *mcpFacts) drop(inv messages.Invalidation) {
	m.gen.Add(1)
	if inv.Kind == messages.CacheAll {
		if m.servers != nil {
			m.servers.Purge()
		}
		if m.tools != nil {
			m.tools.Purge()
		}
		return
	}
	prefix := inv.TenantID + "\x00" + inv.Key
	if m.servers != nil {
		m.servers.Remove(prefix)
	}
	if m.tools != nil {
		for _, k := range m.tools.Keys() {
			if strings.HasPrefix(k, prefix+"\x00") {
				m.tools.Remove(k)
			}
		}
	}
}
