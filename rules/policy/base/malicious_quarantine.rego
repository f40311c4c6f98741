package svc.policies.base

# malicious_quarantine: quarantine the agent that attempts a state-mutating
# call when the hop's trust or the chain's root trust is malicious_suspected.
results contains {"policy": "malicious_quarantine", "decision": "quarantine", "reason": "malicious_mutation"} if {
	input.trust_level == "malicious_suspected"
	mutating
}

results contains {"policy": "malicious_quarantine", "decision": "quarantine", "reason": "malicious_mutation"} if {
	input.root_trust_level == "malicious_suspected"
	mutating
}
