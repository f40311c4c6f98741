/**
 * Which answers are retried, how long to wait, and which error a final answer is.
 *
 * - Retried: network errors and timeouts (`status` null), 429 (after
 *   `Retry-After`, seconds or an HTTP-date, when it fits in the remaining
 *   deadline), 502, 503, 504. Nothing else.
 * - Backoff between attempts: full jitter, `uniform(0, min(cap, base * 2**n))`,
 *   or the server's `Retry-After` when it sent one.
 * - Final errors: 401/403 -> SvcAuthError; 429/502/503/504 (after retries) and
 *   network failures -> SvcUnavailable; any other non-2xx -> SvcError.
 */

import { SvcAuthError, SvcError, SvcUnavailable } from "./errors.js";

export const RETRY_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504]);

/** Whether an answer (`status` null: no answer, a network error or timeout) is
 * worth another attempt of the same request. Depends on the status alone. */
export function shouldRetry(status: number | null | undefined, _body?: unknown, _headers?: unknown): boolean {
  if (status === null || status === undefined) return true;
  return RETRY_STATUSES.has(status);
}

/** The error class a final non-2xx answer (or no answer) raises. */
export function errorClass(status: number | null | undefined): typeof SvcError {
  if (status === null || status === undefined || RETRY_STATUSES.has(status)) return SvcUnavailable;
  if (status === 401 || status === 403) return SvcAuthError;
  return SvcError;
}

/** Case-insensitive header lookup in a plain record or a Headers object. */
export function header(headers: Record<string, unknown> | Headers | null | undefined, name: string): string | null {
  if (!headers) return null;
  if (typeof (headers as Headers).get === "function" && !(Object.getPrototypeOf(headers) === Object.prototype)) {
    return (headers as Headers).get(name);
  }
  const lname = name.toLowerCase();
  for (const [k, v] of Object.entries(headers)) {
    if (k.toLowerCase() === lname) {
      const x = Array.isArray(v) ? v[0] : v;
      return x === null || x === undefined ? null : String(x);
    }
  }
  return null;
}

const HAS_ZONE = /\b(GMT|UTC|UT)\s*$|[+-]\d{4}\s*$/i;

/** Seconds to wait from a Retry-After value (delta-seconds or HTTP-date);
 * null when absent or malformed. */
export function retryAfterSeconds(value: string | null | undefined, nowMs: number = Date.now()): number | null {
  if (value === null || value === undefined) return null;
  const v = value.trim();
  if (!v) return null;
  if (/^[0-9]+$/.test(v)) return Number(v);
  if (!HAS_ZONE.test(v)) return null;
  const t = Date.parse(v);
  if (Number.isNaN(t)) return null;
  return Math.max(0, (t - nowMs) / 1000);
}

/** Full jitter: a uniform delay (seconds) in [0, min(cap, base * 2**attempt)]. */
export function backoff(attempt: number, base = 0.1, cap = 1.0, rng: () => number = Math.random): number {
  return rng() * Math.min(cap, base * 2 ** Math.max(0, attempt));
}
