# The tenant policy the load generator installs on svc (POST /v2/policies,
# name bench_redact) and OPA loads beside the base set: redact the card
# number of a payment charge. cmd/loadgen reads this very file
# (-tenant-policy), so both servers evaluate the same module.
package svc.policies.bench_redact

results contains {"decision": "redact", "reason": "card_number_redacted", "redact_fields": ["parameters.card_number"]} if {
	input.tool_call.action == "charge"
	input.tool_call.parameters.card_number
}
