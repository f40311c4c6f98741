// Package mcpguard authorizes every tools/call of a go-sdk MCP client
// (github.com/modelcontextprotocol/go-sdk/mcp) through svc before it is
// sent, for applications that talk to MCP servers directly rather than
// through svc's inline MCP proxy.
//
// Install a [Guard] on the client once; every session it connects is then
// guarded, and session.CallTool needs no wrapper:
//
//	svc, _ := svcsdk.New(url, agentToken, svcsdk.WithSigningKey(key))
//	guard, _ := mcpguard.New(svc, mcpguard.Options{ServerKey: "github"})
//	client := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil)
//	guard.Install(client)
//	session, _ := client.Connect(ctx, transport, nil)
//	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "create_issue", Arguments: args})
//
// The call is authorized as svc's inline proxy authorizes it (CONTRACT §15):
// tool "mcp:<ServerKey>", action the tool's name, parameters its arguments,
// mutates_state false only when the tool's annotations say readOnlyHint,
// trace.run_id from _meta["svc/run_id"]. allow sends the call; redact sends
// it without the redacted fields; deny, quarantine and an approval that is
// pending, rejected or expired answer a CallToolResult with IsError set and
// the decision in StructuredContent, without sending anything (the model
// reads it, as from the proxy); require_approval waits for the approval
// (Options.NoWait: answers at once). svc unreachable, or any other failure
// of the SDK, is a Go error from CallTool, and nothing is sent (fail
// closed).
package mcpguard
