/**
 * The client: authorize, wait for approvals, run and guard tools, check receipts.
 *
 * Fail closed everywhere: a tool runs only on an `allow` (or `redact`, with the
 * redaction applied) that this client received and understood. Everything
 * else throws one of the errors of `errors.ts`.
 */

import { randomBytes } from "node:crypto";
import {
  actionHash,
  CanonicalError,
  canonicalize,
  isPlainObject,
  isWellFormed,
  normalizeIdentifier,
  setKey,
  toolCallIsCertain,
  UNICODE_VERSION,
} from "./canonical.js";
import {
  ActionHashMismatch,
  ApprovalExpired,
  ApprovalRejected,
  ApprovalRequired,
  Cancelled,
  Denied,
  InvalidRequest,
  ReceiptInvalid,
  SvcError,
  SvcUnavailable,
} from "./errors.js";
import { cancelled, type FetchLike, NetworkError, now, type Response, sleep, Transport } from "./http.js";
import { redact } from "./redaction.js";
import { type InclusionProof, type InclusionResult, parseCheckpoint, verifyInclusion } from "./receiptlog.js";
import { decodePublicKey, type Receipt, verifyReceipt as verifyReceiptFields } from "./receipts.js";
import { backoff, errorClass, retryAfterSeconds, shouldRetry } from "./retry.js";
import { decodeKey, SIGNATURE_HEADER, sign } from "./signing.js";

export const VERSION = "0.1.0";
export const DECISIONS: ReadonlySet<string> = new Set(["allow", "deny", "require_approval", "redact", "quarantine"]);
export const MAX_BODY_BYTES = 1 << 20;
/** CONTRACT 14: `?wait=N`, N from 0 to 25. */
export const MAX_WAIT = 25;

/** A tool call: what the agent wants to do. */
export type ToolCall = {
  tool: string;
  action: string;
  resource?: string | null;
  parameters?: Record<string, unknown>;
};

/** A tool call as sent (resource null when absent, parameters an object). */
export type SentToolCall = {
  tool: string;
  action: string;
  resource: string | null;
  parameters: Record<string, unknown>;
};

export type AuthorizeOptions = {
  mutatesState?: boolean;
  sourceTrust?: string;
  trace?: Record<string, unknown>;
  environment?: string;
  requestId?: string;
  approvalId?: string;
  dryRun?: boolean;
  webhook?: { url: string; secret: string };
  signal?: AbortSignal;
};

export type RunOptions = AuthorizeOptions & {
  /** Wait for a require_approval (default true); false throws ApprovalRequired. */
  wait?: boolean;
  /** Seconds to wait for an approval (default: the client's approvalTimeout). */
  approvalTimeout?: number;
  /** When given (not undefined), a redacted value is replaced by it instead of removed. */
  mask?: unknown;
};

export type GuardSpec<A> = Omit<RunOptions, "signal"> & {
  tool: string;
  action: string;
  resource?: string | null | ((args: A) => string | null | undefined);
};

export interface Logger {
  debug?(message: string): void;
  info?(message: string): void;
  warn?(message: string): void;
  error?(message: string): void;
}

export type ClientOptions = {
  baseUrl: string;
  agentToken: string;
  /** The agent's base64 HMAC key: every authorize body is then signed. */
  signingKey?: string | null;
  /** Total deadline of one call (all attempts and waits), seconds. Default 3. */
  timeout?: number;
  /** Further attempts after the first. Default 2. */
  retries?: number;
  /** The gateway's Ed25519 receipt key (base64), pinned out of band. */
  receiptPublicKey?: string | null;
  apiVersion?: "v1" | "v2";
  /** Tools (or [tool, action] pairs) that may run without svc, read-only calls only. */
  failOpenTools?: Array<string | [string, string]>;
  /** Default seconds to wait for an approval (default: until it expires). */
  approvalTimeout?: number | null;
  logger?: Logger;
  userAgent?: string;
  fetch?: FetchLike;
};

/** A time-ordered UUID version 7 (RFC 9562), lower-case text. */
export function uuid7(): string {
  const b = randomBytes(16);
  const ms = BigInt(Date.now());
  for (let i = 0; i < 6; i++) b[i] = Number((ms >> BigInt(8 * (5 - i))) & 0xffn);
  b[6] = 0x70 | (b[6]! & 0x0f);
  b[8] = 0x80 | (b[8]! & 0x3f);
  const h = b.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** A fresh random nonce (32 URL-safe characters; CONTRACT 4 allows 8 to 128). */
export function newNonce(): string {
  return randomBytes(24).toString("base64url");
}

/** An RFC 3339 timestamp as epoch milliseconds (null when absent or malformed). */
export function parseTime(value: unknown): number | null {
  if (typeof value !== "string" || !value) return null;
  let v = value.trim().replace(/(\.\d{1,3})\d*/, "$1");
  if (!/([Zz]|[+-]\d{2}:?\d{2})$/.test(v)) v += "Z";
  const t = Date.parse(v);
  return Number.isNaN(t) ? null : t;
}

function str(v: unknown): string | null {
  return typeof v === "string" && v !== "" ? v : null;
}

function int(v: unknown): number | null {
  return typeof v === "number" && Number.isInteger(v) ? v : null;
}

function strs(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];
}

function isObj(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** The plain fields of a Decision. */
export interface DecisionFields {
  decision: string;
  reason: string;
  decisionId: string | null;
  actionHash: string | null;
  redactedFields: string[];
  approvalId: string | null;
  approvalExpiresAt: string | null;
  receiptId: string | null;
  receiptHash: string | null;
  rootTrustLevel: string | null;
  matchedPolicies: string[];
  compositeRiskScore: number | null;
  riskScore: number | null;
  requestId: string | null;
  dryRun: boolean;
  /** The body as received. */
  raw: unknown;
  /** HTTP status of the answer (200; 403 for a refusal before policy; null for fail-open). */
  status: number | null;
  /** The server's message for a refusal without decision (403). */
  message: string;
  /** svc-jcs-1 of the call as this client computed it. */
  localActionHash: string | null;
  /** False when the call's identifiers hold code points this runtime does not
   * assign: the server's hash is then trusted. */
  hashCertain: boolean;
  /** The server's actionHash differs from localActionHash. */
  hashMismatch: boolean;
  /** A local allow because svc was unavailable and the tool may fail open. */
  failOpen: boolean;
  /** The call as asked. */
  toolCall: SentToolCall | null;
  mutatesState: boolean;
  /** The receipt, when it was fetched and verified. */
  receipt: Receipt | null;
}

/** What svc decided about one call. `allowed` is true only for allow and redact. */
export class Decision implements DecisionFields {
  decision = "deny";
  reason = "";
  decisionId: string | null = null;
  actionHash: string | null = null;
  redactedFields: string[] = [];
  approvalId: string | null = null;
  approvalExpiresAt: string | null = null;
  receiptId: string | null = null;
  receiptHash: string | null = null;
  rootTrustLevel: string | null = null;
  matchedPolicies: string[] = [];
  compositeRiskScore: number | null = null;
  riskScore: number | null = null;
  requestId: string | null = null;
  dryRun = false;
  raw: unknown = null;
  status: number | null = null;
  message = "";
  localActionHash: string | null = null;
  hashCertain = true;
  hashMismatch = false;
  failOpen = false;
  toolCall: SentToolCall | null = null;
  mutatesState = false;
  receipt: Receipt | null = null;

  /** A Decision from plain fields (what is not given takes its default). */
  constructor(init: Partial<DecisionFields> & { decision: string }) {
    for (const [k, v] of Object.entries(init)) {
      if (v !== undefined) (this as Record<string, unknown>)[k] = v;
    }
  }

  get allowed(): boolean {
    return this.decision === "allow" || this.decision === "redact";
  }

  /** approvalExpiresAt as epoch milliseconds. */
  get expiresAt(): number | null {
    return parseTime(this.approvalExpiresAt);
  }

  /** Read a 200 authorize body. A missing or unknown decision value is read as
   * deny (SPEC 7.4). `extra` sets the local fields. */
  static fromBody(body: unknown, status: number | null = 200, extra: Partial<DecisionFields> = {}): Decision {
    if (!isObj(body)) return new Decision({ ...extra, decision: "deny", reason: "unreadable_answer", raw: body, status });
    let dec = body.decision;
    let reason = typeof body.reason === "string" ? body.reason : "";
    if (typeof dec !== "string" || !DECISIONS.has(dec)) {
      reason = typeof dec === "string" ? `unknown_decision:${dec}` : "missing_decision";
      dec = "deny";
    }
    return new Decision({
      ...extra,
      decision: dec as string,
      reason,
      decisionId: str(body.decision_id),
      actionHash: str(body.action_hash),
      redactedFields: strs(body.redacted_fields),
      approvalId: str(body.approval_id),
      approvalExpiresAt: str(body.approval_expires_at),
      receiptId: str(body.receipt_id),
      receiptHash: str(body.receipt_hash),
      rootTrustLevel: str(body.root_trust_level),
      matchedPolicies: strs(body.matched_policies),
      compositeRiskScore: int(body.composite_risk_score),
      riskScore: int(body.risk_score),
      requestId: str(body.request_id),
      dryRun: body.dry_run === true,
      raw: body,
      status,
    });
  }
}

/** What a client does with a 200 authorize body: `run`, `run_redacted`,
 * `deny` or `wait_approval` (testdata/sdk/outcomes.json). */
export function outcome(body: unknown): "run" | "run_redacted" | "deny" | "wait_approval" {
  if (!isObj(body)) return "deny";
  const d = body.decision;
  if (d === "allow") return "run";
  if (d === "redact") {
    let fields = body.redacted_fields;
    if (fields === undefined || fields === null) fields = [];
    if (!Array.isArray(fields)) return "deny";
    try {
      redact({}, fields as string[]);
    } catch (e) {
      if (e instanceof SvcError) return "deny";
      throw e;
    }
    return "run_redacted";
  }
  if (d === "require_approval") {
    const aid = body.approval_id;
    return typeof aid === "string" && aid !== "" ? "wait_approval" : "deny";
  }
  return "deny";
}

/** The plain fields of an Approval. */
export interface ApprovalFields {
  approvalId: string;
  status: string;
  decisionId: string | null;
  agentId: string | null;
  toolCall: Record<string, unknown> | null;
  actionHash: string | null;
  reason: string | null;
  approverUserId: string | null;
  createdAt: string | null;
  decidedAt: string | null;
  expiresAt: string | null;
  consumedAt: string | null;
  raw: unknown;
  edited: boolean;
  call: SentToolCall | null;
}

/** An approval as read from `GET /v2/approvals/:id` (CONTRACT 5). `call` is
 * the call to present again: the call as asked, with the parameters the
 * approver granted (`edited` when they differ). */
export class Approval implements ApprovalFields {
  approvalId = "";
  status = "";
  decisionId: string | null = null;
  agentId: string | null = null;
  toolCall: Record<string, unknown> | null = null;
  actionHash: string | null = null;
  reason: string | null = null;
  approverUserId: string | null = null;
  createdAt: string | null = null;
  decidedAt: string | null = null;
  expiresAt: string | null = null;
  consumedAt: string | null = null;
  raw: unknown = null;
  edited = false;
  call: SentToolCall | null = null;

  constructor(init: Partial<ApprovalFields> & { approvalId: string }) {
    for (const [k, v] of Object.entries(init)) {
      if (v !== undefined) (this as Record<string, unknown>)[k] = v;
    }
  }

  /** The parameters to run with (the call's, else the stored tool_call's). */
  get parameters(): Record<string, unknown> {
    const src = (this.call ?? this.toolCall ?? {}) as Record<string, unknown>;
    const p = src.parameters;
    return isObj(p) ? { ...p } : {};
  }

  static fromBody(body: Record<string, unknown>): Approval {
    const tc = body.tool_call;
    return new Approval({
      approvalId: typeof body.approval_id === "string" ? body.approval_id : "",
      status: typeof body.status === "string" ? body.status : "",
      decisionId: str(body.decision_id),
      agentId: str(body.agent_id),
      toolCall: isObj(tc) ? { ...tc } : null,
      actionHash: str(body.action_hash),
      reason: typeof body.reason === "string" ? body.reason : null,
      approverUserId: str(body.approver_user_id),
      createdAt: str(body.created_at),
      decidedAt: str(body.decided_at),
      expiresAt: str(body.expires_at),
      consumedAt: str(body.consumed_at),
      raw: body,
    });
  }
}

// --- request values --------------------------------------------------------

const MAX_DEPTH = 1000;

/** A plain JSON copy of `v`, refusing what has no JSON form (InvalidRequest,
 * nothing sent). Object members whose value is undefined are left out. */
export function toJsonValue(v: unknown, what = "value", depth = 0): unknown {
  if (depth > MAX_DEPTH) throw new InvalidRequest(`${what} is nested too deeply (or circular)`, { errorCode: "invalid_value" });
  if (v === null) return null;
  switch (typeof v) {
    case "string":
      if (!isWellFormed(v)) {
        throw new InvalidRequest(`${what} holds a lone surrogate, which has no UTF-8 form`, { errorCode: "invalid_utf8" });
      }
      return v;
    case "number":
      if (!Number.isFinite(v)) {
        throw new InvalidRequest(`${what} holds ${v}, which has no JSON form`, { errorCode: "invalid_number" });
      }
      return v;
    case "boolean":
      return v;
    case "object":
      break;
    default:
      throw new InvalidRequest(`${what} holds a ${typeof v}, which has no JSON form`, { errorCode: "invalid_value" });
  }
  if (Array.isArray(v)) {
    const out: unknown[] = [];
    for (let i = 0; i < v.length; i++) {
      if (v[i] === undefined) throw new InvalidRequest(`${what} holds undefined in an array`, { errorCode: "invalid_value" });
      out.push(toJsonValue(v[i], what, depth + 1));
    }
    return out;
  }
  if (!isPlainObject(v)) {
    const toJSON = (v as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === "function") return toJsonValue(toJSON.call(v), what, depth + 1);
    const name = (v as object).constructor?.name ?? "object";
    throw new InvalidRequest(`${what} holds a ${name}, which has no JSON form`, { errorCode: "invalid_value" });
  }
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v)) {
    const x = v[k];
    if (x === undefined) continue;
    if (!isWellFormed(k)) throw new InvalidRequest(`${what} has a member name with a lone surrogate`, { errorCode: "invalid_utf8" });
    setKey(out, k, toJsonValue(x, what, depth + 1));
  }
  return out;
}

/** Empty once white space is stripped (the reference's str.strip(): also
 * U+001C..U+001F; not U+FEFF, which JS trim() strips). */
function blank(s: string): boolean {
  return /^[\t\n\v\f\r \x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$/.test(s);
}

function hasNul(v: unknown): boolean {
  if (typeof v === "string") return v.includes("\u0000");
  if (Array.isArray(v)) return v.some(hasNul);
  if (isObj(v)) return Object.keys(v).some((k) => k.includes("\u0000") || hasNul(v[k]));
  return false;
}

function sameJson(a: unknown, b: unknown): boolean {
  try {
    return canonicalize(a) === canonicalize(b);
  } catch {
    return false;
  }
}

const NO_MASK: unique symbol = Symbol("no mask");

function maskArgs(mask: unknown): [] | [unknown] {
  return mask === NO_MASK || mask === undefined ? [] : [mask];
}

// --- the client ------------------------------------------------------------

/**
 * An agent's client of svc. See the README for every rule.
 */
export class Client {
  readonly baseUrl: string;
  readonly timeout: number;
  readonly retries: number;
  readonly apiVersion: "v1" | "v2";
  readonly approvalTimeout: number | null;
  readonly log: Logger;
  /** Times a listed read-only tool ran without svc (fail-open). */
  failOpenCount = 0;

  private readonly token: string;
  private readonly signingKey: Uint8Array | null;
  private readonly receiptKey: Uint8Array | null;
  private readonly transport: Transport;
  private readonly ua: string;
  private warnedDeprecated = false;
  private readonly failOpen = new Set<string>();

  constructor(opts: ClientOptions) {
    if (!opts || typeof opts !== "object") throw new TypeError("Client options are required");
    const apiVersion = opts.apiVersion ?? "v2";
    if (apiVersion !== "v1" && apiVersion !== "v2") throw new TypeError("apiVersion must be 'v1' or 'v2'");
    if (typeof opts.agentToken !== "string" || !opts.agentToken) throw new TypeError("agentToken is required");
    const timeout = opts.timeout ?? 3;
    if (!(typeof timeout === "number" && timeout > 0)) throw new TypeError("timeout must be a positive number of seconds");
    this.baseUrl = opts.baseUrl;
    this.timeout = timeout;
    this.retries = Math.max(0, Math.floor(opts.retries ?? 2));
    this.apiVersion = apiVersion;
    this.approvalTimeout = opts.approvalTimeout ?? null;
    this.log = opts.logger ?? defaultLogger;
    this.token = opts.agentToken;
    this.signingKey = opts.signingKey ? decodeKey(opts.signingKey) : null;
    this.receiptKey = opts.receiptPublicKey ? decodePublicKey(opts.receiptPublicKey) : null;
    this.transport = new Transport(opts.baseUrl, opts.fetch ?? globalThis.fetch);
    this.ua = opts.userAgent ?? `svc-sdk-typescript/${VERSION}`;
    for (const t of opts.failOpenTools ?? []) {
      if (typeof t === "string") this.failOpen.add(normalizeIdentifier(t) + "\u0000");
      else if (Array.isArray(t) && t.length === 2 && typeof t[0] === "string" && typeof t[1] === "string") {
        this.failOpen.add(normalizeIdentifier(t[0]) + "\u0000" + normalizeIdentifier(t[1]));
      } else throw new TypeError("failOpenTools holds a tool name or a [tool, action] pair");
    }
    if (apiVersion === "v1") {
      this.deprecated("apiVersion 'v1' uses svc's deprecated /v1 paths (sunset Wed, 31 Dec 2026 23:59:59 GMT)");
    }
  }

  /** Nothing to release (fetch pools its connections); kept for symmetry. */
  close(): void {}

  // -- plumbing -----------------------------------------------------------

  private path(p: string): string {
    return `/${this.apiVersion}${p}`;
  }

  private logAt(level: keyof Logger, message: string): void {
    try {
      this.log[level]?.call(this.log, message);
    } catch {
      // a logger never breaks a call
    }
  }

  private deprecated(why: string): void {
    if (this.warnedDeprecated) return;
    this.warnedDeprecated = true;
    this.logAt("warn", `svc: ${why}`);
    process.emitWarning(`svc: ${why}`, { type: "DeprecationWarning", code: "SVC_DEPRECATED_API" });
  }

  private observe(resp: Response): void {
    const dep = resp.header("deprecation");
    const sunset = resp.header("sunset");
    if (dep !== null || sunset !== null) {
      this.deprecated(`the gateway marks this API as deprecated (deprecation: ${dep}, sunset: ${sunset})`);
    }
  }

  private headers(body: Uint8Array | null, signed: boolean): Record<string, string> {
    const h: Record<string, string> = {
      Authorization: `Bearer ${this.token}`,
      Accept: "application/json",
      "User-Agent": this.ua,
    };
    if (body !== null) h["Content-Type"] = "application/json";
    if (signed && this.signingKey !== null && body !== null) h[SIGNATURE_HEADER] = sign(body, this.signingKey);
    return h;
  }

  /** Send with bounded retries inside `deadline` (monotonic ms). Returns the
   * first answer that is not retried; throws SvcUnavailable or the final
   * answer's error when attempts or time run out. */
  private async send(
    method: string,
    path: string,
    deadline: number,
    bodyFactory: (() => Uint8Array) | null,
    signed: boolean,
    signal?: AbortSignal,
  ): Promise<Response> {
    let attempt = 0;
    let lastResp: Response | null = null;
    let lastErr: string | null = null;
    for (;;) {
      if (signal?.aborted) throw cancelled(signal);
      const remaining = deadline - now();
      if (remaining <= 0) break;
      const body = bodyFactory ? bodyFactory() : null;
      try {
        const resp = await this.transport.request(method, this.path(path), body, this.headers(body, signed), remaining / 1000, signal);
        this.observe(resp);
        if (!shouldRetry(resp.status)) return resp;
        lastResp = resp;
        lastErr = null;
        this.logAt("debug", `svc: ${method} ${path}: HTTP ${resp.status} (attempt ${attempt + 1})`);
      } catch (e) {
        if (!(e instanceof NetworkError)) throw e;
        lastResp = null;
        lastErr = e.message;
        this.logAt("debug", `svc: ${method} ${path}: ${e.message} (attempt ${attempt + 1})`);
      }
      if (attempt >= this.retries) break;
      const ra = lastResp ? retryAfterSeconds(lastResp.header("retry-after")) : null;
      const delay = ra ?? backoff(attempt);
      if (delay * 1000 >= deadline - now()) break; // the wait asked for does not fit in the deadline: fail now
      await sleep(delay, signal);
      attempt++;
    }
    if (lastResp) {
      throw errorClass(lastResp.status).fromResponse(lastResp.status, lastResp.json(), lastResp.headers, "svc: ");
    }
    throw new SvcUnavailable(`svc: unreachable within the deadline (${lastErr ?? "no time left"})`, { errorCode: "svc_unavailable" });
  }

  // -- authorize ----------------------------------------------------------

  private static toolCall(call: unknown): SentToolCall {
    if (!isObj(call)) {
      throw new InvalidRequest("the tool call must be an object with tool, action, resource and parameters", { errorCode: "invalid_tool_call" });
    }
    const { tool, action } = call;
    const resource = call.resource ?? null;
    let parameters = call.parameters ?? {};
    if (typeof tool !== "string" || blank(tool)) throw new InvalidRequest("tool must be a non-empty string", { errorCode: "invalid_tool_call" });
    if (typeof action !== "string" || blank(action)) throw new InvalidRequest("action must be a non-empty string", { errorCode: "invalid_tool_call" });
    if (resource !== null && typeof resource !== "string") throw new InvalidRequest("resource must be a string or null", { errorCode: "invalid_tool_call" });
    if (!isObj(parameters)) throw new InvalidRequest("parameters must be an object", { errorCode: "invalid_tool_call" });
    parameters = toJsonValue(parameters, "parameters") as Record<string, unknown>;
    return {
      tool: toJsonValue(tool, "tool") as string,
      action: toJsonValue(action, "action") as string,
      resource: resource === null ? null : (toJsonValue(resource, "resource") as string),
      parameters: parameters as Record<string, unknown>,
    };
  }

  private mayFailOpen(tool: string, action: string, mutatesState: boolean): boolean {
    if (mutatesState || this.failOpen.size === 0) return false;
    const t = normalizeIdentifier(tool);
    const a = normalizeIdentifier(action);
    return this.failOpen.has(t + "\u0000") || this.failOpen.has(t + "\u0000" + a);
  }

  /**
   * Ask svc about one call (`POST /v2/authorize`) and return its Decision.
   *
   * One `requestId` (a UUIDv7 unless given) is reused on every retry; each
   * attempt carries a fresh nonce and, with a signing key, the HMAC of exactly
   * the bytes sent. Deny, quarantine and require_approval are returned, not
   * thrown (`run` throws). A 403 before policy is returned as a deny Decision
   * without decisionId. Throws SvcAuthError (401), SvcUnavailable (unless the
   * tool may fail open), SvcError, InvalidRequest (nothing sent), Cancelled.
   */
  async authorize(call: ToolCall, opts: AuthorizeOptions = {}): Promise<Decision> {
    const tc = Client.toolCall(call);
    const mutatesState = opts.mutatesState === true;
    const extras: Array<[string, unknown]> = [
      ["trace", opts.trace],
      ["environment", opts.environment],
      ["source_trust", opts.sourceTrust],
      ["request_id", opts.requestId],
      ["approval_id", opts.approvalId],
      ["webhook", opts.webhook],
    ];
    const plain: Record<string, unknown> = {};
    for (const [name, v] of extras) {
      if (v === undefined || v === null) continue;
      plain[name] = toJsonValue(v, name);
    }
    for (const [name, v] of [["tool_call", tc] as [string, unknown], ...Object.entries(plain)]) {
      if (hasNul(v)) throw new InvalidRequest(`${name} holds U+0000, which svc refuses`, { errorCode: "nul_character" });
    }
    let localHash: string;
    try {
      localHash = actionHash(tc);
    } catch (e) {
      if (e instanceof CanonicalError) throw new InvalidRequest(`the tool call has no canonical form: ${e.message}`, { errorCode: "invalid_tool_call" });
      throw e;
    }
    const certain = toolCallIsCertain(tc);
    const rid = (plain.request_id as string | undefined) || uuid7();
    const base: Record<string, unknown> = { tool_call: tc, mutates_state: mutatesState, request_id: rid };
    if (plain.source_trust !== undefined) base.source_trust = plain.source_trust;
    if (plain.trace !== undefined) base.trace = plain.trace;
    if (plain.environment !== undefined) base.environment = plain.environment;
    if (plain.approval_id !== undefined) base.approval_id = plain.approval_id;
    if (opts.dryRun) base.dry_run = true;
    if (plain.webhook !== undefined) base.webhook = plain.webhook;

    const encoder = new TextEncoder();
    const body = (): Uint8Array => {
      const b = encoder.encode(JSON.stringify({ ...base, nonce: newNonce() }));
      if (b.length > MAX_BODY_BYTES) {
        throw new InvalidRequest(`the request body is ${b.length} bytes, over svc's 1 MiB limit`, { errorCode: "body_too_large" });
      }
      return b;
    };
    body(); // the pre-check, before anything is sent
    const extra: Partial<DecisionFields> = { localActionHash: localHash, hashCertain: certain, toolCall: tc, mutatesState };
    let resp: Response;
    try {
      resp = await this.send("POST", "/authorize", now() + this.timeout * 1000, body, true, opts.signal);
    } catch (e) {
      if (e instanceof SvcUnavailable && plain.approval_id === undefined && this.mayFailOpen(tc.tool, tc.action, mutatesState)) {
        this.failOpenCount += 1;
        this.logAt(
          "warn",
          `svc: FAIL-OPEN for read-only tool ${JSON.stringify(tc.tool)} action ${JSON.stringify(tc.action)} (request_id ${rid}, use ${this.failOpenCount}): ${e.message}`,
        );
        return new Decision({ ...extra, decision: "allow", reason: "fail_open_svc_unavailable", requestId: rid, failOpen: true, status: null });
      }
      throw e;
    }
    return this.decisionOf(resp, rid, extra);
  }

  private decisionOf(resp: Response, rid: string, extra: Partial<DecisionFields>): Decision {
    const body = resp.json();
    if (resp.status === 200) {
      if (!isObj(body)) {
        throw new SvcError("svc: the authorize answer is not a JSON object", {
          status: 200, body: resp.text(), errorCode: "unreadable_answer", headers: resp.headers,
        });
      }
      const d = Decision.fromBody(body, 200, extra);
      if (d.decision !== body.decision) {
        this.logAt("warn", `svc: unknown decision ${JSON.stringify(body.decision) ?? "undefined"} read as deny (request_id ${rid})`);
      }
      if (d.requestId === null) d.requestId = rid;
      if (d.actionHash && d.localActionHash && d.actionHash !== d.localActionHash) {
        d.hashMismatch = true;
        const why = d.hashCertain
          ? "local hash certain"
          : `local hash uncertain: identifiers beyond this runtime's Unicode ${process.versions.unicode ?? "?"} (svc-jcs-1 is ${UNICODE_VERSION}), server's trusted`;
        this.logAt("warn", `svc: action_hash mismatch: server ${d.actionHash}, local ${d.localActionHash} (${why}; decision ${d.decisionId})`);
      }
      return d;
    }
    if (resp.status === 403) {
      const err = SvcError.fromResponse(403, body, resp.headers);
      return new Decision({
        ...extra,
        decision: "deny",
        reason: err.errorCode || err.reason || "forbidden",
        requestId: rid,
        raw: body,
        status: 403,
        message: err.message,
      });
    }
    throw errorClass(resp.status).fromResponse(resp.status, body, resp.headers, "svc: ");
  }

  // -- approvals ----------------------------------------------------------

  /**
   * Wait until the approval is decided (long-polls `GET
   * /v2/approvals/:id?wait=N`). Returns the Approval when APPROVED (with `call`
   * and `edited` set); throws ApprovalRejected, ApprovalExpired (EXPIRED, or
   * the deadline passed: the earlier of the approval's expiry and `timeout`),
   * ActionHashMismatch, SvcAuthError, SvcError, SvcUnavailable (transient
   * failures until the deadline), Cancelled (`signal`, at once).
   */
  async waitForApproval(ref: Decision | Approval | string, opts: { timeout?: number | null; signal?: AbortSignal } = {}): Promise<Approval> {
    const signal = opts.signal;
    let decision: Decision | null = null;
    let asked: SentToolCall | null = null;
    let expires: number | null = null;
    let aid: unknown;
    if (ref instanceof Decision) {
      decision = ref;
      aid = ref.approvalId;
      asked = ref.toolCall;
      expires = ref.expiresAt;
    } else if (ref instanceof Approval) {
      aid = ref.approvalId;
      expires = parseTime(ref.expiresAt);
    } else aid = ref;
    if (typeof aid !== "string" || !aid) throw new SvcError("svc: no approval_id to wait for", { errorCode: "no_approval_id" });
    const timeout = opts.timeout ?? this.approvalTimeout;
    const userDeadline = timeout !== null && timeout !== undefined ? now() + timeout * 1000 : Infinity;
    const deadline = (): number => {
      if (expires === null) return userDeadline;
      // the expiry on the monotonic clock, with a second of slack so that the
      // server's own EXPIRED answer is usually what ends the wait
      return Math.min(userDeadline, now() + (expires - Date.now()) + 1000);
    };
    const left = () => Math.max(0, (deadline() - now()) / 1000);

    let last: Approval | null = null;
    let transient: string | null = null;
    let failures = 0;
    let polls = 0;
    const path = `/approvals/${encodeURIComponent(aid)}`;
    for (;;) {
      if (signal?.aborted) throw cancelled(signal);
      const remaining = (deadline() - now()) / 1000;
      if (remaining <= 0) {
        if (transient !== null && (last === null || last.status === "PENDING")) {
          throw new SvcUnavailable(`svc: approval ${aid}: no answer before the deadline (${transient})`, { errorCode: "svc_unavailable" });
        }
        throw new ApprovalExpired(`svc: approval ${aid} was not decided before the deadline`, last, decision, { errorCode: "approval_wait_deadline" });
      }
      const wait = remaining === Infinity ? MAX_WAIT : Math.floor(Math.min(MAX_WAIT, remaining));
      const t0 = now();
      let resp: Response;
      try {
        resp = await this.transport.request("GET", this.path(`${path}?wait=${wait}`), null, this.headers(null, false),
          wait + Math.min(10, this.timeout + 5), signal);
      } catch (e) {
        if (!(e instanceof NetworkError)) throw e;
        transient = e.message;
        failures++;
        await sleep(Math.min(backoff(failures, 0.5, 5) + 0.1, left()), signal);
        continue;
      }
      this.observe(resp);
      polls++;
      if (shouldRetry(resp.status)) {
        transient = `HTTP ${resp.status}`;
        failures++;
        const ra = retryAfterSeconds(resp.header("retry-after"));
        await sleep(Math.min(ra ?? backoff(failures, 0.5, 5) + 0.1, left()), signal);
        continue;
      }
      const body = resp.json();
      let a: Approval;
      if (resp.status === 304 && last !== null) a = last;
      else if (resp.status === 200 && isObj(body)) a = Approval.fromBody(body);
      else if (resp.status === 200) {
        throw new SvcError(`svc: approval ${aid}: the answer is not a JSON object`, { status: 200, errorCode: "unreadable_answer", headers: resp.headers });
      } else throw errorClass(resp.status).fromResponse(resp.status, body, resp.headers, `svc: approval ${aid}: `);
      transient = null;
      failures = 0;
      last = a;
      const exp = parseTime(a.expiresAt);
      if (exp !== null) expires = exp;
      if (a.status === "APPROVED") return this.approved(a, asked, decision);
      if (a.status === "REJECTED") {
        throw new ApprovalRejected(`svc: approval ${aid} was rejected${a.reason ? `: ${a.reason}` : ""}`, a, decision, { errorCode: "approval_rejected" });
      }
      if (a.status === "EXPIRED") throw new ApprovalExpired(`svc: approval ${aid} expired`, a, decision, { errorCode: "approval_expired" });
      if (a.status !== "PENDING") {
        throw new SvcError(`svc: approval ${aid}: unknown status ${JSON.stringify(a.status)}`, {
          status: resp.status, body: a.raw, errorCode: "unknown_approval_status", headers: resp.headers,
        });
      }
      const elapsed = (now() - t0) / 1000;
      if (elapsed < Math.max(0, wait - 0.5) || wait === 0) {
        // answered early while PENDING: a busy node (Retry-After), or a server
        // without ?wait. Poll gently: 1 to 5 s with jitter.
        const ra = retryAfterSeconds(resp.header("retry-after"));
        let delay = ra ?? Math.min(5, 1 + backoff(Math.min(polls, 3), 0.5, 4));
        if (wait === 0) delay = Math.min(delay, 0.25);
        await sleep(Math.min(delay, left()), signal);
      }
    }
  }

  /** Check an APPROVED approval against the call asked; set `call` and
   * `edited`. An edit must hash (svc-jcs-1) to the approval's actionHash. */
  private approved(a: Approval, asked: SentToolCall | null, decision: Decision | null): Approval {
    const tc = a.toolCall;
    if (!isObj(tc)) throw new SvcError(`svc: approval ${a.approvalId} has no tool_call`, { errorCode: "unreadable_answer", body: a.raw });
    const params = tc.parameters ?? {};
    if (!isObj(params)) {
      throw new SvcError(`svc: approval ${a.approvalId}: tool_call.parameters is not an object`, { errorCode: "unreadable_answer", body: a.raw });
    }
    let call: SentToolCall;
    let local: string;
    let certain: boolean;
    const hashOf = (c: SentToolCall, normalized: boolean): string => {
      try {
        return actionHash(c, { normalized });
      } catch (e) {
        throw new SvcError(`svc: approval ${a.approvalId}: tool_call has no canonical form: ${(e as Error).message}`, { errorCode: "unreadable_answer" });
      }
    };
    if (asked === null) {
      call = {
        tool: tc.tool as string,
        action: tc.action as string,
        resource: (tc.resource ?? null) as string | null,
        parameters: { ...params },
      };
      local = hashOf(call, true);
      certain = toolCallIsCertain(call);
      a.edited = false;
    } else {
      const sameTarget =
        normalizeIdentifier(asked.tool) === tc.tool &&
        normalizeIdentifier(asked.action) === tc.action &&
        (asked.resource ?? null) === (tc.resource ?? null);
      certain = toolCallIsCertain(asked);
      if (!sameTarget && certain) {
        throw new ActionHashMismatch(`svc: approval ${a.approvalId} is for another call (${String(tc.tool)}/${String(tc.action)})`, null, a.actionHash);
      }
      call = { tool: asked.tool, action: asked.action, resource: asked.resource ?? null, parameters: { ...params } };
      a.edited = !sameJson(asked.parameters ?? {}, call.parameters);
      local = hashOf(call, false);
    }
    a.call = call;
    if (a.actionHash !== local) {
      if (certain) {
        throw new ActionHashMismatch(
          `svc: approval ${a.approvalId}: action_hash ${a.actionHash} does not match the approved call's ${local}`, local, a.actionHash);
      }
      this.logAt("warn", `svc: approval ${a.approvalId}: action_hash ${a.actionHash} differs from the local ${local}; identifiers beyond this runtime's Unicode tables, so the server's is trusted`);
      if (decision !== null) decision.hashMismatch = true;
    }
    return a;
  }

  // -- receipts -----------------------------------------------------------

  /** `GET /v2/receipts/:receipt_id` (an agent reads its own receipts). */
  async getReceipt(receiptId: string, opts: { signal?: AbortSignal } = {}): Promise<Receipt> {
    const resp = await this.send("GET", `/receipts/${encodeURIComponent(receiptId)}`, now() + this.timeout * 1000, null, false, opts.signal);
    const body = resp.json();
    if (resp.status !== 200 || !isObj(body)) {
      throw errorClass(resp.status).fromResponse(resp.status, body, resp.headers, `svc: receipt ${receiptId}: `);
    }
    return body;
  }

  /** `GET /v2/receipts/public-key`: `key_id` and `public_key`. Pin the key you
   * got out of band rather than trusting this answer alone. */
  async getReceiptPublicKey(opts: { signal?: AbortSignal } = {}): Promise<Record<string, unknown>> {
    const resp = await this.send("GET", "/receipts/public-key", now() + this.timeout * 1000, null, false, opts.signal);
    const body = resp.json();
    if (resp.status !== 200 || !isObj(body)) {
      throw errorClass(resp.status).fromResponse(resp.status, body, resp.headers, "svc: receipt key: ");
    }
    return body;
  }

  /** Fetch the receipt of `d` and check it (hash, signature with the pinned
   * key, ids, and action_hash against the local svc-jcs-1 of `call`).
   * Returns the receipt (also set as `d.receipt`); throws ReceiptInvalid. */
  async verifyReceipt(d: Decision, call?: ToolCall | null, opts: { signal?: AbortSignal } = {}): Promise<Receipt> {
    if (this.receiptKey === null) throw new TypeError("receiptPublicKey is not set");
    if (!d.receiptId) throw new ReceiptInvalid(`svc: decision ${d.decisionId} carries no receipt`, null, null, { errorCode: "receipt_missing" });
    let r: Receipt;
    try {
      r = await this.getReceipt(d.receiptId, opts);
    } catch (e) {
      if (e instanceof SvcError && !(e instanceof Cancelled) && e.status === 404) {
        throw new ReceiptInvalid(`svc: receipt ${d.receiptId} not found`, null, null, { errorCode: "receipt_not_found", status: 404, cause: e });
      }
      throw e;
    }
    const res = verifyReceiptFields(r, this.receiptKey);
    const problems: string[] = [];
    if (!res.hashValid) problems.push(`hash invalid (${res.error})`);
    if (!res.signatureValid) problems.push(`signature invalid (${res.error})`);
    for (const [name, want] of [
      ["receipt_id", d.receiptId],
      ["receipt_hash", d.receiptHash],
      ["decision_id", d.decisionId],
      ["decision", d.decision],
    ] as const) {
      if (want !== null && r[name] !== want) problems.push(`${name} ${JSON.stringify(r[name])} is not the decision's ${JSON.stringify(want)}`);
    }
    const c = call ?? d.toolCall;
    let local: string | null = null;
    if (c) {
      try {
        local = actionHash(c);
      } catch {
        local = null;
      }
    }
    const certain = !c || toolCallIsCertain(c);
    const wantHash = local !== null && certain ? local : d.actionHash;
    if (r.action_hash !== wantHash) problems.push(`action_hash ${JSON.stringify(r.action_hash)} is not the call's ${JSON.stringify(wantHash)}`);
    else if (local !== null && r.action_hash !== local) {
      this.logAt("warn", `svc: receipt ${d.receiptId}: action_hash differs from the local ${local} (uncertain Unicode; server's trusted)`);
    }
    if (problems.length) {
      throw new ReceiptInvalid(`svc: receipt ${d.receiptId}: ${problems.join("; ")}`, res, r, { errorCode: "receipt_invalid" });
    }
    d.receipt = r;
    return r;
  }

  /** `GET /v2/receipts/checkpoint`: the latest signed checkpoint of the
   * tenant's receipt log (CONTRACT §17), as text. */
  async getCheckpoint(opts: { signal?: AbortSignal } = {}): Promise<string> {
    const resp = await this.send("GET", "/receipts/checkpoint", now() + this.timeout * 1000, null, false, opts.signal);
    if (resp.status !== 200) throw errorClass(resp.status).fromResponse(resp.status, resp.json(), resp.headers, "svc: checkpoint: ");
    return new TextDecoder().decode(resp.body);
  }

  /** `GET /v2/receipts/:receipt_id/inclusion`: `leaf_index`, `tree_size` and
   * base64 `hashes` (in the latest checkpoint's tree without `treeSize`). */
  async getInclusionProof(receiptId: string, treeSize?: number, opts: { signal?: AbortSignal } = {}): Promise<InclusionProof> {
    const q = treeSize === undefined ? "" : `?tree_size=${Math.trunc(treeSize)}`;
    const resp = await this.send("GET", `/receipts/${encodeURIComponent(receiptId)}/inclusion${q}`, now() + this.timeout * 1000, null, false, opts.signal);
    const body = resp.json();
    if (resp.status !== 200 || !isObj(body)) {
      throw errorClass(resp.status).fromResponse(resp.status, body, resp.headers, `svc: inclusion of ${receiptId}: `);
    }
    return body as unknown as InclusionProof;
  }

  /** Prove a receipt (or the receipt of an id) is in the gateway's receipt
   * log: fetch the latest checkpoint and the receipt's inclusion proof in its
   * tree, and check both with the pinned receipt key (`verifyInclusion`).
   * Throws ReceiptInvalid (`errorCode` `inclusion_invalid`) when either check
   * fails, or `receipt_not_logged` when the receipt is newer than the latest
   * checkpoint (one is signed every SVC_CHECKPOINT_INTERVAL_SECS: try again
   * then). */
  async verifyInclusion(receipt: string | Receipt, opts: { signal?: AbortSignal } = {}): Promise<InclusionResult> {
    if (this.receiptKey === null) throw new TypeError("receiptPublicKey is not set");
    const r = typeof receipt === "string" ? await this.getReceipt(receipt, opts) : receipt;
    let checkpoint: string;
    try {
      checkpoint = await this.getCheckpoint(opts);
    } catch (e) {
      if (e instanceof SvcError && !(e instanceof Cancelled) && e.status === 404) {
        throw new ReceiptInvalid("svc: no receipt log checkpoint yet", null, r, { errorCode: "receipt_not_logged", status: 404, cause: e });
      }
      throw e;
    }
    let size: number;
    try {
      size = parseCheckpoint(checkpoint).size;
    } catch (e) {
      throw new ReceiptInvalid(`svc: the checkpoint served is not one: ${(e as Error).message}`, null, r, { errorCode: "inclusion_invalid" });
    }
    if (typeof r.seq === "number" && r.seq > size) {
      throw new ReceiptInvalid(`svc: receipt ${String(r.receipt_id)} (seq ${r.seq}) is newer than the latest checkpoint (${size} receipts)`, null, r, {
        errorCode: "receipt_not_logged",
      });
    }
    const proof = await this.getInclusionProof(String(r.receipt_id), size, opts);
    const res = verifyInclusion(r, proof, checkpoint, this.receiptKey);
    if (!res.valid) {
      throw new ReceiptInvalid(`svc: receipt ${String(r.receipt_id)} is not proven in the receipt log: ${res.error}`, res, r, { errorCode: "inclusion_invalid" });
    }
    return res;
  }

  // -- run and guard ------------------------------------------------------

  /** @internal require_approval before waiting: refuse what cannot be waited for. */
  preWait(d: Decision, wait: boolean): void {
    if (!d.approvalId) throw new Denied("svc: require_approval without an approval_id (treated as deny)", d);
    if (d.hashMismatch && d.hashCertain) {
      throw new ActionHashMismatch(`svc: the approval would bind action_hash ${d.actionHash}, not this call's ${d.localActionHash}`,
        d.localActionHash, d.actionHash);
    }
    if (!wait) throw new ApprovalRequired(`svc: approval required (approval_id ${d.approvalId})`, d);
  }

  /**
   * Apply a decision this client returned for `call` (its `decision.toolCall`):
   * throw unless it lets the call run (Denied), and return the parameters the
   * tool receives (redacted on redact, `mask` in place of each redacted value
   * when given; with a pinned receipt key, the receipt of a mutating call is
   * fetched and checked first). `run` ends with it; framework adapters use it
   * to run a tool on the decision an earlier hook of the framework asked for,
   * so that one tool call is one svc decision.
   */
  async finish(call: SentToolCall, d: Decision, mask: unknown, signal?: AbortSignal): Promise<Record<string, unknown>> {
    if (!d.allowed) throw new Denied(`svc: ${d.decision} (${d.reason})`, d);
    let params: Record<string, unknown> = { ...(call.parameters ?? {}) };
    if (d.decision === "redact") params = redact(params, d.redactedFields, ...maskArgs(mask));
    if (this.receiptKey !== null && d.mutatesState && !d.failOpen) await this.verifyReceipt(d, call, { signal });
    return params;
  }

  /** @internal Present an approved call again with its approvalId. */
  async present(a: Approval, first: Decision, opts: AuthorizeOptions): Promise<[SentToolCall, Decision]> {
    const call = a.call ?? first.toolCall;
    if (!call) throw new SvcError("svc: no call to present", { errorCode: "invalid_tool_call" });
    if (a.edited) this.logAt("info", `svc: approval ${a.approvalId} edited the parameters; presenting the edited call`);
    const { requestId: _r, approvalId: _a, webhook: _w, ...more } = opts;
    const d = await this.authorize(call, { ...more, approvalId: a.approvalId });
    if (d.failOpen) throw new SvcUnavailable("svc: unavailable while presenting an approval", { errorCode: "svc_unavailable" });
    if (!d.allowed) throw new Denied(`svc: presenting approval ${a.approvalId}: ${d.decision} (${d.reason})`, d);
    return [d.toolCall ?? call, d];
  }

  /**
   * `run` without running the tool: authorize, wait for and present an
   * approval when svc asks for one, and return the parameters the tool would
   * receive with the decision that lets it run. Throws as `run` does.
   */
  async authorizeToRun(call: ToolCall, opts: RunOptions = {}): Promise<{ parameters: Record<string, unknown>; decision: Decision }> {
    const { wait, approvalTimeout, mask, ...authOpts } = opts;
    const hasMask = Object.prototype.hasOwnProperty.call(opts, "mask") && mask !== undefined;
    if (authOpts.dryRun) throw new InvalidRequest("run() never runs a tool on a dry run", { errorCode: "dry_run" });
    let d = await this.authorize(call, authOpts);
    let sent = d.toolCall!;
    if (d.decision === "require_approval") {
      this.preWait(d, wait !== false);
      const a = await this.waitForApproval(d, { timeout: approvalTimeout ?? null, signal: opts.signal });
      [sent, d] = await this.present(a, d, authOpts);
    }
    const parameters = await this.finish(sent, d, hasMask ? mask : NO_MASK, opts.signal);
    return { parameters, decision: d };
  }

  /**
   * Authorize `call` and run `fn(parameters)` only on the allow (or redact,
   * with the redaction applied) that svc returns; return its result.
   *
   * require_approval: wait for the approval (`wait` true, the default), or
   * throw ApprovalRequired. Once approved, the call (as edited by the
   * approver, if edited) is presented again with `approvalId`, and runs only
   * on the allow that this returns. deny and quarantine throw Denied. With
   * `receiptPublicKey` set, the receipt of a mutating call is fetched and
   * verified before `fn` runs. `dryRun` is refused.
   */
  async run<T>(call: ToolCall, fn: (params: Record<string, unknown>) => T | Promise<T>, opts: RunOptions = {}): Promise<T> {
    const { parameters } = await this.authorizeToRun(call, opts);
    return await fn(parameters);
  }

  /**
   * Wrap `fn` so that every call goes through {@link run}: its argument object
   * is the parameters; `resource` may be a function of that object. A
   * redacted argument is removed (or set to `mask`).
   */
  guard<A extends Record<string, unknown>, T>(
    spec: GuardSpec<A>,
    fn: (args: A) => T | Promise<T>,
  ): (args: A, opts?: { signal?: AbortSignal }) => Promise<T> {
    const { tool, action, resource, ...runOpts } = spec;
    const guarded = async (args: A, opts: { signal?: AbortSignal } = {}): Promise<T> => {
      const params = { ...(args ?? {}) } as A;
      const res = typeof resource === "function" ? resource({ ...params }) : resource;
      const call: ToolCall = { tool, action, resource: res ?? null, parameters: params };
      return this.run(call, (p) => fn(p as A), { ...runOpts, mutatesState: spec.mutatesState === true, signal: opts.signal });
    };
    Object.defineProperty(guarded, "svcGuard", { value: { tool, action, mutatesState: spec.mutatesState === true } });
    return guarded;
  }
}

const defaultLogger: Logger = {
  warn: (m: string) => console.warn(m),
  error: (m: string) => console.error(m),
};
