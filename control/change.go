package control

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"svc/actors"
	"svc/broadcast"
	"svc/config"
	"svc/mcpproxy"
	"svc/messages"
	"svc/persistence"
	"svc/rules/policy"
)

// ComponentAuditWriter is the registry entry that reports whether audited
// writes succeed (/readyz lists it): degraded after a write failed for
// storage reasons, ok after the next one succeeded.
const ComponentAuditWriter = "audit_writer"

// Deps are the plane's collaborators.
type Deps struct {
	Config   *config.Config
	Store    persistence.Store
	Registry *actors.Registry
	// MCP drops an MCP server's cached records on every node; nil (tests)
	// caches none.
	MCP MCPCaches
	// Invalidations drops cached records (skills, policies, risk settings,
	// rules, webhook subscriptions) on every node after a change; nil (in
	// tests) caches none.
	Invalidations *broadcast.Invalidations
	// Policies prepares a tenant's changed policy set on this node at once
	// (actors.Authorizer), so its very next call sees it; nil: none.
	Policies PolicyPreparer
	// Engine compiles candidate policy modules (a change that does not
	// compile is refused).
	Engine *policy.Engine
	// Exporter drops the webhook exporter's cached subscriptions on this
	// node when there is no invalidation hub (tests); nil: none.
	Exporter *actors.ExporterHandle
	// Approvals decide and consume approvals (the approval actors).
	Approvals Approvals
	// MCPCredentials seals MCP servers' upstream headers (the key derived
	// from the installation secret); nil: they cannot be stored here.
	MCPCredentials *mcpproxy.Sealer
	// Live counts the node's live decisions (actors.Authorizer): a policy
	// simulation slows down while they come; nil: it never does.
	Live LiveCalls
}

// LiveCalls reports how many decisions the node has made.
type LiveCalls interface {
	Stats() (decisions, bestEffortFailures, refusals uint64)
}

// PolicyPreparer prepares a tenant's policy set for the authorize path.
type PolicyPreparer interface {
	PreparePolicies(ctx context.Context, tenantID string) error
}

// MCPCaches drops the authorize path's cached MCP server and tools on every
// node (mcpregistry.Registry).
type MCPCaches interface {
	Changed(ctx context.Context, tenantID, key string)
}

// Plane carries out operator changes. It is safe for concurrent use.
type Plane struct {
	d    Deps
	log  hclog.Logger
	sims *simulations
}

// New returns the plane and registers the audit writer's health entry (ok
// until a write fails).
func New(d Deps) *Plane {
	if d.Registry == nil {
		d.Registry = actors.NewRegistry()
	}
	d.Registry.Register(ComponentAuditWriter, false)
	d.Registry.Set(ComponentAuditWriter, actors.StateOK, "")
	return &Plane{d: d, log: hclog.L().Named("control"), sims: newSimulations()}
}

// WithLogger sets the plane's logger (default: hclog's default, named
// control).
func (p *Plane) WithLogger(l hclog.Logger) *Plane {
	if l != nil {
		p.log = l.Named("control")
	}
	return p
}

// drop drops a cached record on every node (after a commit).
func (p *Plane) drop(ctx context.Context, kind messages.CacheKind, tenantID, key string) {
	if p.d.Invalidations != nil {
		p.d.Invalidations.Invalidate(ctx, messages.Invalidation{Kind: kind, TenantID: tenantID, Key: key})
	}
}

// Operator is who makes a change: the tenant it applies to and the actor
// recorded on the audit event ("operator:<token id>", "admin", ...).
type Operator struct {
	TenantID string
	Actor    string
}

// Event is the audit event of one change by op.
func Event(op Operator, eventType, action, agentID string, details map[string]any) persistence.AuditEvent {
	if details == nil {
		details = map[string]any{}
	}
	details["action"] = action
	return persistence.AuditEvent{ID: persistence.NewRecordID(), TenantID: op.TenantID, EventType: eventType, Action: action,
		Actor: op.Actor, AgentID: agentID, Details: details, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
}

// change runs one audited write: write stores the change with its audit
// event in one transaction; its outcome settles the audit writer's health;
// after a commit, committed drops what must be dropped (on every node).
func (p *Plane) change(write func() error, committed func()) error {
	err := p.Settle(write())
	if err == nil && committed != nil {
		committed()
	}
	return err
}

// Settle records the outcome of an audited write in the audit writer's
// health and returns err unchanged: a storage failure marks it degraded,
// success ok; a refusal for the domain's reasons (not found, conflict,
// invalid input) leaves it as it is. The plane's writes settle through
// [Plane.change]; a write outside it that carries an audit event would
// call it itself.
func (p *Plane) Settle(err error) error {
	switch {
	case err == nil:
		p.d.Registry.Set(ComponentAuditWriter, actors.StateOK, "")
	case StorageFailure(err):
		p.d.Registry.Set(ComponentAuditWriter, actors.StateDegraded, err.Error())
	}
	return err
}

// StorageFailure reports whether err is a failure of the storage (the
// database unavailable or busy, a deadline, anything unexpected) rather
// than an answer about the change itself (a refusal, not found, a
// conflict, a value that cannot be stored).
func StorageFailure(err error) bool {
	var r *Refusal
	switch {
	case err == nil, errors.As(err, &r):
		return false
	case errors.Is(err, persistence.ErrNotFound), errors.Is(err, persistence.ErrConflict),
		errors.Is(err, persistence.ErrStateConflict), errors.Is(err, persistence.ErrInvalidInput),
		errors.Is(err, persistence.ErrMCPServerLimit):
		return false
	}
	// An error that knows (http/'s status errors) says whether it is one.
	var d interface{ Domain() bool }
	return !errors.As(err, &d) || !d.Domain()
}

// Kind is what a refusal means to the caller.
type Kind int

// Refusal kinds.
const (
	// NotFound: the target does not exist (or belongs to another tenant).
	NotFound Kind = iota + 1
	// Conflict: the target's current state does not allow the change.
	Conflict
	// Invalid: a value the change cannot take (http: 400; with Field, the
	// invalid_field error naming it, whose message is "<field>: <Message>").
	Invalid
	// Unprocessable: a well-formed value the domain rejects, such as a
	// policy that does not compile (http: 422, reason Invalid).
	Unprocessable
	// Exists: the change would duplicate what exists, a name or binding
	// taken (http: 409, reason AlreadyExists).
	Exists
	// Unavailable: this node cannot make the change now (http: 503 with
	// Retry-After, RetryAfter or 1 s), e.g. without the key that seals
	// credentials, or every MCP discovery slot taken.
	Unavailable
	// Timeout: what the change waits for did not answer in time, such as
	// an MCP server asked for its tools (http: 504, reason Timeout).
	Timeout
)

// Refusal is a change the plane refuses for the domain's reasons. What
// names the target ("agent", "mcp server"); Code is the machine-readable
// reason (details.error) and Message the human one; Field names the
// request field at fault (Invalid), and Details are added to the error
// envelope's details. RetryAfter is when an Unavailable change may be
// tried again (zero: soon).
type Refusal struct {
	Kind       Kind
	What       string
	Code       string
	Message    string
	Field      string
	Details    map[string]any
	RetryAfter time.Duration
}

func (r *Refusal) Error() string {
	if r.Message != "" {
		return r.Message
	}
	return fmt.Sprintf("%s not found", r.What)
}

func notFound(what string) *Refusal { return &Refusal{Kind: NotFound, What: what} }

// invalid refuses a value of field (a 400 invalid_field in http).
func invalid(field, format string, args ...any) *Refusal {
	return &Refusal{Kind: Invalid, Code: "invalid_field", Field: field, Message: fmt.Sprintf(format, args...)}
}

func conflict(what, code, format string, args ...any) *Refusal {
	return &Refusal{Kind: Conflict, What: what, Code: code, Message: fmt.Sprintf(format, args...)}
}

// refuse maps the store's not-found and state-conflict answers about what
// to refusals; other errors pass through.
func refuse(err error, what string, onConflict *Refusal) error {
	switch {
	case errors.Is(err, persistence.ErrNotFound):
		return notFound(what)
	case errors.Is(err, persistence.ErrStateConflict) && onConflict != nil:
		return onConflict
	}
	return err
}
