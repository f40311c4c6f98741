package svc.policies.base

# default_allow_trusted_mutation: allow a state-mutating call when the hop's
# trust is trusted_internal_signed, trusted_internal_unsigned or
# semi_trusted_customer, and so is the chain's root trust unless it is ""
# (no upstream hop). A mutating call at unknown (or lower) trust gets no allow
# here, so unless another policy decides it is denied with no_matching_policy
# (fail closed).
results contains {"policy": "default_allow_trusted_mutation", "decision": "allow", "reason": "trusted_mutation"} if {
	input.trust_level in {"trusted_internal_signed", "trusted_internal_unsigned", "semi_trusted_customer"}
	input.root_trust_level in {"", "trusted_internal_signed", "trusted_internal_unsigned", "semi_trusted_customer"}
	mutating
}
