package svc.policies.run_verify_first

verified if input.run.tools.payments.verify.allowed > 0

results contains {"decision": "deny", "reason": "pay_without_verify"} if {
	input.tool_call.tool == "payments"
	input.tool_call.action == "pay"
	not verified
}
