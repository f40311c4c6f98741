package detect

import "time"

// Event kinds this package knows by name (SPEC 6.1). Other kinds (ingested
// external_event:* kinds, for instance) are matched like any string.
const (
	KindAuthorizeDecision = "authorize_decision"
	KindReplayAttempt     = "replay_attempt"
	KindMCPManifestDrift  = "mcp_manifest_drift"
	// KindReceiptChainBroken: the receipt integrity job found a tenant's
	// chain broken (issue 28; beside SPEC 6.1's kinds).
	KindReceiptChainBroken = "receipt_chain_broken"
)

// Event is the input of detection: one security event, reduced to the
// fields a condition can match plus the ids the caller needs to raise an
// alert. The caller builds it from an AseEvent (SPEC 2.2) and its decision:
// MutatesState comes from the authorize request and SourceTrust is the
// hop's effective trust level (evidence.source_trust).
type Event struct {
	// Bookkeeping, never matched by a condition.
	EventID    string
	TenantID   string
	DecisionID string
	OccurredAt time.Time

	// Matchable fields; each has the condition field name in its comment.
	Kind            string   // kind
	Decision        string   // decision
	Tool            string   // tool
	Action          string   // action
	Resource        *string  // resource; nil is JSON null
	RiskScore       int      // risk_score
	MutatesState    bool     // mutates_state
	SourceTrust     string   // source_trust
	AgentID         string   // agent_id
	MatchedPolicies []string // matched_policies
	RedactedFields  []string // redacted_fields
}
