/**
 * Applying a `redact` decision's `redacted_fields` to the parameters
 * (`testdata/sdk/redaction.json` holds the shared cases).
 *
 * - `parameters` alone empties the parameters to `{}`.
 * - `parameters.` then `.`-separated segments walks objects by exact key; on
 *   an array, a canonical decimal index (digits, no sign, no leading zero)
 *   selects an element.
 * - The last segment deletes the key, or sets the array element to null (with
 *   a `mask`: sets the value to the mask instead).
 * - A path that does not resolve changes nothing. Paths apply in order.
 * - A path that does not start with `parameters`/`parameters.`, an empty path
 *   or one with an empty segment throws {@link InvalidRedactionPath} (fail
 *   closed: the tool does not run); every path is checked before any applies.
 *
 * The caller's object is never changed: the result is a deep copy.
 */

import { deepCopy, setKey } from "./canonical.js";
import { InvalidRedactionPath } from "./errors.js";

const INDEX = /^(0|[1-9][0-9]*)$/;

/** The segments after `parameters` ([] for `parameters` itself). */
export function parsePath(path: unknown): string[] {
  if (typeof path !== "string" || path === "") {
    throw new InvalidRedactionPath(`redaction path ${JSON.stringify(path) ?? String(path)} is not a non-empty string`);
  }
  if (path === "parameters") return [];
  if (!path.startsWith("parameters.")) {
    throw new InvalidRedactionPath(`redaction path ${JSON.stringify(path)} does not start with 'parameters.'`);
  }
  const segments = path.slice("parameters.".length).split(".");
  if (segments.some((s) => s === "")) throw new InvalidRedactionPath(`redaction path ${JSON.stringify(path)} has an empty segment`);
  return segments;
}

function index(seg: string, arr: unknown[]): number | null {
  if (!INDEX.test(seg)) return null;
  const i = Number(seg);
  return i < arr.length ? i : null;
}

function isObj(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function has(o: Record<string, unknown>, k: string): boolean {
  return Object.prototype.hasOwnProperty.call(o, k);
}

/** A deep copy of `parameters` with every path of `redactedFields` removed
 * (or set to `mask` when a mask is given: pass it explicitly, even
 * `undefined` counts as "no mask"). */
export function redact(
  parameters: Record<string, unknown> | null | undefined,
  redactedFields: readonly string[] | null | undefined,
  ...mask: [] | [unknown]
): Record<string, unknown> {
  const fields = redactedFields ?? [];
  if (!Array.isArray(fields)) throw new InvalidRedactionPath("redacted_fields must be a list of paths");
  const paths = fields.map((p) => parsePath(p)); // every path checked before any applies
  let out: Record<string, unknown>;
  if (parameters === null || parameters === undefined) out = {};
  else if (isObj(parameters)) out = deepCopy(parameters);
  else throw new InvalidRedactionPath("parameters must be an object");
  const useMask = mask.length > 0 && mask[0] !== undefined;
  const maskValue = () => deepCopy(mask[0]);
  for (const segments of paths) {
    if (segments.length === 0) {
      out = {};
      continue;
    }
    let cur: unknown = out;
    for (const seg of segments.slice(0, -1)) {
      if (isObj(cur)) {
        cur = has(cur, seg) ? cur[seg] : undefined;
      } else if (Array.isArray(cur)) {
        const i = index(seg, cur);
        cur = i === null ? undefined : cur[i];
      } else {
        cur = undefined;
      }
      if (cur === undefined) break;
    }
    const last = segments[segments.length - 1]!;
    if (isObj(cur)) {
      if (has(cur, last)) {
        if (useMask) setKey(cur, last, maskValue());
        else delete cur[last];
      }
    } else if (Array.isArray(cur)) {
      const i = index(last, cur);
      if (i !== null) cur[i] = useMask ? maskValue() : null;
    }
  }
  return out;
}
