// The MCP adapter (svc-sdk/adapters/mcp): an MCP SDK Client calling a real
// McpServer (same package, in-memory transport) through svcCallTool, against
// a real svc gateway. Refusals are shaped as svc's own MCP proxy shapes them.

import { after, before, describe } from "node:test";
import assert from "node:assert/strict";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { z } from "zod";
import { Client } from "../../dist/index.js";
import { svcCallTool, svcMcpClient } from "../../dist/adapters/mcp.js";
import { agentClient, skipReason, startSvc, stoppedGatewayUrl, test } from "./harness.mjs";

const skip = skipReason();
const NAMES = ["allow_tool", "deny_tool", "quarantine_tool", "approval_tool", "redact_tool"];

/** An MCP server whose tools record their arguments; read_tool is marked read-only when `readOnly`. */
async function mcpPair({ readOnly = true } = {}) {
  const calls = [];
  const server = new McpServer({ name: "fw-test", version: "1.0.0" });
  const inputSchema = { n: z.number().optional(), card: z.string().optional(), meta: z.record(z.string(), z.unknown()).optional() };
  for (const name of [...NAMES, "read_tool"]) {
    const annotations = name === "read_tool" && readOnly ? { readOnlyHint: true } : undefined;
    server.registerTool(name, { description: name, inputSchema, ...(annotations ? { annotations } : {}) }, async (args) => {
      calls.push([name, args]);
      return { content: [{ type: "text", text: `ran ${name}` }] };
    });
  }
  const [a, b] = InMemoryTransport.createLinkedPair();
  await server.connect(a);
  const mcp = new McpClient({ name: "fw-client", version: "1.0.0" });
  await mcp.connect(b);
  return { mcp, server, calls };
}

describe("mcp adapter", () => {
  let svc;
  before(async () => {
    if (skip) return;
    svc = await startSvc();
    await svc.fx.mcpServer("fs", [...NAMES, "read_tool"]);
  });
  after(async () => {
    await svc?.gw.close();
  });
  const newClient = (opts) => agentClient(Client, svc.fx, svc.gw.url, opts);

  test("allow: forwarded with its arguments", async () => {
    const { client } = await newClient();
    const { mcp, calls } = await mcpPair();
    const callTool = svcCallTool(client, mcp, { serverKey: "fs" });
    const r = await callTool({ name: "allow_tool", arguments: { n: 1 } });
    assert.equal(r.isError, undefined);
    assert.equal(r.content[0].text, "ran allow_tool");
    assert.deepEqual(calls, [["allow_tool", { n: 1 }]]);
  });

  for (const [name, decision, reason] of [["deny_tool", "deny", "fw_deny"], ["quarantine_tool", "quarantine", "fw_quarantine"]]) {
    test(`${name}: not forwarded; isError with the proxy's structuredContent`, async () => {
      const { client } = await newClient();
      const { mcp, calls } = await mcpPair();
      const r = await svcCallTool(client, mcp, { serverKey: "fs" })({ name, arguments: { n: 2 } });
      assert.deepEqual(calls, []);
      assert.equal(r.isError, true);
      assert.equal(r.structuredContent.decision, decision);
      assert.equal(r.structuredContent.reason, reason);
      assert.match(r.structuredContent.decision_id, /^[0-9a-f-]{36}$/);
      assert.ok(r.structuredContent.receipt_id, "receipt_id");
      assert.match(r.content[0].text, new RegExp(reason));
    });
  }

  test("redact: forwarded without the redacted fields", async () => {
    const { client } = await newClient();
    const { mcp, calls } = await mcpPair();
    await svcCallTool(client, mcp, { serverKey: "fs" })({ name: "redact_tool", arguments: { n: 3, card: "4111", meta: { ssn: "1", keep: "k" } } });
    assert.deepEqual(calls, [["redact_tool", { n: 3, meta: { keep: "k" } }]]);
  });

  test("mutatesState false only for readOnlyHint tools (from tools/list)", async () => {
    const { client } = await newClient();
    const ro = await mcpPair({ readOnly: true });
    const r1 = await svcCallTool(client, ro.mcp, { serverKey: "fs" })({ name: "read_tool", arguments: { n: 1 } });
    assert.equal(r1.isError, undefined, JSON.stringify(r1));
    assert.deepEqual(ro.calls, [["read_tool", { n: 1 }]]);
    const rw = await mcpPair({ readOnly: false });
    const r2 = await svcCallTool(client, rw.mcp, { serverKey: "fs" })({ name: "read_tool", arguments: { n: 1 } });
    assert.equal(r2.isError, true);
    assert.equal(r2.structuredContent.reason, "fw_read_tool_mutates");
    assert.deepEqual(rw.calls, []);
  });

  test("the tool in svc is mcp:<serverKey>, the action the tool's name", async () => {
    const { client, agent } = await newClient();
    const { mcp } = await mcpPair();
    const r = await svcCallTool(client, mcp, { serverKey: "fs", wait: false })({ name: "approval_tool", arguments: { n: 1 } });
    assert.equal(r.isError, true);
    const a = await svc.fx.pendingApproval(agent.agent_id);
    assert.equal(a.tool_call.tool, "mcp:fs");
    assert.equal(a.tool_call.action, "approval_tool");
    assert.deepEqual(a.tool_call.parameters, { n: 1 });
  });

  test("require_approval, wait false: not forwarded; isError naming the approval", async () => {
    const { client, agent } = await newClient();
    const { mcp, calls } = await mcpPair();
    const r = await svcCallTool(client, mcp, { serverKey: "fs", wait: false })({ name: "approval_tool", arguments: { n: 4 } });
    assert.deepEqual(calls, []);
    const a = await svc.fx.pendingApproval(agent.agent_id);
    assert.equal(r.isError, true);
    assert.deepEqual(Object.keys(r.structuredContent).sort(), ["approval_expires_at", "approval_id", "decision", "decision_id", "reason"]);
    assert.equal(r.structuredContent.decision, "require_approval");
    assert.equal(r.structuredContent.approval_id, a.approval_id);
  });

  test("require_approval: waits; approved: forwarded; edited: forwards the edit; rejected: isError, not forwarded", async () => {
    for (const [action, params, want] of [["approve", undefined, { n: 5 }], ["edit", { n: 50 }, { n: 50 }], ["reject", undefined, null]]) {
      const { client, agent } = await newClient();
      const { mcp, calls } = await mcpPair();
      const guarded = svcMcpClient(client, mcp, { serverKey: "fs" });
      const approver = svc.fx.approver(agent.agent_id, action, params);
      const r = await guarded.callTool({ name: "approval_tool", arguments: { n: 5 } });
      await approver;
      if (want) {
        assert.equal(r.isError, undefined, JSON.stringify(r));
        assert.deepEqual(calls, [["approval_tool", want]]);
      } else {
        assert.equal(r.isError, true);
        assert.equal(r.structuredContent.reason, "approval_rejected");
        assert.deepEqual(calls, []);
      }
      // the rest of the client is the client's own
      assert.equal((await guarded.listTools()).tools.length, 6);
    }
  });

  test("svc unreachable: not forwarded (fail closed)", async () => {
    const url = await stoppedGatewayUrl();
    const { client } = await agentClient(Client, svc.fx, url, { timeout: 1, retries: 0 });
    const { mcp, calls } = await mcpPair();
    const r = await svcCallTool(client, mcp, { serverKey: "fs" })({ name: "allow_tool", arguments: { n: 6 } });
    assert.deepEqual(calls, []);
    assert.equal(r.isError, true);
    assert.equal(r.structuredContent.reason, "svc_unavailable");
  });
});
