package svc.policies.run_exfil

results contains {"decision": "deny", "reason": "egress_after_untrusted_content"} if {
	input.run.trust.untrusted_seen
	"egress" in input.skill.labels
}
