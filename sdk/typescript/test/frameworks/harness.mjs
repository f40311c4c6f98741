// Starts a real svc gateway (the binary named by SVC_BIN) for the framework
// adapter tests, makes fixtures through its API, and plays the approver
// (after sdk/python/tests/live/harness.py).

import { spawn } from "node:child_process";
import { test as nodeTest } from "node:test";
import { mkdtempSync, openSync, readFileSync, rmSync, closeSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomUUID } from "node:crypto";

export const ADMIN_TOKEN = process.env.SVC_FW_ADMIN_TOKEN || "sdk-fw-admin-token-" + "a".repeat(32);
/** A gateway already running (e.g. `SVC_ADMIN_TOKEN=... make run`) that
 * startSvc uses instead of starting one: SVC_FW_GATEWAY_URL, with its
 * SVC_ADMIN_TOKEN in SVC_FW_ADMIN_TOKEN. For running the README's quick
 * starts by hand; the suite itself starts its own gateways. */
export const EXTERNAL_URL = process.env.SVC_FW_GATEWAY_URL || "";
const RECEIPT_SEED = Buffer.from(Array.from({ length: 32 }, (_, i) => 100 + i));
export const SVC_BIN = process.env.SVC_BIN ?? "";

// allow / deny / quarantine / require_approval / redact by tool name (or, for
// mcp:<server> tools, by action: the MCP tool's name); read_tool is allowed
// only when the call says it does not change state.
export const POLICY = `package svc.policies.sdk_frameworks

named(x) if { input.tool_call.tool == x }
named(x) if { input.tool_call.action == x }

results contains {"decision": "allow", "reason": "fw_allow"} if { named("allow_tool") }
results contains {"decision": "deny", "reason": "fw_deny"} if { named("deny_tool") }
results contains {"decision": "quarantine", "reason": "fw_quarantine"} if { named("quarantine_tool") }
results contains {"decision": "require_approval", "reason": "fw_approval"} if { named("approval_tool") }
results contains {"decision": "redact", "reason": "fw_redact", "redact_fields": ["parameters.card", "parameters.meta.ssn"]} if { named("redact_tool") }
results contains {"decision": "require_approval", "reason": "fw_quickstart_approval"} if { named("send_email") }
results contains {"decision": "require_approval", "reason": "fw_quickstart_approval"} if { named("refund") }
results contains {"decision": "require_approval", "reason": "fw_quickstart_approval"} if { named("delete_branch") }
results contains {"decision": "deny", "reason": "fw_quickstart_deny"} if { named("create_issue") }
results contains {"decision": "allow", "reason": "fw_read_only"} if { named("read_tool"); input.mutates_state == false }
results contains {"decision": "deny", "reason": "fw_read_tool_mutates"} if { named("read_tool"); input.mutates_state == true }
`;

/** node:test's test, skipped (each test counted as skipped) without SVC_BIN. */
export function test(name, fn) {
  const skip = skipReason();
  return skip ? nodeTest(name, { skip }, fn) : nodeTest(name, fn);
}

/** Skip (or, under CI=true, fail) when there is no gateway binary. */
export function skipReason() {
  if (SVC_BIN || EXTERNAL_URL) return undefined;
  if (process.env.CI === "true") throw new Error("SVC_BIN is not set under CI=true: the framework adapter tests cannot run");
  return "SVC_BIN is not set: the framework adapter tests are SKIPPED";
}

export async function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Poll `cond` until it returns a truthy value; throws at the deadline. */
export async function waitUntil(cond, { timeout = 10_000, interval = 50, what = "condition" } = {}) {
  const deadline = Date.now() + timeout;
  let last;
  while (Date.now() < deadline) {
    try {
      const v = await cond();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, interval));
  }
  throw new Error(`timed out after ${timeout} ms waiting for ${what}${last ? ` (last error: ${last})` : ""}`);
}

export async function api(base, method, path, token, body) {
  const headers = { Accept: "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(15_000) });
  const text = await r.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = text;
  }
  return { status: r.status, body: parsed };
}

export class Gateway {
  constructor({ env = {}, name = "svc-fw" } = {}) {
    this.name = name;
    this.workdir = mkdtempSync(join(tmpdir(), "svc-fw-"));
    this.extraEnv = env;
    this.proc = null;
    this.logPath = join(this.workdir, `${name}.log`);
  }

  async start() {
    this.port = await freePort();
    this.debugPort = await freePort();
    this.url = `http://127.0.0.1:${this.port}`;
    const env = {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: process.env.HOME ?? "/tmp",
      DATABASE_URL: `sqlite://${this.workdir}/svc.db`,
      SVC_LISTEN_ADDR: `127.0.0.1:${this.port}`,
      SVC_DEBUG_ADDR: `127.0.0.1:${this.debugPort}`,
      SVC_ADMIN_TOKEN: ADMIN_TOKEN,
      SVC_RECEIPT_SIGNING_KEY: RECEIPT_SEED.toString("base64"),
      SVC_APPROVAL_TTL_SECS: "60",
      SVC_APPROVAL_CALLBACK_IP_LIMIT: "100000",
      SVC_APPROVAL_ATTEMPT_LIMIT: "100000",
      SVC_AUTH_FAILURE_LIMIT: "100000",
      SVC_ALLOW_PRIVATE_TARGETS: "true",
      SVC_LOG_LEVEL: "warn",
      SVC_SHUTDOWN_TIMEOUT_SECS: "5",
      ...this.extraEnv,
    };
    const fd = openSync(this.logPath, "a");
    this.proc = spawn(SVC_BIN, ["serve"], { env, cwd: this.workdir, stdio: ["ignore", fd, fd] });
    closeSync(fd);
    this.exited = new Promise((resolve) => this.proc.once("exit", (code, sig) => resolve({ code, sig })));
    let exitedEarly = null;
    this.exited.then((e) => (exitedEarly = e));
    try {
      await waitUntil(
        async () => {
          if (exitedEarly) throw new Error(`${this.name} exited (${JSON.stringify(exitedEarly)}):\n${this.tail()}`);
          const r = await fetch(`${this.url}/readyz`, { signal: AbortSignal.timeout(2000) });
          return r.status === 200;
        },
        { timeout: 60_000, interval: 100, what: `${this.name} /readyz` },
      );
    } catch (e) {
      await this.stop();
      throw new Error(`${e.message}\n--- ${this.name} log ---\n${this.tail()}`);
    }
    return this;
  }

  tail(n = 4000) {
    try {
      return readFileSync(this.logPath, "utf8").slice(-n);
    } catch {
      return "";
    }
  }

  /** Stop the process (SIGTERM, then SIGKILL) and wait for its exit. */
  async stop() {
    const p = this.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    p.kill("SIGTERM");
    const killer = setTimeout(() => p.kill("SIGKILL"), 15_000);
    await this.exited;
    clearTimeout(killer);
  }

  async close() {
    await this.stop();
    rmSync(this.workdir, { recursive: true, force: true });
  }
}

/** Tenants, agents, policies and approvals through the API. */
export class Fixtures {
  static async create(url) {
    const fx = new Fixtures();
    fx.url = url;
    const r = await api(url, "POST", "/v2/tenants", ADMIN_TOKEN, { name: `sdk-fw-${randomUUID().slice(0, 8)}` });
    if (r.status !== 201) throw new Error(`create tenant: ${r.status} ${JSON.stringify(r.body)}`);
    fx.tenantId = r.body.tenant_id;
    fx.op = r.body.operator_token;
    return fx;
  }

  call(method, path, body) {
    return api(this.url, method, path, this.op, body);
  }

  async agent(fields = {}) {
    const r = await this.call("POST", "/v2/agents", { name: `agent-${randomUUID().slice(0, 10)}`, signing_key: "generate", ...fields });
    if (r.status !== 201) throw new Error(`create agent: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  }

  async policy(name, rego) {
    const r = await this.call("POST", "/v2/policies", { name, rego });
    if (r.status !== 201) throw new Error(`create policy: ${r.status} ${JSON.stringify(r.body)}`);
  }

  async approvals(agentId) {
    const r = await this.call("GET", `/v2/approvals?agent_id=${encodeURIComponent(agentId)}`);
    if (r.status !== 200) throw new Error(`list approvals: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  }

  /** The agent's PENDING approval (waits for it). */
  async pendingApproval(agentId, timeout = 10_000) {
    return waitUntil(async () => (await this.approvals(agentId)).find((a) => a.status === "PENDING"), {
      timeout,
      what: `a PENDING approval of agent ${agentId}`,
    });
  }

  /** approve, reject or edit (with parameters) an approval as an operator. */
  async decide(approvalId, action, parameters) {
    const body = { approver_user_id: "alice", reason: `sdk frameworks ${action}` };
    if (parameters !== undefined) body.parameters = parameters;
    const r = await this.call("POST", `/v2/approvals/${approvalId}/${action}`, body);
    if (r.status !== 200) throw new Error(`${action} ${approvalId}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  }

  /** Register an MCP server (stdio: the manifest is given) and approve its tools,
   * so that svc authorizes mcp:<key> calls by policy. */
  async mcpServer(key, toolNames) {
    let r = await this.call("POST", "/v1/mcp/servers", { server_key: key, transport: "stdio" });
    if (r.status !== 201) throw new Error(`register mcp server: ${r.status} ${JSON.stringify(r.body)}`);
    const tools = toolNames.map((name) => ({ name, description: name, inputSchema: { type: "object" } }));
    r = await this.call("POST", `/v1/mcp/servers/${key}/discover`, { tools });
    if (r.status !== 200) throw new Error(`discover mcp server: ${r.status} ${JSON.stringify(r.body)}`);
    for (const name of toolNames) {
      r = await this.call("POST", `/v1/mcp/servers/${key}/tools/${name}/approve`);
      if (r.status !== 200) throw new Error(`approve mcp tool ${name}: ${r.status} ${JSON.stringify(r.body)}`);
    }
  }

  /** In the background: wait for the agent's PENDING approval, then decide it. */
  approver(agentId, action, parameters) {
    return (async () => {
      const a = await this.pendingApproval(agentId, 20_000);
      await new Promise((r) => setTimeout(r, 300)); // let the agent start waiting (not a correctness sleep)
      return this.decide(a.approval_id, action, parameters);
    })();
  }
}

/** One gateway, one tenant with the policy, for a test file. */
export async function startSvc() {
  const gw = EXTERNAL_URL ? { url: EXTERNAL_URL, close: async () => {} } : await new Gateway().start();
  const fx = await Fixtures.create(gw.url);
  await fx.policy("sdk_frameworks", POLICY);
  return { gw, fx };
}

/** A client of a new agent of `fx` (and the agent). */
export async function agentClient(Client, fx, url, opts = {}) {
  const a = await fx.agent();
  const client = new Client({ baseUrl: url, agentToken: a.agent_token, signingKey: a.signing_key, timeout: 5, retries: 1, logger: {}, ...opts });
  return { client, agent: a };
}

/** A gateway that was started and stopped: its address refuses connections. */
export async function stoppedGatewayUrl() {
  const gw = await new Gateway({ name: "svc-fw-stopped" }).start();
  const url = gw.url;
  await gw.close();
  await waitUntil(async () => {
    try {
      await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(1000) });
      return false;
    } catch {
      return true;
    }
  }, { timeout: 10_000, what: "the stopped gateway to refuse connections" });
  return url;
}
