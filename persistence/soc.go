package persistence

import (
	"context"
	"encoding/json"
	"time"
)

// CustomRule is a tenant's detection rule (CONTRACT §7). Condition is the
// normalized condition as JSON (rules/detect parses and validates it).
type CustomRule struct {
	TenantID  string
	Key       string
	AlertName string
	Severity  string
	Enabled   bool
	Condition json.RawMessage
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Alert is one rule match on one event (CONTRACT §7).
type Alert struct {
	Seq           int64
	ID            string
	TenantID      string
	RuleKey       string
	AlertName     string
	Severity      string
	Source        string // default or custom
	AgentID       string
	DecisionID    string
	SourceEventID string
	Summary       string
	CreatedAt     time.Time
}

// Incident statuses.
const (
	IncidentOpen   = "open"
	IncidentClosed = "closed"
)

// Incident is a correlated pattern over an agent's events (SPEC 6.3,
// CONTRACT §7).
type Incident struct {
	Seq            int64
	ID             string
	TenantID       string
	Kind           string
	Severity       string
	Status         string
	AgentID        string
	Summary        string
	SourceEventIDs []string
	OpenedAt       time.Time
	ClosedAt       *time.Time
	CloseReason    *string
}

// AlertFilter narrows ListAlerts; empty fields do not filter. SinceSeq != 0
// lists only rows after that seq, oldest first, for the watch streams (-1:
// from the first row).
type AlertFilter struct {
	Severity string
	AgentID  string
	SinceSeq int64
	// ExcludeRules leaves out the alerts of these rule keys (the watch
	// stream leaves out the polling-only MCP inspection alerts).
	ExcludeRules []string
}

// IncidentFilter narrows ListIncidents like AlertFilter.
type IncidentFilter struct {
	Status   string
	Severity string
	AgentID  string
	Kind     string
	SinceSeq int64
}

// SOCSummary is GET /v1/soc/summary's counts.
type SOCSummary struct {
	AlertsBySeverity    map[string]int64
	IncidentsByStatus   map[string]int64
	IncidentsBySeverity map[string]int64 // open ones
	AlertsTotal         int64
	IncidentsTotal      int64
}

// SOCStore keeps custom rules, alerts and incidents.
type SOCStore interface {
	// PutRule creates or replaces the tenant's custom rule with r.Key.
	PutRule(ctx context.Context, r CustomRule, audit ...AuditEvent) (CustomRule, error)
	DeleteRule(ctx context.Context, tenantID, key string, audit ...AuditEvent) error
	ListRules(ctx context.Context, tenantID string) ([]CustomRule, error)
	// AppendAlerts writes alerts (of any tenants) in one transaction.
	AppendAlerts(ctx context.Context, alerts []Alert) error
	ListAlerts(ctx context.Context, tenantID string, f AlertFilter, p Page) ([]Alert, error)
	// OpenIncidents writes incidents (of any tenants) in one transaction;
	// ErrConflict when one of the ids exists already (nothing is written).
	OpenIncidents(ctx context.Context, incs []Incident) error
	GetIncident(ctx context.Context, tenantID, id string) (Incident, error)
	ListIncidents(ctx context.Context, tenantID string, f IncidentFilter, p Page) ([]Incident, error)
	// CloseIncident closes an open incident: ErrNotFound, or
	// ErrStateConflict when it is closed already.
	CloseIncident(ctx context.Context, tenantID, id string, reason *string, at time.Time, audit ...AuditEvent) (Incident, error)
	SOCSummary(ctx context.Context, tenantID string) (SOCSummary, error)
	// DecisionsBetween reads at most limit of the tenant's decisions with
	// from <= created_at < to, newest first (backtests).
	DecisionsBetween(ctx context.Context, tenantID string, from, to time.Time, limit int) ([]Decision, error)
}
