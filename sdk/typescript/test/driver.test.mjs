// The conformance driver as a subprocess: CONTRACT 14's line protocol and the
// live operations of sdk/README.md (against the scripted fake svc).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { actionHash, canonicalize } from "../dist/index.js";
import { Fake, ROOT, reply, envelope, rfc3339, sleep, vectors, makeReceipt, PUB_B64 } from "./helpers.mjs";

const DRIVER = join(ROOT, "conformance-driver");

/** Run the driver over `input` (bytes); the answers parsed. */
function runDriver(input) {
  return new Promise((resolve, reject) => {
    const p = spawn(DRIVER, [], { cwd: "/", stdio: ["pipe", "pipe", "pipe"] });
    const out = [];
    const err = [];
    p.stdout.on("data", (c) => out.push(c));
    p.stderr.on("data", (c) => err.push(c));
    p.on("error", reject);
    p.on("close", (code) => {
      const text = Buffer.concat(out).toString("utf8");
      resolve({ code, text, answers: text.split("\n").filter(Boolean).map((l) => JSON.parse(l)), stderr: Buffer.concat(err).toString() });
    });
    p.stdin.end(input);
  });
}

test("the driver is executable", () => {
  accessSync(DRIVER, constants.X_OK);
});

test("lines are answered in order, malformed ones with an error", async () => {
  const key = "a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U=";
  const inp = [
    Buffer.from('{"op":"canonicalize","value":{"b":[1E21,-0.0,0.000001],"a":"\\u20ac"}}'),
    Buffer.from("not json at all"),
    Buffer.from('{"op":"frobnicate"}'),
    Buffer.from('{"op":"action_hash","tool_call":{"tool":" GitHub ","action":"Merge","resource":null,"parameters":{}}}'),
    Buffer.from(`{"op":"sign","body":"{\\"a\\":1}","signing_key":"${key}"}`),
    Buffer.from('{"op":"sign","body":"x","signing_key":"***"}'),
    Buffer.from('{"op":"redact","parameters":{"a":{"b":1},"c":2},"redacted_fields":["parameters.a.b"]}'),
    Buffer.from('{"op":"redact","parameters":{"a":1},"redacted_fields":["a"]}'),
    Buffer.from('{"op":"retry","status":429,"body":null,"headers":{"Retry-After":"1"}}'),
    Buffer.from('{"op":"retry","status":400,"body":{"reason":"BadRequest"},"headers":{}}'),
    Buffer.from('{"op":"outcome","response":{"decision":"require_approval"}}'),
    Buffer.from('{"op":"verify_receipt","receipt":{},"public_key":"AAAA"}'),
    Buffer.from('{"op":"canonicalize"}'),
    Buffer.from('{"op":"canonicalize","value":1,"value":2}'),
    Buffer.from("[1,2]"),
    Buffer.from(""),
    Buffer.from([0xff, 0xfe]),
    Buffer.from('{"op":"canonicalize","value":123456789012345678901234567890}'),
    Buffer.from('{"op":"canonicalize","value":1e999}'),
    Buffer.from('{"op":"canonicalize","value":"\\ud800"}'),
    Buffer.from('{"op":5}'),
    Buffer.from('{"value":1}'),
    Buffer.from('{"op":"authorize","tool_call":{"tool":"t","action":"a"}}'),
    Buffer.from('{"op":"canonicalize","value":"\\u2028\u00e9"}'),
    Buffer.from('{"op":"redact","parameters":{"x":{"a":1,"a":2}},"redacted_fields":[]}'),
  ];
  const { code, answers, text, stderr } = await runDriver(Buffer.concat(inp.flatMap((l) => [l, Buffer.from("\n")])));
  assert.equal(code, 0, stderr);
  assert.equal(answers.length, inp.length);
  assert.ok(/^[\x00-\x7f]*$/.test(text), "ASCII answers");
  assert.deepEqual(answers[0], { canonical: '{"a":"\u20ac","b":[1e+21,0,0.000001]}' });
  assert.ok(answers[1].error);
  assert.deepEqual(answers[2], { error: "unknown_op" });
  assert.deepEqual(answers[3], { action_hash: actionHash({ tool: "github", action: "merge", resource: null, parameters: {} }) });
  assert.ok(answers[4].header.startsWith("sha256="));
  assert.deepEqual(answers[5], { error: "invalid_key" });
  assert.deepEqual(answers[6], { parameters: { a: {}, c: 2 } });
  assert.deepEqual(answers[7], { error: "invalid_redaction_path" });
  assert.deepEqual(answers[8], { retry: true });
  assert.deepEqual(answers[9], { retry: false });
  assert.deepEqual(answers[10], { outcome: "deny" });
  assert.deepEqual(answers[11], { hash_valid: false, signature_valid: false });
  assert.deepEqual(answers[12], { error: "missing_field" });
  assert.deepEqual(answers[13], { error: "duplicate_key" });
  assert.deepEqual(answers[14], { error: "invalid_input" });
  assert.deepEqual(answers[15], { error: "invalid_json" });
  assert.deepEqual(answers[16], { error: "invalid_json" });
  assert.deepEqual(answers[17], { canonical: "1.2345678901234568e+29" });
  assert.deepEqual(answers[18], { error: "invalid_json" });
  assert.deepEqual(answers[19], { error: "invalid_value" });
  assert.deepEqual(answers[20], { error: "unknown_op" });
  assert.deepEqual(answers[21], { error: "unknown_op" });
  assert.deepEqual(answers[22], { error: "no_client" });
  assert.deepEqual(answers[23], { canonical: '"\u2028\u00e9"' });
  assert.deepEqual(answers[24], { error: "duplicate_key" });
});

test("empty input: no answer, exit 0", async () => {
  const { code, answers } = await runDriver(Buffer.alloc(0));
  assert.deepEqual([code, answers], [0, []]);
});

test("a last line without a newline is answered", async () => {
  const { code, answers } = await runDriver(Buffer.from('{"op":"canonicalize","value":[]}\n{"op":"canonicalize","value":{}}'));
  assert.deepEqual([code, answers], [0, [{ canonical: "[]" }, { canonical: "{}" }]]);
});

test("each answer is written before the next line is read", async () => {
  const p = spawn(DRIVER, [], { stdio: ["pipe", "pipe", "inherit"] });
  const rl = createInterface({ input: p.stdout });
  const it = rl[Symbol.asyncIterator]();
  for (let i = 0; i < 3; i++) {
    p.stdin.write(`{"op":"canonicalize","value":${i}}\n`);
    const { value } = await it.next();
    assert.deepEqual(JSON.parse(value), { canonical: String(i) });
  }
  p.stdin.end();
  const code = await new Promise((r) => p.on("close", r));
  assert.equal(code, 0);
});

test("every jcs vector through the subprocess", async () => {
  const cases = [];
  for (const v of vectors("jcs/vectors.json")) cases.push([{ op: "canonicalize", value: v.input }, { canonical: v.canonical }]);
  for (const v of vectors("jcs/action_hash.json")) cases.push([{ op: "action_hash", tool_call: v.tool_call }, { action_hash: v.action_hash }]);
  const { code, answers } = await runDriver(Buffer.from(cases.map(([i]) => canonicalize(i) + "\n").join("")));
  assert.equal(code, 0);
  assert.equal(answers.length, cases.length);
  cases.forEach(([inp, want], i) => assert.deepEqual(answers[i], want, JSON.stringify(inp)));
});

test("live operations against a fake svc", async () => {
  const fake = await new Fake().start();
  try {
    const TC = { tool: "Pay", action: "charge", resource: "cus_1", parameters: { amount: 100, card: "4242" } };
    const stored = { tool: "pay", action: "charge", resource: "cus_1", parameters: { amount: 50, card: "4242" } };
    const approval = (status) => ({ approval_id: "ap1", decision_id: "d1", status, tool_call: stored, expires_at: rfc3339(60),
      action_hash: actionHash({ ...TC, parameters: stored.parameters }) });
    const receipt = makeReceipt(canonicalize, { action_hash: actionHash({ tool: "pay", action: "charge", resource: null, parameters: {} }) });
    let authorizeAnswers = [];
    let approvalAnswer = () => reply(200, approval("APPROVED"));
    fake.handler = (req) => {
      if (req.path.startsWith("/v2/receipts/public-key")) return reply(200, { key_id: "k", public_key: PUB_B64 });
      if (req.path.startsWith("/v2/receipts/")) return reply(200, receipt);
      if (req.path.startsWith("/v2/approvals/")) return approvalAnswer(req);
      return authorizeAnswers.length > 1 ? authorizeAnswers.shift() : authorizeAnswers[0];
    };
    const script = [];
    const expect = [];
    const line = (req, check) => {
      script.push(req);
      expect.push(check);
    };
    line({ op: "client", base_url: fake.url, agent_token: "tok", timeout: 2, retries: 0, fail_open_tools: ["search", ["kb", "q"]],
      receipt_public_key: PUB_B64 }, (a) => assert.deepEqual(a, { ok: true, warnings: [] }));
    line({ op: "authorize", tool_call: TC, mutates_state: true, trace: { run_id: "r" } }, (a) => {
      assert.equal(a.decision.decision, "allow");
      assert.equal(a.decision.local_action_hash, actionHash(TC));
      assert.equal(a.decision.hash_certain, true);
      assert.equal(a.decision.mutates_state, true);
      assert.deepEqual(a.decision.tool_call, TC);
      assert.deepEqual(a.decision.redacted_fields, []);
      assert.equal(a.decision.decision_id, null);
      assert.deepEqual(a.warnings, []);
    });
    line({ op: "run", tool_call: TC, mask: null }, (a) => {
      assert.equal(a.ran, true);
      assert.deepEqual(a.parameters, { amount: 100, card: null });
      assert.equal(a.decision.decision, "redact");
    });
    line({ op: "run", tool_call: TC }, (a) => assert.deepEqual(a.parameters, { amount: 100 }));
    line({ op: "guard", tool: "pay", action: "charge", resource: null, arguments: { amount: 1, card: "x" }, mask: "***" },
      (a) => assert.deepEqual(a.parameters, { amount: 1, card: "***" }));
    line({ op: "run", tool_call: TC }, (a) => {
      assert.equal(a.ran, false);
      assert.equal(a.raised.type, "Denied");
      assert.equal(a.raised.decision.decision, "deny");
      assert.equal(a.raised.error_code, "nope");
    });
    line({ op: "run", tool_call: TC }, (a) => {
      assert.equal(a.ran, true);
      assert.deepEqual(a.parameters, stored.parameters);
      assert.equal(a.decision.decision, "allow");
    });
    line({ op: "wait_for_approval", approval_id: "ap1", timeout: 5 }, (a) => {
      assert.equal(a.approval.status, "APPROVED");
      assert.equal(a.approval.edited, false);
      assert.deepEqual(a.approval.call, stored);
    });
    line({ op: "wait_for_approval", approval_id: "ap2", cancel_after: 0.3 }, (a) => {
      assert.equal(a.raised.type, "Cancelled");
      assert.equal(a.raised.error_code, "cancelled");
    });
    line({ op: "authorize", tool_call: { tool: "search", action: "q" } }, (a) => {
      assert.equal(a.decision.fail_open, true);
      assert.deepEqual(a.warnings.map((w) => w.kind), ["fail_open"]);
    });
    line({ op: "authorize", tool_call: { tool: "db", action: "drop" } }, (a) => {
      assert.equal(a.raised.type, "SvcUnavailable");
      assert.equal(a.raised.status, 503);
      assert.equal(a.raised.error_code, "shared_state_unavailable");
      assert.equal(a.raised.headers["content-length"] !== undefined, true);
    });
    line({ op: "stats" }, (a) => assert.deepEqual(a, { fail_open_count: 1, warnings: [] }));
    line({ op: "get_receipt", receipt_id: receipt.receipt_id }, (a) => assert.deepEqual(a.receipt, receipt));
    line({ op: "get_receipt_public_key" }, (a) => assert.deepEqual(a.public_key, { key_id: "k", public_key: PUB_B64 }));
    line({ op: "verify_decision_receipt", decision: { decision: "allow", receipt_id: receipt.receipt_id, decision_id: receipt.decision_id,
      receipt_hash: receipt.receipt_hash, tool_call: { tool: "pay", action: "charge", resource: null, parameters: {} } } },
    (a) => assert.deepEqual(a.receipt, receipt));
    line({ op: "verify_decision_receipt", decision: { decision: "deny", receipt_id: receipt.receipt_id,
      tool_call: { tool: "pay", action: "charge", resource: null, parameters: {} } } }, (a) => assert.equal(a.raised.type, "ReceiptInvalid"));
    line({ op: "authorize", tool_call: { tool: "t", action: "a", parameters: { x: "\u0000" } } }, (a) => {
      assert.equal(a.raised.type, "InvalidRequest");
      assert.equal(a.raised.status, null);
    });
    line({ op: "client", base_url: fake.url, agent_token: "tok", api_version: "v1" }, (a) => {
      assert.equal(a.ok, true);
      assert.deepEqual(a.warnings.map((w) => w.kind), ["deprecation"]);
    });
    line({ op: "client", base_url: 5, agent_token: "tok" }, (a) => assert.deepEqual(a, { error: "invalid_input" }));

    // what the fake answers to the authorize calls above, in order
    const allow = { decision: "allow", reason: "ok", action_hash: actionHash(TC) };
    const answers = [
      reply(200, allow),
      reply(200, { decision: "redact", redacted_fields: ["parameters.card"] }),
      reply(200, { decision: "redact", redacted_fields: ["parameters.card"] }),
      reply(200, { decision: "redact", redacted_fields: ["parameters.card"] }),
      reply(200, { decision: "deny", reason: "nope", decision_id: "dd" }),
      reply(200, { decision: "require_approval", approval_id: "ap1", action_hash: actionHash(TC), approval_expires_at: rfc3339(60) }),
      reply(200, { decision: "allow", reason: "approved" }),
      reply(503, envelope(503, "ServiceUnavailable", "shared_state_unavailable")),
      reply(503, envelope(503, "ServiceUnavailable", "shared_state_unavailable")),
    ];
    authorizeAnswers = answers;
    approvalAnswer = (req) => (req.path.includes("/ap2") ? sleep(3000).then(() => reply(200, approval("PENDING"))) : reply(200, approval("APPROVED")));
    const { code, answers: got, stderr } = await runDriver(Buffer.from(script.map((r) => JSON.stringify(r) + "\n").join("")));
    assert.equal(code, 0, stderr);
    assert.equal(got.length, script.length);
    got.forEach((a, i) => {
      try {
        expect[i](a);
      } catch (e) {
        e.message = `line ${i} (${script[i].op}): ${e.message}\n${JSON.stringify(a)}`;
        throw e;
      }
    });
  } finally {
    await fake.close();
  }
});
