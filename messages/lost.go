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

// LogRefused tells the security pipeline that a witness refused a
// checkpoint of the tenant's receipt log as inconsistent with one it had
// cosigned (CONTRACT §17): the log was rewritten or forked (a HIGH
// alert).
type LogRefused struct {
	TenantID string
	// Witness is the witness's name, URL its submission prefix.
	Witness string
	URL     string
	Size    int64
	Reason  string
	At      time.Time
}
