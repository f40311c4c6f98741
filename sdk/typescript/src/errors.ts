/**
 * Typed errors. Every one of them means: the tool did not run.
 *
 * `SvcError` is the base class and carries what the gateway said, when it said
 * anything: the HTTP `status`, the envelope's `reason` (`Forbidden`,
 * `TooManyRequests`...), `errorCode` (the envelope's `details.error`, or a
 * local code such as `invalid_redaction_path`), `message`, the parsed `body`
 * and the answer's `headers` (lower-case names). `err.name` is the class name.
 */

export interface SvcErrorInit {
  status?: number | null;
  reason?: string | null;
  errorCode?: string | null;
  body?: unknown;
  headers?: Record<string, string> | null;
  cause?: unknown;
}

export class SvcError extends Error {
  status: number | null;
  reason: string | null;
  errorCode: string | null;
  body: unknown;
  headers: Record<string, string>;

  constructor(message: string, init: SvcErrorInit = {}) {
    super(message, init.cause !== undefined ? { cause: init.cause } : undefined);
    this.name = new.target.name;
    this.status = init.status ?? null;
    this.reason = init.reason ?? null;
    this.errorCode = init.errorCode ?? null;
    this.body = init.body ?? null;
    this.headers = { ...(init.headers ?? {}) };
  }

  /** Build the error from an answer and its status envelope (CONTRACT 10). */
  static fromResponse<T extends SvcError>(
    this: new (message: string, init?: SvcErrorInit) => T,
    status: number,
    body: unknown,
    headers?: Record<string, string> | null,
    prefix = "",
  ): T {
    let reason: string | null = null;
    let errorCode: string | null = null;
    let message = "";
    if (body !== null && typeof body === "object" && !Array.isArray(body)) {
      const b = body as Record<string, unknown>;
      if (typeof b.reason === "string") reason = b.reason;
      if (typeof b.message === "string") message = b.message;
      const details = b.details;
      if (details !== null && typeof details === "object" && !Array.isArray(details)) {
        const e = (details as Record<string, unknown>).error;
        if (typeof e === "string") errorCode = e;
      }
    }
    let text = `${prefix}HTTP ${status}`;
    if (reason) text += ` ${reason}`;
    if (errorCode) text += ` (${errorCode})`;
    if (message) text += `: ${message}`;
    return new this(text, { status, reason, errorCode, body, headers: headers ?? {} });
  }
}

/** 401 or 403: the agent token, its status (quarantined, revoked) or the
 * request signature was refused. Retrying will not help. */
export class SvcAuthError extends SvcError {}

/** svc could not be reached, or kept answering 429/502/503/504, within the
 * deadline. Fail closed: the tool did not run (unless fail-open applies). */
export class SvcUnavailable extends SvcError {}

/** A local pre-check refused the call before anything was sent (U+0000, a
 * body over 1 MiB, NaN or infinity, a lone surrogate, a value with no JSON
 * form, an empty tool or action). */
export class InvalidRequest extends SvcError {}

/** A `redacted_fields` path is malformed (errorCode `invalid_redaction_path`):
 * fail closed, the tool does not run. */
export class InvalidRedactionPath extends SvcError {
  constructor(message: string, init: SvcErrorInit = {}) {
    super(message, { errorCode: "invalid_redaction_path", ...init });
  }
}

/** What a decision-carrying error needs of a Decision. */
interface DecisionLike {
  status: number | null;
  raw: unknown;
  reason: string;
}

function decisionInit(decision: DecisionLike | null | undefined, init: SvcErrorInit): SvcErrorInit {
  if (!decision) return init;
  return {
    status: decision.status,
    body: decision.raw,
    errorCode: decision.reason || null,
    ...init,
  };
}

/** The decision was deny or quarantine (or a 403 before policy, or an answer
 * the SDK treats as deny). `.decision` is the Decision. */
export class Denied<D extends DecisionLike = any> extends SvcError {
  decision: D;
  constructor(message: string, decision: D, init: SvcErrorInit = {}) {
    super(message, decisionInit(decision, init));
    this.decision = decision;
  }
}

/** require_approval while not waiting (`run(..., { wait: false })`):
 * `.decision.approvalId` names the approval to wait for later. */
export class ApprovalRequired<D extends DecisionLike = any> extends SvcError {
  decision: D;
  constructor(message: string, decision: D, init: SvcErrorInit = {}) {
    super(message, decisionInit(decision, init));
    this.decision = decision;
  }
}

/** An approver rejected the call. */
export class ApprovalRejected<A = any, D = any> extends SvcError {
  approval: A | null;
  decision: D | null;
  constructor(message: string, approval: A | null = null, decision: D | null = null, init: SvcErrorInit = {}) {
    super(message, { errorCode: "approval_rejected", ...init });
    this.approval = approval;
    this.decision = decision;
  }
}

/** The approval expired, or the wait's deadline (the earlier of
 * `approvalExpiresAt` and the caller's timeout) passed while PENDING. */
export class ApprovalExpired<A = any, D = any> extends SvcError {
  approval: A | null;
  decision: D | null;
  constructor(message: string, approval: A | null = null, decision: D | null = null, init: SvcErrorInit = {}) {
    super(message, { errorCode: "approval_expired", ...init });
    this.approval = approval;
    this.decision = decision;
  }
}

/** The receipt of the decision did not verify (hash, signature, key id, or an
 * action hash other than the call's). `.result` is the VerifyResult. */
export class ReceiptInvalid<R = any> extends SvcError {
  result: R | null;
  receipt: Record<string, unknown> | null;
  constructor(message: string, result: R | null = null, receipt: Record<string, unknown> | null = null, init: SvcErrorInit = {}) {
    super(message, { errorCode: "receipt_invalid", ...init });
    this.result = result;
    this.receipt = receipt;
  }
}

/** The locally computed svc-jcs-1 hash differs from the one the gateway (or an
 * approval) states where the hash binds what runs: fail closed. */
export class ActionHashMismatch extends SvcError {
  local: string | null;
  remote: string | null;
  constructor(message: string, local: string | null = null, remote: string | null = null, init: SvcErrorInit = {}) {
    super(message, { errorCode: "action_hash_mismatch", ...init });
    this.local = local;
    this.remote = remote;
  }
}

/** An AbortSignal aborted a call or a wait. It extends SvcError (errorCode
 * `cancelled`, status null), so one `catch (e instanceof SvcError)` sees
 * every way a tool did not run. `.cause` is the signal's reason. */
export class Cancelled extends SvcError {
  constructor(message = "cancelled", init: SvcErrorInit = {}) {
    super(message, { errorCode: "cancelled", ...init });
  }
}
