package svc.policies.base

# mcp_unknown_tool: deny a tool "mcp:<server_key>" unless its server is known
# and active and its tool known and approved. A missing "mcp" object is an
# unknown server (fail closed).
results contains {"policy": "mcp_unknown_tool", "decision": "deny", "reason": reason} if {
	startswith(input.tool_call.tool, "mcp:")
	reason := mcp_denial
}

mcp_server_status := s if {
	s := input.mcp.server_status
} else := ""

mcp_tool_status := s if {
	s := input.mcp.tool_status
} else := ""

mcp_denial := "mcp_unknown_server" if {
	mcp_server_status == ""
} else := "mcp_server_quarantined" if {
	mcp_server_status == "quarantined"
} else := "mcp_server_not_active" if {
	mcp_server_status != "active"
} else := "mcp_unknown_tool" if {
	mcp_tool_status == ""
} else := "mcp_tool_not_approved" if {
	mcp_tool_status != "approved"
}
