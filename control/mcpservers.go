package control

import (
	"context"
	"errors"
	"net/textproto"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"

	"svc/persistence"
	"svc/rules/policy"
)

// DefaultMCPTrust is the trust level of a server registered without one: a
// tool server is outside the gateway, so untrusted until said otherwise.
const DefaultMCPTrust = "untrusted_external"

// MCPRegistration is a server registration as asked: Key and Transport
// (http or stdio) already checked for shape; URL only for http servers
// (required there); TrustLevel nil for DefaultMCPTrust; UpstreamHeaders
// only for http servers.
type MCPRegistration struct {
	Key, Transport    string
	URL, TrustLevel   *string
	InspectionEnabled bool
	UpstreamHeaders   *map[string]string
}

// RegisterMCPServer registers a server (status active, no tools until
// discovered) with an mcp_server_registered event. Its URL is admitted as
// an outbound target, its upstream headers checked and sealed. A key taken:
// Exists; the tenant at SVC_MCP_MAX_SERVERS_PER_TENANT: Conflict
// mcp_server_limit.
func (p *Plane) RegisterMCPServer(ctx context.Context, op Operator, r MCPRegistration) (persistence.MCPServer, error) {
	srv := persistence.MCPServer{TenantID: op.TenantID, Key: r.Key, Transport: r.Transport, TrustLevel: DefaultMCPTrust,
		InspectionEnabled: r.InspectionEnabled}
	switch {
	case srv.Transport == persistence.MCPTransportHTTP && r.URL == nil:
		return persistence.MCPServer{}, invalid("url", "is required for an http server")
	case srv.Transport == persistence.MCPTransportHTTP:
		target, err := p.AdmitTarget(*r.URL)
		if err != nil {
			return persistence.MCPServer{}, err
		}
		srv.URL = target
	case r.URL != nil:
		return persistence.MCPServer{}, invalid("url", "is for http servers only")
	}
	if r.TrustLevel != nil {
		t, err := checkTrust(*r.TrustLevel)
		if err != nil {
			return persistence.MCPServer{}, err
		}
		srv.TrustLevel = t
	}
	if r.UpstreamHeaders != nil {
		if srv.Transport != persistence.MCPTransportHTTP {
			return persistence.MCPServer{}, invalid("upstream_headers", "are for http servers only")
		}
		sealed, err := p.sealUpstreamHeaders(srv.TenantID, srv.Key, *r.UpstreamHeaders)
		if err != nil {
			return persistence.MCPServer{}, err
		}
		srv.UpstreamAuth = sealed
	}
	limit := 0
	if p.d.Config != nil {
		limit = p.d.Config.MCPMaxServersPerTenant
	}
	var created persistence.MCPServer
	err := p.change(func() (err error) {
		created, err = p.d.Store.CreateMCPServer(ctx, srv, limit, Event(op, "config_change", "mcp_server_registered", "",
			map[string]any{"server_key": srv.Key, "transport": srv.Transport, "url_host": URLHost(srv.URL), "trust_level": srv.TrustLevel,
				"inspection_enabled": srv.InspectionEnabled, "upstream_headers": HeaderNames(r.UpstreamHeaders)}))
		switch {
		case errors.Is(err, persistence.ErrConflict):
			return exists("mcp server", "an mcp server %q exists", srv.Key)
		case errors.Is(err, persistence.ErrMCPServerLimit):
			c := conflict("mcp server", "mcp_server_limit", "the tenant has %d mcp servers, as many as it may register "+
				"(SVC_MCP_MAX_SERVERS_PER_TENANT); delete one to register another", limit)
			c.Details = map[string]any{"limit": limit}
			return c
		}
		return err
	}, func() { p.mcpChanged(ctx, op.TenantID, srv.Key) }) // an unknown server may be cached
	return created, err
}

// MCPServerChange is a registration change as asked (nil: unchanged);
// UpstreamHeaders empty removes them.
type MCPServerChange struct {
	URL, TrustLevel   *string
	InspectionEnabled *bool
	UpstreamHeaders   *map[string]string
}

// ChangeMCPServer applies a registration change to srv (read by the
// caller) with an mcp_server_updated event naming what changed.
func (p *Plane) ChangeMCPServer(ctx context.Context, op Operator, srv persistence.MCPServer, ch MCPServerChange) (persistence.MCPServer, error) {
	var patch persistence.MCPServerPatch
	details := map[string]any{"server_key": srv.Key}
	if ch.URL != nil {
		if srv.Transport != persistence.MCPTransportHTTP {
			return persistence.MCPServer{}, invalid("url", "is for http servers only")
		}
		target, err := p.AdmitTarget(*ch.URL)
		if err != nil {
			return persistence.MCPServer{}, err
		}
		patch.URL, details["url_host"] = &target, URLHost(target)
	}
	if ch.TrustLevel != nil {
		t, err := checkTrust(*ch.TrustLevel)
		if err != nil {
			return persistence.MCPServer{}, err
		}
		patch.TrustLevel, details["trust_level"] = &t, t
	}
	if ch.InspectionEnabled != nil {
		patch.InspectionEnabled, details["inspection_enabled"] = ch.InspectionEnabled, *ch.InspectionEnabled
	}
	if ch.UpstreamHeaders != nil {
		if srv.Transport != persistence.MCPTransportHTTP {
			return persistence.MCPServer{}, invalid("upstream_headers", "are for http servers only")
		}
		sealed := []byte{}
		if len(*ch.UpstreamHeaders) > 0 {
			var err error
			if sealed, err = p.sealUpstreamHeaders(srv.TenantID, srv.Key, *ch.UpstreamHeaders); err != nil {
				return persistence.MCPServer{}, err
			}
		}
		patch.UpstreamAuth, details["upstream_headers"] = &sealed, HeaderNames(ch.UpstreamHeaders)
	}
	return p.UpdateMCPServer(ctx, op, srv.Key, patch, "mcp_server_updated", details)
}

// checkTrust checks a trust level (SPEC 4.2 rule 4's levels).
func checkTrust(v string) (string, error) {
	v = strings.TrimSpace(v)
	if !slices.Contains(policy.TrustLevels(), v) {
		return "", invalid("trust_level", "must be one of %s", strings.Join(policy.TrustLevels(), ", "))
	}
	return v, nil
}

// reservedUpstreamHeaders are the headers the proxy sets itself: a server
// record may not name them.
var reservedUpstreamHeaders = map[string]bool{"Host": true, "Content-Length": true, "Content-Type": true, "Accept": true,
	"Connection": true, "Transfer-Encoding": true, "Upgrade": true, "Te": true, "Trailer": true, "Keep-Alive": true,
	"Proxy-Authorization": true, "Proxy-Connection": true, "Mcp-Session-Id": true, "Mcp-Protocol-Version": true, "Last-Event-Id": true}

// sealUpstreamHeaders checks and encrypts a server's upstream headers:
// at most 16, names HTTP tokens the proxy does not set itself, values of
// at most 8192 bytes without control characters.
func (p *Plane) sealUpstreamHeaders(tenantID, key string, h map[string]string) ([]byte, error) {
	if len(h) > 16 {
		return nil, invalid("upstream_headers", "has %d headers, at most 16", len(h))
	}
	clean := make(map[string]string, len(h))
	for name, value := range h {
		canon := textproto.CanonicalMIMEHeaderKey(name)
		switch {
		case name == "" || !httpguts.ValidHeaderFieldName(name):
			return nil, invalid("upstream_headers", "%q is not a header name", name)
		case reservedUpstreamHeaders[canon]:
			return nil, invalid("upstream_headers", "%s is set by the proxy itself", canon)
		case len(value) > 8192 || !httpguts.ValidHeaderFieldValue(value):
			return nil, invalid("upstream_headers", "the value of %s must be at most 8192 bytes without control characters", canon)
		}
		clean[canon] = value
	}
	if p.d.MCPCredentials == nil {
		return nil, &Refusal{Kind: Unavailable, Code: "mcp_credentials_unavailable", Message: "upstream headers cannot be stored on this node"}
	}
	return p.d.MCPCredentials.SealCredentials(tenantID, key, clean)
}

// HeaderNames are the canonical names of upstream headers, sorted, for
// audit details (never their values).
func HeaderNames(h *map[string]string) []string {
	if h == nil {
		return nil
	}
	names := make([]string, 0, len(*h))
	for n := range *h {
		names = append(names, textproto.CanonicalMIMEHeaderKey(n))
	}
	slices.Sort(names)
	return names
}
