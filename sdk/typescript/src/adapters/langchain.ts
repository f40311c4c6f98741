/**
 * svc for LangChain.js v1 agents (`createAgent`) and LangGraph.js.
 *
 * - `svcMiddleware(client, opts)`: an agent middleware (what
 *   `createMiddleware({ name, wrapToolCall })` returns) for
 *   `createAgent({ middleware: [svcMiddleware(client)] })`. Every tool call
 *   goes to svc first. deny / quarantine: a ToolMessage with status "error"
 *   naming the decision and reason (the model reads it), the tool did not
 *   run. redact: the tool gets the redacted args. require_approval, by
 *   `approval`:
 *   - `"auto"` (default): `"interrupt"` when the graph has a checkpointer,
 *     `"wait"` otherwise.
 *   - `"interrupt"`: LangGraph's `interrupt()` with `{ type: "svc_approval",
 *     approval_id, approval_expires_at, decision_id, reason, tool_call }`;
 *     the run pauses (`result.__interrupt__`). Resume it with
 *     `new Command({ resume: ... })` once the approval is decided in svc:
 *     the middleware then waits for svc's decision (bounded by
 *     `approvalTimeout`), presents it, and runs the approved (or
 *     approver-edited) args; rejected in svc, an error ToolMessage. Resuming
 *     with `false` or `{ approved: false }` refuses without asking svc.
 *   - `"wait"`: waits for svc's approval, then runs.
 *   - `"result"`: an error ToolMessage naming the approval_id.
 *   svc unavailable: an error ToolMessage; the tool did not run.
 * - `svcWrapToolCall(client, opts)`: the bare `wrapToolCall(request, handler)`
 *   hook, for your own middleware or ToolNode (`new ToolNode(tools, { wrapToolCall })`
 *   of langchain's agents).
 *
 * No static import of langchain: ToolMessage comes from `@langchain/core/messages`
 * lazily (installed wherever langchain is), or pass `toolMessage`.
 */

import type { Client, Decision } from "../index.js";
import { type ApprovalStore, type SvcCallOptions, SvcToolRefused, guardedRun, refusalOf, toCall, authorizeOptions } from "./common.js";

export { SvcToolRefused, type ApprovalStore, type RefusalInfo, type SvcCallOptions } from "./common.js";

export interface LcToolCall {
  id?: string;
  name: string;
  args: Record<string, unknown>;
  [k: string]: unknown;
}

export interface LcToolCallRequest {
  toolCall: LcToolCall;
  tool?: unknown;
  state?: unknown;
  runtime?: {
    interrupt?: (value: unknown) => unknown;
    configurable?: Record<string, unknown>;
    signal?: AbortSignal;
    [k: string]: unknown;
  };
  [k: string]: unknown;
}

export type LcToolCallHandler = (request: LcToolCallRequest) => unknown | Promise<unknown>;

export interface SvcLangChainOptions<I = Record<string, unknown>> extends SvcCallOptions<I> {
  approval?: "auto" | "interrupt" | "wait" | "result";
  /** svc approvals awaiting a resume, by tool call id (default: a Map). */
  approvals?: ApprovalStore;
  /** Builds the ToolMessage of a refusal (default: `@langchain/core/messages`' ToolMessage). */
  toolMessage?: (fields: { content: string; tool_call_id: string; name: string; status: "error"; artifact?: unknown }) => unknown;
  /** Middleware name (default "svc"). */
  name?: string;
}

const CORE_MESSAGES = "@langchain/core/messages";

type ToolMessageFields = { content: string; tool_call_id: string; name: string; status: "error"; artifact?: unknown };
let toolMessageClass: Promise<(new (f: ToolMessageFields) => unknown) | null> | null = null;

/** ToolMessage of `@langchain/core`, resolved from where svc-sdk is installed
 * (next to langchain in an application); null when it cannot be found. */
function loadToolMessage(): Promise<(new (f: ToolMessageFields) => unknown) | null> {
  toolMessageClass ??= import(CORE_MESSAGES).then(
    (m: { ToolMessage?: new (f: ToolMessageFields) => unknown }) => m.ToolMessage ?? null,
    () => null,
  );
  return toolMessageClass;
}

/** The refusal as the tool's result: an error ToolMessage when the class is at
 * hand; else the framework's own handler builds the ToolMessage around the
 * text, from a stand-in tool (the real tool is never called). */
async function refusalMessage(opts: SvcLangChainOptions<any>, fields: ToolMessageFields, request: LcToolCallRequest, handler: LcToolCallHandler): Promise<unknown> {
  if (opts.toolMessage) return opts.toolMessage(fields);
  const TM = await loadToolMessage();
  if (TM) return new TM(fields);
  const standIn = { name: fields.name, invoke: async () => fields.content };
  return handler({ ...request, tool: standIn });
}

function hasCheckpointer(req: LcToolCallRequest): boolean {
  const c = req.runtime?.configurable;
  return !!c && !!(c["__pregel_checkpointer"] ?? c["checkpointer"]);
}

function refusedByResume(v: unknown): boolean {
  if (v === false || v === "reject" || v === "rejected") return true;
  return !!v && typeof v === "object" && (v as { approved?: unknown }).approved === false;
}

/** The `wrapToolCall` hook. */
export function svcWrapToolCall(client: Client, opts: SvcLangChainOptions<any> = {}) {
  const approvals: ApprovalStore = opts.approvals ?? new Map<string, Decision>();
  // `any` in the signature: langchain's ToolCallRequest / handler types must fit.
  return async (request: LcToolCallRequest | any, handler: LcToolCallHandler | any): Promise<any> => {
    const call = request.toolCall;
    const id = call.id ?? "";
    const name = call.name;
    const args = call.args ?? {};
    const signal = request.runtime?.signal;
    const refuse = async (r: SvcToolRefused) =>
      refusalMessage(opts, { content: r.message, tool_call_id: id, name, status: "error", artifact: { svc: r.info } }, request, handler);
    const run = (prior?: Decision) =>
      guardedRun(client, name, args, (params) => handler({ ...request, toolCall: { ...call, args: params } }), {
        ...opts,
        wait: true,
        prior,
        signal,
      });

    let mode = opts.approval ?? "auto";
    if (mode === "auto") mode = hasCheckpointer(request) && typeof request.runtime?.interrupt === "function" ? "interrupt" : "wait";
    try {
      if (mode === "wait") return await run();
      // interrupt / result: ask first, so that a require_approval can pause the graph.
      let d = id ? approvals.get(id) : undefined;
      if (!d) {
        try {
          d = await client.authorize(toCall(name, args, opts), authorizeOptions(name, args, opts, signal) as never);
        } catch (err) {
          const r = refusalOf(err);
          if (r) return await refuse(r);
          throw err;
        }
        if (d.decision !== "require_approval" || !d.approvalId) {
          // Decided without a human: apply it (allow, redact) or refuse (deny,
          // quarantine, require_approval without an approval_id).
          return await run(d);
        }
        if (mode === "result") return await refuse(refusalOf(Object.assign(new Error("approval required"), { name: "ApprovalRequired", decision: d }))!);
        if (id) approvals.set(id, d);
      }
      // LangGraph re-runs the node on resume: interrupt() then returns the resume value.
      const resumed = request.runtime!.interrupt!({
        type: "svc_approval",
        approval_id: d.approvalId,
        approval_expires_at: d.approvalExpiresAt ?? null,
        decision_id: d.decisionId ?? null,
        reason: d.reason,
        tool_call: { id, name, args },
      });
      if (id) approvals.delete(id);
      if (refusedByResume(await resumed)) {
        return await refuse(
          new SvcToolRefused(`the tool call was refused when the run was resumed (svc approval ${d.approvalId}); the tool did not run.`, {
            decision: "require_approval",
            reason: "refused_on_resume",
            approval_id: d.approvalId,
          }),
        );
      }
      return await run(d);
    } catch (err) {
      const r = refusalOf(err);
      if (r) return await refuse(r);
      throw err;
    }
  };
}

/** The agent middleware (structurally what langchain's `createMiddleware` returns). */
export function svcMiddleware(client: Client, opts: SvcLangChainOptions<any> = {}) {
  return {
    [Symbol.for("AgentMiddleware")]: true,
    name: opts.name ?? "svc",
    wrapToolCall: svcWrapToolCall(client, opts),
  };
}
