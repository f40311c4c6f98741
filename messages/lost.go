package messages

import "time"

// RecordLost tells the security pipeline that a decision answered before
// its commit (SPEC 4.2 rule 10) could not be recorded afterwards: the
// tenant's audit has a hole, which it must hear of (a HIGH alert).
type RecordLost struct {
	TenantID   string
	AgentID    string
	DecisionID string
	Error      string
	At         time.Time
}
