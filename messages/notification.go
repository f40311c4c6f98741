package messages

import "time"

// Notification severities (SPEC 6.4), lower case as on the wire.
const (
	NotifySeverityLow    = "low"
	NotifySeverityMedium = "medium"
	NotifySeverityHigh   = "high"
)

// Notification is one outbound chat notification (SPEC 6.4), sent to the
// notifier actor either derived from an AseEvent (deny and require_approval
// decisions) or directly by the SOC pipeline for HIGH alerts and incidents.
// The sender decides that it is worth sending: the notifier delivers every
// Notification it receives (subject to its circuit breaker).
//
// Redaction invariant (SPEC 1.8): a Notification carries ids, hashes and
// short human-readable text only. It never carries a secret, a token, a raw
// tool parameter or an approval id (the approval is looked up with
// GET /v1/approvals), and the sender must not put any into Summary or
// Detail.
type Notification struct {
	// Kind is the event, alert or incident kind, for example
	// authorize_decision or deny_storm.
	Kind string
	// Severity is "low", "medium" or "high" (NotifySeverity*).
	Severity string
	TenantID string
	// AgentID is the agent UUID, or UnknownAgent.
	AgentID string
	// At is when the notified thing happened; the zero time means now.
	At time.Time
	// Summary is the one-line headline.
	Summary string
	// Detail is the one-line detail shown quoted under the summary.
	Detail string
	// RecordType ("alert" or "incident"), RecordID and RuleKey (alerts)
	// name the record behind a SOC notification, for the webhook export;
	// the chat message does not show them.
	RecordType string
	RecordID   string
	RuleKey    string
}
