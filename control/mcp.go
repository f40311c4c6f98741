package control

import (
	"context"
	"time"

	"svc/persistence"
	"svc/rules/inspect"
	"svc/rules/manifest"
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
		srv, err = p.d.Store.UpdateMCPServer(ctx, op.TenantID, key, patch, Event(op, "config_change", action, "", details))
		return refuse(err, "mcp server", conflict("mcp server", "invalid_transition", "%s", conflictMsg))
	}, func() { p.mcpChanged(ctx, op.TenantID, key) })
	return srv, err
}

// DeleteMCPServer removes the server's registration, tools and pins.
func (p *Plane) DeleteMCPServer(ctx context.Context, op Operator, key string) error {
	return p.change(func() error {
		err := p.d.Store.DeleteMCPServer(ctx, op.TenantID, key, Event(op, "config_change", "mcp_server_deleted", "",
			map[string]any{"server_key": key}))
		return refuse(err, "mcp server", nil)
	}, func() { p.mcpChanged(ctx, op.TenantID, key) })
}

func (p *Plane) mcpChanged(ctx context.Context, tenantID, key string) {
	if p.d.MCP != nil {
		p.d.MCP.Changed(ctx, tenantID, key)
	}
}

// ApproveMCPTool approves a pending or disabled tool of a server (the
// authorize path may then call it); an approved one is a Conflict.
func (p *Plane) ApproveMCPTool(ctx context.Context, op Operator, key, tool string) (persistence.MCPTool, error) {
	return p.setMCPToolStatus(ctx, op, key, tool, manifest.StatusApproved, "mcp_tool_approved", manifest.StatusPending, manifest.StatusDisabled)
}

// DisableMCPTool disables a pending or approved tool; a disabled one is a
// Conflict.
func (p *Plane) DisableMCPTool(ctx context.Context, op Operator, key, tool string) (persistence.MCPTool, error) {
	return p.setMCPToolStatus(ctx, op, key, tool, manifest.StatusDisabled, "mcp_tool_disabled", manifest.StatusPending, manifest.StatusApproved)
}

// setMCPToolStatus moves tool (already normalized, SPEC 4.2 rule 7) of
// server key from one of from to to.
func (p *Plane) setMCPToolStatus(ctx context.Context, op Operator, key, tool, to, action string, from ...string) (persistence.MCPTool, error) {
	var t persistence.MCPTool
	err := p.change(func() (err error) {
		t, err = p.d.Store.SetMCPToolStatus(ctx, op.TenantID, key, tool, from, to, Event(op, "config_change", action, "",
			map[string]any{"server_key": key, "tool_key": tool}))
		return refuse(err, "mcp tool", conflict("mcp tool", "invalid_transition", "the mcp tool is already %s", to))
	}, func() { p.mcpChanged(ctx, op.TenantID, key) })
	return t, err
}

// InspectResponse scans a tool's response of srv (when the server has
// inspection enabled, the caller checks) and raises one alert per flagged
// category (SPEC 4.8), attributed to agentID: the inspect endpoint's and
// the MCP proxy's. It returns the findings and the alerts' ids.
func (p *Plane) InspectResponse(ctx context.Context, srv persistence.MCPServer, agentID string, raw []byte) ([]inspect.Finding, []string, error) {
	findings := inspect.Response(raw)
	specs := inspect.Alerts(findings, srv.Key)
	if len(specs) == 0 {
		return findings, []string{}, nil
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	alerts := make([]persistence.Alert, len(specs))
	ids := make([]string, len(specs))
	for i, a := range specs {
		alerts[i] = persistence.Alert{ID: persistence.NewRecordID(), TenantID: srv.TenantID, RuleKey: a.Rule, AlertName: a.Rule,
			Severity: a.Severity, Source: "default", AgentID: agentID, Summary: a.Summary, CreatedAt: now}
		ids[i] = alerts[i].ID
	}
	if err := p.d.Store.AppendAlerts(ctx, alerts); err != nil {
		return nil, nil, err
	}
	return findings, ids, nil
}
