// The shared vectors of testdata/jcs and testdata/sdk, read in place, against
// the native API (including what no driver op covers: outcomes.json and the
// error of retry.json).
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import {
  actionHash, actionBytes, canonicalize, parseStrict, canonicalizeText, CanonicalError, normalizeIdentifier, sign, redact,
  InvalidRedactionPath, shouldRetry, errorClass, outcome, verifyReceipt, identifierIsCertain,
  receiptHash, HASHED_FIELDS, RECEIPT_SCHEME, RECEIPT_SCHEME_CONTEXT, verifyInclusion,
} from "../dist/index.js";
import { vectors } from "./helpers.mjs";

const sameJson = (a, b) => canonicalize(a) === canonicalize(b);

test("jcs/vectors.json: canonical bytes and sha256", () => {
  for (const v of vectors("jcs/vectors.json")) {
    const got = canonicalize(v.input);
    assert.equal(got, v.canonical, v.name);
    assert.equal(createHash("sha256").update(got).digest("hex"), v.sha256, v.name);
    // the strict parser reads its own output back to the same bytes
    assert.equal(canonicalizeText(got), v.canonical, v.name);
  }
});

test("jcs/action_hash.json and sdk/action_hash_unicode.json: svc-jcs-1", () => {
  for (const file of ["jcs/action_hash.json", "sdk/action_hash_unicode.json"]) {
    for (const v of vectors(file)) {
      assert.equal(new TextDecoder().decode(actionBytes(v.tool_call)), v.normalized, `${file}: ${v.name}`);
      assert.equal(actionHash(v.tool_call), v.action_hash, `${file}: ${v.name}`);
    }
  }
});

test("rule 7 traps: per-code-point lower-casing, White_Space, strict percent-decoding", () => {
  assert.equal(normalizeIdentifier("\u0130STANBUL"), "istanbul");
  assert.equal(normalizeIdentifier("\u03a3\u03a3"), "\u03c3\u03c3"); // no final sigma
  assert.equal(normalizeIdentifier("\u00a0Read\u0085"), "read");
  assert.equal(normalizeIdentifier("\u001ctool\u001f"), "\u001ctool\u001f"); // not White_Space
  assert.equal(normalizeIdentifier("\ufefftool"), "\ufefftool"); // JS trim() would strip it
  assert.equal(normalizeIdentifier("a%41%zz"), "a%41%zz");
  assert.equal(normalizeIdentifier("%47itHub"), "github");
  assert.equal(normalizeIdentifier("a+b"), "a+b");
  assert.equal(normalizeIdentifier("%FF"), "%ff");
  assert.equal(normalizeIdentifier("%252541"), "%2541");
  assert.equal(normalizeIdentifier("e\u0301"), "\u00e9");
  // assigned after Unicode 15.0 (Node's ICU lower-cases it; svc does not)
  assert.equal(normalizeIdentifier("\u{10D50}"), "\u{10D50}");
  assert.equal(normalizeIdentifier("\uA7CB"), "\uA7CB");
  assert.ok(identifierIsCertain("\u0130STANBUL"));
  assert.ok(!identifierIsCertain("pay\u{E0080}")); // unassigned in this runtime
});

test("parseStrict: duplicates at any depth, numbers beyond a double, strict grammar", () => {
  assert.deepEqual(parseStrict('{"a":[1.0E+2,-0,{"__proto__":1}]}'), { a: [100, -0, JSON.parse('{"__proto__":1}')] });
  for (const bad of ['{"a":1,"a":2}', '{"x":{"a":1,"a":2}}', '[{"k":[{"d":1,"d":1}]}]', "1e400", "-1e400", "NaN", "Infinity",
    "[1,]", "{'a':1}", '"\u0001"', "01", "1.", ".5", "", " ", "[1] x", '"\\x"', "\ufeff{}"]) {
    assert.throws(() => parseStrict(bad), CanonicalError, JSON.stringify(bad));
  }
  assert.throws(() => parseStrict(new Uint8Array([0x22, 0xff, 0x22])), CanonicalError);
  assert.equal(canonicalizeText('{"b":1e21,"a":"\\u00e9"}'), '{"a":"\u00e9","b":1e+21}');
  assert.throws(() => canonicalize({ a: NaN }), CanonicalError);
  assert.throws(() => canonicalize({ a: "\ud800" }), CanonicalError);
  assert.throws(() => canonicalize({ a: 1n }), CanonicalError);
  assert.throws(() => canonicalize([undefined]), CanonicalError);
  assert.throws(() => canonicalize(new Map()), CanonicalError);
});

test("sdk/signing.json: the header over exactly the bytes", () => {
  for (const v of vectors("sdk/signing.json")) {
    assert.equal(sign(v.body, v.signing_key), v.header, v.name);
    assert.equal(sign(new TextEncoder().encode(v.body), v.signing_key), v.header, v.name);
  }
});

test("sdk/redaction.json: what the tool receives, or invalid_redaction_path", () => {
  for (const v of vectors("sdk/redaction.json")) {
    const before = canonicalize(v.parameters ?? {});
    if (v.error) {
      assert.equal(v.error, "invalid_redaction_path");
      assert.throws(() => redact(v.parameters, v.redacted_fields), (e) => e instanceof InvalidRedactionPath && e.errorCode === "invalid_redaction_path", v.name);
    } else {
      const got = redact(v.parameters, v.redacted_fields);
      assert.ok(sameJson(got, v.parameters_after), `${v.name}: ${canonicalize(got)} != ${canonicalize(v.parameters_after)}`);
    }
    assert.equal(canonicalize(v.parameters ?? {}), before, `${v.name}: the caller's parameters changed`);
  }
});

test("redact with a mask", () => {
  const p = { card: "4242", tags: ["a", "b"], meta: { ssn: 1 } };
  assert.deepEqual(redact(p, ["parameters.card", "parameters.tags.1", "parameters.meta.ssn"], "[redacted]"),
    { card: "[redacted]", tags: ["a", "[redacted]"], meta: { ssn: "[redacted]" } });
  assert.deepEqual(redact(p, ["parameters.card"], null), { card: null, tags: ["a", "b"], meta: { ssn: 1 } });
  assert.equal(p.card, "4242");
});

test("sdk/retry.json: retry and the final error", () => {
  for (const v of vectors("sdk/retry.json")) {
    assert.equal(shouldRetry(v.status, v.body, v.headers), v.retry, v.name);
    const want = v.error ?? null;
    const got = v.status >= 200 && v.status < 300 ? null : errorClass(v.status).name;
    assert.equal(got, want, v.name);
  }
});

test("sdk/inclusion.json: checkpoint_valid and proof_valid", () => {
  const vs = vectors("sdk/inclusion.json");
  assert.ok(vs.length > 20);
  for (const v of vs) {
    const r = verifyInclusion(v.receipt, v.proof, v.checkpoint, v.public_key);
    assert.equal(r.checkpointValid, v.checkpoint_valid, `${v.name}: checkpoint (${r.error})`);
    assert.equal(r.proofValid, v.proof_valid, `${v.name}: proof (${r.error})`);
    assert.equal(r.valid, v.checkpoint_valid && v.proof_valid);
  }
});

test("sdk/outcomes.json", () => {
  for (const v of vectors("sdk/outcomes.json")) assert.equal(outcome(v.response), v.outcome, v.name);
});

test("sdk/receipts.json: hash_valid and signature_valid", () => {
  for (const v of vectors("sdk/receipts.json")) {
    const r = verifyReceipt(v.receipt, v.public_key);
    assert.equal(r.hashValid, v.hash_valid, `${v.name}: hash (${r.error})`);
    assert.equal(r.signatureValid, v.signature_valid, `${v.name}: signature (${r.error})`);
    assert.equal(r.valid, v.hash_valid && v.signature_valid);
  }
});

test("receipts: context_hash selects svc-receipt-2; null and \"\" are svc-receipt-1; another type or form is invalid", () => {
  assert.equal(RECEIPT_SCHEME, "svc-receipt-1");
  assert.equal(RECEIPT_SCHEME_CONTEXT, "svc-receipt-2");
  const v = vectors("sdk/receipts.json").find((x) => x.name === "valid receipt at seq 2");
  const ctx = "c".repeat(64);
  const base = v.receipt;
  const obj = Object.fromEntries(HASHED_FIELDS.map((f) => [f, base[f]]));
  const sha = (o) => createHash("sha256").update(canonicalize(o)).digest("hex");
  assert.equal(receiptHash(base), sha(obj));
  assert.equal(receiptHash({ ...base, context_hash: ctx }), sha({ ...obj, context_hash: ctx }));
  const added = verifyReceipt({ ...base, context_hash: ctx }, v.public_key);
  assert.equal(added.hashValid, false);
  assert.equal(added.signatureValid, true);
  for (const c of [null, undefined, ""]) {
    const r = verifyReceipt({ ...base, context_hash: c }, v.public_key);
    assert.ok(r.hashValid && r.signatureValid, `context_hash ${JSON.stringify(c)}: ${r.error}`);
  }
  for (const c of [1, true, [ctx], {}, ctx.toUpperCase(), ctx.slice(0, 63), ctx + "c", ctx + "\n", " " + ctx]) {
    assert.throws(() => receiptHash({ ...base, context_hash: c }), TypeError);
    const r = verifyReceipt({ ...base, context_hash: c }, v.public_key);
    assert.equal(r.hashValid, false, `context_hash ${JSON.stringify(c)}`);
    assert.match(r.error, /context_hash/);
  }
});
