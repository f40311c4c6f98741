package actors

import "svc/persistence"

// AgentTransition is one operator status operation on an agent (CONTRACT
// §3): its name (the API's path segment), the action of its admin_action
// audit event, the statuses it applies to, and the status it leads to.
// The database applies it atomically (persistence TransitionAgent): from
// any other status it is a conflict.
type AgentTransition struct {
	Op, Action string
	From       []string
	To         string
}

// AgentTransitions are the operator transitions of an agent's lifecycle.
// Quarantine is not among them: it follows a recorded decision (SPEC 4.2
// rule 9, actors/aftercommit.go).
func AgentTransitions() []AgentTransition {
	return []AgentTransition{
		{"freeze", "agent_frozen", []string{persistence.AgentActive, persistence.AgentQuarantined}, persistence.AgentFrozen},
		{"unfreeze", "agent_unfrozen", []string{persistence.AgentFrozen}, persistence.AgentActive},
		{"restore", "agent_restored", []string{persistence.AgentQuarantined, persistence.AgentFrozen}, persistence.AgentActive},
		{"revoke", "agent_revoked", []string{persistence.AgentActive, persistence.AgentQuarantined, persistence.AgentFrozen}, persistence.AgentRevoked},
	}
}
