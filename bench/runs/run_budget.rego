package svc.policies.run_budget

results contains {"decision": "require_approval", "reason": "run_budget_exceeded"} if {
	input.tool_call.tool == "payments"
	input.tool_call.action == "pay"
	object.get(input.run.sums, "payments/pay.amount", 0) + input.tool_call.parameters.amount > 1000
}
