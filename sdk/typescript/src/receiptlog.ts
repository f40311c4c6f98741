/**
 * Inclusion of a receipt in the gateway's receipt log (CONTRACT §17).
 *
 * Each tenant's receipts, in `seq` order, are the leaves of an RFC 6962
 * Merkle tree: leaf `seq - 1` is SHA-256 of a 0x00 byte and the 32 bytes of
 * the receipt's `receipt_hash`. The gateway signs checkpoints of the tree
 * (C2SP `tlog-checkpoint` signed notes: origin, tree size, base64 root, then
 * signature lines) with the receipt key, and serves each receipt's inclusion
 * proof (`GET /v2/receipts/:receipt_id/inclusion`: `leaf_index`,
 * `tree_size`, base64 `hashes`).
 *
 * `verifyInclusion` checks both with the receipt key the SDK pins: the log's
 * note verifier key is the receipt key named as the checkpoint's origin
 * (C2SP signed-note: key hash = the first 4 bytes of SHA-256 of
 * `<origin>\n`, 0x01 and the 32-byte key). Other signature lines, such as
 * witnesses' cosignatures, are ignored.
 */
import { createHash } from "node:crypto";
import { decodePublicKey, ed25519Verify, receiptHash, strictB64, type Receipt } from "./receipts.js";

/** A parsed checkpoint: its head, the signed text and its signature lines. */
export interface Checkpoint {
  origin: string;
  size: number;
  root: Uint8Array;
  text: Uint8Array;
  signatures: { name: string; keyHash: number; signature: Uint8Array }[];
}

/** An inclusion proof as the gateway serves it. */
export interface InclusionProof {
  leaf_index: number;
  tree_size: number;
  hashes: string[];
}

/** The outcome of `verifyInclusion`; `valid` is both checks. */
export interface InclusionResult {
  checkpointValid: boolean;
  proofValid: boolean;
  origin: string;
  treeSize: number;
  error: string;
  valid: boolean;
}

const EM_DASH = "\u2014 ";
const SIZE = /^(0|[1-9][0-9]{0,14})$/;
const MAX_PROOF = 63;

function sha256(...parts: Uint8Array[]): Uint8Array {
  const h = createHash("sha256");
  for (const p of parts) h.update(p);
  return new Uint8Array(h.digest());
}

function equal(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** Parse a signed checkpoint note without checking its signatures (TypeError
 * when it is no well-formed note or checkpoint). */
export function parseCheckpoint(signed: string): Checkpoint {
  if (typeof signed !== "string") throw new TypeError("a checkpoint is text");
  if (!signed.endsWith("\n")) throw new TypeError("the note does not end in a newline");
  const split = signed.lastIndexOf("\n\n");
  if (split < 0) throw new TypeError("the note has no signature");
  const text = signed.slice(0, split + 1);
  const signatures: Checkpoint["signatures"] = [];
  for (const line of signed.slice(split + 2).split("\n").slice(0, -1)) {
    if (!line.startsWith(EM_DASH)) throw new TypeError("malformed signature line");
    const rest = line.slice(EM_DASH.length);
    const sp = rest.indexOf(" ");
    const name = sp < 0 ? "" : rest.slice(0, sp);
    const raw = sp < 0 ? null : strictB64(rest.slice(sp + 1));
    if (!name || raw === null || raw.length < 5) throw new TypeError("malformed signature line");
    signatures.push({ name, keyHash: Buffer.from(raw.subarray(0, 4)).readUInt32BE(0), signature: raw.subarray(4) });
  }
  if (signatures.length === 0) throw new TypeError("the note has no signature");
  const lines = text.split("\n");
  if (lines.length < 4 || !lines[0] || !SIZE.test(lines[1])) throw new TypeError("not a checkpoint: origin, size and root lines expected");
  const root = strictB64(lines[2]);
  if (root === null || root.length !== 32) throw new TypeError("the checkpoint's root is not a base64 SHA-256 hash");
  return { origin: lines[0], size: Number(lines[1]), root, text: new TextEncoder().encode(text), signatures };
}

/** The key hash of an Ed25519 note key (C2SP signed-note). */
export function noteKeyHash(name: string, publicKey: Uint8Array): number {
  const h = sha256(new TextEncoder().encode(name + "\n"), Uint8Array.of(1), publicKey);
  return Buffer.from(h.subarray(0, 4)).readUInt32BE(0);
}

/** RFC 9162 section 2.1.3.2: the root the proof leads to, or null. Sizes
 * are below 2^53, so the halvings are exact in floating point. */
function rootFromInclusion(index: number, size: number, leaf: Uint8Array, proof: Uint8Array[]): Uint8Array | null {
  if (index < 0 || index >= size) return null;
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  const one = Uint8Array.of(1);
  for (const p of proof) {
    if (sn === 0) return null;
    if (fn % 2 === 1 || fn === sn) {
      r = sha256(one, p, r);
      while (fn % 2 === 0 && fn !== 0) {
        fn = Math.floor(fn / 2);
        sn = Math.floor(sn / 2);
      }
    } else {
      r = sha256(one, r, p);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 ? r : null;
}

/**
 * Check that `receipt` is in the log `checkpoint` signs, by `proof`.
 *
 * `checkpointValid`: the checkpoint is of the receipt's tenant's log (its
 * origin ends in "/" and the receipt's `tenant_id`) and carries a signature
 * by `publicKey` (the receipt key, standard base64 or 32 bytes), named as
 * its origin, that verifies. `proofValid`: the receipt hashes to its
 * `receipt_hash`, the proof is of leaf `seq - 1` in a tree of the
 * checkpoint's size, and its hashes lead from the receipt's leaf to the
 * checkpoint's root, whether or not the signature verifies.
 */
export function verifyInclusion(receipt: Receipt, proof: InclusionProof, checkpoint: string, publicKey: string | Uint8Array): InclusionResult {
  let cp: Checkpoint;
  try {
    cp = parseCheckpoint(checkpoint);
  } catch (e) {
    return { checkpointValid: false, proofValid: false, origin: "", treeSize: 0, error: (e as Error).message, valid: false };
  }
  const errors: string[] = [];
  let checkpointValid = false;
  let pub: Uint8Array | null = null;
  try {
    pub = decodePublicKey(publicKey);
  } catch {
    errors.push("no valid receipt key");
  }
  const tenant = receipt?.tenant_id;
  if (pub !== null) {
    if (typeof tenant !== "string" || !cp.origin.endsWith("/" + tenant)) {
      errors.push("the checkpoint is not of the receipt's tenant's log");
    } else {
      const want = noteKeyHash(cp.origin, pub);
      checkpointValid = cp.signatures.some(
        (s) => s.name === cp.origin && s.keyHash === want && s.signature.length === 64 && ed25519Verify(pub as Uint8Array, cp.text, s.signature),
      );
      if (!checkpointValid) errors.push("the checkpoint carries no valid signature by the receipt key");
    }
  }
  const proofValid = checkProof(receipt, proof, cp, errors);
  return { checkpointValid, proofValid, origin: cp.origin, treeSize: cp.size, error: errors.join("; "), valid: checkpointValid && proofValid };
}

function isInt(v: unknown): v is number {
  return typeof v === "number" && Number.isSafeInteger(v);
}

function checkProof(receipt: Receipt, proof: InclusionProof, cp: Checkpoint, errors: string[]): boolean {
  if (typeof receipt !== "object" || receipt === null || typeof proof !== "object" || proof === null) {
    errors.push("the receipt and the proof are objects");
    return false;
  }
  let computed: string;
  try {
    computed = receiptHash(receipt);
  } catch (e) {
    errors.push((e as Error).message);
    return false;
  }
  const stored = receipt.receipt_hash;
  const seq = receipt.seq;
  if (computed !== stored || !isInt(seq)) {
    errors.push("receipt_hash mismatch");
    return false;
  }
  const { leaf_index: index, tree_size: size, hashes } = proof;
  if (!isInt(index) || !isInt(size) || !Array.isArray(hashes) || hashes.length > MAX_PROOF) {
    errors.push("malformed proof");
    return false;
  }
  if (size !== cp.size || index !== seq - 1) {
    errors.push(`the proof is of leaf ${index} in a tree of ${size}; the receipt is leaf ${seq - 1}, the checkpoint's tree ${cp.size}`);
    return false;
  }
  const path: Uint8Array[] = [];
  for (const h of hashes) {
    const raw = typeof h === "string" ? strictB64(h) : null;
    if (raw === null || raw.length !== 32) {
      errors.push("a proof hash is not a base64 SHA-256 hash");
      return false;
    }
    path.push(raw);
  }
  const leaf = sha256(Uint8Array.of(0), Buffer.from(stored as string, "hex"));
  const root = rootFromInclusion(index, size, leaf, path);
  if (root === null || !equal(root, cp.root)) {
    errors.push("the proof does not lead to the checkpoint's root");
    return false;
  }
  return true;
}
