/**
 * Canonical JSON (RFC 8785, JCS), SPEC 4.2 rule 7 and the svc-jcs-1 action hash.
 *
 * These bytes are a wire contract shared with the gateway (`canonical/` in the
 * svc repository) and every other SDK; `testdata/jcs/` and `testdata/sdk/`
 * hold the vectors they are all checked against.
 *
 * - {@link canonicalize} writes a JSON value as RFC 8785 text: members sorted
 *   by the UTF-16 code units of their names, no white space, numbers as
 *   ECMAScript's Number.prototype.toString, strings escaped as JSON.stringify.
 *   NaN, infinities, lone surrogates and values with no JSON form are refused
 *   ({@link CanonicalError}).
 * - {@link parseStrict} reads JSON text strictly (I-JSON): duplicate member
 *   names at any depth and numbers beyond a double's range are refused.
 * - {@link normalizeIdentifier} is rule 7 exactly as the gateway applies it,
 *   on Unicode 15.0.0 tables: code points that 15.0.0 does not assign are left
 *   unchanged even though Node's ICU knows them (see `unicode15.ts`).
 * - {@link actionHash} is svc-jcs-1: lower-case hex SHA-256 of the JCS bytes of
 *   `{"tool","action","resource","parameters"}` after rule 7 on tool and action.
 */

import { createHash } from "node:crypto";
import { ASSIGNED_15_0, UNICODE_VERSION } from "./unicode15.js";

export { UNICODE_VERSION };
export const SCHEME = "svc-jcs-1";
const MAX_DEPTH = 1000;

/** A value or text that has no RFC 8785 canonical form. */
export class CanonicalError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CanonicalError";
  }
}

// --- helpers ---------------------------------------------------------------

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Whether `s` has a UTF-8 form (no lone surrogate). */
export function isWellFormed(s: string): boolean {
  return !LONE_SURROGATE.test(s);
}

/** A plain JSON object: a literal `{}` or a null-prototype object. */
export function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (v === null || typeof v !== "object" || Array.isArray(v)) return false;
  const p = Object.getPrototypeOf(v);
  return p === Object.prototype || p === null;
}

/** Set an own enumerable property, `__proto__` included. */
export function setKey(o: Record<string, unknown>, k: string, v: unknown): void {
  if (k === "__proto__") {
    Object.defineProperty(o, k, { value: v, writable: true, enumerable: true, configurable: true });
  } else {
    o[k] = v;
  }
}

/** A deep copy of plain JSON data (objects keep `__proto__` as a key). */
export function deepCopy<T>(v: T): T {
  if (Array.isArray(v)) return v.map((x) => deepCopy(x)) as T;
  if (v !== null && typeof v === "object") {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v)) setKey(out, k, deepCopy((v as Record<string, unknown>)[k]));
    return out as T;
  }
  return v;
}

function compareUtf16(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0; // JS string comparison is by UTF-16 code units
}

// --- writing ---------------------------------------------------------------

function writeString(s: string): string {
  if (!isWellFormed(s)) throw new CanonicalError("a string holds a lone surrogate, which has no UTF-8 form");
  return JSON.stringify(s);
}

function write(v: unknown, out: string[], depth: number): void {
  if (depth > MAX_DEPTH) throw new CanonicalError("nesting too deep");
  if (v === null) {
    out.push("null");
    return;
  }
  switch (typeof v) {
    case "boolean":
      out.push(v ? "true" : "false");
      return;
    case "string":
      out.push(writeString(v));
      return;
    case "number":
      if (!Number.isFinite(v)) throw new CanonicalError("NaN and infinities have no JSON form");
      out.push(Object.is(v, -0) ? "0" : String(v));
      return;
    case "object":
      break;
    default:
      throw new CanonicalError(`a ${typeof v} has no JSON form`);
  }
  if (Array.isArray(v)) {
    out.push("[");
    for (let i = 0; i < v.length; i++) {
      if (i) out.push(",");
      const e = v[i];
      if (e === undefined) throw new CanonicalError("undefined has no JSON form");
      write(e, out, depth + 1);
    }
    out.push("]");
    return;
  }
  if (!isPlainObject(v)) {
    const ctor = (v as object).constructor?.name ?? "object";
    throw new CanonicalError(`a ${ctor} has no JSON form`);
  }
  const keys = Object.keys(v).filter((k) => v[k] !== undefined).sort(compareUtf16);
  out.push("{");
  keys.forEach((k, i) => {
    if (i) out.push(",");
    out.push(writeString(k), ":");
    write(v[k], out, depth + 1);
  });
  out.push("}");
}

/** The RFC 8785 canonical text of `value` (plain objects, arrays, strings,
 * finite numbers, booleans and null, nested). Members whose value is
 * `undefined` are left out, as JSON.stringify does. */
export function canonicalize(value: unknown): string {
  const out: string[] = [];
  try {
    write(value, out, 0);
  } catch (e) {
    if (e instanceof RangeError) throw new CanonicalError("nesting too deep");
    throw e;
  }
  return out.join("");
}

/** {@link canonicalize} as UTF-8 bytes (what is hashed). */
export function canonicalBytes(value: unknown): Uint8Array {
  return new TextEncoder().encode(canonicalize(value));
}

// --- strict parsing --------------------------------------------------------

const NUMBER_RE = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

class Parser {
  i = 0;
  constructor(readonly s: string) {}

  fail(why: string): never {
    throw new CanonicalError(`not JSON: ${why} at offset ${this.i}`);
  }

  ws(): void {
    const s = this.s;
    while (this.i < s.length) {
      const c = s.charCodeAt(this.i);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) this.i++;
      else break;
    }
  }

  value(depth: number): unknown {
    if (depth > MAX_DEPTH) this.fail("nesting too deep");
    this.ws();
    const c = this.s[this.i];
    switch (c) {
      case "{":
        return this.object(depth);
      case "[":
        return this.array(depth);
      case '"':
        return this.string();
      case "t":
        return this.literal("true", true);
      case "f":
        return this.literal("false", false);
      case "n":
        return this.literal("null", null);
      default:
        if (c === "-" || (c !== undefined && c >= "0" && c <= "9")) return this.number();
        return this.fail(c === undefined ? "unexpected end" : `unexpected ${JSON.stringify(c)}`);
    }
  }

  literal<T>(word: string, v: T): T {
    if (this.s.startsWith(word, this.i)) {
      this.i += word.length;
      return v;
    }
    return this.fail("invalid literal");
  }

  number(): number {
    NUMBER_RE.lastIndex = this.i;
    const m = NUMBER_RE.exec(this.s);
    if (!m) return this.fail("invalid number");
    this.i += m[0].length;
    const n = Number(m[0]);
    if (!Number.isFinite(n)) throw new CanonicalError(`number ${m[0].slice(0, 40)} is out of the range of a double`);
    return n;
  }

  string(): string {
    const s = this.s;
    this.i++; // opening quote
    let out = "";
    let start = this.i;
    for (;;) {
      if (this.i >= s.length) this.fail("unterminated string");
      const c = s.charCodeAt(this.i);
      if (c === 0x22) {
        out += s.slice(start, this.i);
        this.i++;
        return out;
      }
      if (c < 0x20) this.fail("control character in string");
      if (c !== 0x5c) {
        this.i++;
        continue;
      }
      out += s.slice(start, this.i);
      const e = s[this.i + 1];
      this.i += 2;
      switch (e) {
        case '"': out += '"'; break;
        case "\\": out += "\\"; break;
        case "/": out += "/"; break;
        case "b": out += "\b"; break;
        case "f": out += "\f"; break;
        case "n": out += "\n"; break;
        case "r": out += "\r"; break;
        case "t": out += "\t"; break;
        case "u": {
          const hex = s.slice(this.i, this.i + 4);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.fail("invalid \\u escape");
          out += String.fromCharCode(parseInt(hex, 16));
          this.i += 4;
          break;
        }
        default:
          this.i -= 2;
          this.fail("invalid escape");
      }
      start = this.i;
    }
  }

  array(depth: number): unknown[] {
    this.i++;
    const out: unknown[] = [];
    this.ws();
    if (this.s[this.i] === "]") {
      this.i++;
      return out;
    }
    for (;;) {
      out.push(this.value(depth + 1));
      this.ws();
      const c = this.s[this.i++];
      if (c === "]") return out;
      if (c !== ",") this.fail("expected , or ]");
    }
  }

  object(depth: number): Record<string, unknown> {
    this.i++;
    const out: Record<string, unknown> = {};
    const seen = new Set<string>();
    this.ws();
    if (this.s[this.i] === "}") {
      this.i++;
      return out;
    }
    for (;;) {
      this.ws();
      if (this.s[this.i] !== '"') this.fail("expected a member name");
      const k = this.string();
      if (seen.has(k)) throw new CanonicalError(`duplicate member name ${JSON.stringify(k)}`);
      seen.add(k);
      this.ws();
      if (this.s[this.i++] !== ":") this.fail("expected :");
      setKey(out, k, this.value(depth + 1));
      this.ws();
      const c = this.s[this.i++];
      if (c === "}") return out;
      if (c !== ",") this.fail("expected , or }");
    }
  }
}

/** Parse JSON text strictly: duplicate member names (at any depth), NaN,
 * infinities, numbers beyond a double's range and invalid UTF-8 (bytes) are
 * refused with {@link CanonicalError}. `__proto__` is an ordinary key. */
export function parseStrict(text: string | Uint8Array): unknown {
  let s: string;
  if (typeof text === "string") s = text;
  else {
    try {
      s = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(text);
    } catch {
      throw new CanonicalError("JSON text is not valid UTF-8");
    }
  }
  const p = new Parser(s);
  const v = p.value(0);
  p.ws();
  if (p.i !== s.length) p.fail("trailing data");
  return v;
}

/** `canonicalize(parseStrict(text))`. */
export function canonicalizeText(text: string | Uint8Array): string {
  return canonicalize(parseStrict(text));
}

// --- rule 7 ----------------------------------------------------------------

const ASSIGNED: Uint32Array = (() => {
  const parts = ASSIGNED_15_0.split(",");
  const a = new Uint32Array(parts.length * 2);
  parts.forEach((p, i) => {
    const [lo, hi] = p.split("-");
    a[2 * i] = parseInt(lo!, 16);
    a[2 * i + 1] = parseInt(hi!, 16);
  });
  return a;
})();

/** Whether Unicode 15.0.0 (svc-jcs-1's tables) assigns the code point. */
export function assignedIn15(cp: number): boolean {
  let lo = 0;
  let hi = ASSIGNED.length / 2 - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (cp < ASSIGNED[2 * mid]!) hi = mid - 1;
    else if (cp > ASSIGNED[2 * mid + 1]!) lo = mid + 1;
    else return true;
  }
  return false;
}

/** Unicode White_Space: what Go's strings.TrimSpace trims. JS trim() would
 * also trim U+FEFF and keep nothing else out, so it is not used. */
const WHITE_SPACE = new Set([
  0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x20, 0x85, 0xa0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006,
  0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000,
]);

function isHex(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);
}

const UTF8 = new TextEncoder();

/** Percent-decode once as Go's url.PathUnescape does (`+` stays `+`); the
 * input is returned unchanged when an escape is malformed or the decoded bytes
 * are not valid UTF-8. */
export function pathUnescape(s: string): string {
  if (!s.includes("%")) return s;
  const b = UTF8.encode(s);
  const out = new Uint8Array(b.length);
  let n = 0;
  for (let i = 0; i < b.length; ) {
    const c = b[i]!;
    if (c === 0x25) {
      if (i + 2 >= b.length || !isHex(b[i + 1]!) || !isHex(b[i + 2]!)) return s;
      out[n++] = parseInt(String.fromCharCode(b[i + 1]!, b[i + 2]!), 16);
      i += 3;
    } else {
      out[n++] = c;
      i++;
    }
  }
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(out.subarray(0, n));
  } catch {
    return s;
  }
}

/** NFC as svc computes it: code points Unicode 15.0.0 does not assign are
 * starters that compose with nothing, so the text is normalized piecewise
 * around them (Node's newer tables would compose or reorder them). */
function nfc15(s: string): string {
  let allKnown = true;
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    if (cp > 0x7f && !assignedIn15(cp)) {
      allKnown = false;
      break;
    }
  }
  if (allKnown) return s.normalize("NFC");
  let out = "";
  let seg = "";
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    if (cp > 0x7f && !assignedIn15(cp)) {
      out += seg.normalize("NFC") + ch;
      seg = "";
    } else seg += ch;
  }
  return out + seg.normalize("NFC");
}

function trimSpace(s: string): string {
  const cps = Array.from(s);
  let a = 0;
  let b = cps.length;
  while (a < b && WHITE_SPACE.has(cps[a]!.codePointAt(0)!)) a++;
  while (b > a && WHITE_SPACE.has(cps[b - 1]!.codePointAt(0)!)) b--;
  return cps.slice(a, b).join("");
}

/** Go's strings.ToLower: each code point alone, by its simple mapping; code
 * points Unicode 15.0.0 does not assign are unchanged. */
function lower15(s: string): string {
  if (/^[\x00-\x7f]*$/.test(s)) return s.toLowerCase();
  let out = "";
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    if (cp <= 0x7f) {
      out += ch.toLowerCase();
      continue;
    }
    if (!assignedIn15(cp)) {
      out += ch;
      continue;
    }
    const low = ch.toLowerCase();
    const n = low.length === 1 ? 1 : Array.from(low).length;
    if (n === 1) out += low;
    else out += cp === 0x130 ? "i" : ch; // SpecialCasing: Go's simple mapping of U+0130 is "i"
  }
  return out;
}

/** SPEC 4.2 rule 7 on a tool or action key: percent-decode once (strict), NFC,
 * trim Unicode White_Space, lower-case code point by code point with the
 * simple case mappings (U+0130 becomes "i"; no final-sigma rule). */
export function normalizeIdentifier(s: string): string {
  if (typeof s !== "string") throw new CanonicalError(`an identifier must be a string, not ${typeof s}`);
  if (!isWellFormed(s)) throw new CanonicalError("an identifier holds a lone surrogate");
  return lower15(trimSpace(nfc15(pathUnescape(s))));
}

const RUNTIME_UNASSIGNED = /\p{Cn}/u;

/** False when `s` (or its percent-decoded form) holds a code point that this
 * runtime's Unicode tables do not assign (`/\p{Cn}/u`): a gateway with other
 * tables might normalize it otherwise, so a local hash over it is not
 * authoritative and the server's `action_hash` is trusted. */
export function identifierIsCertain(s: unknown): boolean {
  if (typeof s !== "string") return true;
  if (/^[\x00-\x7f]*$/.test(s)) return true;
  for (const text of [s, pathUnescape(s)]) {
    for (const ch of text) {
      if (ch.codePointAt(0)! > 0x7f && RUNTIME_UNASSIGNED.test(ch)) return false;
    }
  }
  return true;
}

/** Whether {@link actionHash} of the call is known to equal the gateway's. */
export function toolCallIsCertain(call: { tool?: unknown; action?: unknown }): boolean {
  return identifierIsCertain(call.tool) && identifierIsCertain(call.action);
}

// --- svc-jcs-1 -------------------------------------------------------------

/** A tool call as the wire names it. */
export interface ToolCall {
  tool: string;
  action: string;
  resource?: string | null;
  parameters?: Record<string, unknown> | null;
}

function hashedObject(call: unknown, normalize: boolean): Record<string, unknown> {
  if (call === null || typeof call !== "object" || Array.isArray(call)) throw new CanonicalError("tool_call must be an object");
  const tc = call as Record<string, unknown>;
  let tool = tc.tool;
  let action = tc.action;
  if (typeof tool !== "string" || typeof action !== "string") {
    throw new CanonicalError("tool_call.tool and tool_call.action must be strings");
  }
  const resource = tc.resource ?? null;
  if (resource !== null && typeof resource !== "string") throw new CanonicalError("tool_call.resource must be a string or null");
  const params = tc.parameters ?? {};
  if (params === null || typeof params !== "object" || Array.isArray(params)) {
    throw new CanonicalError("tool_call.parameters must be an object");
  }
  if (normalize) {
    tool = normalizeIdentifier(tool);
    action = normalizeIdentifier(action);
  }
  return { tool, action, resource, parameters: params };
}

/** The canonical bytes {@link actionHash} hashes. With `normalized` the tool
 * and action are taken as already normalized (an approval's stored
 * tool_call): rule 7 is not applied twice. */
export function actionBytes(call: ToolCall | Record<string, unknown>, opts: { normalized?: boolean } = {}): Uint8Array {
  return canonicalBytes(hashedObject(call, !opts.normalized));
}

/** svc-jcs-1: lower-case hex SHA-256 of {@link actionBytes}. */
export function actionHash(call: ToolCall | Record<string, unknown>, opts: { normalized?: boolean } = {}): string {
  return createHash("sha256").update(actionBytes(call, opts)).digest("hex");
}

/** Lower-case hex SHA-256 of bytes or a string's UTF-8. */
export function sha256Hex(data: Uint8Array | string): string {
  return createHash("sha256").update(data).digest("hex");
}
