package control

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"svc/actors"
	"svc/mcpclient"
	"svc/mcpregistry"
	"svc/outbound"
	"svc/persistence"
	"svc/rules/manifest"
)

// MCPDiscoverer runs discoveries of MCP servers' tools (mcpregistry.Registry:
// fetch or take the manifest, record it and its drift, write the audit
// event that audit builds, in one transaction). The plane's MCP dependency
// is one when it discovers too, as the node's registry does.
type MCPDiscoverer interface {
	Discover(ctx context.Context, tenantID, key string, tools []manifest.Tool,
		audit func(mcpregistry.Discovery) persistence.AuditEvent) (mcpregistry.Discovery, error)
}

// errNoDiscovery: the plane's MCP dependency runs no discoveries (a plane
// built for tests without one).
var errNoDiscovery = errors.New("control: no mcp discovery on this node")

// DiscoverMCPServer discovers the tools of op's server key (CONTRACT §8)
// with a config_change mcp_discovered event of what it found in the same
// transaction, and drops the server's caches on every node once committed.
// tools is a stdio server's manifest, required; an http server is asked
// over MCP and takes none (nil). Refusals: NotFound for an unknown server;
// Invalid for tools sent to an http server or missing for a stdio one, and
// invalid_manifest for a stdio manifest the gateway refuses; Unprocessable
// forbidden_target for an address the outbound guard refuses, and
// mcp_discovery_failed for a server that answers too much, not as an MCP
// server, or with a manifest the gateway refuses; Timeout mcp_timeout for
// one that does not answer in time; Unavailable mcp_discovery_busy, with
// RetryAfter, when every discovery slot of the node stayed taken. A failed
// fetch or refused manifest is recorded on the server (its
// last_discovery_error) by the registry.
func (p *Plane) DiscoverMCPServer(ctx context.Context, op Operator, key string, tools []manifest.Tool) (mcpregistry.Discovery, error) {
	reg, ok := p.d.MCP.(MCPDiscoverer)
	if !ok {
		return mcpregistry.Discovery{}, errNoDiscovery
	}
	srv, err := p.d.Store.GetMCPServer(ctx, op.TenantID, key)
	if err != nil {
		return mcpregistry.Discovery{}, refuse(err, "mcp server", nil)
	}
	switch {
	case tools != nil && srv.Transport == persistence.MCPTransportHTTP:
		return mcpregistry.Discovery{}, invalid("tools", "an http server is discovered over MCP: send no manifest")
	case tools == nil && srv.Transport == persistence.MCPTransportStdio:
		return mcpregistry.Discovery{}, invalid("tools", `a stdio server's manifest is required: {"tools":[{"name","description","inputSchema"}]}`)
	}
	var d mcpregistry.Discovery
	err = p.change(func() (err error) {
		d, err = reg.Discover(ctx, op.TenantID, key, tools, func(d mcpregistry.Discovery) persistence.AuditEvent {
			return Event(op, "config_change", "mcp_discovered", "", mcpregistry.DiscoveryDetails(key, d))
		})
		return p.discoveryRefusal(err, srv.Transport)
	}, func() { p.mcpChanged(ctx, op.TenantID, key) })
	return d, err
}

// discoveryRefusal maps a failed discovery of a server of transport to
// its refusal; other errors (the store's) pass through.
func (p *Plane) discoveryRefusal(err error, transport string) error {
	failed := func(kind Kind, code, format string, args ...any) *Refusal {
		return &Refusal{Kind: kind, What: "mcp server", Code: code, Message: fmt.Sprintf(format, args...)}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, persistence.ErrNotFound):
		return notFound("mcp server")
	case errors.Is(err, outbound.ErrForbiddenTarget):
		return failed(Unprocessable, "forbidden_target", "the mcp server's address may not be reached (CONTRACT §7)")
	case errors.Is(err, mcpregistry.ErrBusy):
		r := failed(Unavailable, "mcp_discovery_busy", "every mcp discovery slot of the node stayed taken for %s; retry later",
			mcpregistry.SlotWait)
		r.RetryAfter = mcpregistry.SlotWait
		// Kept as it was before discovery moved here (issue 39): the
		// handler settled the audit writer's health with its 503, which
		// counted as a storage failure, so a busy node reports the audit
		// writer degraded until the next audited write, though nothing was
		// written. A refusal alone would leave the health as it is.
		p.d.Registry.Set(ComponentAuditWriter, actors.StateDegraded, "ServiceUnavailable: "+r.Message)
		return r
	case errors.Is(err, mcpclient.ErrTimeout):
		return failed(Timeout, "mcp_timeout", "the mcp server did not answer within %s", mcpclient.DefaultLimits.Timeout)
	case errors.Is(err, mcpregistry.ErrManifest) && transport == persistence.MCPTransportStdio:
		return failed(Invalid, "invalid_manifest", "%s", strings.TrimPrefix(err.Error(), mcpregistry.ErrManifest.Error()+": "))
	case errors.Is(err, mcpclient.ErrTooLarge), errors.Is(err, mcpclient.ErrProtocol), errors.Is(err, mcpregistry.ErrManifest):
		return failed(Unprocessable, "mcp_discovery_failed", "%s", err.Error())
	}
	return err
}
