package svc.policies.base

# default_allow_read: allow a call that does not mutate state, at any trust.
results contains {"policy": "default_allow_read", "decision": "allow", "reason": "read_only"} if {
	not mutating
}
