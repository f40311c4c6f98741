// The Vercel AI SDK adapter (svc-sdk/adapters/ai) in generateText's own tool
// loop, with a scripted model, against a real svc gateway.

import { after, before, describe } from "node:test";
import assert from "node:assert/strict";
import { generateText, tool, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { z } from "zod";
import { Client } from "../../dist/index.js";
import { svcTool, svcTools, svcNeedsApproval, svcApprovalResponse, SvcToolRefused } from "../../dist/adapters/ai.js";
import { agentClient, skipReason, startSvc, stoppedGatewayUrl, test } from "./harness.mjs";

const skip = skipReason();
const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

/** A model that calls `toolName(input)` once, then answers with what it saw. */
function scriptedModel(toolName, input, toolCallId = "call-1") {
  return new MockLanguageModelV3({
    doGenerate: async (options) => {
      const last = options.prompt.at(-1);
      if (last.role === "tool") {
        return { content: [{ type: "text", text: "saw: " + JSON.stringify(last.content) }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] };
      }
      return {
        content: [{ type: "tool-call", toolCallId, toolName, input: JSON.stringify(input) }],
        finishReason: { unified: "tool-calls", raw: "tool_calls" },
        usage,
        warnings: [],
      };
    },
  });
}

/** A tool recording its calls. */
function recorder() {
  const calls = [];
  const t = tool({
    description: "records its input",
    inputSchema: z.object({ n: z.number().optional(), card: z.string().optional(), meta: z.record(z.string(), z.unknown()).optional() }),
    execute: async (input) => {
      calls.push(input);
      return { ok: true, got: input };
    },
  });
  return { t, calls };
}

/** What the model was shown about tool results on its last call. */
function seen(model) {
  return JSON.stringify(model.doGenerateCalls.at(-1).prompt.filter((m) => m.role === "tool"));
}

describe("ai adapter", () => {
  let svc;
  before(async () => {
    if (skip) return;
    svc = await startSvc();
  });
  after(async () => {
    await svc?.gw.close();
  });
  const newClient = (opts) => agentClient(Client, svc.fx, svc.gw.url, opts);

  test("allow: the tool runs with its input and the model sees the result", async () => {
    const { client } = await newClient();
    const { t, calls } = recorder();
    const model = scriptedModel("allow_tool", { n: 1 });
    const r = await generateText({ model, tools: svcTools(client, { allow_tool: t }), prompt: "go", stopWhen: stepCountIs(3) });
    assert.deepEqual(calls, [{ n: 1 }]);
    assert.match(r.text, /"ok":true/);
  });

  for (const [name, reason] of [["deny_tool", "fw_deny"], ["quarantine_tool", "fw_quarantine"]]) {
    test(`${name}: the tool does not run and the model reads the decision and reason`, async () => {
      const { client } = await newClient();
      const { t, calls } = recorder();
      const model = scriptedModel(name, { n: 2 });
      const r = await generateText({ model, tools: { [name]: svcTool(client, t, { tool: name }) }, prompt: "go", stopWhen: stepCountIs(3) });
      assert.deepEqual(calls, []);
      const s = seen(model);
      assert.match(s, new RegExp(reason));
      assert.match(s, name === "deny_tool" ? /decision: deny/ : /decision: quarantine/);
      const err = r.steps[0].content.find((p) => p.type === "tool-error");
      assert.ok(err instanceof Object && err.error instanceof SvcToolRefused, "a tool-error part carrying SvcToolRefused");
      assert.equal(err.error.info.reason, reason);
    });
  }

  test("deny with onRefusal 'result': the model reads a tool result { error, svc }", async () => {
    const { client } = await newClient();
    const { t, calls } = recorder();
    const model = scriptedModel("deny_tool", { n: 2 });
    await generateText({ model, tools: { deny_tool: svcTool(client, t, { tool: "deny_tool", onRefusal: "result" }) }, prompt: "go", stopWhen: stepCountIs(3) });
    assert.deepEqual(calls, []);
    const s = seen(model);
    assert.match(s, /"decision":"deny"/);
    assert.match(s, /"reason":"fw_deny"/);
  });

  test("redact: the tool gets the input without the redacted fields", async () => {
    const { client } = await newClient();
    const { t, calls } = recorder();
    const model = scriptedModel("redact_tool", { n: 3, card: "4111", meta: { ssn: "123", keep: "k" } });
    await generateText({ model, tools: svcTools(client, { redact_tool: t }), prompt: "go", stopWhen: stepCountIs(3) });
    assert.deepEqual(calls, [{ n: 3, meta: { keep: "k" } }]);
  });

  /** The framework's approval flow: a first generateText stops with a
   * tool-approval-request; the operator decides in svc; the application
   * answers the request; a second generateText runs the tool (or not). */
  async function approvalFlow(svcAction, params, frameworkApproved = true) {
    const { client, agent } = await newClient();
    const { t, calls } = recorder();
    const tools = svcTools(client, { approval_tool: t });
    const model = scriptedModel("approval_tool", { n: 4 }, "call-appr");
    const first = await generateText({ model, tools, prompt: "go", stopWhen: stepCountIs(3) });
    const req = first.content.find((p) => p.type === "tool-approval-request");
    assert.ok(req, "generateText stopped with a tool-approval-request");
    assert.equal(req.toolCall.toolName, "approval_tool");
    assert.deepEqual(calls, [], "nothing ran before the approval");
    const pending = tools.approval_tool.approvals.get("call-appr");
    assert.ok(pending?.approvalId, "the svc approval is known by toolCallId");
    const inSvc = await svc.fx.pendingApproval(agent.agent_id);
    assert.equal(inSvc.approval_id, pending.approvalId);
    await svc.fx.decide(pending.approvalId, svcAction, params);
    const messages = [
      { role: "user", content: "go" },
      ...first.response.messages,
      { role: "tool", content: [{ type: "tool-approval-response", approvalId: req.approvalId, approved: frameworkApproved }] },
    ];
    await generateText({ model, tools, messages, stopWhen: stepCountIs(3) });
    return { calls, model, pending };
  }

  test("require_approval: the AI SDK's approval request, approved in svc: runs", async () => {
    const { calls, model } = await approvalFlow("approve");
    assert.deepEqual(calls, [{ n: 4 }]);
    assert.match(seen(model), /"ok":true/);
  });

  test("require_approval: edited in svc: runs with the edited input", async () => {
    const { calls } = await approvalFlow("edit", { n: 40 });
    assert.deepEqual(calls, [{ n: 40 }]);
  });

  test("require_approval: rejected in svc: does not run, the model reads why", async () => {
    const { calls, model, pending } = await approvalFlow("reject");
    assert.deepEqual(calls, []);
    assert.match(seen(model), /rejected/);
    assert.match(seen(model), new RegExp(pending.approvalId));
  });

  test("require_approval: refused in the framework: does not run", async () => {
    const { calls } = await approvalFlow("approve", undefined, false);
    assert.deepEqual(calls, []);
  });

  test("require_approval with approval 'wait': execute waits for svc's approval", async () => {
    const { client, agent } = await newClient();
    const { t, calls } = recorder();
    const model = scriptedModel("approval_tool", { n: 5 });
    const approver = svc.fx.approver(agent.agent_id, "approve");
    await generateText({ model, tools: svcTools(client, { approval_tool: t }, { approval: "wait" }), prompt: "go", stopWhen: stepCountIs(3) });
    await approver;
    assert.deepEqual(calls, [{ n: 5 }]);
  });

  test("require_approval with approval 'result': the model reads the approval_id", async () => {
    const { client, agent } = await newClient();
    const { t, calls } = recorder();
    const model = scriptedModel("approval_tool", { n: 6 });
    await generateText({ model, tools: svcTools(client, { approval_tool: t }, { approval: "result" }), prompt: "go", stopWhen: stepCountIs(3) });
    assert.deepEqual(calls, []);
    const a = await svc.fx.pendingApproval(agent.agent_id);
    assert.match(seen(model), new RegExp(`approval_id: ${a.approval_id}`));
  });

  test("svc unreachable: fails closed (the tool does not run, the model reads why)", async () => {
    const url = await stoppedGatewayUrl();
    const { client } = await agentClient(Client, svc.fx, url, { timeout: 1, retries: 0 });
    const { t, calls } = recorder();
    for (const approval of ["framework", "wait"]) {
      const model = scriptedModel("allow_tool", { n: 7 });
      await generateText({ model, tools: svcTools(client, { allow_tool: t }, { approval }), prompt: "go", stopWhen: stepCountIs(3) });
      assert.match(seen(model), /unavailable/);
    }
    assert.deepEqual(calls, []);
  });

  test("svcNeedsApproval alone: allow runs; deny ends the generation; require_approval answered from svc", async () => {
    const { client, agent } = await newClient();
    const calls = [];
    const plain = (name) =>
      tool({
        inputSchema: z.object({ n: z.number() }),
        needsApproval: svcNeedsApproval(client, { tool: name }),
        execute: async (input) => {
          calls.push([name, input]);
          return "done";
        },
      });
    await generateText({ model: scriptedModel("allow_tool", { n: 1 }), tools: { allow_tool: plain("allow_tool") }, prompt: "go", stopWhen: stepCountIs(3) });
    assert.deepEqual(calls, [["allow_tool", { n: 1 }]]);

    await assert.rejects(
      generateText({ model: scriptedModel("deny_tool", { n: 2 }), tools: { deny_tool: plain("deny_tool") }, prompt: "go", stopWhen: stepCountIs(3) }),
      (e) => e instanceof SvcToolRefused || e?.cause instanceof SvcToolRefused || /fw_deny/.test(String(e?.message)),
    );
    assert.equal(calls.length, 1);

    const at = plain("approval_tool");
    const model = scriptedModel("approval_tool", { n: 3 }, "call-na");
    const first = await generateText({ model, tools: { approval_tool: at }, prompt: "go", stopWhen: stepCountIs(3) });
    const req = first.content.find((p) => p.type === "tool-approval-request");
    assert.ok(req);
    const approver = svc.fx.approver(agent.agent_id, "approve");
    const resp = await svcApprovalResponse(at.needsApproval, req, { timeout: 20 });
    await approver;
    assert.equal(resp.approved, true, resp.reason);
    await generateText({
      model,
      tools: { approval_tool: at },
      messages: [{ role: "user", content: "go" }, ...first.response.messages, { role: "tool", content: [resp] }],
      stopWhen: stepCountIs(3),
    });
    assert.deepEqual(calls.at(-1), ["approval_tool", { n: 3 }]);
  });
});
