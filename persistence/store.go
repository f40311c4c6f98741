package persistence

import (
	"context"
	"time"
)

// Operator roles.
const (
	RoleAdmin    = "admin"
	RoleApprover = "approver"
	RoleViewer   = "viewer"
)

// Agent statuses (CONTRACT §3).
const (
	AgentActive      = "active"
	AgentQuarantined = "quarantined"
	AgentFrozen      = "frozen"
	AgentRevoked     = "revoked"
	AgentDeleted     = "deleted"
)

// Tenant is one customer of the installation. Every other record belongs to
// exactly one tenant.
type Tenant struct {
	ID                    string
	Name                  string
	AutoRotateTokenOnLeak bool
	CreatedAt             time.Time
}

// OperatorToken is a human or automation credential of one tenant. Only the
// SHA-256 hash of the secret is stored; the plaintext is never kept.
type OperatorToken struct {
	ID        string
	TenantID  string
	Name      string
	Role      string
	CreatedAt time.Time
}

// Agent is a registered AI agent. TokenHash and SigningKey are never exposed
// by the API.
type Agent struct {
	// Seq orders agents for cursor pagination.
	Seq      int64
	ID       string
	TenantID string
	Name     string
	Status   string
	RiskTier string
	// AllowedEnvironments is nil when the agent is unrestricted.
	AllowedEnvironments []string
	// SigningKey is the agent's HMAC key for request signing, nil when unset.
	SigningKey []byte
	CreatedAt  time.Time
	UpdatedAt  time.Time
	LastSeenAt *time.Time
}

// AgentPatch holds the fields of a partial agent update; a nil field is left
// unchanged.
type AgentPatch struct {
	Name                *string
	RiskTier            *string
	AllowedEnvironments *[]string // pointer to nil slice: clear the restriction
	SigningKey          *[]byte   // pointer to nil slice: remove the key
}

// Permission binds a tool to an agent. An agent with no bindings may use any
// tool.
type Permission struct {
	TenantID  string
	AgentID   string
	ToolKey   string
	CreatedAt time.Time
}

// AuditEvent is one row of a tenant's audit trail.
type AuditEvent struct {
	Seq        int64
	ID         string
	TenantID   string
	EventType  string
	Action     string
	Actor      string
	AgentID    string
	DecisionID string
	// Details is a JSON object; it never carries secrets or tokens.
	Details   map[string]any
	CreatedAt time.Time
	// Archived: read from the archive (the audit archival job moved it).
	Archived bool
}

// Heartbeat is one buffered last-seen time of an agent.
type Heartbeat struct {
	TenantID string
	AgentID  string
	At       time.Time
}

// Page selects a window of a list ordered newest first. After is the
// sequence number carried by a cursor (0: none); when After is set it wins
// over Offset. Limit is the page size; implementations read Limit+1 rows so
// that the caller can tell whether more follow.
type Page struct {
	Limit  int
	Offset int
	After  int64
}

// AuditFilter narrows an audit listing.
type AuditFilter struct {
	EventType string
	// Query is the already sanitized keyword query (see SanitizeQuery).
	Query string
}

// AgentFilter narrows an agent listing. An empty Status hides deleted
// agents; a non-empty one matches exactly.
type AgentFilter struct {
	Status string
}

// PoolStats is a snapshot of the connection pool.
type PoolStats struct {
	Active int // connections in use
	Idle   int // open and idle
	Max    int // configured maximum
	Size   int // open connections in total
	// LivenessChecks counts the checks SVC_DB_TEST_BEFORE_ACQUIRE ran on
	// connections before handing them out (0 with it off).
	LivenessChecks uint64
	// ReplicaFallbacksUnavailable and ReplicaFallbacksSchema count the
	// reads meant for the read replica that the primary answered, because
	// the replica could not be reached or lacked a table or column the
	// read needs (a migration it has not replayed yet); 0 without one.
	ReplicaFallbacksUnavailable uint64
	ReplicaFallbacksSchema      uint64
}

// TenantStore keeps tenants.
type TenantStore interface {
	// CreateTenant inserts the tenant and its first admin operator token in
	// one transaction, with the audit events given.
	CreateTenant(ctx context.Context, t Tenant, admin OperatorToken, adminHash []byte, audit ...AuditEvent) error
	GetTenant(ctx context.Context, id string) (Tenant, error)
	GetTenantByName(ctx context.Context, name string) (Tenant, error)
	ListTenants(ctx context.Context) ([]Tenant, error)
	// DeleteTenant removes the tenant and every row that belongs to it.
	DeleteTenant(ctx context.Context, id string) error
	UpdateTenantSettings(ctx context.Context, id string, autoRotate bool, audit ...AuditEvent) (Tenant, error)
}

// OperatorTokenStore keeps operator tokens.
type OperatorTokenStore interface {
	CreateOperatorToken(ctx context.Context, t OperatorToken, hash []byte, audit ...AuditEvent) error
	ListOperatorTokens(ctx context.Context, tenantID string) ([]OperatorToken, error)
	DeleteOperatorToken(ctx context.Context, tenantID, id string, audit ...AuditEvent) error
	// LookupOperatorToken finds a token by the SHA-256 of its secret.
	LookupOperatorToken(ctx context.Context, hash []byte) (OperatorToken, error)
}

// AgentStore keeps agents and their tool permissions.
type AgentStore interface {
	CreateAgent(ctx context.Context, a Agent, tokenHash []byte, audit ...AuditEvent) error
	GetAgent(ctx context.Context, tenantID, id string) (Agent, error)
	ListAgents(ctx context.Context, tenantID string, f AgentFilter, p Page) ([]Agent, error)
	UpdateAgent(ctx context.Context, tenantID, id string, p AgentPatch, audit ...AuditEvent) (Agent, error)
	// TransitionAgent moves the agent to status `to` only when its current
	// status is one of `from` (a conditional update). ErrStateConflict when it
	// is not, ErrNotFound when there is no such agent.
	TransitionAgent(ctx context.Context, tenantID, id string, from []string, to string, audit ...AuditEvent) (Agent, error)
	// RotateAgentToken replaces the token hash; the old token fails at once.
	RotateAgentToken(ctx context.Context, tenantID, id string, newHash []byte, audit ...AuditEvent) (Agent, error)
	// LookupAgentToken finds an agent by the SHA-256 of its token, in any
	// status; the caller decides which statuses authenticate.
	LookupAgentToken(ctx context.Context, hash []byte) (Agent, error)
	// TouchAgents records buffered heartbeats, keeping the latest time.
	TouchAgents(ctx context.Context, beats []Heartbeat) error

	AddPermission(ctx context.Context, p Permission, audit ...AuditEvent) error
	ListPermissions(ctx context.Context, tenantID, agentID string) ([]Permission, error)
	DeletePermission(ctx context.Context, tenantID, agentID, toolKey string, audit ...AuditEvent) error
}

// AuditStore keeps the audit trail.
type AuditStore interface {
	AppendAudit(ctx context.Context, events []AuditEvent) error
	ListAudit(ctx context.Context, tenantID string, f AuditFilter, p Page) ([]AuditEvent, error)
}

// LeaseStore keeps the leadership lease row (SPEC part 3).
type LeaseStore interface {
	// AcquireLease renews the named lease when holder owns it, or takes it
	// when it has expired; it reports whether holder now holds it.
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	// ReleaseLease gives the lease up when holder owns it.
	ReleaseLease(ctx context.Context, name, holder string) error
}

// SecretStore keeps the installation's own secrets (not a tenant's: no
// tenant owns them, and deleting a tenant leaves them).
type SecretStore interface {
	// InstallationSecret returns the secret stored under name, storing
	// fresh there first when none is (an insert that does nothing when a
	// value exists). Every node sharing the database gets the same bytes,
	// and of concurrent first calls, on any nodes, one value wins for all.
	InstallationSecret(ctx context.Context, name string, fresh []byte) ([]byte, error)
}

// Store is the whole storage contract.
type Store interface {
	TenantStore
	OperatorTokenStore
	AgentStore
	AuditStore
	LeaseStore
	DecisionStore
	PolicyStore
	SkillStore
	RiskStore
	ApprovalStore
	ApprovalCallbackStore
	SOCStore
	WebhookStore
	EvidenceStore
	MCPStore
	MaintenanceStore
	CodehostStore
	SecretStore
	ReceiptLogStore
	WitnessStore

	// Backend names the implementation: "sqlite" or "postgres".
	Backend() string
	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// ProbeWrite commits a one-row write (the writer_probe table) the way a
	// group commit writes: the audit writer's check, while its writes fail,
	// of whether they would succeed again.
	ProbeWrite(ctx context.Context) error
	// PoolStats reports the connection pool.
	PoolStats() PoolStats
	// SampleAcquire acquires and releases one connection, reporting the wait.
	SampleAcquire(ctx context.Context) (time.Duration, error)
	Close() error
}
