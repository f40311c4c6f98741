package svc.policies.base

# high_tier_mutation: require approval for every state-mutating call of a
# high-tier agent, whatever the trust (SPEC part 3, agent risk tier).
results contains {"policy": "high_tier_mutation", "decision": "require_approval", "reason": "high_risk_tier_mutation"} if {
	input.agent.risk_tier == "high"
	mutating
}
