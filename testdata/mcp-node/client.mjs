// An MCP client of the TypeScript SDK (1.x: @modelcontextprotocol/sdk, 2.x:
// @modelcontextprotocol/client) driven by cmd/svc/e2e_mcpnode_test.go:
//
//   node client.mjs <v1|v2> <endpoint> <agent token> '<plan JSON>'
//
// The plan is a list of calls {name, arguments, progress}; the client
// connects, lists the tools, makes each call, ends the session, and writes
// one JSON object a line: {"tools": [...], "protocol": ...}, then one
// {"name", "isError", "structuredContent", "text", "progress": [ms, ...],
// "ms", "error"} per call.
const [which, endpoint, token, planJSON] = process.argv.slice(2);
const plan = JSON.parse(planJSON || "[]");
let Client, Transport;
if (which === "v1") {
  ({ Client } = await import("@modelcontextprotocol/sdk/client/index.js"));
  ({ StreamableHTTPClientTransport: Transport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js"));
} else {
  ({ Client, StreamableHTTPClientTransport: Transport } = await import("@modelcontextprotocol/client"));
}
const withToken = (url, init) => {
  const h = new Headers(init?.headers);
  h.set("authorization", "Bearer " + token);
  return fetch(url, { ...init, headers: h });
};
const client = new Client({ name: "svc-e2e-" + which, version: "1.0.0" }, { capabilities: {} });
const transport = new Transport(new URL(endpoint), { fetch: withToken });
await client.connect(transport);
const tools = await client.listTools();
console.log(JSON.stringify({ tools: tools.tools.map((t) => t.name).sort(), protocol: transport.protocolVersion ?? null,
  session: transport.sessionId ?? null }));
for (const c of plan) {
  const start = Date.now();
  const progress = [];
  const onprogress = () => progress.push(Date.now() - start);
  const out = { name: c.name, progress };
  try {
    const params = { name: c.name, arguments: c.arguments ?? {} };
    const r = which === "v1"
      ? await client.callTool(params, undefined, c.progress ? { onprogress } : undefined)
      : await client.callTool(params, c.progress ? { onprogress } : undefined);
    out.isError = !!r.isError;
    out.structuredContent = r.structuredContent ?? null;
    out.text = (r.content ?? []).filter((x) => x.type === "text").map((x) => x.text).join("");
  } catch (e) {
    out.error = String(e?.message ?? e);
  }
  out.ms = Date.now() - start;
  console.log(JSON.stringify(out));
}
await transport.terminateSession?.();
await client.close();
