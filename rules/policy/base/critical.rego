package svc.policies.base

# critical: deny every action the skill registry rates critical.
results contains {"policy": "critical", "decision": "deny", "reason": "critical_risk_action"} if {
	input.skill.risk == "critical"
}
