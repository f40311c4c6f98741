/**
 * Receipt verification, schemes svc-receipt-1 and svc-receipt-2
 * (`receipt/doc.go` in svc).
 *
 * Under svc-receipt-1 ({@link RECEIPT_SCHEME}), `receipt_hash` is the
 * lower-case hex SHA-256 of the RFC 8785 bytes of the object with exactly the
 * members `receipt_id, tenant_id, decision_id, seq, action_hash, decision,
 * prev_receipt_hash, key_id, created_at` (seq an integer with |seq| <= 2**53,
 * every other member a string hashed as stored; a missing member counts as ""
 * and seq as 0). A receipt made under run context carries `context_hash` (64
 * lower-case hex: the SHA-256 of the run context the policy saw) and is
 * hashed as svc-receipt-2 ({@link RECEIPT_SCHEME_CONTEXT}): the same object
 * plus the member `context_hash`. A `context_hash` that is absent, null or ""
 * means svc-receipt-1, so one chain mixes both; one that is present,
 * non-empty and not 64 lower-case hex makes the hash invalid.
 *
 * A signed receipt carries `signature`: standard base64 of the Ed25519
 * signature of the 32 raw bytes of `receipt_hash`, made with the key whose
 * `key_id` (the first 16 hex characters of SHA-256 of the 32-byte public
 * key) the receipt names.
 *
 * {@link verifyReceipt} reports the two checks apart: `hashValid` and
 * `signatureValid` (signed, by the key given, and the signature verifies;
 * false for an unsigned receipt).
 */

import { createPublicKey, verify as edVerify, type KeyObject } from "node:crypto";
import { canonicalize, sha256Hex } from "./canonical.js";
import { decodeBase64 } from "./signing.js";

/** The scheme of a receipt without `context_hash`. */
export const RECEIPT_SCHEME = "svc-receipt-1";
/** The scheme of a receipt with a non-empty `context_hash`: svc-receipt-1's
 * object ({@link HASHED_FIELDS}) plus `context_hash`. */
export const RECEIPT_SCHEME_CONTEXT = "svc-receipt-2";
/** The members svc-receipt-1 hashes (svc-receipt-2 adds `context_hash`). */
export const HASHED_FIELDS = [
  "receipt_id",
  "tenant_id",
  "decision_id",
  "seq",
  "action_hash",
  "decision",
  "prev_receipt_hash",
  "key_id",
  "created_at",
] as const;
const MAX_SEQ = 2 ** 53;
const HASH_RE = /^[0-9a-f]{64}$/;
const SPKI_ED25519_PREFIX = Buffer.from("302a300506032b6570032100", "hex");

/** The outcome of {@link verifyReceipt}. `valid` is hashValid && signatureValid. */
export interface VerifyResult {
  hashValid: boolean;
  signatureValid: boolean;
  keyIdMatches: boolean;
  signed: boolean;
  keyId: string;
  computedHash: string | null;
  error: string;
  valid: boolean;
}

/** A receipt in CONTRACT 13's shape. */
export type Receipt = Record<string, unknown>;

/** First 16 hex characters of SHA-256 of the 32-byte public key ("" otherwise). */
export function keyId(publicKey: Uint8Array): string {
  return publicKey.length === 32 ? sha256Hex(publicKey).slice(0, 16) : "";
}

/** Standard base64 of a 32-byte Ed25519 public key, or the raw 32 bytes
 * (TypeError otherwise). */
export function decodePublicKey(publicKey: string | Uint8Array): Uint8Array {
  if (publicKey instanceof Uint8Array) {
    if (publicKey.length !== 32) throw new TypeError(`an Ed25519 public key is 32 bytes, got ${publicKey.length}`);
    return publicKey;
  }
  let raw: Uint8Array;
  try {
    raw = decodeBase64(publicKey);
  } catch {
    throw new TypeError("public key is not standard base64");
  }
  if (raw.length !== 32) throw new TypeError(`an Ed25519 public key is 32 bytes, got ${raw.length}`);
  return raw;
}

/** A node:crypto KeyObject for a raw 32-byte Ed25519 public key (SPKI DER). */
export function ed25519PublicKey(raw: Uint8Array): KeyObject {
  return createPublicKey({ key: Buffer.concat([SPKI_ED25519_PREFIX, raw]), format: "der", type: "spki" });
}

/** Ed25519 verification of `signature` over `message` with a raw public key. */
export function ed25519Verify(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean {
  if (publicKey.length !== 32 || signature.length !== 64) return false;
  try {
    return edVerify(null, message, ed25519PublicKey(publicKey), signature);
  } catch {
    return false;
  }
}

/** The hash of a receipt (its receipt_hash and signature are ignored):
 * svc-receipt-2 when it carries a non-empty `context_hash`, else
 * svc-receipt-1. TypeError when a field has the wrong type, seq is out of
 * range or `context_hash` is not 64 lower-case hex. */
export function receiptHash(receipt: Receipt): string {
  const obj: Record<string, unknown> = {};
  for (const name of HASHED_FIELDS) {
    let v = receipt[name];
    if (name === "seq") {
      if (v === null || v === undefined) v = 0;
      if (typeof v !== "number" || !Number.isInteger(v)) throw new TypeError("seq must be an integer");
      if (v > MAX_SEQ || v < -MAX_SEQ) throw new TypeError(`seq ${v} is out of range`);
    } else {
      if (v === null || v === undefined) v = "";
      if (typeof v !== "string") throw new TypeError(`${name} must be a string`);
    }
    obj[name] = v;
  }
  const ctx = receipt.context_hash;
  if (ctx !== null && ctx !== undefined) {
    if (typeof ctx !== "string") throw new TypeError("context_hash must be a string");
    if (ctx !== "") {
      if (!HASH_RE.test(ctx)) throw new TypeError("context_hash is not 64 lower-case hex characters");
      obj.context_hash = ctx;
    }
  }
  return sha256Hex(canonicalize(obj));
}

/** Standard base64 in its canonical encoding only (no stray padding bits), else null. */
export function strictB64(s: string): Uint8Array | null {
  if (s.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(s)) return null;
  const raw = Buffer.from(s, "base64");
  if (raw.toString("base64") !== s) return null; // canonical encoding only
  return new Uint8Array(raw);
}

/** Verify one receipt (CONTRACT 13's shape) against the gateway's public key
 * (standard base64, or the 32 raw bytes). `hashValid` follows
 * {@link receiptHash} (svc-receipt-1, or svc-receipt-2 for a receipt with
 * `context_hash`; false for a malformed `context_hash`). Never throws. */
export function verifyReceipt(receipt: Receipt, publicKey: string | Uint8Array): VerifyResult {
  const res = (hashValid: boolean, signatureValid: boolean, keyIdMatches: boolean, signed: boolean, kid: string,
    computedHash: string | null, error: string): VerifyResult => ({
    hashValid, signatureValid, keyIdMatches, signed, keyId: kid, computedHash, error, valid: hashValid && signatureValid,
  });
  if (receipt === null || typeof receipt !== "object" || Array.isArray(receipt)) {
    return res(false, false, false, false, "", null, "receipt is not an object");
  }
  let pub: Uint8Array | null = null;
  try {
    pub = decodePublicKey(publicKey);
  } catch {
    pub = null;
  }
  const kid = pub ? keyId(pub) : "";
  let error = "";
  let computed: string | null = null;
  try {
    computed = receiptHash(receipt);
  } catch (e) {
    error = (e as Error).message;
  }
  const stored = receipt.receipt_hash;
  const hashValid = computed !== null && typeof stored === "string" && computed === stored;
  if (computed !== null && !hashValid) error = "receipt_hash mismatch";

  const sig = receipt.signature;
  const rkid = receipt.key_id;
  const signed = (sig !== null && sig !== undefined) || (typeof rkid === "string" && rkid !== "");
  const keyIdMatches = kid !== "" && typeof rkid === "string" && rkid === kid;
  let signatureValid = false;
  let why = "";
  if (!signed) why = "unsigned receipt";
  else if (sig === null || sig === undefined) why = "missing signature";
  else if (!keyIdMatches) why = "unknown key_id";
  else if (typeof sig !== "string") why = "invalid signature";
  else {
    const rawSig = strictB64(sig);
    const msg = typeof stored === "string" && HASH_RE.test(stored) ? new Uint8Array(Buffer.from(stored, "hex")) : null;
    if (rawSig === null || rawSig.length !== 64 || msg === null || pub === null) why = "invalid signature";
    else if (ed25519Verify(pub, msg, rawSig)) signatureValid = true;
    else why = "invalid signature";
  }
  if (!error && why) error = why;
  return res(hashValid, signatureValid, keyIdMatches, signed, kid, computed, error);
}
