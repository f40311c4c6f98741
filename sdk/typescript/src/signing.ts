/**
 * Request signing (SPEC 4.2 rule 14, CONTRACT 13).
 *
 * An agent registered with a `signing_key` sends
 * `X-Svc-Request-Signature: sha256=<hex HMAC-SHA256 of the raw body>`. The key
 * is the decoded bytes of the standard base64 `signing_key`. Sign exactly the
 * bytes you send: serialize once to a Uint8Array, sign it, send it.
 */

import { createHmac } from "node:crypto";

export const SIGNATURE_HEADER = "X-Svc-Request-Signature";

const B64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Decode standard base64 (with padding; no URL-safe alphabet). Throws
 * TypeError when malformed. Surrounding white space is ignored. */
export function decodeBase64(s: string): Uint8Array {
  if (typeof s !== "string") throw new TypeError("base64 text must be a string");
  const t = s.trim();
  if (t.length % 4 !== 0 || !B64.test(t)) throw new TypeError("not standard base64");
  return new Uint8Array(Buffer.from(t, "base64"));
}

/** Decode a standard-base64 signing key (TypeError when malformed or empty). */
export function decodeKey(keyB64: string | Uint8Array): Uint8Array {
  if (keyB64 instanceof Uint8Array) {
    if (keyB64.length === 0) throw new TypeError("signing key is empty");
    return keyB64;
  }
  let key: Uint8Array;
  try {
    key = decodeBase64(keyB64);
  } catch {
    throw new TypeError("signing key is not standard base64");
  }
  if (key.length === 0) throw new TypeError("signing key is empty");
  return key;
}

/** `"sha256=<hex>"`: the HMAC-SHA256 of `body` (a string is signed as its
 * UTF-8 bytes) under the decoded key: the value of X-Svc-Request-Signature. */
export function sign(body: string | Uint8Array, keyB64: string | Uint8Array): string {
  const bytes = typeof body === "string" ? new TextEncoder().encode(body) : body;
  return "sha256=" + createHmac("sha256", decodeKey(keyB64)).update(bytes).digest("hex");
}
