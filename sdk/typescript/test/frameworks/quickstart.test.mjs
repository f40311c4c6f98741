// The quick starts of README.md (section "Framework adapters"), run as written (relative imports
// instead of svc-sdk/adapters/*, scripted models, and the operator deciding
// in svc where the README says "decide it in svc").

import { after, before, describe } from "node:test";
import assert from "node:assert/strict";
import { skipReason, startSvc, test } from "./harness.mjs";
import { Client } from "../../dist/index.js";

const skip = skipReason();

describe("README quick starts", () => {
  let live;
  before(async () => {
    if (skip) return;
    live = await startSvc();
    await live.fx.mcpServer("github", ["create_issue"]);
  });
  after(async () => {
    await live?.gw.close();
  });
  /** The agent's token, as SVC_AGENT_TOKEN would hold it. */
  async function env() {
    const agent = await live.fx.agent({ signing_key: undefined }); // no request signing: the README's client has no signingKey
    return { SVC_URL: live.gw.url, SVC_AGENT_TOKEN: agent.agent_token, agent };
  }
  /** Approve the agent's pending approval in svc (the human's part). */
  const decideInSvc = async (agent, approvalId) => {
    const a = await live.fx.pendingApproval(agent.agent_id);
    assert.equal(a.approval_id, approvalId);
    await live.fx.decide(approvalId, "approve");
  };

  test("Vercel AI SDK", async () => {
    const { generateText, tool, stepCountIs } = await import("ai");
    const { MockLanguageModelV3 } = await import("ai/test");
    const { z } = await import("zod");
    const { svcTools } = await import("../../dist/adapters/ai.js");
    const e = await env();
    const sent = [];
    const mailer = { send: async (to, body) => (sent.push({ to, body }), "sent") };
    const usage = { inputTokens: { total: 1 }, outputTokens: { total: 1 } };
    const model = new MockLanguageModelV3({
      doGenerate: async ({ prompt }) =>
        prompt.at(-1).role === "tool"
          ? { content: [{ type: "text", text: "done" }], finishReason: { unified: "stop" }, usage, warnings: [] }
          : { content: [{ type: "tool-call", toolCallId: "c1", toolName: "send_email", input: '{"to":"bob@example.com","body":"hi"}' }], finishReason: { unified: "tool-calls" }, usage, warnings: [] },
    });
    const prompt = "email bob";
    const history = [{ role: "user", content: prompt }];

    const svc = new Client({ baseUrl: e.SVC_URL, agentToken: e.SVC_AGENT_TOKEN });
    const tools = svcTools(svc, {
      send_email: tool({
        description: "Send an email",
        inputSchema: z.object({ to: z.string(), body: z.string() }),
        execute: async ({ to, body }) => mailer.send(to, body),
      }),
    });
    const first = await generateText({ model, tools, prompt, stopWhen: stepCountIs(5) });
    const reqs = first.content.filter((p) => p.type === "tool-approval-request");
    assert.equal(reqs.length, 1);
    const req = reqs[0];
    const pending = tools[req.toolCall.toolName].approvals.get(req.toolCall.toolCallId);
    await decideInSvc(e.agent, pending.approvalId);
    const messages = [...history, ...first.response.messages,
      { role: "tool", content: [{ type: "tool-approval-response", approvalId: req.approvalId, approved: true }] }];
    await generateText({ model, tools, messages, stopWhen: stepCountIs(5) });
    assert.deepEqual(sent, [{ to: "bob@example.com", body: "hi" }]);
  });

  test("OpenAI Agents SDK", async () => {
    const { Agent, run, tool, Usage, setTracingDisabled } = await import("@openai/agents");
    const { z } = await import("zod");
    const { svcFunctionTool } = await import("../../dist/adapters/openai-agents.js");
    setTracingDisabled(true);
    const e = await env();
    const refunds = [];
    const doRefund = async (a) => (refunds.push(a), "refunded");
    const model = {
      async getResponse(req) {
        const last = Array.isArray(req.input) ? req.input.at(-1) : null;
        return last?.type === "function_call_result"
          ? { usage: new Usage(), output: [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "done" }] }] }
          : { usage: new Usage(), output: [{ type: "function_call", callId: "r1", name: "refund", arguments: '{"order":"42","amount":10}', status: "completed" }] };
      },
      async *getStreamedResponse() {},
    };
    const waitUntilDecidedInSvc = (approvalId) => decideInSvc(e.agent, approvalId);

    const svc = new Client({ baseUrl: e.SVC_URL, agentToken: e.SVC_AGENT_TOKEN });
    const refund = svcFunctionTool(svc, tool({ name: "refund", description: "Refund an order",
      parameters: z.object({ order: z.string(), amount: z.number() }), execute: doRefund }));
    const agent = new Agent({ name: "support", model, tools: [refund] });
    let result = await run(agent, "refund order 42");
    let rounds = 0;
    while (result.interruptions.length) {
      rounds++;
      for (const item of result.interruptions) {
        const pending = refund.approvals.get(item.rawItem.callId);
        await waitUntilDecidedInSvc(pending.approvalId);
        result.state.approve(item);
      }
      result = await run(agent, result.state);
    }
    assert.equal(rounds, 1);
    assert.deepEqual(refunds, [{ order: "42", amount: 10 }]);
  });

  test("LangChain.js / LangGraph.js", async () => {
    const { createAgent, FakeToolCallingModel, tool } = await import("langchain");
    const { Command, MemorySaver } = await import("@langchain/langgraph");
    const { z } = await import("zod");
    const { svcMiddleware } = await import("../../dist/adapters/langchain.js");
    const e = await env();
    const deleted = [];
    const tools = [tool(async (a) => (deleted.push(a), "deleted"), { name: "delete_branch", description: "Delete a branch", schema: z.object({ branch: z.string() }) })];
    const model = new FakeToolCallingModel({ toolCalls: [[{ name: "delete_branch", args: { branch: "stale" }, id: "d1" }], []] });

    const svc = new Client({ baseUrl: e.SVC_URL, agentToken: e.SVC_AGENT_TOKEN });
    const agent = createAgent({ model, tools, middleware: [svcMiddleware(svc)], checkpointer: new MemorySaver() });
    const config = { configurable: { thread_id: "t1" } };
    let out = await agent.invoke({ messages: [{ role: "user", content: "delete the stale branch" }] }, config);
    assert.equal(out.__interrupt__?.[0]?.value.type, "svc_approval");
    const { approval_id } = out.__interrupt__[0].value;
    await decideInSvc(e.agent, approval_id);
    out = await agent.invoke(new Command({ resume: { approved: true } }), config);
    assert.deepEqual(deleted, [{ branch: "stale" }]);
  });

  test("MCP clients", async () => {
    const { McpServer } = await import("@modelcontextprotocol/sdk/server/mcp.js");
    const { Client: McpClient } = await import("@modelcontextprotocol/sdk/client/index.js");
    const { InMemoryTransport } = await import("@modelcontextprotocol/sdk/inMemory.js");
    const { z } = await import("zod");
    const { svcMcpClient } = await import("../../dist/adapters/mcp.js");
    const e = await env();
    const created = [];
    const server = new McpServer({ name: "github", version: "1.0.0" });
    server.registerTool("create_issue", { inputSchema: { title: z.string() } }, async (a) => (created.push(a), { content: [{ type: "text", text: "ok" }] }));
    const [a, b] = InMemoryTransport.createLinkedPair();
    await server.connect(a);
    const connectedMcpClient = new McpClient({ name: "app", version: "1.0.0" });
    await connectedMcpClient.connect(b);

    const svc = new Client({ baseUrl: e.SVC_URL, agentToken: e.SVC_AGENT_TOKEN });
    const mcp = svcMcpClient(svc, connectedMcpClient, { serverKey: "github" });
    const result = await mcp.callTool({ name: "create_issue", arguments: { title: "..." } });
    assert.equal(result.isError, true);
    assert.equal(result.structuredContent.decision, "deny");
    assert.equal(result.structuredContent.reason, "fw_quickstart_deny");
    assert.deepEqual(created, []);
  });
});
