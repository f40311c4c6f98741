package control

import (
	"context"

	"svc/persistence"
)

// MCP server changes: each drops the server's cached record and tools on
// every node once committed, so the authorize path and the proxy see it on
// their next call.

// QuarantineMCPServer moves an active server to quarantined (its tools are
// refused); a server already quarantined is a Conflict.
func (p *Plane) QuarantineMCPServer(ctx context.Context, op Operator, key string) (persistence.MCPServer, error) {
	return p.setMCPServerStatus(ctx, op, key, persistence.MCPServerQuarantined, persistence.MCPServerActive,
		"mcp_server_quarantined", "the mcp server is already quarantined")
}

// RestoreMCPServer moves a quarantined server back to active; a server
// that is not quarantined is a Conflict.
func (p *Plane) RestoreMCPServer(ctx context.Context, op Operator, key string) (persistence.MCPServer, error) {
	return p.setMCPServerStatus(ctx, op, key, persistence.MCPServerActive, persistence.MCPServerQuarantined,
		"mcp_server_restored", "the mcp server is not quarantined")
}

func (p *Plane) setMCPServerStatus(ctx context.Context, op Operator, key, to, from, action, conflictMsg string) (persistence.MCPServer, error) {
	return p.updateMCPServer(ctx, op, key, persistence.MCPServerPatch{Status: &to, StatusFrom: []string{from}}, action,
		map[string]any{"to": to}, conflictMsg)
}

// PinMCPServer pins the server's discovered tool definitions as approved;
// a server not discovered yet is a Conflict.
func (p *Plane) PinMCPServer(ctx context.Context, op Operator, key string) (persistence.MCPServer, error) {
	return p.updateMCPServer(ctx, op, key, persistence.MCPServerPatch{Pin: true}, "mcp_manifest_pinned", map[string]any{},
		"the mcp server has not been discovered yet: nothing to pin")
}

// UpdateMCPServer applies patch (a registration change) with a config_change
// event of the given action and details.
func (p *Plane) UpdateMCPServer(ctx context.Context, op Operator, key string, patch persistence.MCPServerPatch, action string,
	details map[string]any) (persistence.MCPServer, error) {
	return p.updateMCPServer(ctx, op, key, patch, action, details, "the mcp server changed meanwhile")
}

func (p *Plane) updateMCPServer(ctx context.Context, op Operator, key string, patch persistence.MCPServerPatch, action string,
	details map[string]any, conflictMsg string) (persistence.MCPServer, error) {
	details["server_key"] = key
	var srv persistence.MCPServer
	err := p.change(func() (err error) {
		srv, err = p.store.UpdateMCPServer(ctx, op.TenantID, key, patch, Event(op, "config_change", action, "", details))
		return refuse(err, "mcp server", conflict("mcp server", "invalid_transition", "%s", conflictMsg))
	}, func() { p.mcpChanged(ctx, op.TenantID, key) })
	return srv, err
}

// DeleteMCPServer removes the server's registration, tools and pins.
func (p *Plane) DeleteMCPServer(ctx context.Context, op Operator, key string) error {
	return p.change(func() error {
		err := p.store.DeleteMCPServer(ctx, op.TenantID, key, Event(op, "config_change", "mcp_server_deleted", "",
			map[string]any{"server_key": key}))
		return refuse(err, "mcp server", nil)
	}, func() { p.mcpChanged(ctx, op.TenantID, key) })
}

func (p *Plane) mcpChanged(ctx context.Context, tenantID, key string) {
	if p.mcp != nil {
		p.mcp.Changed(ctx, tenantID, key)
	}
}
