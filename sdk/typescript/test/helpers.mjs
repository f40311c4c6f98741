// Shared helpers of the unit tests (imported, not run).
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { createHash, createPrivateKey, sign as edSign, createPublicKey } from "node:crypto";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

export const HERE = dirname(fileURLToPath(import.meta.url));
export const ROOT = join(HERE, "..");
export const TESTDATA = join(ROOT, "..", "..", "testdata");

export function vectors(rel) {
  return JSON.parse(readFileSync(join(TESTDATA, rel), "utf8"));
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function reply(status = 200, body = null, headers = {}) {
  const raw = body instanceof Uint8Array || Buffer.isBuffer(body) ? Buffer.from(body)
    : typeof body === "string" ? Buffer.from(body) : body === null ? Buffer.alloc(0) : Buffer.from(JSON.stringify(body));
  return { status, headers, raw };
}

export function envelope(status, reason, code = "", message = "m") {
  const d = { kind: "Status", apiVersion: "v2", status: "Failure", message, reason, details: {}, code: status };
  if (code) d.details.error = code;
  return d;
}

export function rfc3339(secondsFromNow) {
  return new Date(Date.now() + secondsFromNow * 1000).toISOString();
}

/** A scripted stand-in for svc (node:http). `handler(req)` returns a reply
 * (or a promise of one); `script(...answers)` answers in turn, the last repeats. */
export class Fake {
  constructor(handler) {
    this.requests = [];
    this.connections = 0;
    this.handler = handler ?? (() => reply(200, { decision: "allow", reason: "ok" }));
    this.server = createServer((req, res) => {
      const chunks = [];
      req.on("data", (c) => chunks.push(c));
      req.on("end", async () => {
        const body = Buffer.concat(chunks);
        const r = {
          method: req.method, path: req.url, headers: req.headers, body,
          json: () => (body.length ? JSON.parse(body.toString("utf8")) : null),
        };
        this.requests.push(r);
        let a;
        try {
          a = await this.handler(r);
        } catch (e) {
          a = reply(599, String(e));
        }
        if (res.destroyed) return;
        res.writeHead(a.status, { ...a.headers, "Content-Length": a.raw.length });
        res.end(a.raw);
      });
    });
    this.server.on("connection", (s) => {
      this.connections++;
      this.sockets.add(s);
      s.on("close", () => this.sockets.delete(s));
    });
    this.sockets = new Set();
  }

  async start() {
    await new Promise((r) => this.server.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${this.server.address().port}`;
    return this;
  }

  script(...answers) {
    const it = [...answers];
    this.handler = (req) => {
      const a = it.length > 1 ? it.shift() : it[0];
      return typeof a === "function" ? a(req) : a;
    };
  }

  authorizeRequests() {
    return this.requests.filter((r) => r.path.endsWith("/authorize"));
  }

  async close() {
    for (const s of this.sockets) s.destroy();
    await new Promise((r) => this.server.close(r));
  }
}

// --- receipts signed with a test key (seed 0..31) ---------------------------

const PKCS8_ED25519_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");
const SEED = Buffer.from(Array.from({ length: 32 }, (_, i) => i));
export const PRIVATE_KEY = createPrivateKey({ key: Buffer.concat([PKCS8_ED25519_PREFIX, SEED]), format: "der", type: "pkcs8" });
const spki = createPublicKey(PRIVATE_KEY).export({ format: "der", type: "spki" });
export const PUB = spki.subarray(spki.length - 32);
export const PUB_B64 = PUB.toString("base64");
export const KEY_ID = createHash("sha256").update(PUB).digest("hex").slice(0, 16);

export function makeReceipt(canonicalize, { seq = 1, prev = "", signed = true, ...over } = {}) {
  const r = {
    receipt_id: "0190c3a2-7f00-7000-8000-000000000001",
    tenant_id: "t1",
    decision_id: "0190c3a2-7f00-7000-8000-0000000000d1",
    seq,
    action_hash: "a".repeat(64),
    decision: "allow",
    prev_receipt_hash: prev,
    key_id: signed ? KEY_ID : "",
    created_at: "2026-11-27T10:00:00.123456Z",
    ...over,
  };
  const fields = ["receipt_id", "tenant_id", "decision_id", "seq", "action_hash", "decision", "prev_receipt_hash", "key_id", "created_at"];
  const obj = Object.fromEntries(fields.map((f) => [f, r[f]]));
  r.receipt_hash = createHash("sha256").update(canonicalize(obj)).digest("hex");
  r.signature = signed ? edSign(null, Buffer.from(r.receipt_hash, "hex"), PRIVATE_KEY).toString("base64") : null;
  return r;
}
