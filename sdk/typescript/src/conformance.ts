/**
 * The SDK conformance protocol of CONTRACT 14: one JSON object a line in, one
 * JSON object a line out, in order; `sdk/typescript/conformance-driver` runs
 * {@link main}. Answers are ASCII JSON (non-ASCII escaped).
 *
 * Operations: canonicalize, action_hash, sign, redact, verify_receipt, verify_inclusion, retry,
 * outcome, and the live operations of sdk/README.md (client, authorize, run,
 * guard, wait_for_approval, get_receipt, get_receipt_public_key,
 * verify_decision_receipt, stats), processed strictly one at a time. A line
 * that cannot be handled answers `{"error": "<code>"}`: invalid_json,
 * duplicate_key, invalid_input, unknown_op, missing_field, invalid_value,
 * invalid_key, invalid_redaction_path, no_client, internal_error.
 */

import { actionHash, CanonicalError, canonicalize, parseStrict } from "./canonical.js";
import { Approval, Client, Decision, type Logger, outcome, type RunOptions, type SentToolCall } from "./client.js";
import { Cancelled, InvalidRedactionPath, SvcError } from "./errors.js";
import { type InclusionProof, verifyInclusion } from "./receiptlog.js";
import { verifyReceipt } from "./receipts.js";
import { redact } from "./redaction.js";
import { shouldRetry } from "./retry.js";
import { sign } from "./signing.js";

type Obj = Record<string, unknown>;
type Answer = Record<string, unknown>;

class Fail extends Error {
  constructor(readonly code: string) {
    super(code);
  }
}

function isObj(v: unknown): v is Obj {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function has(o: Obj, k: string): boolean {
  return Object.prototype.hasOwnProperty.call(o, k);
}

function need(req: Obj, name: string): unknown {
  if (!has(req, name)) throw new Fail("missing_field");
  return req[name];
}

// --- pure operations -------------------------------------------------------

const OPS: Record<string, (req: Obj) => Answer> = {
  canonicalize(req) {
    const value = need(req, "value");
    try {
      return { canonical: canonicalize(value) };
    } catch (e) {
      if (e instanceof CanonicalError) throw new Fail("invalid_value");
      throw e;
    }
  },
  action_hash(req) {
    const tc = need(req, "tool_call");
    if (!isObj(tc)) throw new Fail("invalid_input");
    try {
      return { action_hash: actionHash(tc) };
    } catch (e) {
      if (e instanceof CanonicalError) throw new Fail("invalid_value");
      throw e;
    }
  },
  sign(req) {
    const body = need(req, "body");
    const key = need(req, "signing_key");
    if (typeof body !== "string" || typeof key !== "string") throw new Fail("invalid_input");
    if (/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(body)) throw new Fail("invalid_value");
    try {
      return { header: sign(body, key) };
    } catch {
      throw new Fail("invalid_key");
    }
  },
  redact(req) {
    const params = need(req, "parameters");
    const fields = need(req, "redacted_fields");
    if (params !== null && !isObj(params)) throw new Fail("invalid_input");
    try {
      return { parameters: redact(params as Obj | null, fields as string[]) };
    } catch (e) {
      if (e instanceof InvalidRedactionPath) throw new Fail("invalid_redaction_path");
      throw e;
    }
  },
  verify_receipt(req) {
    const receipt = need(req, "receipt");
    const key = need(req, "public_key");
    if (!isObj(receipt) || typeof key !== "string") throw new Fail("invalid_input");
    const r = verifyReceipt(receipt, key);
    return { hash_valid: r.hashValid, signature_valid: r.signatureValid };
  },
  verify_inclusion(req) {
    const receipt = need(req, "receipt");
    const proof = need(req, "proof");
    const checkpoint = need(req, "checkpoint");
    const key = need(req, "public_key");
    if (!isObj(receipt) || !isObj(proof) || typeof checkpoint !== "string" || typeof key !== "string") throw new Fail("invalid_input");
    const r = verifyInclusion(receipt, proof as unknown as InclusionProof, checkpoint, key);
    return { checkpoint_valid: r.checkpointValid, proof_valid: r.proofValid };
  },
  retry(req) {
    const status = need(req, "status");
    if (status !== null && !(typeof status === "number" && Number.isInteger(status))) throw new Fail("invalid_input");
    const headers = req.headers;
    if (headers !== undefined && headers !== null && !isObj(headers)) throw new Fail("invalid_input");
    return { retry: shouldRetry(status as number | null) };
  },
  outcome(req) {
    return { outcome: outcome(need(req, "response")) };
  },
};

// --- live operations (sdk/README.md) ---------------------------------------

export const LIVE_OPS: ReadonlySet<string> = new Set([
  "client", "authorize", "run", "guard", "wait_for_approval", "get_receipt", "get_receipt_public_key",
  "verify_decision_receipt", "verify_receipt_inclusion", "stats",
]);

type Warning = { kind: "deprecation" | "fail_open" | "hash_mismatch" | "other"; message: string };

function classify(message: string): Warning["kind"] {
  if (message.includes("FAIL-OPEN")) return "fail_open";
  if (message.includes("deprecated")) return "deprecation";
  if (message.includes("action_hash") && (message.includes("mismatch") || message.includes("differs"))) return "hash_mismatch";
  return "other";
}

export function decisionJson(d: Decision | null | undefined): Answer | null {
  if (!d) return null;
  return {
    decision: d.decision, reason: d.reason, decision_id: d.decisionId, action_hash: d.actionHash,
    local_action_hash: d.localActionHash, hash_certain: d.hashCertain, hash_mismatch: d.hashMismatch,
    redacted_fields: [...d.redactedFields], approval_id: d.approvalId, approval_expires_at: d.approvalExpiresAt,
    receipt_id: d.receiptId, receipt_hash: d.receiptHash, root_trust_level: d.rootTrustLevel,
    matched_policies: [...d.matchedPolicies], request_id: d.requestId, status: d.status, message: d.message || null,
    fail_open: d.failOpen, dry_run: d.dryRun, mutates_state: d.mutatesState, tool_call: d.toolCall, raw: d.raw ?? null,
  };
}

const strOrNull = (v: unknown): string | null => (typeof v === "string" ? v : null);

export function decisionFromJson(v: unknown): Decision {
  if (!isObj(v) || typeof v.decision !== "string") throw new Fail("invalid_input");
  const tc = v.tool_call;
  return new Decision({
    decision: v.decision, reason: typeof v.reason === "string" ? v.reason : "", decisionId: strOrNull(v.decision_id),
    actionHash: strOrNull(v.action_hash), redactedFields: Array.isArray(v.redacted_fields) ? [...v.redacted_fields] : [],
    approvalId: strOrNull(v.approval_id), approvalExpiresAt: strOrNull(v.approval_expires_at),
    receiptId: strOrNull(v.receipt_id), receiptHash: strOrNull(v.receipt_hash), rootTrustLevel: strOrNull(v.root_trust_level),
    matchedPolicies: Array.isArray(v.matched_policies) ? [...v.matched_policies] : [], requestId: strOrNull(v.request_id),
    dryRun: v.dry_run === true, raw: v.raw ?? null, status: typeof v.status === "number" ? v.status : null,
    message: typeof v.message === "string" ? v.message : "", localActionHash: strOrNull(v.local_action_hash),
    hashCertain: v.hash_certain !== false, hashMismatch: v.hash_mismatch === true, failOpen: v.fail_open === true,
    toolCall: isObj(tc)
      ? { tool: tc.tool as string, action: tc.action as string, resource: (tc.resource ?? null) as string | null,
          parameters: isObj(tc.parameters) ? { ...tc.parameters } : {} }
      : null,
    mutatesState: v.mutates_state === true,
  });
}

export function approvalJson(a: Approval | null | undefined): Answer | null {
  if (!a) return null;
  return {
    approval_id: a.approvalId, status: a.status, decision_id: a.decisionId, action_hash: a.actionHash, reason: a.reason,
    expires_at: a.expiresAt, tool_call: a.toolCall, edited: a.edited, call: a.call, raw: a.raw ?? null,
  };
}

export function errorJson(e: SvcError): Answer {
  if (e instanceof Cancelled) {
    return { type: "Cancelled", error_code: "cancelled", status: null, message: "cancelled", headers: {}, decision: null, approval: null };
  }
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(e.headers ?? {})) headers[k.toLowerCase()] = String(v);
  const withDecision = e as SvcError & { decision?: Decision; approval?: Approval };
  return {
    type: e.name, error_code: e.errorCode, status: e.status, message: e.message, headers,
    decision: withDecision.decision instanceof Decision ? decisionJson(withDecision.decision) : null,
    approval: withDecision.approval instanceof Approval ? approvalJson(withDecision.approval) : null,
  };
}

function seconds(req: Obj, name: string): number | null {
  const v = req[name];
  if (v === undefined || v === null) return null;
  if (typeof v !== "number") throw new Fail("invalid_input");
  return v;
}

function callOf(req: Obj): Obj {
  const tc = req.tool_call;
  if (!isObj(tc)) throw new Fail(tc === undefined || tc === null ? "missing_field" : "invalid_input");
  return { ...tc };
}

const AUTHORIZE_OPTS: Array<[string, string]> = [
  ["mutates_state", "mutatesState"], ["source_trust", "sourceTrust"], ["trace", "trace"], ["environment", "environment"],
  ["request_id", "requestId"], ["approval_id", "approvalId"], ["dry_run", "dryRun"], ["webhook", "webhook"],
];

function optsOf(req: Obj, allowed: string[] = AUTHORIZE_OPTS.map(([k]) => k)): Obj {
  const out: Obj = {};
  for (const [wire, name] of AUTHORIZE_OPTS) {
    if (allowed.includes(wire) && req[wire] !== undefined && req[wire] !== null) out[name] = req[wire];
  }
  return out;
}

/** The driver's one client and what it logged during the current op. */
export class Session {
  client: Client | null = null;
  records: Warning[] = [];
  readonly logger: Logger = {
    warn: (m: string) => this.records.push({ kind: classify(m), message: m }),
    error: (m: string) => this.records.push({ kind: classify(m), message: m }),
  };

  async handle(op: string, req: Obj): Promise<Answer> {
    if (op !== "client" && this.client === null) return { error: "no_client" };
    this.records = [];
    let answer: Answer;
    try {
      answer = await this.op(op, req);
    } catch (e) {
      if (e instanceof Fail) return { error: e.code };
      if (!(e instanceof SvcError)) throw e;
      answer = { raised: errorJson(e) };
      if (op === "run" || op === "guard") answer.ran = false;
    }
    answer.warnings = [...this.records];
    return answer;
  }

  private async op(op: string, req: Obj): Promise<Answer> {
    switch (op) {
      case "client":
        return this.opClient(req);
      case "authorize": {
        const d = await this.client!.authorize(callOf(req) as never, optsOf(req));
        return { decision: decisionJson(d) };
      }
      case "run":
        return this.run(callOf(req), req, optsOf(req));
      case "guard":
        return this.guard(req);
      case "wait_for_approval":
        return this.wait(req);
      case "get_receipt": {
        const rid = req.receipt_id;
        if (typeof rid !== "string") throw new Fail("invalid_input");
        return { receipt: await this.client!.getReceipt(rid) };
      }
      case "get_receipt_public_key":
        return { public_key: await this.client!.getReceiptPublicKey() };
      case "verify_receipt_inclusion": {
        const rid = req.receipt_id;
        if (typeof rid !== "string") throw new Fail("invalid_input");
        const r = await this.client!.verifyInclusion(rid);
        return { inclusion: { checkpoint_valid: r.checkpointValid, proof_valid: r.proofValid, origin: r.origin, tree_size: r.treeSize } };
      }
      case "verify_decision_receipt": {
        const d = decisionFromJson(req.decision);
        const tc = req.tool_call;
        return { receipt: await this.client!.verifyReceipt(d, isObj(tc) ? ({ ...tc } as never) : null) };
      }
      case "stats":
        return { fail_open_count: this.client!.failOpenCount };
      default:
        throw new Fail("unknown_op");
    }
  }

  private opClient(req: Obj): Answer {
    const url = req.base_url;
    const token = req.agent_token;
    if (typeof url !== "string" || typeof token !== "string") throw new Fail("invalid_input");
    const fo = req.fail_open_tools;
    if (fo !== undefined && fo !== null && !Array.isArray(fo)) throw new Fail("invalid_input");
    const retries = req.retries;
    if (retries !== undefined && retries !== null && typeof retries !== "number") throw new Fail("invalid_input");
    for (const k of ["signing_key", "receipt_public_key", "api_version"]) {
      if (req[k] !== undefined && req[k] !== null && typeof req[k] !== "string") throw new Fail("invalid_input");
    }
    try {
      this.client = new Client({
        baseUrl: url,
        agentToken: token,
        signingKey: (req.signing_key as string | null) ?? null,
        receiptPublicKey: (req.receipt_public_key as string | null) ?? null,
        apiVersion: ((req.api_version as string | null) || "v2") as "v1" | "v2",
        failOpenTools: ((fo as unknown[] | null) ?? []) as Array<string | [string, string]>,
        timeout: seconds(req, "timeout") ?? undefined,
        approvalTimeout: seconds(req, "approval_timeout"),
        retries: (retries as number | null) ?? undefined,
        logger: this.logger,
      });
    } catch (e) {
      if (e instanceof TypeError) throw new Fail("invalid_input");
      throw e;
    }
    return { ok: true };
  }

  private async run(tc: Obj, req: Obj, opts: Obj): Promise<Answer> {
    if (opts.dryRun) throw new Fail("invalid_input");
    const runOpts: RunOptions = { ...(opts as RunOptions), wait: req.wait !== false, approvalTimeout: seconds(req, "approval_timeout") ?? undefined };
    if (has(req, "mask")) runOpts.mask = req.mask;
    const { parameters, decision } = await this.client!.authorizeToRun(tc as never, runOpts);
    return { ran: true, parameters, decision: decisionJson(decision) };
  }

  private async guard(req: Obj): Promise<Answer> {
    const { tool, action } = req;
    const args = req.arguments ?? {};
    if (typeof tool !== "string" || typeof action !== "string" || !isObj(args)) throw new Fail("invalid_input");
    const resource = req.resource;
    if (resource !== undefined && resource !== null && typeof resource !== "string") throw new Fail("invalid_input");
    // The call guard() builds: the arguments by name are the parameters.
    const tc: SentToolCall = { tool, action, resource: (resource as string | null) ?? null, parameters: { ...args } };
    const opts = optsOf(req, ["source_trust", "trace", "environment", "request_id", "webhook"]);
    opts.mutatesState = req.mutates_state === true;
    return this.run(tc as Obj, req, opts);
  }

  private async wait(req: Obj): Promise<Answer> {
    const ref: Decision | string = req.decision !== undefined && req.decision !== null
      ? decisionFromJson(req.decision)
      : (req.approval_id as string);
    const after = seconds(req, "cancel_after");
    const timeout = seconds(req, "timeout");
    let timer: NodeJS.Timeout | undefined;
    let signal: AbortSignal | undefined;
    if (after !== null) {
      const ac = new AbortController();
      signal = ac.signal;
      timer = setTimeout(() => ac.abort(new Error("cancel_after")), after * 1000);
    }
    try {
      const a = await this.client!.waitForApproval(ref, { timeout, signal });
      return { approval: approvalJson(a) };
    } finally {
      if (timer) clearTimeout(timer);
    }
  }
}

// --- lines -----------------------------------------------------------------

/** Answer one parsed request object. */
export async function handle(req: unknown, session: Session | null = null): Promise<Answer> {
  if (!isObj(req)) return { error: "invalid_input" };
  const op = req.op;
  if (session !== null && typeof op === "string" && LIVE_OPS.has(op)) {
    try {
      return await session.handle(op, req);
    } catch {
      return { error: "internal_error" }; // never stop early
    }
  }
  const fn = typeof op === "string" && Object.prototype.hasOwnProperty.call(OPS, op) ? OPS[op] : undefined;
  if (!fn) return { error: "unknown_op" };
  try {
    return fn(req);
  } catch (e) {
    if (e instanceof Fail) return { error: e.code };
    return { error: "internal_error" };
  }
}

/** Answer one input line (bytes or text), parsed strictly. */
export async function handleLine(line: Uint8Array | string, session: Session | null = null): Promise<Answer> {
  let text: string;
  if (typeof line === "string") text = line;
  else {
    try {
      text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(line);
    } catch {
      return { error: "invalid_json" };
    }
  }
  text = text.replace(/^[\r\n]+|[\r\n]+$/g, "");
  if (!text.trim()) return { error: "invalid_json" };
  let req: unknown;
  try {
    req = parseStrict(text);
  } catch (e) {
    return { error: e instanceof CanonicalError && e.message.includes("duplicate") ? "duplicate_key" : "invalid_json" };
  }
  return handle(req, session);
}

/** ASCII JSON text of an answer, one line. */
export function encode(answer: Answer): string {
  let s: string | undefined;
  try {
    s = JSON.stringify(answer);
  } catch {
    s = undefined;
  }
  if (s === undefined) return '{"error":"internal_error"}\n';
  return s.replace(/[\u007f-\uffff]/g, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0")) + "\n";
}

function write(text: string): Promise<void> {
  return new Promise((resolve, reject) => {
    process.stdout.write(text, (err) => (err ? reject(err) : resolve()));
  });
}

/** Read lines from standard input until EOF, answer each in order (one at a
 * time), then exit 0. */
export async function main(): Promise<number> {
  process.noDeprecation = true; // the SDK's deprecation warnings are captured, not printed
  const session = new Session();
  let buf: Buffer = Buffer.alloc(0);
  for await (const chunk of process.stdin) {
    buf = buf.length ? Buffer.concat([buf, chunk as Buffer]) : (chunk as Buffer);
    let nl: number;
    while ((nl = buf.indexOf(0x0a)) >= 0) {
      const line = buf.subarray(0, nl + 1);
      buf = buf.subarray(nl + 1);
      await write(encode(await handleLine(new Uint8Array(line), session)));
    }
  }
  if (buf.length) await write(encode(await handleLine(new Uint8Array(buf), session)));
  return 0;
}
