/**
 * The ACP schemas (PROTOCOL.md section 4, ACP-V1.md): field names and required-ness agree with the pinned SDK's
 * schema/v1/schema.json, objects are open (`_meta`, future fields), paths are absolute, and the `initialize` result
 * schema is exactly the answer PROTOCOL.md fixes.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import * as acp from "../../protocol/acp.js";
import { CWD } from "./fixtures.js";

interface SdkDef {
  properties?: Record<string, unknown>;
  required?: string[];
}

const require = createRequire(import.meta.url);
const sdkSchemaPath = require.resolve("@agentclientprotocol/sdk/schema/v1/schema.json");
const sdkDefs = (JSON.parse(readFileSync(sdkSchemaPath, "utf8")) as { $defs: Record<string, SdkDef> }).$defs;

/** Our schema, the SDK definition it mirrors, and the discriminator key our variant adds (SDK puts it outside). */
const mirrors: [string, z.ZodType, string, string?][] = [
  ["InitializeParams", acp.InitializeParams, "InitializeRequest"],
  ["ClientCapabilities", acp.ClientCapabilities, "ClientCapabilities"],
  ["FileSystemCapabilities", acp.FileSystemCapabilities, "FileSystemCapabilities"],
  ["Implementation", acp.Implementation, "Implementation"],
  ["InitializeResult", acp.InitializeResult, "InitializeResponse"],
  ["SessionNewParams", acp.SessionNewParams, "NewSessionRequest"],
  ["SessionNewResult", acp.SessionNewResult, "NewSessionResponse"],
  ["SessionLoadParams", acp.SessionLoadParams, "LoadSessionRequest"],
  ["SessionLoadResult", acp.SessionLoadResult, "LoadSessionResponse"],
  ["SessionListParams", acp.SessionListParams, "ListSessionsRequest"],
  ["SessionListResult", acp.SessionListResult, "ListSessionsResponse"],
  ["SessionInfo", acp.SessionInfo, "SessionInfo"],
  ["SessionCloseParams", acp.SessionCloseParams, "CloseSessionRequest"],
  ["SessionCloseResult", acp.SessionCloseResult, "CloseSessionResponse"],
  ["SessionPromptParams", acp.SessionPromptParams, "PromptRequest"],
  ["SessionPromptResult", acp.SessionPromptResult, "PromptResponse"],
  ["SessionCancelParams", acp.SessionCancelParams, "CancelNotification"],
  ["SessionUpdateParams", acp.SessionUpdateParams, "SessionNotification"],
  ["McpServerStdio", acp.McpServerStdio, "McpServerStdio"],
  ["McpServerHttp", acp.McpServerHttp, "McpServerHttp", "type"],
  ["McpServerSse", acp.McpServerSse, "McpServerSse", "type"],
  ["EnvVariable", acp.EnvVariable, "EnvVariable"],
  ["TextContent", acp.TextContent, "TextContent", "type"],
  ["ImageContent", acp.ImageContent, "ImageContent", "type"],
  ["AudioContent", acp.AudioContent, "AudioContent", "type"],
  ["ResourceLink", acp.ResourceLink, "ResourceLink", "type"],
  ["EmbeddedResource", acp.EmbeddedResource, "EmbeddedResource", "type"],
  ["TextResourceContents", acp.TextResourceContents, "TextResourceContents"],
  ["BlobResourceContents", acp.BlobResourceContents, "BlobResourceContents"],
  ["Annotations", acp.Annotations, "Annotations"],
  ["ToolCallUpdate", acp.ToolCallUpdate, "ToolCallUpdate"],
  ["ToolCallLocation", acp.ToolCallLocation, "ToolCallLocation"],
  ["PlanEntry", acp.PlanEntry, "PlanEntry"],
  ["AvailableCommand", acp.AvailableCommand, "AvailableCommand"],
  ["PermissionOption", acp.PermissionOption, "PermissionOption"],
  ["RequestPermissionParams", acp.RequestPermissionParams, "RequestPermissionRequest"],
  ["RequestPermissionResult", acp.RequestPermissionResult, "RequestPermissionResponse"],
];

/** Outbound shapes PROTOCOL.md fixes more tightly than ACP: they may require more than the SDK, never less. */
const STRICTER_OUTBOUND = new Set(["InitializeResult"]);

function shapeOf(schema: z.ZodType): { properties: string[]; required: string[] } {
  const json = z.toJSONSchema(schema, { io: "input" }) as SdkDef;
  return { properties: Object.keys(json.properties ?? {}).sort(), required: [...(json.required ?? [])].sort() };
}

describe("agreement with the SDK's schema/v1/schema.json", () => {
  // Only names go through it.each: vitest formats its arguments, and a zod schema is a very large object graph.
  it.each(mirrors.map(([name, , sdkName], index) => [name, sdkName, index] as const))(
    "%s has the required fields of %s and no field it lacks",
    (name, sdkName, index) => {
      const [, schema, , discriminator] = mirrors[index] ?? [];
      if (!schema) throw new Error(`no mirror at ${index}`);
      const sdk = sdkDefs[sdkName];
      expect(sdk, `SDK definition ${sdkName}`).toBeDefined();
      const ours = shapeOf(schema);
      const sdkProperties = Object.keys(sdk?.properties ?? {});
      const extra = ours.properties.filter((p) => p !== discriminator && !sdkProperties.includes(p));
      expect(extra).toEqual([]);
      const sdkRequired = [...(sdk?.required ?? [])].sort();
      const required = ours.required.filter((r) => r !== discriminator);
      if (STRICTER_OUTBOUND.has(name)) {
        expect(required).toEqual(expect.arrayContaining(sdkRequired));
      } else {
        expect(required).toEqual(sdkRequired);
      }
    },
  );

  it("has the same discriminator values as the SDK for ContentBlock, SessionUpdate and StopReason", () => {
    const constsOf = (def: string, key: string) =>
      ((sdkDefs[def] as { oneOf: { properties: Record<string, { const: string }> }[] }).oneOf ?? []).map(
        (v) => v.properties[key]?.const,
      );
    expect(acp.ContentBlock.options.map((o) => o.shape.type.value)).toEqual(constsOf("ContentBlock", "type"));
    const stable = acp.SessionUpdate.options.map((o) => o.shape.sessionUpdate.value);
    // The SDK's schema also lists unstable variants (notice, compaction_*); ACP-V1.md section 3 names the 11 stable ones.
    expect(constsOf("SessionUpdate", "sessionUpdate").slice(0, stable.length)).toEqual(stable);
    expect(acp.StopReason.options).toEqual(
      (sdkDefs.StopReason as { oneOf: { const: string }[] }).oneOf.map((v) => v.const),
    );
  });
});

describe("initialize", () => {
  it("accepts a minimal request and this server's capability flags", () => {
    const parsed = acp.InitializeParams.parse({
      protocolVersion: 1,
      clientCapabilities: {
        fs: { readTextFile: true, writeTextFile: false },
        _meta: { "acp-orchestrator": { extensionPrefix: "_", runStateAuthority: true } },
      },
      clientInfo: { name: "zed", version: "1.0" },
    });
    expect(parsed.clientCapabilities?._meta?.["acp-orchestrator"]).toEqual({
      extensionPrefix: "_",
      runStateAuthority: true,
    });
  });

  it("accepts any uint16 version (an unsupported one is answered with 1) and rejects a missing one", () => {
    expect(acp.InitializeParams.safeParse({ protocolVersion: 65535 }).success).toBe(true);
    expect(acp.InitializeParams.safeParse({ protocolVersion: 65536 }).success).toBe(false);
    expect(acp.InitializeParams.safeParse({}).success).toBe(false);
  });

  it("reads an invalid standard capability as absent, as ACP's default-on-error does", () => {
    const parsed = acp.InitializeParams.parse({ protocolVersion: 1, clientCapabilities: { terminal: "yes" } });
    expect(parsed.clientCapabilities?.terminal).toBeUndefined();
  });

  const result = {
    protocolVersion: 1,
    agentCapabilities: {
      loadSession: true,
      promptCapabilities: { image: true, audio: false, embeddedContext: true },
      mcpCapabilities: { http: false, sse: false },
      sessionCapabilities: { list: {}, close: {}, resume: {}, delete: {}, additionalDirectories: {} },
      _meta: {
        "acp-orchestrator": { version: "0.1.0", methods: ["product.plan"], notifications: ["product.taskStatus"] },
      },
    },
    agentInfo: { name: "acp-orchestrator", version: "0.1.0" },
    authMethods: [],
  };

  it("result schema accepts exactly the answer of PROTOCOL.md section 4", () => {
    expect(acp.InitializeResult.parse(result)).toEqual(result);
  });

  it("result schema rejects any deviation from it", () => {
    const deviations = [
      { ...result, protocolVersion: 2 },
      { ...result, authMethods: [{ id: "x", name: "x" }] },
      { ...result, extra: true },
      { ...result, agentCapabilities: { ...result.agentCapabilities, loadSession: false } },
      { ...result, agentCapabilities: { ...result.agentCapabilities, sessionCapabilities: { list: {} } } },
      { ...result, agentInfo: { name: "other", version: "1" } },
    ];
    for (const deviation of deviations) expect(acp.InitializeResult.safeParse(deviation).success).toBe(false);
  });
});

describe("sessions", () => {
  it("session/new accepts an absolute cwd, keeps _meta and unknown future fields, reads mcpServers null as []", () => {
    const parsed = acp.SessionNewParams.parse({ cwd: CWD, mcpServers: null, _meta: { a: 1 }, futureField: true });
    expect(parsed).toEqual({ cwd: CWD, mcpServers: [], _meta: { a: 1 }, futureField: true });
  });

  it("session/new rejects a relative cwd and a missing mcpServers", () => {
    expect(acp.SessionNewParams.safeParse({ cwd: "./project", mcpServers: [] }).success).toBe(false);
    expect(acp.SessionNewParams.safeParse({ cwd: CWD }).success).toBe(false);
  });

  it("accepts the three MCP server transports", () => {
    const servers = [
      { name: "fs", command: "/usr/bin/mcp-fs", args: [], env: [{ name: "A", value: "1" }] },
      { type: "http", name: "web", url: "https://example.com/mcp", headers: [] },
      { type: "sse", name: "events", url: "https://example.com/sse", headers: [] },
    ];
    expect(acp.SessionNewParams.parse({ cwd: CWD, mcpServers: servers }).mcpServers).toEqual(servers);
  });

  it("session/load requires sessionId, cwd and mcpServers", () => {
    expect(acp.SessionLoadParams.safeParse({ sessionId: "s1", cwd: CWD, mcpServers: [] }).success).toBe(true);
    expect(acp.SessionLoadParams.safeParse({ cwd: CWD, mcpServers: [] }).success).toBe(false);
    expect(acp.SessionLoadParams.safeParse({ sessionId: "s1", cwd: "rel", mcpServers: [] }).success).toBe(false);
  });

  it("session/list takes an optional absolute cwd filter", () => {
    expect(acp.SessionListParams.safeParse({}).success).toBe(true);
    expect(acp.SessionListParams.safeParse({ cwd: null, cursor: null }).success).toBe(true);
    expect(acp.SessionListParams.safeParse({ cwd: "rel" }).success).toBe(false);
  });

  it("session/prompt accepts every content block type and rejects an unknown one", () => {
    const prompt = [
      { type: "text", text: "Build it" },
      { type: "image", data: "aGk=", mimeType: "image/png" },
      { type: "audio", data: "aGk=", mimeType: "audio/wav" },
      { type: "resource_link", uri: "file:///a.ts", name: "a.ts" },
      { type: "resource", resource: { uri: "file:///a.ts", text: "x" } },
      { type: "resource", resource: { uri: "file:///a.bin", blob: "aGk=" }, annotations: { priority: 1 } },
    ];
    expect(acp.SessionPromptParams.safeParse({ sessionId: "s1", prompt }).success).toBe(true);
    expect(acp.SessionPromptParams.safeParse({ sessionId: "s1", prompt: [{ type: "video" }] }).success).toBe(false);
    expect(acp.SessionPromptParams.safeParse({ sessionId: "s1" }).success).toBe(false);
  });

  it("session/prompt result is a stop reason", () => {
    expect(acp.SessionPromptResult.safeParse({ stopReason: "cancelled" }).success).toBe(true);
    expect(acp.SessionPromptResult.safeParse({ stopReason: "error" }).success).toBe(false);
  });
});

describe("session/update", () => {
  const updates = [
    { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "Hi" } },
    { sessionUpdate: "user_message_chunk", content: { type: "text", text: "Build" }, messageId: "m1" },
    { sessionUpdate: "agent_thought_chunk", content: { type: "text", text: "Hmm" } },
    { sessionUpdate: "tool_call", toolCallId: "t1", title: "Write the parser", kind: "other", status: "pending" },
    {
      sessionUpdate: "tool_call_update",
      toolCallId: "t1",
      status: "completed",
      content: [{ type: "content", content: { type: "text", text: "done" } }],
    },
    { sessionUpdate: "plan", entries: [{ content: "Write the parser", priority: "medium", status: "in_progress" }] },
    { sessionUpdate: "usage_update", used: 10, size: 1000 },
  ];

  it.each(updates.map((u) => [u.sessionUpdate, u] as const))("accepts %s", (_kind, update) => {
    expect(acp.SessionUpdateParams.safeParse({ sessionId: "s1", update }).success).toBe(true);
  });

  it("rejects a cancelled tool call status (not in ACP v1) and a bare content block in tool call content", () => {
    const bad = [
      { sessionUpdate: "tool_call_update", toolCallId: "t1", status: "cancelled" },
      { sessionUpdate: "tool_call_update", toolCallId: "t1", content: [{ type: "text", text: "x" }] },
      { sessionUpdate: "tool_call", toolCallId: "t1" },
    ];
    for (const update of bad)
      expect(acp.SessionUpdateParams.safeParse({ sessionId: "s1", update }).success).toBe(false);
  });

  it("rejects a relative diff path", () => {
    const update = {
      sessionUpdate: "tool_call_update",
      toolCallId: "t1",
      content: [{ type: "diff", path: "a.ts", newText: "" }],
    };
    expect(acp.SessionUpdateParams.safeParse({ sessionId: "s1", update }).success).toBe(false);
  });
});

describe("session/request_permission", () => {
  const params = {
    sessionId: "s1",
    toolCall: { toolCallId: "plan-prd_1", title: "Run the plan?" },
    options: [
      { optionId: "confirm", name: "Confirm", kind: "allow_once" },
      { optionId: "revise", name: "Revise", kind: "reject_once" },
    ],
  };

  it("accepts the plan confirmation request of PROTOCOL.md section 4", () => {
    expect(acp.RequestPermissionParams.safeParse(params).success).toBe(true);
  });

  it("rejects an unknown option kind", () => {
    const bad = { ...params, options: [{ optionId: "x", name: "X", kind: "maybe" }] };
    expect(acp.RequestPermissionParams.safeParse(bad).success).toBe(false);
  });

  it("accepts both outcomes and rejects a selected outcome without optionId", () => {
    expect(
      acp.RequestPermissionResult.safeParse({ outcome: { outcome: "selected", optionId: "confirm" } }).success,
    ).toBe(true);
    expect(acp.RequestPermissionResult.safeParse({ outcome: { outcome: "cancelled" } }).success).toBe(true);
    expect(acp.RequestPermissionResult.safeParse({ outcome: { outcome: "selected" } }).success).toBe(false);
  });
});
