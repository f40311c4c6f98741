package messages

import (
	"encoding/json"
	"time"
)

// SchemaVersion is the current AseEvent schema version.
const SchemaVersion = 1

// Event kinds named by SPEC part 6.
const (
	KindAuthorizeDecision      = "authorize_decision"
	KindReplayAttempt          = "replay_attempt"
	KindMCPManifestDrift       = "mcp_manifest_drift"
	KindAgentQuarantined       = "agent_quarantined"
	KindAgentRiskEscalated     = "agent_risk_escalated"
	KindAgentTokenLeakDetected = "agent_token_leak_detected"
	KindExternalCodehost       = "external_event:codehost_webhook"
	KindExternalModelVendor    = "external_event:modelvendor_trace"
	// KindReceiptChainBroken is beside SPEC 6.1's kinds: the receipt
	// integrity job found a tenant's chain broken (issue 28).
	KindReceiptChainBroken = "receipt_chain_broken"
)

// UnknownAgent is the agent_id of events that have no agent (ingested ones).
const UnknownAgent = "unknown"

// AseEvent is the normalized security event (SPEC 2.2). It carries ids and
// hashes only: never a secret, a token or a raw tool parameter.
type AseEvent struct {
	EventID         string          `json:"event_id"`
	OccurredAt      time.Time       `json:"occurred_at"`
	TenantID        string          `json:"tenant_id"`
	Kind            string          `json:"kind"`
	AgentID         string          `json:"agent_id"`
	Decision        string          `json:"decision"`
	Tool            string          `json:"tool"`
	Action          string          `json:"action"`
	Resource        *string         `json:"resource"`
	RiskScore       int             `json:"risk_score"`
	Reason          string          `json:"reason"`
	RunID           *string         `json:"run_id"`
	TraceID         *string         `json:"trace_id"`
	MatchedPolicies []string        `json:"matched_policies"`
	RedactedFields  []string        `json:"redacted_fields"`
	SchemaVersion   int             `json:"schema_version"`
	Evidence        *Evidence       `json:"evidence"`
	PromptInjection json.RawMessage `json:"prompt_injection"`
	RagPoisoning    json.RawMessage `json:"rag_poisoning"`
	// MutatesState is added beside SPEC 2.2's fields: whether the decided
	// call mutates state (detection conditions match on it); absent for
	// events that are not about a call.
	MutatesState *bool `json:"mutates_state,omitempty"`
}

// Evidence links an event to its records by id and hash only.
type Evidence struct {
	DecisionID  *string `json:"decision_id"`
	ActionHash  *string `json:"action_hash"`
	ReceiptID   *string `json:"receipt_id"`
	ReceiptHash *string `json:"receipt_hash"`
	SourceTrust *string `json:"source_trust"`
}

// MarshalJSON writes RFC 3339 UTC times, empty arrays instead of null, and
// null for absent JSON objects.
func (e AseEvent) MarshalJSON() ([]byte, error) {
	type plain AseEvent
	p := plain(e)
	p.OccurredAt = p.OccurredAt.UTC()
	if p.MatchedPolicies == nil {
		p.MatchedPolicies = []string{}
	}
	if p.RedactedFields == nil {
		p.RedactedFields = []string{}
	}
	if p.SchemaVersion == 0 {
		p.SchemaVersion = SchemaVersion
	}
	if len(p.PromptInjection) == 0 {
		p.PromptInjection = json.RawMessage("null")
	}
	if len(p.RagPoisoning) == 0 {
		p.RagPoisoning = json.RawMessage("null")
	}
	return json.Marshal(p)
}

// UnmarshalJSON reads an event, defaulting schema_version to 1 when absent.
func (e *AseEvent) UnmarshalJSON(b []byte) error {
	type plain AseEvent
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	if p.SchemaVersion == 0 {
		p.SchemaVersion = SchemaVersion
	}
	if string(p.PromptInjection) == "null" {
		p.PromptInjection = nil
	}
	if string(p.RagPoisoning) == "null" {
		p.RagPoisoning = nil
	}
	*e = AseEvent(p)
	return nil
}
