/**
 * svc for MCP clients (`@modelcontextprotocol/sdk`'s `Client`), for
 * applications that call MCP servers directly rather than through svc's
 * inline MCP proxy. Every `tools/call` is authorized the way the proxy
 * authorizes it (CONTRACT 15): tool `mcp:<serverKey>`, action the tool's
 * name, parameters its `arguments`, `mutatesState` false only when the
 * tool's annotations (from `tools/list`) say `readOnlyHint: true`, and
 * `trace.run_id` from `_meta["svc/run_id"]` when present.
 *
 * - allow: forwarded. redact: forwarded without the redacted fields.
 * - deny / quarantine: not forwarded; a CallToolResult with `isError: true`,
 *   a text naming the decision and reason, and `structuredContent`
 *   `{ decision, reason, decision_id, receipt_id }`, as the proxy answers.
 * - require_approval: waits for svc's approval (default) and forwards the
 *   approved (or approver-edited) arguments; with `wait: false`, not
 *   forwarded: `isError: true` with `structuredContent`
 *   `{ decision, reason, decision_id, approval_id, approval_expires_at }`.
 *   Rejected or expired: `isError: true`, not forwarded.
 * - svc unavailable (or any svc error): not forwarded; `isError: true` with
 *   `{ decision: "deny", reason: "svc_unavailable" }` (fail closed).
 *
 * `svcCallTool(client, mcpClient, opts)` returns the guarded `callTool`;
 * `svcMcpClient(client, mcpClient, opts)` returns the MCP client with its
 * `callTool` replaced (everything else unchanged).
 */

import type { Client } from "../index.js";
import { type RefusalInfo, type SvcCallOptions, guardedRun, isObject, refusalOf } from "./common.js";

export { SvcToolRefused, type RefusalInfo } from "./common.js";

export interface McpCallToolParams {
  name: string;
  arguments?: Record<string, unknown>;
  _meta?: Record<string, unknown>;
  [k: string]: unknown;
}

export interface McpCallToolResult {
  content: Array<{ type: string; text?: string; [k: string]: unknown }>;
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
  [k: string]: unknown;
}

export interface McpClientLike {
  callTool(params: McpCallToolParams, resultSchema?: unknown, options?: { signal?: AbortSignal; [k: string]: unknown }): Promise<unknown>;
  listTools(params?: { cursor?: string }, options?: unknown): Promise<{ tools: Array<{ name: string; annotations?: { readOnlyHint?: boolean } }>; nextCursor?: string }>;
}

export interface SvcMcpOptions extends Pick<SvcCallOptions, "sourceTrust" | "environment" | "approvalTimeout" | "mask"> {
  /** The server's key in svc: the tool is `mcp:<serverKey>`. */
  serverKey: string;
  /** require_approval: wait for svc's approval (default true), or answer isError naming the approval_id. */
  wait?: boolean;
  /** Read-only tools by name, instead of asking the server's tools/list. */
  readOnly?: (name: string) => boolean | undefined;
}

/** The guarded `callTool` of an MCP client. */
export function svcCallTool(client: Client, mcp: McpClientLike, opts: SvcMcpOptions) {
  if (!opts.serverKey) throw new TypeError("svcCallTool: serverKey is required");
  let readOnly: Map<string, boolean> | null = null;
  let listing: Promise<Map<string, boolean>> | null = null;

  async function list(): Promise<Map<string, boolean>> {
    const m = new Map<string, boolean>();
    let cursor: string | undefined;
    for (let page = 0; page < 100; page++) {
      const r = await mcp.listTools(cursor ? { cursor } : undefined);
      for (const t of r.tools ?? []) m.set(t.name, t.annotations?.readOnlyHint === true);
      if (!r.nextCursor) break;
      cursor = r.nextCursor;
    }
    return m;
  }

  async function isReadOnly(name: string): Promise<boolean> {
    const own = opts.readOnly?.(name);
    if (own !== undefined) return own;
    if (!readOnly || !readOnly.has(name)) {
      listing ??= list().finally(() => (listing = null));
      try {
        readOnly = await listing;
      } catch {
        return false; // cannot tell: the cautious answer
      }
    }
    return readOnly.get(name) ?? false;
  }

  return async (params: McpCallToolParams, resultSchema?: unknown, options?: { signal?: AbortSignal; [k: string]: unknown }): Promise<McpCallToolResult> => {
    const args = isObject(params.arguments) ? params.arguments : {};
    const mutates = !(await isReadOnly(params.name));
    const runId = params._meta?.["svc/run_id"];
    try {
      return (await guardedRun(
        client,
        params.name,
        args,
        (approved) => mcp.callTool({ ...params, arguments: approved }, resultSchema, options),
        {
          tool: `mcp:${opts.serverKey}`,
          action: params.name,
          resource: null,
          mutatesState: mutates,
          sourceTrust: opts.sourceTrust,
          environment: opts.environment,
          trace: typeof runId === "string" && runId ? { run_id: runId } : undefined,
          approvalTimeout: opts.approvalTimeout,
          mask: opts.mask,
          wait: opts.wait ?? true,
          signal: options?.signal,
        },
      )) as McpCallToolResult;
    } catch (err) {
      const r = refusalOf(err);
      if (!r) throw err;
      return refusalResult(r.message, r.info);
    }
  };
}

/** A CallToolResult refusing the call, shaped as svc's proxy shapes it. */
export function refusalResult(message: string, info: RefusalInfo): McpCallToolResult {
  const sc: Record<string, unknown> = { decision: info.decision, reason: info.reason };
  if (info.decision_id !== undefined) sc.decision_id = info.decision_id;
  if (info.decision === "require_approval") {
    if (info.approval_id !== undefined) sc.approval_id = info.approval_id;
    if (info.approval_expires_at !== undefined) sc.approval_expires_at = info.approval_expires_at;
  } else if (info.receipt_id !== undefined) {
    sc.receipt_id = info.receipt_id;
  }
  if (info.error) sc.error = info.error;
  return { content: [{ type: "text", text: message }], structuredContent: sc, isError: true };
}

/** The MCP client with `callTool` guarded by svc. */
export function svcMcpClient<C extends McpClientLike>(client: Client, mcp: C, opts: SvcMcpOptions): C {
  const callTool = svcCallTool(client, mcp, opts);
  return new Proxy(mcp, {
    get(target, prop, receiver) {
      if (prop === "callTool") return callTool;
      const v = Reflect.get(target, prop, receiver);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}
