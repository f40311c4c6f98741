package messages

import "time"

// AlertRecord is an alert as the API, the live feed and the webhook export
// show it (CONTRACT §7).
type AlertRecord struct {
	AlertID       string    `json:"alert_id" openapi:"format=uuid"`
	TenantID      string    `json:"tenant_id" openapi:"format=uuid"`
	RuleKey       string    `json:"rule_key"`
	AlertName     string    `json:"alert_name"`
	Severity      string    `json:"severity" openapi:"enum=INFO|LOW|MEDIUM|HIGH"`
	Source        string    `json:"source"`
	AgentID       string    `json:"agent_id"`
	DecisionID    *string   `json:"decision_id"`
	SourceEventID string    `json:"source_event_id"`
	Summary       string    `json:"summary"`
	CreatedAt     time.Time `json:"created_at"`
}

// IncidentRecord is an incident as the API and the live feed show it
// (CONTRACT §7).
type IncidentRecord struct {
	IncidentID     string     `json:"incident_id" openapi:"format=uuid"`
	TenantID       string     `json:"tenant_id" openapi:"format=uuid"`
	Kind           string     `json:"kind"`
	Severity       string     `json:"severity" openapi:"enum=INFO|LOW|MEDIUM|HIGH"`
	Status         string     `json:"status" openapi:"enum=open|closed"`
	AgentID        string     `json:"agent_id"`
	Summary        string     `json:"summary"`
	SourceEventIDs []string   `json:"source_event_ids"`
	OpenedAt       time.Time  `json:"opened_at"`
	ClosedAt       *time.Time `json:"closed_at"`
	CloseReason    *string    `json:"close_reason"`
}

// Feed item types (CONTRACT §7 live feed).
const (
	FeedEvent    = "event"
	FeedAlert    = "alert"
	FeedIncident = "incident"
)

// FeedItem is one item of the live feed: subscribers receive
// {"type":...,"data":...}; between nodes it travels as its tenant id, a
// newline and that frame (broadcast.Feed).
type FeedItem struct {
	TenantID string `json:"tenant_id"`
	Type     string `json:"type"`
	Data     any    `json:"data"`
}
