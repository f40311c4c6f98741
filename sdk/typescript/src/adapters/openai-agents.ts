/**
 * svc for the OpenAI Agents SDK (`@openai/agents`).
 *
 * - `svcFunctionTool(client, functionTool, opts)`: a FunctionTool (from
 *   `tool({...})`) whose `invoke` svc decides first. deny / quarantine: the
 *   tool's output is a text naming the decision and reason (the model reads
 *   it), the tool did not run. redact: the tool gets the redacted input.
 *   require_approval, by `approval`:
 *   - `"framework"` (default): the tool's `needsApproval` asks svc; on
 *     require_approval the run stops with an interruption (a
 *     RunToolApprovalItem) and the svc approval is remembered by callId
 *     (`tool.approvals.get(callId)` names its approval_id). svc stays the
 *     authority: after `state.approve(item)` and `run(agent, state)`, the
 *     tool waits for svc's approval (bounded by `approvalTimeout`), presents
 *     it, and runs with the approved (or approver-edited) input; rejected in
 *     svc, the output says so. `state.reject(item)`: the tool never runs.
 *   - `"wait"`: the tool waits for svc's approval, then runs.
 *   - `"result"`: the output names the approval_id; the tool did not run.
 *   svc unavailable: the output says so; the tool did not run.
 * - `svcToolInputGuardrail(client, opts)`: a tool input guardrail for tools
 *   you do not wrap (`tool({ ..., inputGuardrails: [g] })`). allow: allow;
 *   deny / quarantine / unavailable: `rejectContent` with the message the
 *   model reads. A guardrail cannot change the input, so redact is rejected
 *   too (fail closed), and so is an approver's edit. require_approval: waits
 *   for svc (or rejects naming the approval_id with `approval: "result"`).
 *   Give it the `approvals` of `svcNeedsApproval(client, opts)` set as the
 *   tool's `needsApproval`, and svc's require_approval becomes the run's
 *   interruption; the guardrail then presents the approval svc granted.
 *
 * No runtime import of `@openai/agents`: the shapes used are declared here.
 */

import type { Client, Decision } from "../index.js";
import {
  type ApprovalStore,
  type SvcCallOptions,
  SvcToolRefused,
  askForApproval,
  authorizeOptions,
  guardedRun,
  isObject,
  refusalOf,
  fresh,
  sameCall,
  toCall,
} from "./common.js";

export { SvcToolRefused, type ApprovalStore, type RefusalInfo, type SvcCallOptions } from "./common.js";

/** The part of a FunctionTool this module touches. */
export interface FunctionToolLike {
  type: "function";
  name: string;
  invoke: (runContext: any, input: string, details?: any) => Promise<unknown>;
  needsApproval: (runContext: any, input: any, callId?: string) => Promise<boolean>;
  [k: string]: unknown;
}

/** The FunctionCallItem a tool guardrail receives. */
export interface FunctionCallLike {
  callId: string;
  name: string;
  arguments: string;
  [k: string]: unknown;
}

export type ToolGuardrailOutput = {
  outputInfo?: unknown;
  behavior: { type: "allow" } | { type: "rejectContent"; message: string } | { type: "throwException" };
};

/** Structurally a `ToolInputGuardrailDefinition` (what `defineToolInputGuardrail` returns). */
export interface SvcToolInputGuardrail {
  type: "tool_input";
  name: string;
  run: (data: { context: unknown; agent: unknown; toolCall: FunctionCallLike }) => Promise<ToolGuardrailOutput>;
}

export interface SvcAgentsOptions<I = Record<string, unknown>> extends SvcCallOptions<I> {
  /** require_approval: the run's interruption (default for tools), svc's wait (default for the guardrail), or a refusal naming the approval_id. */
  approval?: "framework" | "wait" | "result";
  /** Where `needsApproval` leaves the svc approvals (default: a Map). */
  approvals?: ApprovalStore;
}

function parseArgs(input: string): Record<string, unknown> {
  if (input === "" || input === undefined || input === null) return {};
  const v = JSON.parse(input);
  return isObject(v) ? v : { input: v };
}

/** A `needsApproval` that asks svc: true on require_approval (remembered by callId). */
export function svcNeedsApproval(
  client: Client,
  name: string,
  opts: SvcAgentsOptions<any> = {},
): ((runContext: unknown, input: unknown, callId?: string) => Promise<boolean>) & { approvals: ApprovalStore } {
  const approvals: ApprovalStore = opts.approvals ?? new Map<string, Decision>();
  const fn = async (_ctx: unknown, input: unknown, callId?: string) => {
    const d = await askForApproval(client, approvals, callId, name, input as Record<string, unknown>, opts);
    return d !== null && d.decision === "require_approval" && !!d.approvalId && !!callId;
  };
  return Object.assign(fn, { approvals });
}

/** The FunctionTool with svc deciding before it runs. */
export function svcFunctionTool<T extends FunctionToolLike>(
  client: Client,
  tool: T,
  opts: SvcAgentsOptions<any> = {},
): T & { approvals: ApprovalStore } {
  const approvals: ApprovalStore = opts.approvals ?? new Map<string, Decision>();
  const mode = opts.approval ?? "framework";
  const name = tool.name;
  const invoke = tool.invoke.bind(tool);
  const own = tool.needsApproval?.bind(tool);
  const wrapped: FunctionToolLike = {
    ...tool,
    invoke: async (runContext: unknown, input: string, details?: { toolCall?: FunctionCallLike; signal?: AbortSignal }) => {
      const callId = details?.toolCall?.callId;
      const pending = callId ? approvals.get(callId) : undefined;
      let args: Record<string, unknown>;
      try {
        args = parseArgs(input);
      } catch {
        return "svc: the tool call's arguments are not JSON, so svc could not be asked; the tool did not run.";
      }
      try {
        return await guardedRun(client, name, args, (params) => invoke(runContext, JSON.stringify(params), details), {
          ...opts,
          wait: mode !== "result",
          prior: pending,
          signal: details?.signal,
        });
      } catch (err) {
        const r = refusalOf(err);
        if (r) return r.message;
        throw err;
      } finally {
        if (callId && pending) approvals.delete(callId);
      }
    },
  };
  if (mode === "framework") {
    const ask = svcNeedsApproval(client, name, { ...opts, approvals });
    wrapped.needsApproval = async (runContext: unknown, input: unknown, callId?: string) => {
      if (own && (await own(runContext, input, callId))) return true;
      return ask(runContext, input, callId);
    };
  }
  return Object.assign(wrapped, { approvals }) as T & { approvals: ApprovalStore };
}

function reject(message: string, info: unknown): ToolGuardrailOutput {
  return { behavior: { type: "rejectContent", message }, outputInfo: info };
}

/** A tool input guardrail asking svc. */
export function svcToolInputGuardrail(client: Client, opts: SvcAgentsOptions<any> & { name?: string } = {}): SvcToolInputGuardrail {
  const approvals: ApprovalStore = opts.approvals ?? new Map<string, Decision>();
  return {
    type: "tool_input",
    name: opts.name ?? "svc",
    run: async ({ toolCall }) => {
      let args: Record<string, unknown>;
      try {
        args = parseArgs(toolCall.arguments);
      } catch {
        return reject("svc: the tool call's arguments are not JSON; the tool did not run.", { decision: "deny", reason: "invalid_arguments" });
      }
      const stored = approvals.get(toolCall.callId);
      const call = toCall(toolCall.name, args, opts);
      const waitOpts = (opts.approvalTimeout !== undefined ? { timeout: opts.approvalTimeout } : {}) as never;
      try {
        let d: Decision;
        let approvalId: string | null = null;
        if (stored && (stored.decision === "require_approval" || (fresh(stored) && sameCall(stored, call)))) {
          d = stored; // asked by svcNeedsApproval already: one decision per call
        } else {
          d = await client.authorize(call, authorizeOptions(toolCall.name, args, opts) as never);
          if (d.decision === "require_approval" && (!d.approvalId || opts.approval === "result")) {
            const r = refusalOf(approvalRequired(d))!;
            return reject(r.message, r.info);
          }
        }
        if (d.decision === "require_approval") {
          if (!d.approvalId) {
            const r = refusalOf(denied(d))!;
            return reject(r.message, r.info);
          }
          const a = await client.waitForApproval(d, waitOpts);
          approvalId = a.approvalId;
          if (a.edited) {
            return reject(
              `svc: approval ${a.approvalId} was granted with edited parameters, which a guardrail cannot apply; the tool did not run (wrap it with svcFunctionTool).`,
              { decision: "require_approval", reason: "approval_edited", approval_id: a.approvalId },
            );
          }
          d = await client.authorize(a.call as never, { ...authorizeOptions(toolCall.name, args, opts), approvalId: a.approvalId } as never);
        }
        if (d.decision === "allow") return { behavior: { type: "allow" }, outputInfo: { decision: "allow", reason: d.reason, decision_id: d.decisionId, approval_id: approvalId } };
        if (d.decision === "redact") {
          return reject(
            `svc allows this tool call only with ${d.redactedFields?.join(", ") || "some fields"} redacted, which a guardrail cannot do; the tool did not run.`,
            { decision: "redact", reason: d.reason, decision_id: d.decisionId },
          );
        }
        const r = refusalOf(denied(d))!;
        return reject(r.message, r.info);
      } catch (err) {
        const r = refusalOf(err);
        if (r) return reject(r.message, r.info);
        throw err;
      } finally {
        if (stored) approvals.delete(toolCall.callId);
      }
    },
  };
}

/** Error-shaped stand-ins so refusalOf words decisions the same everywhere. */
function denied(d: Decision): Error {
  return Object.assign(new Error(`svc: ${d.decision} (${d.reason})`), { name: "Denied", decision: d });
}
function approvalRequired(d: Decision): Error {
  return Object.assign(new Error(`svc: approval required`), { name: "ApprovalRequired", decision: d });
}

/** Re-exported for callers that want to tell a refusal from the tool's own error. */
export function isSvcRefusal(err: unknown): err is SvcToolRefused {
  return err instanceof SvcToolRefused;
}
