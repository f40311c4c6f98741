package svc.policies.run_loop

results contains {"decision": "deny", "reason": "tool_loop"} if {
	input.run.tools[input.tool_call.tool][input.tool_call.action].attempts >= 5
}
