/**
 * svc-sdk: the TypeScript client of svc. Ask svc before every tool call, run
 * the tool only when svc allows it, and prove it afterwards.
 */

export {
  Client,
  Decision,
  Approval,
  outcome,
  uuid7,
  newNonce,
  parseTime,
  toJsonValue,
  DECISIONS,
  MAX_BODY_BYTES,
  MAX_WAIT,
  VERSION,
} from "./client.js";
export type {
  ToolCall,
  SentToolCall,
  AuthorizeOptions,
  RunOptions,
  GuardSpec,
  Logger,
  ClientOptions,
  DecisionFields,
  ApprovalFields,
} from "./client.js";
export {
  canonicalize,
  canonicalizeText,
  canonicalBytes,
  parseStrict,
  actionHash,
  actionBytes,
  normalizeIdentifier,
  identifierIsCertain,
  toolCallIsCertain,
  CanonicalError,
  SCHEME,
  UNICODE_VERSION,
} from "./canonical.js";
export { sign, decodeKey, SIGNATURE_HEADER } from "./signing.js";
export { redact, parsePath } from "./redaction.js";
export { shouldRetry, errorClass, retryAfterSeconds, backoff, RETRY_STATUSES } from "./retry.js";
export { verifyReceipt, receiptHash, keyId, decodePublicKey, RECEIPT_SCHEME, RECEIPT_SCHEME_CONTEXT, HASHED_FIELDS } from "./receipts.js";
export type { VerifyResult, Receipt } from "./receipts.js";
export { verifyInclusion, parseCheckpoint, noteKeyHash } from "./receiptlog.js";
export type { Checkpoint, InclusionProof, InclusionResult } from "./receiptlog.js";
export {
  SvcError,
  SvcAuthError,
  SvcUnavailable,
  InvalidRequest,
  InvalidRedactionPath,
  Denied,
  ApprovalRequired,
  ApprovalRejected,
  ApprovalExpired,
  ReceiptInvalid,
  ActionHashMismatch,
  Cancelled,
} from "./errors.js";
export type { SvcErrorInit } from "./errors.js";
