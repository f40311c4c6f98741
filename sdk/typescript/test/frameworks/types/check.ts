// Compile-time check: the adapters' structural shapes fit the frameworks' own
// types (run by run.sh with the SDK's TypeScript; nothing is executed).
import { tool as aiTool, type Tool, type ToolSet } from "ai";
import { tool as agentsTool, Agent, type FunctionTool, type ToolInputGuardrailDefinition } from "@openai/agents";
import { createAgent, tool as lcTool, type AgentMiddleware } from "langchain";
import type { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import { z } from "zod";
import { Client } from "../../../dist/index.js";
import { svcTool, svcTools, svcNeedsApproval } from "../../../dist/adapters/ai.js";
import { svcFunctionTool, svcToolInputGuardrail, svcNeedsApproval as agentsNeedsApproval } from "../../../dist/adapters/openai-agents.js";
import { svcMiddleware } from "../../../dist/adapters/langchain.js";
import { svcMcpClient, svcCallTool } from "../../../dist/adapters/mcp.js";

declare const svc: Client;
declare const mcp: McpClient;

const t = aiTool({ inputSchema: z.object({ n: z.number() }), execute: async ({ n }) => n + 1 });
const guarded: Tool = svcTool(svc, t, { tool: "t" });
const set: ToolSet = svcTools(svc, { t });
const withNeeds: Tool = aiTool({ inputSchema: z.object({ n: z.number() }), needsApproval: svcNeedsApproval(svc, { tool: "x" }), execute: async () => 1 });

const ft = agentsTool({ name: "f", description: "f", parameters: z.object({ n: z.number() }), execute: async ({ n }) => n });
const wrapped: FunctionTool<any, any, any> = svcFunctionTool(svc, ft);
const g: ToolInputGuardrailDefinition = svcToolInputGuardrail(svc);
const ft2 = agentsTool({ name: "g", description: "g", parameters: z.object({ n: z.number() }), needsApproval: agentsNeedsApproval(svc, "g"), inputGuardrails: [g], execute: async () => 1 });
new Agent({ name: "a", tools: [wrapped, ft2] });

const m: AgentMiddleware = svcMiddleware(svc);
createAgent({ model: "openai:gpt-4o", tools: [lcTool(async () => "x", { name: "x", description: "x", schema: z.object({}) })], middleware: [svcMiddleware(svc)] });

const guardedMcp: McpClient = svcMcpClient(svc, mcp, { serverKey: "k" });
const r: Promise<{ isError?: boolean }> = svcCallTool(svc, mcp, { serverKey: "k" })({ name: "x", arguments: {} });
void [guarded, set, withNeeds, g, m, guardedMcp, r];
