// The OpenAI Agents SDK adapter (svc-sdk/adapters/openai-agents) in the
// Runner's own tool loop, with a scripted Model, against a real svc gateway.

import { after, before, describe } from "node:test";
import assert from "node:assert/strict";
import { Agent, run, tool, Usage, setTracingDisabled } from "@openai/agents";
import { Client } from "../../dist/index.js";
import { svcFunctionTool, svcNeedsApproval, svcToolInputGuardrail } from "../../dist/adapters/openai-agents.js";
import { agentClient, skipReason, startSvc, stoppedGatewayUrl, test } from "./harness.mjs";

setTracingDisabled(true);
const skip = skipReason();

/** A Model that calls `toolName(input)` once, then answers with the tool output it saw. */
class ScriptedModel {
  constructor(toolName, input, callId = "call-1") {
    Object.assign(this, { toolName, input, callId, requests: [] });
  }
  async getResponse(request) {
    this.requests.push(request);
    const items = Array.isArray(request.input) ? request.input : [];
    const last = items.at(-1);
    if (last && last.type === "function_call_result") {
      return { usage: new Usage(), output: [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "saw: " + JSON.stringify(last.output) }] }] };
    }
    return {
      usage: new Usage(),
      output: [{ type: "function_call", callId: this.callId, name: this.toolName, arguments: JSON.stringify(this.input), status: "completed" }],
    };
  }
  async *getStreamedResponse() {
    throw new Error("not scripted");
  }
  /** The tool output the model was shown last. */
  seen() {
    const items = this.requests.at(-1)?.input ?? [];
    return JSON.stringify(items.filter((i) => i.type === "function_call_result"));
  }
}

const schema = { type: "object", properties: { n: { type: "number" }, card: { type: "string" }, meta: { type: "object" } }, required: [], additionalProperties: true };

function recorder(name, extra = {}) {
  const calls = [];
  const t = tool({
    name,
    description: "records its input",
    parameters: schema,
    strict: false,
    execute: async (input) => {
      calls.push(input);
      return `ran ${name} with ${JSON.stringify(input)}`;
    },
    ...extra,
  });
  return { t, calls };
}

describe("openai-agents adapter", () => {
  let svc;
  before(async () => {
    if (skip) return;
    svc = await startSvc();
  });
  after(async () => {
    await svc?.gw.close();
  });
  const newClient = (opts) => agentClient(Client, svc.fx, svc.gw.url, opts);

  async function runOnce(client, name, input, opts) {
    const { t, calls } = recorder(name);
    const model = new ScriptedModel(name, input);
    const agent = new Agent({ name: "a", model, tools: [svcFunctionTool(client, t, opts)] });
    const result = await run(agent, "go");
    return { calls, model, result };
  }

  test("svcFunctionTool allow: runs with its input, the model sees the output", async () => {
    const { client } = await newClient();
    const { calls, result } = await runOnce(client, "allow_tool", { n: 1 });
    assert.deepEqual(calls, [{ n: 1 }]);
    assert.match(result.finalOutput, /ran allow_tool/);
  });

  for (const [name, reason, decision] of [["deny_tool", "fw_deny", "deny"], ["quarantine_tool", "fw_quarantine", "quarantine"]]) {
    test(`svcFunctionTool ${name}: does not run; the model reads decision and reason`, async () => {
      const { client } = await newClient();
      const { calls, model } = await runOnce(client, name, { n: 2 });
      assert.deepEqual(calls, []);
      assert.match(model.seen(), new RegExp(`decision: ${decision}, reason: ${reason}`));
    });
  }

  test("svcFunctionTool redact: the tool gets the input without the redacted fields", async () => {
    const { client } = await newClient();
    const { calls } = await runOnce(client, "redact_tool", { n: 3, card: "4111", meta: { ssn: "1", keep: "k" } });
    assert.deepEqual(calls, [{ n: 3, meta: { keep: "k" } }]);
  });

  /** require_approval as the run's interruption; decided in svc; approved or rejected in the run state. */
  async function interruptionFlow(svcAction, params, approveInRun = true) {
    const { client, agent: svcAgent } = await newClient();
    const { t, calls } = recorder("approval_tool");
    const model = new ScriptedModel("approval_tool", { n: 4 }, "call-appr");
    const guarded = svcFunctionTool(client, t);
    const agent = new Agent({ name: "a", model, tools: [guarded] });
    const first = await run(agent, "go");
    assert.equal(first.interruptions.length, 1, "the run stopped with an approval interruption");
    assert.deepEqual(calls, []);
    const pending = guarded.approvals.get("call-appr");
    assert.ok(pending?.approvalId);
    assert.equal((await svc.fx.pendingApproval(svcAgent.agent_id)).approval_id, pending.approvalId);
    await svc.fx.decide(pending.approvalId, svcAction, params);
    if (approveInRun) first.state.approve(first.interruptions[0]);
    else first.state.reject(first.interruptions[0]);
    const second = await run(agent, first.state);
    return { calls, model, second, pending };
  }

  test("require_approval: an interruption; approved in svc and in the run: runs", async () => {
    const { calls, second } = await interruptionFlow("approve");
    assert.deepEqual(calls, [{ n: 4 }]);
    assert.match(second.finalOutput, /ran approval_tool/);
  });

  test("require_approval: edited in svc: runs with the edited input", async () => {
    const { calls } = await interruptionFlow("edit", { n: 44 });
    assert.deepEqual(calls, [{ n: 44 }]);
  });

  test("require_approval: rejected in svc: does not run; the model reads it", async () => {
    const { calls, model, pending } = await interruptionFlow("reject");
    assert.deepEqual(calls, []);
    assert.match(model.seen(), /rejected/);
    assert.match(model.seen(), new RegExp(pending.approvalId));
  });

  test("require_approval: rejected in the run state: does not run", async () => {
    const { calls } = await interruptionFlow("approve", undefined, false);
    assert.deepEqual(calls, []);
  });

  test("require_approval with approval 'wait': waits for svc, then runs", async () => {
    const { client, agent } = await newClient();
    const approver = svc.fx.approver(agent.agent_id, "approve");
    const { calls } = await runOnce(client, "approval_tool", { n: 5 }, { approval: "wait" });
    await approver;
    assert.deepEqual(calls, [{ n: 5 }]);
  });

  test("require_approval with approval 'result': the model reads the approval_id", async () => {
    const { client, agent } = await newClient();
    const { calls, model } = await runOnce(client, "approval_tool", { n: 6 }, { approval: "result" });
    assert.deepEqual(calls, []);
    const a = await svc.fx.pendingApproval(agent.agent_id);
    assert.match(model.seen(), new RegExp(`approval_id: ${a.approval_id}`));
  });

  async function guardrailRun(client, name, input, { needsApproval, approvals, approval } = {}) {
    const g = svcToolInputGuardrail(client, { approvals, approval });
    const { t, calls } = recorder(name, { inputGuardrails: [g], ...(needsApproval ? { needsApproval } : {}) });
    const model = new ScriptedModel(name, input, "call-g");
    const agent = new Agent({ name: "a", model, tools: [t] });
    return { calls, model, agent, result: await run(agent, "go") };
  }

  test("guardrail: allow runs; deny, quarantine and redact are rejected with a message the model reads", async () => {
    const { client } = await newClient();
    let r = await guardrailRun(client, "allow_tool", { n: 1 });
    assert.deepEqual(r.calls, [{ n: 1 }]);
    r = await guardrailRun(client, "deny_tool", { n: 2 });
    assert.deepEqual(r.calls, []);
    assert.match(r.model.seen(), /decision: deny, reason: fw_deny/);
    r = await guardrailRun(client, "redact_tool", { n: 3, card: "4111" });
    assert.deepEqual(r.calls, []);
    assert.match(r.model.seen(), /redacted/);
    const q = await newClient();
    r = await guardrailRun(q.client, "quarantine_tool", { n: 4 });
    assert.deepEqual(r.calls, []);
    assert.match(r.model.seen(), /decision: quarantine, reason: fw_quarantine/);
  });

  test("guardrail + svcNeedsApproval: svc's require_approval is the run's interruption; approved in svc: runs; edited: refused", async () => {
    for (const [action, params] of [["approve", undefined], ["edit", { n: 70 }]]) {
      const { client, agent: svcAgent } = await newClient();
      const needsApproval = svcNeedsApproval(client, "approval_tool");
      const r = await guardrailRun(client, "approval_tool", { n: 7 }, { needsApproval, approvals: needsApproval.approvals });
      assert.equal(r.result.interruptions.length, 1);
      assert.deepEqual(r.calls, []);
      const a = await svc.fx.pendingApproval(svcAgent.agent_id);
      await svc.fx.decide(a.approval_id, action, params);
      r.result.state.approve(r.result.interruptions[0]);
      await run(r.agent, r.result.state);
      if (action === "approve") assert.deepEqual(r.calls, [{ n: 7 }]);
      else {
        assert.deepEqual(r.calls, []);
        assert.match(r.model.seen(), /edited/);
      }
    }
  });

  test("guardrail alone on require_approval: waits for svc (approved: runs)", async () => {
    const { client, agent } = await newClient();
    const approver = svc.fx.approver(agent.agent_id, "approve");
    const r = await guardrailRun(client, "approval_tool", { n: 8 });
    await approver;
    assert.deepEqual(r.calls, [{ n: 8 }]);
  });

  test("svc unreachable: fails closed (tool wrapper and guardrail)", async () => {
    const url = await stoppedGatewayUrl();
    const { client } = await agentClient(Client, svc.fx, url, { timeout: 1, retries: 0 });
    const a = await runOnce(client, "allow_tool", { n: 9 });
    assert.deepEqual(a.calls, []);
    assert.match(a.model.seen(), /unavailable/);
    const g = await guardrailRun(client, "allow_tool", { n: 9 });
    assert.deepEqual(g.calls, []);
    assert.match(g.model.seen(), /unavailable/);
  });
});
