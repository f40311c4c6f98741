// The LangChain.js / LangGraph.js adapter (svc-sdk/adapters/langchain): a
// wrapToolCall middleware in createAgent's own loop, with a scripted model,
// against a real svc gateway; require_approval as LangGraph's interrupt()
// (with a checkpointer) or svc's wait (without).

import { after, before, describe } from "node:test";
import assert from "node:assert/strict";
import { createAgent, FakeToolCallingModel, tool, ToolMessage } from "langchain";
import { Command, MemorySaver } from "@langchain/langgraph";
import { z } from "zod";
import { Client } from "../../dist/index.js";
import { svcMiddleware } from "../../dist/adapters/langchain.js";
import { agentClient, skipReason, startSvc, stoppedGatewayUrl, test } from "./harness.mjs";

const skip = skipReason();

/** Calls `name(args)` once, then answers; records what it was shown. */
class ScriptedModel extends FakeToolCallingModel {
  constructor(name, args, id = "call-1") {
    super({ toolCalls: [[{ name, args, id }], []] });
    this.seenMessages = [];
  }
  bindTools() {
    return this; // the base class returns a copy, which would record elsewhere
  }
  async _generate(messages, options, runManager) {
    this.seenMessages.push(messages);
    return super._generate(messages, options, runManager);
  }
  /** The tool messages of the model's last call. */
  seen() {
    const last = this.seenMessages.at(-1) ?? [];
    return JSON.stringify(last.filter((m) => ToolMessage.isInstance(m)).map((m) => ({ content: m.content, status: m.status })));
  }
}

function recorder(name) {
  const calls = [];
  const t = tool(
    async (input) => {
      calls.push(input);
      return `ran ${name} with ${JSON.stringify(input)}`;
    },
    {
      name,
      description: "records its input",
      schema: z.object({ n: z.number().optional(), card: z.string().optional(), meta: z.record(z.string(), z.unknown()).optional() }),
    },
  );
  return { t, calls };
}

describe("langchain adapter", () => {
  let svc;
  before(async () => {
    if (skip) return;
    svc = await startSvc();
  });
  after(async () => {
    await svc?.gw.close();
  });
  const newClient = (opts) => agentClient(Client, svc.fx, svc.gw.url, opts);

  async function runOnce(client, name, args, opts) {
    const { t, calls } = recorder(name);
    const model = new ScriptedModel(name, args);
    const agent = createAgent({ model, tools: [t], middleware: [svcMiddleware(client, opts)] });
    const result = await agent.invoke({ messages: [{ role: "user", content: "go" }] });
    return { calls, model, result };
  }

  test("allow: runs with its args; the model sees the result", async () => {
    const { client } = await newClient();
    const { calls, model } = await runOnce(client, "allow_tool", { n: 1 });
    assert.deepEqual(calls, [{ n: 1 }]);
    assert.match(model.seen(), /ran allow_tool/);
  });

  // deny: the refusal's ToolMessage built by the framework's own handler
  // (@langchain/core is not resolvable from svc-sdk's dist here); quarantine:
  // built by the toolMessage option, as an error ToolMessage.
  for (const [name, reason, decision, opts] of [
    ["deny_tool", "fw_deny", "deny", {}],
    ["quarantine_tool", "fw_quarantine", "quarantine", { toolMessage: (f) => new ToolMessage(f) }],
  ]) {
    test(`${name}: does not run; the model reads a ToolMessage naming decision and reason`, async () => {
      const { client } = await newClient();
      const { calls, model } = await runOnce(client, name, { n: 2 }, opts);
      assert.deepEqual(calls, []);
      assert.match(model.seen(), new RegExp(`decision: ${decision}, reason: ${reason}`));
      if (opts.toolMessage) assert.match(model.seen(), /"status":"error"/);
    });
  }

  test("redact: the tool gets the args without the redacted fields", async () => {
    const { client } = await newClient();
    const { calls } = await runOnce(client, "redact_tool", { n: 3, card: "4111", meta: { ssn: "1", keep: "k" } });
    assert.deepEqual(calls, [{ n: 3, meta: { keep: "k" } }]);
  });

  test("require_approval without a checkpointer: waits for svc (approved: runs; edited: runs the edit)", async () => {
    for (const [action, params, want] of [["approve", undefined, { n: 4 }], ["edit", { n: 41 }, { n: 41 }]]) {
      const { client, agent } = await newClient();
      const approver = svc.fx.approver(agent.agent_id, action, params);
      const { calls } = await runOnce(client, "approval_tool", { n: 4 });
      await approver;
      assert.deepEqual(calls, [want]);
    }
  });

  /** With a checkpointer: interrupt(), decide in svc, resume. */
  async function interruptFlow(svcAction, params, resume = { approved: true }) {
    const { client, agent: svcAgent } = await newClient();
    const { t, calls } = recorder("approval_tool");
    const model = new ScriptedModel("approval_tool", { n: 5 }, "call-int");
    const agent = createAgent({ model, tools: [t], middleware: [svcMiddleware(client)], checkpointer: new MemorySaver() });
    const config = { configurable: { thread_id: `t-${Math.random()}` } };
    const first = await agent.invoke({ messages: [{ role: "user", content: "go" }] }, config);
    const intr = first.__interrupt__;
    assert.ok(Array.isArray(intr) && intr.length === 1, "the run paused with one interrupt");
    assert.equal(intr[0].value.type, "svc_approval");
    assert.deepEqual(calls, []);
    const a = await svc.fx.pendingApproval(svcAgent.agent_id);
    assert.equal(intr[0].value.approval_id, a.approval_id);
    await svc.fx.decide(a.approval_id, svcAction, params);
    const second = await agent.invoke(new Command({ resume }), config);
    const approvals = await svc.fx.approvals(svcAgent.agent_id);
    return { calls, model, second, approvalId: a.approval_id, approvals };
  }

  test("require_approval with a checkpointer: LangGraph interrupt(); approved in svc, resumed: runs once", async () => {
    const { calls, model, approvals } = await interruptFlow("approve");
    assert.deepEqual(calls, [{ n: 5 }]);
    assert.match(model.seen(), /ran approval_tool/);
    assert.equal(approvals.length, 1, "one svc approval for the call, though the node ran twice");
  });

  test("require_approval with a checkpointer: edited in svc: runs the edited args", async () => {
    const { calls } = await interruptFlow("edit", { n: 55 });
    assert.deepEqual(calls, [{ n: 55 }]);
  });

  test("require_approval with a checkpointer: rejected in svc: does not run; the model reads it", async () => {
    const { calls, model, approvalId } = await interruptFlow("reject");
    assert.deepEqual(calls, []);
    assert.match(model.seen(), /rejected/);
    assert.match(model.seen(), new RegExp(approvalId));
  });

  test("require_approval with a checkpointer: resumed with { approved: false }: does not run", async () => {
    const { calls, model } = await interruptFlow("approve", undefined, { approved: false });
    assert.deepEqual(calls, []);
    assert.match(model.seen(), /refused when the run was resumed/);
  });

  test("require_approval with approval 'result': the model reads the approval_id", async () => {
    const { client, agent } = await newClient();
    const { calls, model } = await runOnce(client, "approval_tool", { n: 6 }, { approval: "result" });
    assert.deepEqual(calls, []);
    const a = await svc.fx.pendingApproval(agent.agent_id);
    assert.match(model.seen(), new RegExp(`approval_id: ${a.approval_id}`));
  });

  test("svc unreachable: fails closed (with and without a checkpointer)", async () => {
    const url = await stoppedGatewayUrl();
    const { client } = await agentClient(Client, svc.fx, url, { timeout: 1, retries: 0 });
    const a = await runOnce(client, "allow_tool", { n: 7 });
    assert.deepEqual(a.calls, []);
    assert.match(a.model.seen(), /unavailable/);
    const { t, calls } = recorder("allow_tool");
    const model = new ScriptedModel("allow_tool", { n: 7 });
    const agent = createAgent({ model, tools: [t], middleware: [svcMiddleware(client)], checkpointer: new MemorySaver() });
    await agent.invoke({ messages: [{ role: "user", content: "go" }] }, { configurable: { thread_id: "down" } });
    assert.deepEqual(calls, []);
    assert.match(model.seen(), /unavailable/);
  });
});
