package persistence

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// ErrMCPServerLimit: the tenant has as many MCP servers as it may
// register (CreateMCPServer's limit).
var ErrMCPServerLimit = errors.New("persistence: the tenant has as many mcp servers as it may register")

// MCP server statuses (CONTRACT §8) and transports.
const (
	MCPServerActive      = "active"
	MCPServerQuarantined = "quarantined"
	MCPTransportHTTP     = "http"
	MCPTransportStdio    = "stdio"
)

// MCPServer is a tenant's registered MCP server. PinnedHash is the manifest
// hash that drift is measured against (empty before the first discovery);
// ManifestHash is the hash the last discovery found.
type MCPServer struct {
	TenantID           string
	Key                string
	Transport          string
	URL                string
	TrustLevel         string
	InspectionEnabled  bool
	Status             string
	PinnedHash         string
	ManifestHash       string
	LastDiscoveryAt    *time.Time
	LastDiscoveryError string
	// UpstreamAuth is the credentials the gateway presents to the server,
	// as an opaque blob the caller seals (encrypts) before storing and
	// opens after reading; nil when there are none.
	UpstreamAuth []byte
	// Revision grows with every change.
	Revision  int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// MCPFinding is what the poisoning scan found in one tool: a category and
// a count, never the text.
type MCPFinding struct {
	Tool     string `json:"tool"`
	Category string `json:"category"`
	Count    int    `json:"count"`
}

// MCPTool is one tool of a server as its last discovery found it. Key is
// the name normalized as an authorize call's action is; Name is the
// server's spelling.
type MCPTool struct {
	TenantID    string
	ServerKey   string
	Key         string
	Name        string
	Status      string
	Description string
	InputSchema json.RawMessage
	Hash        string
	Findings    []MCPFinding
	// ReadOnly is the tool's annotations.readOnlyHint as discovered (not
	// part of its hash).
	ReadOnly  bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// MCPManifestEntry is one drift: a discovery whose manifest hash differed
// from the pinned one (CONTRACT §8).
type MCPManifestEntry struct {
	Seq          int64
	ID           string
	TenantID     string
	ServerKey    string
	DiscoveredAt time.Time
	ManifestHash string
	PinnedHash   string
	Added        []string
	Removed      []string
	Changed      []string
	RiskScore    int
	Findings     []MCPFinding
	// EventID is the id of the mcp_manifest_drift event it emitted.
	EventID string
}

// MCPServerPatch holds a partial server update; nil leaves a field as is.
type MCPServerPatch struct {
	URL               *string
	TrustLevel        *string
	InspectionEnabled *bool
	Status            *string
	// StatusFrom: the update applies only from these statuses
	// (ErrStateConflict otherwise); nil: from any.
	StatusFrom []string
	// Pin sets PinnedHash to ManifestHash (ErrStateConflict before the
	// first discovery).
	Pin bool
	// UpstreamAuth, when not nil, replaces the sealed upstream
	// credentials; pointing at an empty slice, it removes them.
	UpstreamAuth *[]byte
}

// MCPDiscovery is what one discovery writes, decided by the caller's plan
// from the server and its tools as stored when the discovery commits.
type MCPDiscovery struct {
	ManifestHash string
	// Pin sets the pinned hash (the first discovery).
	Pin bool
	// Upsert are the added and changed tools, with their new status.
	Upsert []MCPTool
	// Delete are the keys of the removed tools.
	Delete []string
	// Entry is the drift's history entry, nil without one.
	Entry *MCPManifestEntry
	// Audit are the change's audit events.
	Audit []AuditEvent
}

// MCPDiscoveryPlan decides a discovery's writes from the stored server and
// tools (read inside the committing transaction, so concurrent discoveries
// of one server are applied one after the other).
type MCPDiscoveryPlan func(server MCPServer, tools []MCPTool) (MCPDiscovery, error)

// MCPStore keeps the MCP registry.
type MCPStore interface {
	// CreateMCPServer inserts a server; ErrConflict when its key exists,
	// ErrMCPServerLimit when the tenant has limit servers already (0: no
	// limit). Concurrent creations of one tenant's servers, from any node,
	// never take it past the limit.
	CreateMCPServer(ctx context.Context, s MCPServer, limit int, audit ...AuditEvent) (MCPServer, error)
	GetMCPServer(ctx context.Context, tenantID, key string) (MCPServer, error)
	ListMCPServers(ctx context.Context, tenantID string) ([]MCPServer, error)
	// ListAllMCPServers lists every tenant's servers of a transport (the
	// leader's re-discovery).
	ListAllMCPServers(ctx context.Context, transport string) ([]MCPServer, error)
	UpdateMCPServer(ctx context.Context, tenantID, key string, p MCPServerPatch, audit ...AuditEvent) (MCPServer, error)
	DeleteMCPServer(ctx context.Context, tenantID, key string, audit ...AuditEvent) error

	ListMCPTools(ctx context.Context, tenantID, serverKey string) ([]MCPTool, error)
	GetMCPTool(ctx context.Context, tenantID, serverKey, toolKey string) (MCPTool, error)
	// SetMCPToolStatus moves a tool to status `to` from one of `from`
	// (ErrStateConflict otherwise).
	SetMCPToolStatus(ctx context.Context, tenantID, serverKey, toolKey string, from []string, to string, audit ...AuditEvent) (MCPTool, error)

	// ApplyMCPDiscovery records a successful discovery as plan decides.
	// The plan's audit events are written with it.
	ApplyMCPDiscovery(ctx context.Context, tenantID, serverKey string, plan MCPDiscoveryPlan) (MCPServer, *MCPManifestEntry, error)
	// FailMCPDiscovery records a failed discovery's reason.
	FailMCPDiscovery(ctx context.Context, tenantID, serverKey, reason string, at time.Time) error
	// ListMCPHistory lists a server's drift entries, newest first.
	ListMCPHistory(ctx context.Context, tenantID, serverKey string, p Page) ([]MCPManifestEntry, error)
}
