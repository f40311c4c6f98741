package svc.policies.run_tainted

results contains {"decision": "require_approval", "reason": "tainted_run_mutation"} if {
	input.run.trust.min in {"untrusted_external", "malicious_suspected"}
	input.mutates_state
}
