package svc.policies.base

# untrusted_mutation: deny a state-mutating call when the hop's trust or the
# chain's root trust is untrusted_external or malicious_suspected.
results contains {"policy": "untrusted_mutation", "decision": "deny", "reason": "untrusted_mutation"} if {
	input.trust_level in {"untrusted_external", "malicious_suspected"}
	mutating
}

results contains {"policy": "untrusted_mutation", "decision": "deny", "reason": "untrusted_mutation"} if {
	input.root_trust_level in {"untrusted_external", "malicious_suspected"}
	mutating
}
