package messages

import "time"

// Heartbeat tells the heartbeat buffer that an agent was seen at At.
type Heartbeat struct {
	TenantID string
	AgentID  string
	At       time.Time
}
