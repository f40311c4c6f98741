/**
 * What the framework adapters share: how a framework's tool call becomes an
 * svc ToolCall, how a guarded call runs, and how a refusal becomes text and
 * structured data the model (or the application) can read.
 *
 * Nothing here imports a framework. Fail closed throughout: the tool's own
 * function runs only inside `client.run`, i.e. only on an allow (or redact,
 * redaction applied) that svc returned for exactly the parameters it gets.
 */

import { actionHash, type Client, type Decision, type ToolCall } from "../index.js";

/** A value, or a function of the tool's input (and the framework's tool name). */
export type PerCall<T, I = Record<string, unknown>> = T | ((input: I, name: string) => T);

/** How a framework tool call maps onto svc, and how svc's answer is applied. */
export interface SvcCallOptions<I = Record<string, unknown>> {
  /** The tool's name in svc (default: the framework's tool name). */
  tool?: PerCall<string, I>;
  /** The action in svc (default: `"call"`). */
  action?: PerCall<string, I>;
  /** The resource in svc (default: none). */
  resource?: PerCall<string | null | undefined, I>;
  /** Whether the call changes state (default: true, the cautious answer). */
  mutatesState?: PerCall<boolean, I>;
  /** Passed to authorize as they are. */
  sourceTrust?: string;
  environment?: string;
  trace?: Record<string, unknown>;
  /** How long to wait for an approval (the core's unit; default: the client's). */
  approvalTimeout?: number;
  /** Redaction mask (default: the redacted fields are removed). */
  mask?: unknown;
}

/** What a refusal says, in the shape svc's own MCP proxy uses (CONTRACT 15). */
export interface RefusalInfo {
  decision: string;
  reason: string;
  decision_id?: string | null;
  receipt_id?: string | null;
  approval_id?: string | null;
  approval_expires_at?: string | null;
  /** The error class, when the refusal is an error rather than a decision. */
  error?: string;
}

/** Why a guarded tool did not run. */
export class SvcToolRefused extends Error {
  info: RefusalInfo;
  override cause: unknown;
  constructor(message: string, info: RefusalInfo, cause?: unknown) {
    super(message);
    this.name = "SvcToolRefused";
    this.info = info;
    this.cause = cause;
  }
}

function pick<T, I>(v: PerCall<T, I> | undefined, input: I, name: string): T | undefined {
  return typeof v === "function" ? (v as (input: I, name: string) => T)(input, name) : v;
}

/** The svc ToolCall of a framework tool call. */
export function toCall<I>(name: string, input: I, opts: SvcCallOptions<I>): ToolCall {
  const params = isObject(input) ? (input as Record<string, unknown>) : input === undefined || input === null ? {} : { input };
  const resource = pick(opts.resource, input, name);
  return {
    tool: pick(opts.tool, input, name) ?? name,
    action: pick(opts.action, input, name) ?? "call",
    resource: resource ?? null,
    parameters: params,
  };
}

/** The authorize options of a call. */
export function authorizeOptions<I>(name: string, input: I, opts: SvcCallOptions<I>, signal?: AbortSignal): Record<string, unknown> {
  const o: Record<string, unknown> = { mutatesState: pick(opts.mutatesState, input, name) ?? true };
  if (opts.sourceTrust !== undefined) o.sourceTrust = opts.sourceTrust;
  if (opts.environment !== undefined) o.environment = opts.environment;
  if (opts.trace !== undefined) o.trace = opts.trace;
  if (signal) o.signal = signal;
  return o;
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function decisionInfo(d: Partial<Decision> | null | undefined, fallback: string): RefusalInfo {
  const info: RefusalInfo = { decision: (d?.decision as string) ?? fallback, reason: d?.reason ?? "" };
  if (d?.decisionId) info.decision_id = d.decisionId;
  if (d?.receiptId) info.receipt_id = d.receiptId;
  if (d?.approvalId) info.approval_id = d.approvalId;
  if (d?.approvalExpiresAt) info.approval_expires_at = d.approvalExpiresAt;
  return info;
}

/** The refusal of an svc error, or null when `err` is not one of svc's
 * (an error of the tool itself, or of the framework). */
export function refusalOf(err: unknown): SvcToolRefused | null {
  if (err instanceof SvcToolRefused) return err;
  if (!(err instanceof Error)) return null;
  const e = err as Error & { decision?: Partial<Decision>; approval?: { approvalId?: string } | null; reason?: string | null };
  switch (e.name) {
    case "Denied": {
      const info = decisionInfo(e.decision, "deny");
      const verb = info.decision === "quarantine" ? "quarantined" : "denied";
      return new SvcToolRefused(
        `svc ${verb} this tool call (decision: ${info.decision}, reason: ${info.reason || "none"}` +
          `${info.decision_id ? `, decision_id: ${info.decision_id}` : ""}). The tool did not run.`,
        info,
        err,
      );
    }
    case "ApprovalRequired": {
      const info = decisionInfo(e.decision, "require_approval");
      return new SvcToolRefused(
        `svc requires a human approval for this tool call (approval_id: ${info.approval_id ?? "none"}, reason: ${info.reason || "none"}` +
          `${info.approval_expires_at ? `, expires at ${info.approval_expires_at}` : ""}). The tool did not run yet; ` +
          `it can run once the approval is granted in svc.`,
        info,
        err,
      );
    }
    case "ApprovalRejected":
    case "ApprovalExpired": {
      const rejected = e.name === "ApprovalRejected";
      const d = (e as { decision?: Partial<Decision> }).decision;
      const info = decisionInfo(d, "require_approval");
      info.reason = rejected ? "approval_rejected" : "approval_expired";
      info.error = e.name;
      const aid = e.approval?.approvalId ?? info.approval_id;
      if (aid) info.approval_id = aid;
      return new SvcToolRefused(
        `svc: the approval${aid ? ` ${aid}` : ""} of this tool call was ${rejected ? "rejected by an approver" : "not granted in time (expired)"}. ` +
          `The tool did not run. (${e.message})`,
        info,
        err,
      );
    }
    case "SvcUnavailable":
      return new SvcToolRefused(`svc is unavailable, so this tool call was not run (fail closed): ${e.message}`, {
        decision: "deny",
        reason: "svc_unavailable",
        error: e.name,
      }, err);
    case "SvcAuthError":
    case "ActionHashMismatch":
    case "InvalidRequest":
    case "InvalidRedactionPath":
    case "ReceiptInvalid":
    case "SvcError":
      return new SvcToolRefused(`svc refused this tool call (${e.name}): ${e.message}. The tool did not run.`, {
        decision: "deny",
        reason: (e as { errorCode?: string | null }).errorCode || e.name,
        error: e.name,
      }, err);
    default:
      return null;
  }
}

/** Approval decisions remembered between the framework's "needs approval?"
 * question and its later execution of the same tool call (keyed by the
 * framework's tool call id). A Map is enough in one process; pass your own
 * (e.g. backed by your session store) when the run resumes elsewhere. */
export interface ApprovalStore {
  get(toolCallId: string): Decision | undefined;
  set(toolCallId: string, decision: Decision): unknown;
  delete(toolCallId: string): unknown;
}

export interface GuardedRunOptions<I> extends SvcCallOptions<I> {
  /** On require_approval: wait for svc's approval (true), or refuse with a
   * result naming the approval_id (false). */
  wait?: boolean;
  /** The decision svc already gave about this very call (the framework's
   * "needs approval?" hook asked): applied rather than asked again. A
   * require_approval is waited for and presented. */
  prior?: Decision;
  signal?: AbortSignal;
}

/**
 * Run `fn` under svc's decision about the framework tool call `name(input)`.
 * Returns `fn`'s result, or throws SvcToolRefused (with the model-readable
 * message and the structured info) when svc did not let it run. Errors of
 * `fn` itself pass through unchanged.
 */
export async function guardedRun<I, T>(
  client: Client,
  name: string,
  input: I,
  fn: (params: Record<string, unknown>) => T | Promise<T>,
  opts: GuardedRunOptions<I>,
): Promise<T> {
  let ran = false;
  const body = (params: Record<string, unknown>) => {
    ran = true;
    return fn(params);
  };
  const authOpts = authorizeOptions(name, input, opts, opts.signal);
  const runOpts: Record<string, unknown> = { ...authOpts, wait: opts.wait ?? true };
  if (opts.approvalTimeout !== undefined) runOpts.approvalTimeout = opts.approvalTimeout;
  if (opts.mask !== undefined) runOpts.mask = opts.mask;
  try {
    const prior = opts.prior;
    if (prior && prior.decision === "require_approval" && prior.approvalId) {
      const waitOpts: Record<string, unknown> = {};
      if (opts.approvalTimeout !== undefined) waitOpts.timeout = opts.approvalTimeout;
      if (opts.signal) waitOpts.signal = opts.signal;
      const approval = await client.waitForApproval(prior, waitOpts as never);
      // Present the approved call (as edited by the approver, if edited): svc
      // answers allow (consuming the approval) and only then does fn run.
      return await client.run(approval.call as ToolCall, body, { ...runOpts, approvalId: approval.approvalId } as never);
    }
    const call = toCall(name, input, opts);
    if (prior && prior.decision !== "require_approval" && prior.toolCall && fresh(prior) && sameCall(prior, call) && hasFinish(client)) {
      // One decision per tool call: apply the one svc gave (redaction, and the
      // receipt check when a key is pinned, are the client's own finish step).
      const params = await finish(client, prior, opts.mask, opts.signal);
      return await body(params);
    }
    return await client.run(call, body, runOpts as never);
  } catch (err) {
    if (ran) throw err;
    const r = refusalOf(err);
    if (r) throw r;
    throw err;
  }
}

/**
 * Ask svc about a call for a framework's "needs approval?" hook. Returns the
 * decision (require_approval ones are remembered in `store`); never throws
 * on svc being unavailable: returns null, and the execution path fails closed.
 */
export async function askForApproval<I>(
  client: Client,
  store: ApprovalStore,
  toolCallId: string | undefined,
  name: string,
  input: I,
  opts: SvcCallOptions<I>,
): Promise<Decision | null> {
  if (toolCallId) {
    const known = store.get(toolCallId);
    if (known) return known; // asked already (frameworks ask again on resume)
  }
  let d: Decision;
  try {
    d = await client.authorize(toCall(name, input, opts), authorizeOptions(name, input, opts) as never);
  } catch (err) {
    if (refusalOf(err)) return null;
    throw err;
  }
  askedAt.set(d, Date.now());
  if (toolCallId) store.set(toolCallId, d);
  return d;
}

/** When the "needs approval?" hook got each decision. A decision other than
 * require_approval is applied at execution only within PRIOR_TTL_MS of it
 * (the same step, in practice); later, or from a store that lost the time,
 * svc is asked again. */
const askedAt = new WeakMap<Decision, number>();
export const PRIOR_TTL_MS = 60_000;

export function fresh(d: Decision): boolean {
  const t = askedAt.get(d);
  return t !== undefined && Date.now() - t <= PRIOR_TTL_MS;
}

export function sameCall(d: Decision, call: ToolCall): boolean {
  try {
    return !!d.actionHash && actionHash(call) === d.actionHash;
  } catch {
    return false;
  }
}

function hasFinish(client: Client): boolean {
  return typeof (client as unknown as { finish?: unknown }).finish === "function";
}

/** The client's finish step (`Client.finish`, @internal in the core): throws
 * Denied unless `d` lets its call run; returns the parameters (redacted on
 * redact, `undefined` mask meaning "remove"; receipt verified when pinned). */
async function finish(client: Client, d: Decision, mask: unknown, signal?: AbortSignal): Promise<Record<string, unknown>> {
  const c = client as unknown as { finish: (call: unknown, d: Decision, mask: unknown, signal?: AbortSignal) => Promise<Record<string, unknown>> };
  return c.finish(d.toolCall, d, mask, signal);
}
