/**
 * svc for the Vercel AI SDK (`ai`, v6: `tool()`, `execute`, `needsApproval`,
 * tool-approval-request / tool-approval-response parts).
 *
 * - `svcTool(client, tool, opts)`: the tool with its `execute` guarded: svc
 *   decides first. deny / quarantine: `execute` throws SvcToolRefused, which
 *   the AI SDK turns into a tool-error the model reads (the message names the
 *   decision and reason; `onRefusal: "result"` returns `{ error, svc }` as the
 *   tool's output instead). redact: `execute` gets the redacted input.
 *   require_approval, by `approval`:
 *   - `"framework"` (default): the tool's `needsApproval` asks svc; on
 *     require_approval it answers true and the AI SDK stops with a
 *     tool-approval-request. The svc approval is remembered by toolCallId
 *     (`approvals.get(toolCallId)` names its approval_id for your UI). svc
 *     stays the authority: when the application answers the request with
 *     `approved: true`, `execute` waits for svc's approval (bounded by
 *     `approvalTimeout`), presents it, and runs with the approved (or
 *     approver-edited) input; rejected in svc, it does not run. Answered
 *     `approved: false`, the AI SDK does not call `execute` at all.
 *   - `"wait"`: `execute` waits for svc's approval, then runs.
 *   - `"result"`: `execute` refuses with a result naming the approval_id.
 *   svc unavailable: the tool does not run (a tool-error saying so).
 * - `svcTools(client, tools, opts)`: every tool of a ToolSet, svc names = keys.
 * - `svcNeedsApproval(client, opts)`: a `needsApproval` alone, for tools whose
 *   `execute` you cannot wrap (provider-executed tools). It answers false only
 *   on allow; true on require_approval (remembered by toolCallId); and throws
 *   SvcToolRefused on anything else (deny, quarantine, redact, which it cannot
 *   apply, svc unavailable), which ends the generation: fail closed.
 *   `svcApprovalResponse(client, needsApproval, request)` then waits for the
 *   svc approval and builds the tool-approval-response to send back.
 *
 * No runtime import of `ai`: the shapes used are declared here.
 */

import type { Client, Decision } from "../index.js";
import {
  type ApprovalStore,
  type SvcCallOptions,
  SvcToolRefused,
  askForApproval,
  authorizeOptions,
  guardedRun,
  refusalOf,
  toCall,
} from "./common.js";

export { SvcToolRefused, type ApprovalStore, type RefusalInfo, type SvcCallOptions } from "./common.js";

/** The part of an AI SDK `Tool` this module touches. */
export interface AiToolLike {
  title?: string;
  // `any` parameters: the AI SDK's own option types must be assignable here
  execute?: (input: any, options: any) => unknown;
  needsApproval?: boolean | ((input: any, options: any) => boolean | PromiseLike<boolean>);
  [k: string]: unknown;
}

export interface AiExecuteOptions {
  toolCallId: string;
  messages?: unknown[];
  abortSignal?: AbortSignal;
  [k: string]: unknown;
}

export interface AiApprovalOptions {
  toolCallId: string;
  messages?: unknown[];
  [k: string]: unknown;
}

export interface SvcToolOptions<I = Record<string, unknown>> extends SvcCallOptions<I> {
  /** The tool's name in svc: required unless the tool has a `title` (an AI SDK tool does not know its key). */
  tool?: SvcCallOptions<I>["tool"];
  /** require_approval: the AI SDK's approval flow (default), svc's wait, or a refusal naming the approval_id. */
  approval?: "framework" | "wait" | "result";
  /** How a refusal reaches the model: a thrown error (tool-error part, default) or a tool result `{ error, svc }`. */
  onRefusal?: "throw" | "result";
  /** Where `needsApproval` leaves the svc approvals for `execute` (default: a Map). */
  approvals?: ApprovalStore;
}

/** A guarded tool; `approvals` holds the svc approvals awaiting the application's answer. */
export type SvcTool<T extends AiToolLike> = T & { approvals: ApprovalStore };

function nameOf(tool: AiToolLike, opts: SvcToolOptions<any>): string {
  if (typeof opts.tool === "string") return opts.tool;
  if (typeof tool.title === "string" && tool.title) return tool.title;
  if (typeof opts.tool === "function") return "";
  throw new TypeError("svcTool: pass { tool: '<name in svc>' } (an AI SDK tool does not know its own name)");
}

/** The tool with svc deciding before its `execute`. */
export function svcTool<T extends AiToolLike>(client: Client, tool: T, opts: SvcToolOptions<any> = {}): SvcTool<T> {
  const execute = tool.execute;
  if (typeof execute !== "function") {
    throw new TypeError("svcTool: the tool has no execute to guard (use svcNeedsApproval for provider-executed tools)");
  }
  const name = nameOf(tool, opts);
  const approvals: ApprovalStore = opts.approvals ?? new Map<string, Decision>();
  const mode = opts.approval ?? "framework";
  const guarded: AiToolLike = {
    ...tool,
    execute: async (input: unknown, options: AiExecuteOptions) => {
      const id = options?.toolCallId;
      const pending = id ? approvals.get(id) : undefined;
      try {
        return await guardedRun(client, name, input as Record<string, unknown>, (params) => execute(params, options), {
          ...opts,
          wait: mode !== "result",
          prior: pending,
          signal: options?.abortSignal,
        });
      } catch (err) {
        const r = refusalOf(err);
        if (r && opts.onRefusal === "result") return { error: r.message, svc: r.info };
        throw err;
      } finally {
        if (id && pending) approvals.delete(id);
      }
    },
  };
  if (mode === "framework") {
    const own = tool.needsApproval;
    guarded.needsApproval = async (input: unknown, options: AiApprovalOptions) => {
      if (own === true) return true;
      if (typeof own === "function" && (await own(input, options))) return true;
      const d = await askForApproval(client, approvals, options?.toolCallId, name, input as Record<string, unknown>, opts);
      // Only svc's require_approval becomes the AI SDK's approval request; deny,
      // redact and svc being unreachable are handled (fail closed) by execute.
      return d !== null && d.decision === "require_approval" && !!d.approvalId;
    };
  }
  return Object.assign(guarded, { approvals }) as SvcTool<T>;
}

/** Every tool of a ToolSet guarded, its svc name its key (unless `opts.tool`). */
export function svcTools<S extends Record<string, AiToolLike>>(
  client: Client,
  tools: S,
  opts: SvcToolOptions<any> = {},
): { [K in keyof S]: SvcTool<S[K]> } {
  const out: Record<string, AiToolLike> = {};
  for (const [key, t] of Object.entries(tools)) out[key] = svcTool(client, t, { ...opts, tool: opts.tool ?? key });
  return out as { [K in keyof S]: SvcTool<S[K]> };
}

export interface SvcNeedsApprovalOptions<I = Record<string, unknown>> extends SvcCallOptions<I> {
  /** The tool's name in svc. */
  tool: SvcCallOptions<I>["tool"];
  approvals?: ApprovalStore;
}

export type SvcNeedsApprovalFn = ((input: any, options: AiApprovalOptions) => Promise<boolean>) & {
  approvals: ApprovalStore;
  client: Client;
  options: SvcNeedsApprovalOptions<any>;
};

/** A `needsApproval` asking svc, for tools whose execute you cannot wrap. */
export function svcNeedsApproval(client: Client, opts: SvcNeedsApprovalOptions<any>): SvcNeedsApprovalFn {
  const approvals: ApprovalStore = opts.approvals ?? new Map<string, Decision>();
  const name = typeof opts.tool === "string" ? opts.tool : "";
  const fn = async (input: unknown, options: AiApprovalOptions): Promise<boolean> => {
    const known = options?.toolCallId ? approvals.get(options.toolCallId) : undefined;
    if (known) return true;
    let d: Decision;
    try {
      d = await client.authorize(toCall(name, input, opts), authorizeOptions(name, input, opts) as never);
    } catch (err) {
      throw refusalOf(err) ?? err;
    }
    if (d.decision === "allow") return false;
    if (d.decision === "require_approval" && d.approvalId && options?.toolCallId) {
      approvals.set(options.toolCallId, d);
      return true;
    }
    const info = { decision: d.decision, reason: d.reason, decision_id: d.decisionId ?? null };
    throw new SvcToolRefused(
      d.decision === "redact"
        ? `svc answered redact (reason: ${d.reason}) for a tool whose input cannot be changed here; the tool must not run.`
        : `svc ${d.decision === "quarantine" ? "quarantined" : "denied"} this tool call (decision: ${d.decision}, reason: ${d.reason}). The tool must not run.`,
      info,
    );
  };
  return Object.assign(fn, { approvals, client, options: opts });
}

/** The AI SDK's tool-approval-response part. */
export interface AiToolApprovalResponse {
  type: "tool-approval-response";
  approvalId: string;
  approved: boolean;
  reason?: string;
}

/**
 * For a tool-approval-request raised by `svcNeedsApproval`: wait for svc's
 * approval, present it (svc consumes it), and return the response part to
 * send back: approved only when svc approved the call unchanged. An edit is
 * refused here, since a tool svc does not execute cannot take edited input.
 */
export async function svcApprovalResponse(
  needsApproval: SvcNeedsApprovalFn,
  request: { approvalId: string; toolCall: { toolCallId: string } },
  opts: { timeout?: number; signal?: AbortSignal } = {},
): Promise<AiToolApprovalResponse> {
  const { client, approvals } = needsApproval;
  const id = request.toolCall.toolCallId;
  const d = approvals.get(id);
  const deny = (reason: string): AiToolApprovalResponse => ({ type: "tool-approval-response", approvalId: request.approvalId, approved: false, reason });
  if (!d) return deny("svc: no svc approval is known for this tool call");
  try {
    const a = await client.waitForApproval(d, opts as never);
    if (a.edited) return deny(`svc: approval ${a.approvalId} was edited; the edit cannot be applied to this tool`);
    const p = await client.authorize(a.call as never, { ...authorizeOptions("", a.call?.parameters ?? {}, needsApproval.options), approvalId: a.approvalId } as never);
    if (p.decision !== "allow") return deny(`svc: presenting approval ${a.approvalId}: ${p.decision} (${p.reason})`);
    return { type: "tool-approval-response", approvalId: request.approvalId, approved: true, reason: `svc approval ${a.approvalId}` };
  } catch (err) {
    const r = refusalOf(err);
    if (r) return deny(r.message);
    throw err;
  } finally {
    approvals.delete(id);
  }
}
