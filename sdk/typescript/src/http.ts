/**
 * The transport: global `fetch` (undici, keep-alive) with a per-request
 * timeout and the caller's AbortSignal. Internal.
 */

import { Cancelled } from "./errors.js";

/** No (complete) answer: connection refused or reset, timeout, bad framing. */
export class NetworkError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "NetworkError";
  }
}

/** A complete answer: status, headers (lower-case names), body bytes. */
export class Response {
  private parsed = false;
  private value: unknown = null;
  constructor(
    readonly status: number,
    readonly headers: Record<string, string>,
    readonly body: Uint8Array,
  ) {}

  header(name: string): string | null {
    return this.headers[name.toLowerCase()] ?? null;
  }

  /** The body parsed as JSON, or null when it is empty or not JSON. */
  json(): unknown {
    if (!this.parsed) {
      this.parsed = true;
      try {
        this.value = this.body.length ? JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(this.body)) : null;
      } catch {
        this.value = null;
      }
    }
    return this.value;
  }

  text(limit = 1000): string {
    return new TextDecoder().decode(this.body.subarray(0, limit));
  }
}

export type FetchLike = typeof globalThis.fetch;

/** Monotonic milliseconds. */
export function now(): number {
  return performance.now();
}

export function cancelled(signal: AbortSignal | undefined): Cancelled {
  return new Cancelled("svc: cancelled", { cause: signal?.reason });
}

/** Sleep `seconds`, ending at once (Cancelled) when `signal` aborts. */
export function sleep(seconds: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(cancelled(signal));
  if (seconds <= 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(t);
      reject(cancelled(signal));
    };
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, seconds * 1000);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

export class Transport {
  readonly base: string;
  constructor(
    baseUrl: string,
    private readonly fetchImpl: FetchLike = globalThis.fetch,
  ) {
    let u: URL;
    try {
      u = new URL(baseUrl);
    } catch {
      throw new TypeError(`baseUrl must be an absolute http or https URL, not ${JSON.stringify(baseUrl)}`);
    }
    if ((u.protocol !== "http:" && u.protocol !== "https:") || !u.hostname) {
      throw new TypeError(`baseUrl must be an absolute http or https URL, not ${JSON.stringify(baseUrl)}`);
    }
    this.base = baseUrl.replace(/\/+$/, "");
  }

  /** Send one request and read the whole answer within `timeoutSeconds`.
   * Throws NetworkError (no complete answer) or Cancelled (`signal`). */
  async request(
    method: string,
    path: string,
    body: Uint8Array | null,
    headers: Record<string, string>,
    timeoutSeconds: number,
    signal?: AbortSignal,
  ): Promise<Response> {
    if (signal?.aborted) throw cancelled(signal);
    const timeout = AbortSignal.timeout(Math.max(1, Math.ceil(timeoutSeconds * 1000)));
    const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
    try {
      const res = await this.fetchImpl(this.base + path, {
        method,
        headers,
        body: body ?? undefined,
        signal: combined,
        redirect: "manual",
      });
      const data = new Uint8Array(await res.arrayBuffer());
      const hdrs: Record<string, string> = {};
      res.headers.forEach((v, k) => {
        hdrs[k.toLowerCase()] = v;
      });
      return new Response(res.status, hdrs, data);
    } catch (e) {
      if (signal?.aborted) throw cancelled(signal);
      if (timeout.aborted) throw new NetworkError(`timeout after ${timeoutSeconds.toFixed(3)} s`, { cause: e });
      const cause = (e as { cause?: { code?: string; message?: string } }).cause;
      const why = cause?.code ?? cause?.message ?? (e as Error).message ?? String(e);
      throw new NetworkError(`${(e as Error).name ?? "Error"}: ${why}`, { cause: e });
    }
  }
}
