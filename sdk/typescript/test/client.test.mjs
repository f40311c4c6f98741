// The client against a scripted fake svc (node:http): a port of
// sdk/python/tests/test_client.py.
import { describe, test, beforeEach, afterEach } from "node:test";
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { createServer } from "node:net";
import {
  Client, Decision, actionHash, canonicalize, ActionHashMismatch, ApprovalExpired, ApprovalRejected, ApprovalRequired, Cancelled,
  Denied, InvalidRequest, ReceiptInvalid, SvcAuthError, SvcError, SvcUnavailable, InvalidRedactionPath,
} from "../dist/index.js";
import { Fake, reply, envelope, rfc3339, sleep, makeReceipt, PUB_B64 } from "./helpers.mjs";

const KEY_BYTES = Buffer.alloc(32, "s");
const KEY = KEY_BYTES.toString("base64");
const TOKEN = "svc_agent_" + "x".repeat(43);
const UUID7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const hmac = (body) => "sha256=" + createHmac("sha256", KEY_BYTES).update(body).digest("hex");

let fake;
let logs;
const logger = {
  debug: (m) => logs.push(["debug", m]),
  info: (m) => logs.push(["info", m]),
  warn: (m) => logs.push(["warn", m]),
  error: (m) => logs.push(["error", m]),
};
const warnings = () => logs.filter(([l]) => l === "warn").map(([, m]) => m);

beforeEach(async () => {
  fake = await new Fake().start();
  logs = [];
});
afterEach(async () => {
  await fake.close();
});

function client(opts = {}) {
  return new Client({ baseUrl: fake.url, agentToken: TOKEN, signingKey: KEY, logger, ...opts });
}

async function freePort() {
  const s = createServer();
  await new Promise((r) => s.listen(0, "127.0.0.1", r));
  const p = s.address().port;
  await new Promise((r) => s.close(r));
  return p;
}

const elapsed = (t0) => (performance.now() - t0) / 1000;

describe("authorize", () => {
  test("allow and the request's shape", async () => {
    const tc = { tool: "GitHub", action: "read", resource: "acme/api", parameters: { n: 1 } };
    fake.script(reply(200, { decision: "allow", reason: "read_only", decision_id: "d1", action_hash: actionHash(tc),
      receipt_id: "r1", matched_policies: ["p"], composite_risk_score: 3, redacted_fields: [] }));
    const d = await client().authorize(tc, { trace: { run_id: "run" }, environment: "prod" });
    assert.ok(d.allowed);
    assert.deepEqual([d.decision, d.reason, d.decisionId, d.receiptId, d.matchedPolicies, d.compositeRiskScore],
      ["allow", "read_only", "d1", "r1", ["p"], 3]);
    assert.equal(d.hashMismatch, false);
    const [r] = fake.authorizeRequests();
    assert.deepEqual([r.method, r.path], ["POST", "/v2/authorize"]);
    assert.equal(r.headers.authorization, "Bearer " + TOKEN);
    assert.equal(r.headers["content-type"], "application/json");
    const body = r.json();
    assert.deepEqual(body.tool_call, tc);
    assert.equal(body.mutates_state, false);
    assert.deepEqual(body.trace, { run_id: "run" });
    assert.equal(body.environment, "prod");
    assert.match(body.request_id, UUID7);
    assert.ok(body.nonce.length >= 8 && body.nonce.length <= 128);
    assert.ok(!("dry_run" in body));
    assert.equal(d.requestId, body.request_id);
    assert.equal(r.headers["x-svc-request-signature"], hmac(r.body));
    assert.ok(!r.body.toString().replace('"GitHub"', "").includes(" ")); // compact JSON
  });

  test("unsigned without a key; resource null when absent", async () => {
    await client({ signingKey: null }).authorize({ tool: "t", action: "a" });
    const [r] = fake.authorizeRequests();
    assert.ok(!("x-svc-request-signature" in r.headers));
    assert.deepEqual(r.json().tool_call, { tool: "t", action: "a", resource: null, parameters: {} });
  });

  test("retries reuse the request_id with a fresh nonce, each signed over its bytes", async () => {
    fake.script(reply(503, envelope(503, "ServiceUnavailable", "shared_state_unavailable")), reply(502, "bad gateway"),
      reply(200, { decision: "allow" }));
    const d = await client({ retries: 2 }).authorize({ tool: "t", action: "a" });
    assert.equal(d.decision, "allow");
    const rs = fake.authorizeRequests();
    assert.equal(rs.length, 3);
    assert.equal(new Set(rs.map((r) => r.json().request_id)).size, 1);
    assert.equal(new Set(rs.map((r) => r.json().nonce)).size, 3);
    for (const r of rs) assert.equal(r.headers["x-svc-request-signature"], hmac(r.body));
  });

  test("a given request_id is kept", async () => {
    await client().authorize({ tool: "t", action: "a" }, { requestId: "my-id" });
    assert.equal(fake.authorizeRequests()[0].json().request_id, "my-id");
  });

  test("retries exhausted: SvcUnavailable", async () => {
    fake.script(reply(503, { decision: "deny", reason: "audit_writer_unavailable" }));
    await assert.rejects(client({ retries: 2 }).authorize({ tool: "t", action: "a" }), (e) => e instanceof SvcUnavailable && e.status === 503);
    assert.equal(fake.authorizeRequests().length, 3);
  });

  test("never retried: 400 404 409 500 422 401", async () => {
    for (const [status, reason, code, cls] of [[400, "BadRequest", "invalid_json", SvcError], [404, "NotFound", "not_found", SvcError],
      [409, "Conflict", "request_in_flight", SvcError], [500, "InternalError", "database_unavailable", SvcError],
      [422, "Invalid", "", SvcError], [401, "Unauthorized", "invalid_signature", SvcAuthError]]) {
      fake.requests.length = 0;
      fake.script(reply(status, envelope(status, reason, code, "why"), status === 500 ? { "Retry-After": "1" } : {}));
      const e = await client().authorize({ tool: "t", action: "a" }).then(() => null, (x) => x);
      assert.ok(e instanceof cls, `${status}: ${e}`);
      assert.ok(!(e instanceof SvcUnavailable));
      assert.deepEqual([e.status, e.reason, e.errorCode ?? ""], [status, reason, code]);
      assert.equal(e.name, cls.name);
      assert.ok(e.message.includes("why"));
      assert.equal(fake.authorizeRequests().length, 1, String(status));
    }
  });

  test("403 before policy is a deny without decision_id", async () => {
    fake.script(reply(403, envelope(403, "Forbidden", "FORBIDDEN", "environment not allowed for this agent")));
    const c = client();
    const d = await c.authorize({ tool: "t", action: "a" }, { environment: "prod" });
    assert.deepEqual([d.decision, d.decisionId, d.status, d.reason], ["deny", null, 403, "FORBIDDEN"]);
    assert.ok(d.message.includes("environment not allowed"));
    assert.equal(d.allowed, false);
    let ran = false;
    await assert.rejects(c.run({ tool: "t", action: "a" }, () => { ran = true; }), (e) => e instanceof Denied && e.decision.status === 403);
    assert.equal(ran, false);
  });

  test("Retry-After (seconds) is honoured", async () => {
    fake.script(reply(429, envelope(429, "TooManyRequests", "rate_limited"), { "Retry-After": "1" }), reply(200, { decision: "allow" }));
    const t0 = performance.now();
    const d = await client({ timeout: 3 }).authorize({ tool: "t", action: "a" });
    assert.ok(elapsed(t0) >= 0.95);
    assert.equal(d.decision, "allow");
  });

  test("Retry-After (HTTP-date) is honoured", async () => {
    const when = new Date(Math.ceil(Date.now() / 1000) * 1000 + 2000).toUTCString();
    fake.script(reply(429, envelope(429, "TooManyRequests", "rate_limited"), { "Retry-After": when }), reply(200, { decision: "allow" }));
    const t0 = performance.now();
    assert.equal((await client({ timeout: 4 }).authorize({ tool: "t", action: "a" })).decision, "allow");
    assert.ok(elapsed(t0) >= 0.9);
  });

  test("a Retry-After beyond the deadline fails now", async () => {
    fake.script(reply(429, envelope(429, "TooManyRequests", "rate_limited"), { "Retry-After": "30" }));
    const t0 = performance.now();
    await assert.rejects(client({ timeout: 3 }).authorize({ tool: "t", action: "a" }),
      (e) => e instanceof SvcUnavailable && e.status === 429 && e.errorCode === "rate_limited" && e.headers["retry-after"] === "30");
    assert.ok(elapsed(t0) < 1.0);
    assert.equal(fake.authorizeRequests().length, 1);
  });

  test("the deadline holds on a hung server", async () => {
    fake.script(async () => { await sleep(3000); return reply(200, { decision: "allow" }); });
    const t0 = performance.now();
    await assert.rejects(client({ timeout: 1 }).authorize({ tool: "t", action: "a" }), SvcUnavailable);
    assert.ok(elapsed(t0) < 1.6);
  });

  test("connection refused", async () => {
    const c = new Client({ baseUrl: `http://127.0.0.1:${await freePort()}`, agentToken: TOKEN, timeout: 1.5, logger });
    const t0 = performance.now();
    await assert.rejects(c.authorize({ tool: "t", action: "a" }), (e) => e instanceof SvcUnavailable && e.errorCode === "svc_unavailable");
    assert.ok(elapsed(t0) < 1.6);
  });

  test("an unknown or missing decision is deny", async () => {
    for (const body of [{ decision: "permit" }, { reason: "x" }, { decision: null }, { decision: "ALLOW" }]) {
      fake.script(reply(200, body));
      const d = await client().authorize({ tool: "t", action: "a" });
      assert.equal(d.decision, "deny");
      assert.equal(d.allowed, false);
    }
    assert.ok(warnings().some((m) => m.includes("unknown decision")));
  });

  test("an unreadable 200 is an error", async () => {
    for (const raw of ["<html>", "[1]", ""]) {
      fake.script(reply(200, raw));
      await assert.rejects(client().authorize({ tool: "t", action: "a" }), (e) => e instanceof SvcError && e.errorCode === "unreadable_answer");
    }
  });

  test("pre-checks send nothing", async () => {
    const c = client();
    const circular = {};
    circular.self = circular;
    const cases = [
      [{ parameters: { a: "x\u0000y" } }, {}], [{ parameters: { "a\u0000": 1 } }, {}], [{ parameters: { a: NaN } }, {}],
      [{ parameters: { a: Infinity } }, {}], [{ parameters: { a: "x".repeat(1 << 20) } }, {}], [{ parameters: { a: "\ud800" } }, {}],
      [{ parameters: { a: () => 1 } }, {}], [{ parameters: { a: 1n } }, {}], [{ parameters: { a: Symbol("s") } }, {}],
      [{ parameters: { a: [1, undefined] } }, {}], [{ parameters: { a: new Map() } }, {}], [{ parameters: [1] }, {}],
      [{ parameters: circular }, {}], [{ resource: 5 }, {}], [{}, { environment: "p\u0000" }], [{}, { trace: { run_id: "\u0000" } }],
      [{}, { trace: { x: NaN } }], [{}, { requestId: "r\u0000" }],
    ];
    for (const [call, opts] of cases) {
      await assert.rejects(c.authorize({ tool: "t", action: "a", ...call }, opts), InvalidRequest, JSON.stringify(Object.keys(call)));
    }
    for (const [tool, action] of [["", "a"], ["t", " "], ["\u001c", "a"], ["t", "\u3000"], ["t\u0000", "a"], [undefined, "a"], ["t", 5]]) {
      await assert.rejects(c.authorize({ tool, action }), InvalidRequest);
    }
    assert.deepEqual(fake.requests, []);
  });

  test("undefined members are left out, as JSON.stringify does", async () => {
    await client().authorize({ tool: "t", action: "a", resource: undefined, parameters: { a: undefined, b: 1 } });
    assert.deepEqual(fake.authorizeRequests()[0].json().tool_call, { tool: "t", action: "a", resource: null, parameters: { b: 1 } });
  });

  test("keep-alive: sequential calls reuse connections", async () => {
    const c = client();
    for (let i = 0; i < 8; i++) await c.authorize({ tool: "t", action: "a" });
    // undici may open a second connection while the first answer is being
    // released; after that, every call reuses one
    assert.ok(fake.connections <= 2, String(fake.connections));
  });

  test("concurrent calls", async () => {
    const c = client();
    const ds = await Promise.all(Array.from({ length: 40 }, () => c.authorize({ tool: "t", action: "a" })));
    assert.ok(ds.every((d) => d.decision === "allow"));
    assert.equal(fake.authorizeRequests().length, 40);
  });

  test("deprecation headers warn once per client", async () => {
    const seen = [];
    const onWarning = (w) => { if (w.name === "DeprecationWarning" && w.code === "SVC_DEPRECATED_API") seen.push(w); };
    process.on("warning", onWarning);
    try {
      fake.script(reply(200, { decision: "allow" }, { Deprecation: "true", Sunset: "Wed, 31 Dec 2026 23:59:59 GMT" }));
      const c = client();
      await c.authorize({ tool: "t", action: "a" });
      await c.authorize({ tool: "t", action: "a" });
      await sleep(20);
      assert.equal(seen.length, 1);
      assert.equal(warnings().filter((m) => m.includes("deprecated")).length, 1);
    } finally {
      process.off("warning", onWarning);
    }
  });

  test("v1 paths and their warning", async () => {
    const seen = [];
    const onWarning = (w) => { if (w.code === "SVC_DEPRECATED_API") seen.push(w); };
    process.on("warning", onWarning);
    try {
      const c = client({ apiVersion: "v1" });
      await c.authorize({ tool: "t", action: "a" });
      await sleep(20);
      assert.equal(seen.length, 1);
      assert.equal(fake.authorizeRequests()[0].path, "/v1/authorize");
    } finally {
      process.off("warning", onWarning);
    }
  });

  test("a hash mismatch is recorded and logged", async () => {
    fake.script(reply(200, { decision: "allow", action_hash: "f".repeat(64) }));
    const d = await client().authorize({ tool: "t", action: "a" });
    assert.equal(d.hashMismatch, true);
    assert.equal(d.hashCertain, true);
    assert.equal(d.localActionHash, actionHash({ tool: "t", action: "a" }));
    assert.ok(warnings().some((m) => m.includes("action_hash mismatch")));
  });

  test("dry run is sent as dry_run: true", async () => {
    fake.script(reply(200, { decision: "deny", dry_run: true }));
    const d = await client().authorize({ tool: "t", action: "a" }, { dryRun: true });
    assert.equal(fake.authorizeRequests()[0].json().dry_run, true);
    assert.equal(d.dryRun, true);
    await assert.rejects(client().run({ tool: "t", action: "a" }, () => 1, { dryRun: true }), (e) => e instanceof InvalidRequest && e.errorCode === "dry_run");
  });
});

describe("fail-open", () => {
  test("a listed read-only tool runs when svc is unavailable", async () => {
    fake.script(reply(503, envelope(503, "ServiceUnavailable")));
    const c = client({ failOpenTools: ["Search", ["kb", "lookup"]], timeout: 1, retries: 0 });
    const d = await c.authorize({ tool: "search", action: "q" });
    assert.deepEqual([d.decision, d.failOpen, d.decisionId, d.status], ["allow", true, null, null]);
    assert.equal(c.failOpenCount, 1);
    assert.ok(warnings().some((m) => m.includes("FAIL-OPEN")));
    assert.equal((await c.authorize({ tool: "KB", action: "Lookup" })).failOpen, true);
    await assert.rejects(c.authorize({ tool: "kb", action: "write" }), SvcUnavailable);
    assert.equal(await c.run({ tool: "search", action: "q", parameters: { q: 1 } }, (p) => p.q), 1);
    assert.equal(c.failOpenCount, 3);
  });

  test("presenting an approval never fails open", async () => {
    fake.script(reply(503, envelope(503, "ServiceUnavailable")));
    const c = client({ failOpenTools: ["search"], timeout: 1, retries: 0 });
    await assert.rejects(c.authorize({ tool: "search", action: "q" }, { approvalId: "ap1" }), SvcUnavailable);
    assert.equal(c.failOpenCount, 0);
  });

  test("a mutating call never fails open", async () => {
    fake.script(reply(503, envelope(503, "ServiceUnavailable")));
    const c = client({ failOpenTools: ["search"], timeout: 1, retries: 0 });
    await assert.rejects(c.authorize({ tool: "search", action: "q" }, { mutatesState: true }), SvcUnavailable);
    assert.equal(c.failOpenCount, 0);
  });

  test("errors other than unavailable never fail open", async () => {
    fake.script(reply(500, envelope(500, "InternalError", "database_unavailable")));
    const c = client({ failOpenTools: ["search"] });
    await assert.rejects(c.authorize({ tool: "search", action: "q" }), (e) => e instanceof SvcError && !(e instanceof SvcUnavailable));
    assert.equal(c.failOpenCount, 0);
  });

  test("unreachable fails open too", async () => {
    const c = new Client({ baseUrl: `http://127.0.0.1:${await freePort()}`, agentToken: TOKEN, timeout: 0.5, failOpenTools: ["search"], logger });
    assert.equal((await c.authorize({ tool: "search", action: "q" })).failOpen, true);
  });
});

describe("run", () => {
  test("redact, and mask", async () => {
    fake.script(reply(200, { decision: "redact", redacted_fields: ["parameters.card", "parameters.meta.ssn"] }));
    const c = client();
    const params = { card: "4242", amount: 5, meta: { ssn: "1", k: 2 } };
    assert.deepEqual(await c.run({ tool: "pay", action: "charge", parameters: params }, (p) => p), { amount: 5, meta: { k: 2 } });
    assert.equal(params.card, "4242");
    const got = await c.run({ tool: "pay", action: "charge", parameters: params }, (p) => p, { mask: "[redacted]" });
    assert.equal(got.card, "[redacted]");
    assert.equal(got.meta.ssn, "[redacted]");
  });

  test("a bad redaction path fails closed", async () => {
    fake.script(reply(200, { decision: "redact", redacted_fields: ["card"] }));
    let ran = false;
    await assert.rejects(client().run({ tool: "t", action: "a", parameters: { card: 1 } }, () => { ran = true; }),
      (e) => e instanceof InvalidRedactionPath && e.errorCode === "invalid_redaction_path");
    assert.equal(ran, false);
  });

  test("deny, quarantine and unknown decisions throw Denied", async () => {
    for (const dec of ["deny", "quarantine", "bogus"]) {
      fake.script(reply(200, { decision: dec, reason: "nope", decision_id: "d" }));
      let ran = false;
      await assert.rejects(client().run({ tool: "t", action: "a" }, () => { ran = true; }),
        (e) => e instanceof Denied && e.decision.decision === (dec === "bogus" ? "deny" : dec) && e.name === "Denied");
      assert.equal(ran, false);
    }
  });

  test("require_approval without waiting: ApprovalRequired", async () => {
    const tc = { tool: "t", action: "a", resource: null, parameters: {} };
    fake.script(reply(200, { decision: "require_approval", approval_id: "ap1", action_hash: actionHash(tc), approval_expires_at: rfc3339(60) }));
    await assert.rejects(client().run(tc, () => 1, { wait: false }), (e) => e instanceof ApprovalRequired && e.decision.approvalId === "ap1");
  });

  test("require_approval without an approval_id is deny", async () => {
    fake.script(reply(200, { decision: "require_approval" }));
    await assert.rejects(client().run({ tool: "t", action: "a" }, () => 1), Denied);
  });

  test("require_approval for another hash is refused before waiting", async () => {
    fake.script(reply(200, { decision: "require_approval", approval_id: "ap1", action_hash: "1".repeat(64) }));
    await assert.rejects(client().run({ tool: "t", action: "a" }, () => 1), ActionHashMismatch);
    assert.ok(!fake.requests.some((r) => r.path.includes("/approvals/")));
  });

  test("guard", async () => {
    fake.script(reply(200, { decision: "allow" }));
    const c = client();
    const merge = c.guard({ tool: "codehost", action: "merge", resource: (a) => `${a.repo}#${a.pr}`, mutatesState: true },
      ({ repo, pr, method = "squash", ...extra }) => [repo, pr, method, extra]);
    assert.deepEqual(await merge({ repo: "acme/api", pr: 42, flag: true }), ["acme/api", 42, "squash", { flag: true }]);
    const body = fake.authorizeRequests()[0].json();
    assert.deepEqual(body.tool_call, { tool: "codehost", action: "merge", resource: "acme/api#42", parameters: { repo: "acme/api", pr: 42, flag: true } });
    assert.equal(body.mutates_state, true);
  });

  test("guard: a redacted argument is removed, or masked", async () => {
    fake.script(reply(200, { decision: "redact", redacted_fields: ["parameters.card"] }));
    const c = client();
    const charge = c.guard({ tool: "pay", action: "charge" }, ({ order, card = "none" }) => [order, card]);
    assert.deepEqual(await charge({ order: "o7", card: "4242" }), ["o7", "none"]);
    const masked = c.guard({ tool: "pay", action: "charge", mask: "***" }, ({ order, card }) => [order, card]);
    assert.deepEqual(await masked({ order: "o7", card: "4242" }), ["o7", "***"]);
  });
});

describe("approvals", () => {
  const TC = { tool: "Pay", action: "charge", resource: "cus_1", parameters: { amount: 100 } };

  function approval(status = "PENDING", { params, ahash, ...over } = {}) {
    const tc = { tool: "pay", action: "charge", resource: "cus_1", parameters: params ?? { amount: 100 } };
    return { approval_id: "ap1", decision_id: "d1", agent_id: "ag", tool_call: tc,
      action_hash: ahash ?? actionHash({ ...TC, parameters: tc.parameters }), status, expires_at: rfc3339(60), ...over };
  }

  function serve(approvals, decisions) {
    const as = [...approvals];
    const ds = [...decisions];
    fake.handler = (req) => {
      if (req.path.includes("/approvals/")) {
        const a = as.length > 1 ? as.shift() : as[0];
        return typeof a === "function" ? a(req) : a.status && a.raw ? a : reply(200, a);
      }
      const d = ds.length > 1 ? ds.shift() : ds[0];
      return reply(200, d);
    };
  }

  const first = () => ({ decision: "require_approval", approval_id: "ap1", decision_id: "d1", action_hash: actionHash(TC), approval_expires_at: rfc3339(60) });

  test("approved, then presented again", async () => {
    serve([approval(), approval("APPROVED")], [first(), { decision: "allow", reason: "approved", decision_id: "d2" }]);
    assert.equal(await client().run(TC, (p) => p.amount * 2), 200);
    const gets = fake.requests.filter((r) => r.path.includes("/approvals/"));
    assert.ok(gets.every((r) => /\/v2\/approvals\/ap1\?wait=\d+$/.test(r.path)), gets.map((r) => r.path).join(" "));
    assert.ok(!fake.requests.some((r) => r.path.includes("consume")));
    const [a, b] = fake.authorizeRequests();
    assert.ok(!("approval_id" in a.json()));
    assert.equal(b.json().approval_id, "ap1");
    assert.notEqual(a.json().request_id, b.json().request_id);
    assert.deepEqual(b.json().tool_call, TC);
  });

  test("edited", async () => {
    serve([approval("APPROVED", { params: { amount: 50 } })], [first(), { decision: "allow", reason: "approved" }]);
    const c = client();
    const d = await c.authorize(TC);
    const a = await c.waitForApproval(d);
    assert.equal(a.edited, true);
    assert.deepEqual(a.parameters, { amount: 50 });
    assert.equal(a.call.tool, "Pay"); // the identifiers as asked
    serve([approval("APPROVED", { params: { amount: 50 } })], [first(), { decision: "allow", reason: "approved" }]);
    assert.equal(await c.run(TC, (p) => p.amount), 50);
    assert.deepEqual(fake.authorizeRequests().at(-1).json().tool_call.parameters, { amount: 50 });
  });

  test("an edit with the wrong hash is refused", async () => {
    serve([approval("APPROVED", { params: { amount: 50 }, ahash: actionHash(TC) })], [first(), { decision: "allow" }]);
    let ran = false;
    await assert.rejects(client().run(TC, () => { ran = true; }), ActionHashMismatch);
    assert.equal(ran, false);
    assert.equal(fake.authorizeRequests().length, 1);
  });

  test("an approval for another tool is refused", async () => {
    const other = approval("APPROVED");
    other.tool_call.tool = "bank";
    serve([other], [first()]);
    await assert.rejects(client().run(TC, (p) => p), ActionHashMismatch);
  });

  test("rejected", async () => {
    serve([approval("REJECTED", { reason: "no" })], [first()]);
    await assert.rejects(client().run(TC, (p) => p), (e) => e instanceof ApprovalRejected && e.approval.status === "REJECTED" && e.decision.approvalId === "ap1");
  });

  test("expired", async () => {
    serve([approval("EXPIRED")], [first()]);
    await assert.rejects(client().run(TC, (p) => p), (e) => e instanceof ApprovalExpired && e.errorCode === "approval_expired");
  });

  test("the caller's timeout", async () => {
    serve([async () => { await sleep(300); return reply(200, approval()); }], [first()]);
    const t0 = performance.now();
    await assert.rejects(client().run(TC, (p) => p, { approvalTimeout: 1.5 }), (e) => e instanceof ApprovalExpired && e.errorCode === "approval_wait_deadline");
    assert.ok(elapsed(t0) < 3.5);
  });

  test("the expiry bounds the wait", async () => {
    const f = first();
    f.approval_expires_at = rfc3339(0.5);
    serve([async () => { await sleep(200); return reply(200, approval("PENDING", { expires_at: f.approval_expires_at })); }], [f]);
    const t0 = performance.now();
    await assert.rejects(client().run(TC, (p) => p), ApprovalExpired);
    assert.ok(elapsed(t0) < 4);
  });

  test("transient failures are retried", async () => {
    serve([reply(503, envelope(503, "ServiceUnavailable")), reply(502, ""), approval("APPROVED")], [first(), { decision: "allow" }]);
    assert.equal(await client().run(TC, (p) => p.amount), 100);
  });

  test("transient failures until the deadline: SvcUnavailable", async () => {
    serve([reply(503, envelope(503, "ServiceUnavailable"))], [first()]);
    await assert.rejects(client().run(TC, (p) => p, { approvalTimeout: 1 }), SvcUnavailable);
  });

  test("the presentation denied", async () => {
    serve([approval("APPROVED")], [first(), { decision: "deny", reason: "approval_consumed" }]);
    await assert.rejects(client().run(TC, (p) => p), (e) => e instanceof Denied && e.decision.reason === "approval_consumed");
  });

  test("an unknown status fails closed", async () => {
    serve([approval("MAYBE")], [first()]);
    await assert.rejects(client().run(TC, (p) => p), (e) => e instanceof SvcError && e.errorCode === "unknown_approval_status");
  });

  test("uncertain Unicode: the server's hash is trusted (and logged)", async () => {
    const unassigned = String.fromCodePoint(0xe0080); // \p{Cn} in this runtime
    assert.ok(/\p{Cn}/u.test(unassigned));
    const tc = { tool: "pay" + unassigned, action: "charge", resource: "cus_1", parameters: { amount: 100 } };
    const serverHash = "2".repeat(64);
    const f = { decision: "require_approval", approval_id: "ap1", action_hash: serverHash, approval_expires_at: rfc3339(60) };
    const appr = { approval_id: "ap1", status: "APPROVED", action_hash: serverHash, expires_at: rfc3339(60),
      tool_call: { tool: "pay" + unassigned, action: "charge", resource: "cus_1", parameters: { amount: 100 } } };
    serve([appr], [f, { decision: "allow", reason: "approved", action_hash: serverHash }]);
    assert.equal(await client().run(tc, (p) => p.amount), 100);
    assert.ok(warnings().some((m) => m.includes("action_hash")));
  });

  test("by id, and 404", async () => {
    fake.script(reply(404, envelope(404, "NotFound", "not_found")));
    await assert.rejects(client().waitForApproval("nope", { timeout: 2 }), (e) => e instanceof SvcError && e.status === 404);
  });

  test("by id: APPROVED returns the stored call", async () => {
    fake.script(reply(200, approval("APPROVED")));
    const a = await client().waitForApproval("ap1", { timeout: 2 });
    assert.equal(a.edited, false);
    assert.deepEqual(a.call, { tool: "pay", action: "charge", resource: "cus_1", parameters: { amount: 100 } });
  });

  test("an AbortSignal ends a pending long-poll at once", async () => {
    let held;
    const heldP = new Promise((r) => { held = r; });
    fake.script(async () => { held(); await sleep(5000); return reply(200, approval()); });
    const ac = new AbortController();
    const p = client().waitForApproval("ap1", { signal: ac.signal });
    await heldP;
    const t0 = performance.now();
    ac.abort();
    await assert.rejects(p, (e) => e instanceof Cancelled && e.name === "Cancelled" && e.errorCode === "cancelled");
    assert.ok(elapsed(t0) < 0.5);
  });

  test("an AbortSignal ends run's wait, and an aborted signal sends nothing", async () => {
    serve([async () => { await sleep(5000); return reply(200, approval()); }], [first()]);
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 200);
    const t0 = performance.now();
    await assert.rejects(client().run(TC, (p) => p, { signal: ac.signal }), Cancelled);
    assert.ok(elapsed(t0) < 1);
    fake.requests.length = 0;
    await assert.rejects(client().authorize(TC, { signal: ac.signal }), Cancelled);
    assert.equal(fake.requests.length, 0);
  });

  test("a Decision rebuilt from plain fields can be waited for", async () => {
    fake.script(reply(200, approval("APPROVED")));
    const d = new Decision({ decision: "require_approval", approvalId: "ap1", toolCall: { ...TC }, approvalExpiresAt: rfc3339(60) });
    const a = await client().waitForApproval(d, { timeout: 2 });
    assert.equal(a.status, "APPROVED");
    assert.deepEqual(a.call, TC);
  });
});

describe("receipts", () => {
  const TC = { tool: "pay", action: "charge", resource: null, parameters: { amount: 1 } };

  function serve(receipt, decision) {
    const d = decision ?? { decision: "allow", decision_id: receipt.decision_id, receipt_id: receipt.receipt_id,
      receipt_hash: receipt.receipt_hash, action_hash: actionHash(TC) };
    fake.handler = (req) => (req.path.startsWith("/v2/receipts/") ? reply(200, receipt) : reply(200, d));
  }

  test("a valid receipt: the mutating call runs", async () => {
    serve(makeReceipt(canonicalize, { action_hash: actionHash(TC) }));
    const c = client({ receiptPublicKey: PUB_B64 });
    assert.equal(await c.run(TC, (p) => p.amount, { mutatesState: true }), 1);
    assert.ok(fake.requests.some((r) => r.path.startsWith("/v2/receipts/")));
  });

  test("read-only calls' receipts are not fetched", async () => {
    serve(makeReceipt(canonicalize, { action_hash: "0".repeat(64) }));
    const c = client({ receiptPublicKey: PUB_B64 });
    assert.equal(await c.run(TC, (p) => p.amount), 1);
    assert.ok(!fake.requests.some((r) => r.path.startsWith("/v2/receipts/")));
  });

  test("bad receipts are refused and the tool does not run", async () => {
    const good = makeReceipt(canonicalize, { action_hash: actionHash(TC) });
    const cases = [
      ["tampered", { ...good, decision: "deny" }, { decision: "allow", receipt_id: good.receipt_id, decision_id: good.decision_id }],
      ["other call", makeReceipt(canonicalize, { action_hash: "0".repeat(64) })],
      ["unsigned", makeReceipt(canonicalize, { action_hash: actionHash(TC), signed: false })],
    ];
    for (const [name, r, d] of cases) {
      serve(r, d);
      let ran = false;
      await assert.rejects(client({ receiptPublicKey: PUB_B64 }).run(TC, () => { ran = true; }, { mutatesState: true }),
        (e) => e instanceof ReceiptInvalid && e.name === "ReceiptInvalid", name);
      assert.equal(ran, false, name);
    }
  });

  test("a missing receipt (404) is ReceiptInvalid", async () => {
    fake.handler = (req) => (req.path.startsWith("/v2/receipts/") ? reply(404, envelope(404, "NotFound", "not_found"))
      : reply(200, { decision: "allow", receipt_id: "r404", action_hash: actionHash(TC) }));
    await assert.rejects(client({ receiptPublicKey: PUB_B64 }).run(TC, () => 1, { mutatesState: true }),
      (e) => e instanceof ReceiptInvalid && e.errorCode === "receipt_not_found");
  });

  test("getReceipt and getReceiptPublicKey", async () => {
    const r = makeReceipt(canonicalize);
    fake.handler = (req) => (req.path === "/v2/receipts/public-key" ? reply(200, { key_id: "k", public_key: PUB_B64 }) : reply(200, r));
    const c = client();
    assert.deepEqual(await c.getReceipt(r.receipt_id), r);
    assert.deepEqual(await c.getReceiptPublicKey(), { key_id: "k", public_key: PUB_B64 });
  });
});
