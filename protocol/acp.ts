/**
 * zod schemas of the ACP v1 messages the server serves and sends (PROTOCOL.md section 4, ACP-V1.md sections 2-4).
 *
 * Field names and required-ness follow `@agentclientprotocol/sdk/schema/v1/schema.json`, which wins over prose.
 * ACP objects are loose (`z.looseObject`): `_meta` and unknown future fields are accepted and kept on input, as ACP
 * extensibility requires, while required fields stay required. Optional ACP fields accept `null` where the ACP schema
 * does. The one exception is `InitializeResult`, which describes exactly the answer PROTOCOL.md section 4 fixes.
 * This file must never import anything but zod and the shared shapes of common.ts.
 */
import * as z from "zod";
import { AbsolutePath } from "./common.js";
import { lazySchema } from "./lazy-schema.js";

/** ACP `_meta`: an open object, or `null` (ACP-V1.md section 5, Extensibility). */
export const AcpMeta = lazySchema(() => z.record(z.string(), z.unknown()).nullish(), "AcpMeta");

/** ACP `ProtocolVersion`: one integer, uint16. */
export const ProtocolVersion = lazySchema(() => z.number().int().min(0).max(65535), "ProtocolVersion");

/** Makes a capability field lenient like ACP's `x-deserialize-default-on-error`: an invalid value reads as absent. */
function lenient<T extends z.ZodType>(schema: T) {
  return schema.optional().catch(undefined);
}

/** An array field ACP deserialises with `x-deserialize-default-on-null`: `null` reads as `[]`. */
function arrayDefaultOnNull<T extends z.ZodType>(item: T) {
  return z
    .array(item)
    .nullable()
    .transform((value) => value ?? []);
}

// ---------------------------------------------------------------------------------------------------------------
// Content

export const Role = lazySchema(() => z.enum(["assistant", "user"]), "Role");

export const Annotations = lazySchema(
  () =>
    z.looseObject({
      audience: z.array(Role).nullish(),
      lastModified: z.string().nullish(),
      priority: z.number().nullish(),
      _meta: AcpMeta,
    }),
  "Annotations",
);

export const TextContent = lazySchema(
  () =>
    z.looseObject({
      type: z.literal("text"),
      text: z.string(),
      annotations: Annotations.nullish(),
      _meta: AcpMeta,
    }),
  "TextContent",
);

export const ImageContent = lazySchema(
  () =>
    z.looseObject({
      type: z.literal("image"),
      data: z.string(),
      mimeType: z.string(),
      uri: z.string().nullish(),
      annotations: Annotations.nullish(),
      _meta: AcpMeta,
    }),
  "ImageContent",
);

export const AudioContent = lazySchema(
  () =>
    z.looseObject({
      type: z.literal("audio"),
      data: z.string(),
      mimeType: z.string(),
      annotations: Annotations.nullish(),
      _meta: AcpMeta,
    }),
  "AudioContent",
);

export const ResourceLink = lazySchema(
  () =>
    z.looseObject({
      type: z.literal("resource_link"),
      uri: z.string(),
      name: z.string(),
      mimeType: z.string().nullish(),
      title: z.string().nullish(),
      description: z.string().nullish(),
      size: z.number().int().nullish(),
      annotations: Annotations.nullish(),
      _meta: AcpMeta,
    }),
  "ResourceLink",
);

export const TextResourceContents = lazySchema(
  () =>
    z.looseObject({
      uri: z.string(),
      text: z.string(),
      mimeType: z.string().nullish(),
      _meta: AcpMeta,
    }),
  "TextResourceContents",
);

export const BlobResourceContents = lazySchema(
  () =>
    z.looseObject({
      uri: z.string(),
      blob: z.string(),
      mimeType: z.string().nullish(),
      _meta: AcpMeta,
    }),
  "BlobResourceContents",
);

export const EmbeddedResource = lazySchema(
  () =>
    z.looseObject({
      type: z.literal("resource"),
      resource: z.union([TextResourceContents, BlobResourceContents]),
      annotations: Annotations.nullish(),
      _meta: AcpMeta,
    }),
  "EmbeddedResource",
);

/** ACP `ContentBlock`, discriminated by `type`. */
export const ContentBlock = lazySchema(
  () => z.discriminatedUnion("type", [TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource]),
  "ContentBlock",
);
export type ContentBlock = z.infer<typeof ContentBlock>;

// ---------------------------------------------------------------------------------------------------------------
// Capabilities and initialize

export const Implementation = lazySchema(
  () =>
    z.looseObject({
      name: z.string(),
      title: z.string().nullish(),
      version: z.string(),
      _meta: AcpMeta,
    }),
  "Implementation",
);

/**
 * This server's own client capability flags, read from `clientCapabilities._meta["acp-orchestrator"]`
 * (PROTOCOL.md sections 2 and 7).
 */
export const OrchestratorClientMeta = lazySchema(
  () =>
    z.looseObject({
      /** `"_"`: send every server → client product notification and request with the ACP extension spelling. */
      extensionPrefix: z.enum(["", "_"]).optional(),
      /** `true`: persist through the host's `runState/*` requests instead of the embedded store. */
      runStateAuthority: z.boolean().optional(),
    }),
  "OrchestratorClientMeta",
);
export type OrchestratorClientMeta = z.infer<typeof OrchestratorClientMeta>;

export const FileSystemCapabilities = lazySchema(
  () =>
    z.looseObject({
      readTextFile: lenient(z.boolean()),
      writeTextFile: lenient(z.boolean()),
      _meta: AcpMeta,
    }),
  "FileSystemCapabilities",
);

export const ClientCapabilities = lazySchema(
  () =>
    z.looseObject({
      fs: lenient(FileSystemCapabilities),
      terminal: lenient(z.boolean()),
      _meta: z.looseObject({ "acp-orchestrator": OrchestratorClientMeta.optional() }).nullish(),
    }),
  "ClientCapabilities",
);
export type ClientCapabilities = z.infer<typeof ClientCapabilities>;

export const InitializeParams = lazySchema(
  () =>
    z.looseObject({
      protocolVersion: ProtocolVersion,
      clientCapabilities: ClientCapabilities.nullish(),
      clientInfo: Implementation.nullish(),
      _meta: AcpMeta,
    }),
  "InitializeParams",
);
export type InitializeParams = z.infer<typeof InitializeParams>;

/** The server's capability advertisement under `agentCapabilities._meta["acp-orchestrator"]`. */
export const OrchestratorAgentMeta = lazySchema(
  () =>
    z.strictObject({
      /** The server's package version. */
      version: z.string(),
      /** Bare names of every extension method the server serves (each also served with a leading `_`). */
      methods: z.array(z.string()),
      /** Bare names of every extension notification the server may send. */
      notifications: z.array(z.string()),
    }),
  "OrchestratorAgentMeta",
);

/** Exactly the `initialize` answer of PROTOCOL.md section 4; nothing more, nothing less. */
export const InitializeResult = lazySchema(
  () =>
    z.strictObject({
      protocolVersion: z.literal(1),
      agentCapabilities: z.strictObject({
        loadSession: z.literal(true),
        promptCapabilities: z.strictObject({
          image: z.literal(true),
          audio: z.literal(false),
          embeddedContext: z.literal(true),
        }),
        mcpCapabilities: z.strictObject({ http: z.literal(false), sse: z.literal(false) }),
        sessionCapabilities: z.strictObject({
          list: z.strictObject({}),
          close: z.strictObject({}),
          resume: z.strictObject({}),
          delete: z.strictObject({}),
          additionalDirectories: z.strictObject({}),
        }),
        _meta: z.strictObject({ "acp-orchestrator": OrchestratorAgentMeta }),
      }),
      agentInfo: z.strictObject({ name: z.literal("acp-orchestrator"), version: z.string() }),
      authMethods: z.array(z.never()).max(0),
    }),
  "InitializeResult",
);
export type InitializeResult = z.infer<typeof InitializeResult>;

// ---------------------------------------------------------------------------------------------------------------
// Sessions

export const SessionId = lazySchema(() => z.string().min(1).max(1_000), "SessionId");

export const EnvVariable = lazySchema(
  () => z.looseObject({ name: z.string(), value: z.string(), _meta: AcpMeta }),
  "EnvVariable",
);
export const HttpHeader = lazySchema(
  () => z.looseObject({ name: z.string(), value: z.string(), _meta: AcpMeta }),
  "HttpHeader",
);

export const McpServerHttp = lazySchema(
  () =>
    z.looseObject({
      type: z.literal("http"),
      name: z.string(),
      url: z.string(),
      headers: arrayDefaultOnNull(HttpHeader),
      _meta: AcpMeta,
    }),
  "McpServerHttp",
);

export const McpServerSse = lazySchema(
  () =>
    z.looseObject({
      type: z.literal("sse"),
      name: z.string(),
      url: z.string(),
      headers: arrayDefaultOnNull(HttpHeader),
      _meta: AcpMeta,
    }),
  "McpServerSse",
);

/** The stdio transport carries no `type` field (ACP-V1.md section 2). */
export const McpServerStdio = lazySchema(
  () =>
    z.looseObject({
      name: z.string(),
      command: z.string(),
      args: arrayDefaultOnNull(z.string()),
      env: arrayDefaultOnNull(EnvVariable),
      _meta: AcpMeta,
    }),
  "McpServerStdio",
);

export const McpServer = lazySchema(() => z.union([McpServerHttp, McpServerSse, McpServerStdio]), "McpServer");
export type McpServer = z.infer<typeof McpServer>;

export const SessionNewParams = lazySchema(
  () =>
    z.looseObject({
      cwd: AbsolutePath,
      mcpServers: arrayDefaultOnNull(McpServer),
      additionalDirectories: z.array(AbsolutePath).nullish(),
      _meta: AcpMeta,
    }),
  "SessionNewParams",
);
export type SessionNewParams = z.infer<typeof SessionNewParams>;

/** ACP `SessionMode`. */
export const SessionMode = lazySchema(
  () =>
    z.looseObject({
      id: z.string().min(1),
      name: z.string(),
      description: z.string().nullish(),
      _meta: AcpMeta,
    }),
  "SessionMode",
);

/** ACP `SessionModeState`: the session's modes (PROTOCOL.md section 4: `confirm`, `auto`, `goal`). */
export const SessionModeState = lazySchema(
  () =>
    z.looseObject({
      currentModeId: z.string().min(1),
      availableModes: z.array(SessionMode),
      _meta: AcpMeta,
    }),
  "SessionModeState",
);
export type SessionModeState = z.infer<typeof SessionModeState>;

/** ACP `SessionConfigSelectOption`. */
export const SessionConfigSelectOption = lazySchema(
  () =>
    z.looseObject({
      value: z.string(),
      name: z.string(),
      description: z.string().nullish(),
      _meta: AcpMeta,
    }),
  "SessionConfigSelectOption",
);

/**
 * ACP `SessionConfigOption` of type `select` (the only type this server offers: PROTOCOL.md section 4, `leader`,
 * `parallelism`, `isolation`); `currentValue` is always one of the flat `options`.
 */
export const SessionConfigOption = lazySchema(
  () =>
    z.looseObject({
      id: z.string().min(1),
      name: z.string(),
      description: z.string().nullish(),
      category: z.string().nullish(),
      type: z.literal("select"),
      currentValue: z.string(),
      options: z.array(SessionConfigSelectOption),
      _meta: AcpMeta,
    }),
  "SessionConfigOption",
);
export type SessionConfigOption = z.infer<typeof SessionConfigOption>;

/** `session/new` answers the session id, its modes and its config options (PROTOCOL.md section 4). */
export const SessionNewResult = lazySchema(
  () =>
    z.looseObject({
      sessionId: SessionId,
      modes: SessionModeState.nullish(),
      configOptions: z.array(SessionConfigOption).nullish(),
      _meta: AcpMeta,
    }),
  "SessionNewResult",
);
export type SessionNewResult = z.infer<typeof SessionNewResult>;

export const SessionLoadParams = lazySchema(
  () =>
    z.looseObject({
      sessionId: SessionId,
      cwd: AbsolutePath,
      mcpServers: arrayDefaultOnNull(McpServer),
      additionalDirectories: z.array(AbsolutePath).nullish(),
      _meta: AcpMeta,
    }),
  "SessionLoadParams",
);
export type SessionLoadParams = z.infer<typeof SessionLoadParams>;

/**
 * `session/load` answers `{modes, configOptions}` once the conversation has been replayed (ACP-V1.md: an object,
 * not `null`).
 */
export const SessionLoadResult = lazySchema(
  () =>
    z.looseObject({
      modes: SessionModeState.nullish(),
      configOptions: z.array(SessionConfigOption).nullish(),
      _meta: AcpMeta,
    }),
  "SessionLoadResult",
);
export type SessionLoadResult = z.infer<typeof SessionLoadResult>;

/** `session/resume`: like `session/load` without the replay; `mcpServers` is optional here (ACP-V1.md section 2). */
export const SessionResumeParams = lazySchema(
  () =>
    z.looseObject({
      sessionId: SessionId,
      cwd: AbsolutePath,
      mcpServers: arrayDefaultOnNull(McpServer).optional(),
      additionalDirectories: z.array(AbsolutePath).nullish(),
      _meta: AcpMeta,
    }),
  "SessionResumeParams",
);
export type SessionResumeParams = z.infer<typeof SessionResumeParams>;

export const SessionResumeResult = lazySchema(
  () =>
    z.looseObject({
      modes: SessionModeState.nullish(),
      configOptions: z.array(SessionConfigOption).nullish(),
      _meta: AcpMeta,
    }),
  "SessionResumeResult",
);
export type SessionResumeResult = z.infer<typeof SessionResumeResult>;

export const SessionDeleteParams = lazySchema(
  () => z.looseObject({ sessionId: SessionId, _meta: AcpMeta }),
  "SessionDeleteParams",
);
export type SessionDeleteParams = z.infer<typeof SessionDeleteParams>;

export const SessionDeleteResult = lazySchema(() => z.looseObject({ _meta: AcpMeta }), "SessionDeleteResult");
export type SessionDeleteResult = z.infer<typeof SessionDeleteResult>;

export const SessionSetModeParams = lazySchema(
  () => z.looseObject({ sessionId: SessionId, modeId: z.string().min(1), _meta: AcpMeta }),
  "SessionSetModeParams",
);
export type SessionSetModeParams = z.infer<typeof SessionSetModeParams>;

export const SessionSetModeResult = lazySchema(() => z.looseObject({ _meta: AcpMeta }), "SessionSetModeResult");
export type SessionSetModeResult = z.infer<typeof SessionSetModeResult>;

/** `session/set_config_option`: a select option takes a string value (boolean options are never offered). */
export const SessionSetConfigOptionParams = lazySchema(
  () =>
    z.looseObject({
      sessionId: SessionId,
      configId: z.string().min(1),
      type: z.string().nullish(),
      value: z.union([z.string(), z.boolean()]),
      _meta: AcpMeta,
    }),
  "SessionSetConfigOptionParams",
);
export type SessionSetConfigOptionParams = z.infer<typeof SessionSetConfigOptionParams>;

/** The complete list of config options, with the new value (ACP-V1.md section 2.3). */
export const SessionSetConfigOptionResult = lazySchema(
  () =>
    z.looseObject({
      configOptions: z.array(SessionConfigOption),
      _meta: AcpMeta,
    }),
  "SessionSetConfigOptionResult",
);
export type SessionSetConfigOptionResult = z.infer<typeof SessionSetConfigOptionResult>;

export const SessionListParams = lazySchema(
  () =>
    z.looseObject({
      cwd: AbsolutePath.nullish(),
      cursor: z.string().max(1_000).nullish(),
      _meta: AcpMeta,
    }),
  "SessionListParams",
);
export type SessionListParams = z.infer<typeof SessionListParams>;

export const SessionInfo = lazySchema(
  () =>
    z.looseObject({
      sessionId: SessionId,
      cwd: AbsolutePath,
      additionalDirectories: z.array(AbsolutePath).optional(),
      title: z.string().nullish(),
      /** ISO-8601. */
      updatedAt: z.string().nullish(),
      _meta: AcpMeta,
    }),
  "SessionInfo",
);
export type SessionInfo = z.infer<typeof SessionInfo>;

export const SessionListResult = lazySchema(
  () =>
    z.looseObject({
      sessions: z.array(SessionInfo),
      nextCursor: z.string().nullish(),
      _meta: AcpMeta,
    }),
  "SessionListResult",
);
export type SessionListResult = z.infer<typeof SessionListResult>;

export const SessionCloseParams = lazySchema(
  () => z.looseObject({ sessionId: SessionId, _meta: AcpMeta }),
  "SessionCloseParams",
);
export type SessionCloseParams = z.infer<typeof SessionCloseParams>;

export const SessionCloseResult = lazySchema(() => z.looseObject({ _meta: AcpMeta }), "SessionCloseResult");
export type SessionCloseResult = z.infer<typeof SessionCloseResult>;

/**
 * Most characters of text one prompt may carry (text blocks, embedded text resources and resource links together):
 * the limit of a product's goal, which a first prompt becomes (DESIGN.md guarantee 14).
 */
export const MAX_PROMPT_TEXT_CHARS = 100_000;

/** Characters of the text a prompt's blocks carry (what `promptText` joins); stops counting past the limit. */
function promptTextChars(blocks: readonly ContentBlock[]): number {
  let total = 0;
  for (const b of blocks) {
    if (b.type === "text") total += b.text.length;
    else if (b.type === "resource_link") total += b.name.length + b.uri.length;
    else if (b.type === "resource") {
      const text = (b.resource as { text?: unknown }).text;
      if (typeof text === "string") total += text.length;
    }
    if (total > MAX_PROMPT_TEXT_CHARS) break;
  }
  return total;
}

export const SessionPromptParams = lazySchema(
  () =>
    z.looseObject({
      sessionId: SessionId,
      prompt: z
        .array(ContentBlock)
        .max(1_000, { abort: true })
        .refine((blocks) => promptTextChars(blocks) <= MAX_PROMPT_TEXT_CHARS, {
          message: `carries too much text: at most ${MAX_PROMPT_TEXT_CHARS} characters are accepted (like a goal)`,
        }),
      _meta: AcpMeta,
    }),
  "SessionPromptParams",
);
export type SessionPromptParams = z.infer<typeof SessionPromptParams>;

export const StopReason = lazySchema(
  () => z.enum(["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]),
  "StopReason",
);
export type StopReason = z.infer<typeof StopReason>;

export const SessionPromptResult = lazySchema(
  () => z.looseObject({ stopReason: StopReason, _meta: AcpMeta }),
  "SessionPromptResult",
);
export type SessionPromptResult = z.infer<typeof SessionPromptResult>;

/** `session/cancel` (client → server notification). */
export const SessionCancelParams = lazySchema(
  () => z.looseObject({ sessionId: SessionId, _meta: AcpMeta }),
  "SessionCancelParams",
);
export type SessionCancelParams = z.infer<typeof SessionCancelParams>;

// ---------------------------------------------------------------------------------------------------------------
// session/update (server → client notification)

export const ToolKind = lazySchema(
  () => z.enum(["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"]),
  "ToolKind",
);
export type ToolKind = z.infer<typeof ToolKind>;

/** ACP v1 has no `cancelled` tool call status. */
export const ToolCallStatus = lazySchema(
  () => z.enum(["pending", "in_progress", "completed", "failed"]),
  "ToolCallStatus",
);
export type ToolCallStatus = z.infer<typeof ToolCallStatus>;

/** Tool call content; bare ContentBlocks are not valid here, they are wrapped in `{type: "content"}`. */
export const ToolCallContent = lazySchema(
  () =>
    z.discriminatedUnion("type", [
      z.looseObject({ type: z.literal("content"), content: ContentBlock, _meta: AcpMeta }),
      z.looseObject({
        type: z.literal("diff"),
        path: AbsolutePath,
        oldText: z.string().nullish(),
        newText: z.string(),
        _meta: AcpMeta,
      }),
      z.looseObject({ type: z.literal("terminal"), terminalId: z.string(), _meta: AcpMeta }),
    ]),
  "ToolCallContent",
);
export type ToolCallContent = z.infer<typeof ToolCallContent>;

export const ToolCallLocation = lazySchema(
  () =>
    z.looseObject({
      path: AbsolutePath,
      /** 1-based. */
      line: z.number().int().min(0).nullish(),
      _meta: AcpMeta,
    }),
  "ToolCallLocation",
);

/** The fields of a new tool call (`sessionUpdate: "tool_call"`). */
const toolCallFields = () => ({
  toolCallId: z.string().min(1),
  title: z.string(),
  name: z.string().nullish(),
  kind: ToolKind.optional(),
  status: ToolCallStatus.optional(),
  content: z.array(ToolCallContent).optional(),
  locations: z.array(ToolCallLocation).optional(),
  rawInput: z.unknown().optional(),
  rawOutput: z.unknown().optional(),
  _meta: AcpMeta,
});

/** The fields of a tool call update: only `toolCallId` is required; `content`/`locations` replace when present. */
const toolCallUpdateFields = () => ({
  toolCallId: z.string().min(1),
  title: z.string().nullish(),
  name: z.string().nullish(),
  kind: ToolKind.nullish(),
  status: ToolCallStatus.nullish(),
  content: z.array(ToolCallContent).nullish(),
  locations: z.array(ToolCallLocation).nullish(),
  rawInput: z.unknown().optional(),
  rawOutput: z.unknown().optional(),
  _meta: AcpMeta,
});

/** ACP `ToolCallUpdate` as it appears inside `session/request_permission`. */
export const ToolCallUpdate = lazySchema(() => z.looseObject(toolCallUpdateFields()), "ToolCallUpdate");
export type ToolCallUpdate = z.infer<typeof ToolCallUpdate>;

export const PlanEntry = lazySchema(
  () =>
    z.looseObject({
      content: z.string(),
      priority: z.enum(["high", "medium", "low"]),
      status: z.enum(["pending", "in_progress", "completed"]),
      _meta: AcpMeta,
    }),
  "PlanEntry",
);
export type PlanEntry = z.infer<typeof PlanEntry>;

const contentChunkFields = () => ({ content: ContentBlock, messageId: z.string().nullish(), _meta: AcpMeta });

export const AvailableCommand = lazySchema(
  () =>
    z.looseObject({
      name: z.string(),
      description: z.string(),
      input: z.looseObject({ hint: z.string(), _meta: AcpMeta }).nullish(),
      _meta: AcpMeta,
    }),
  "AvailableCommand",
);
export type AvailableCommand = z.infer<typeof AvailableCommand>;

/** ACP `SessionUpdate`: the 11 stable v1 variants, discriminated by `sessionUpdate`. */
export const SessionUpdate = lazySchema(
  () =>
    z.discriminatedUnion("sessionUpdate", [
      z.looseObject({ sessionUpdate: z.literal("user_message_chunk"), ...contentChunkFields() }),
      z.looseObject({ sessionUpdate: z.literal("agent_message_chunk"), ...contentChunkFields() }),
      z.looseObject({ sessionUpdate: z.literal("agent_thought_chunk"), ...contentChunkFields() }),
      z.looseObject({ sessionUpdate: z.literal("tool_call"), ...toolCallFields() }),
      z.looseObject({ sessionUpdate: z.literal("tool_call_update"), ...toolCallUpdateFields() }),
      z.looseObject({ sessionUpdate: z.literal("plan"), entries: z.array(PlanEntry), _meta: AcpMeta }),
      z.looseObject({
        sessionUpdate: z.literal("available_commands_update"),
        availableCommands: z.array(AvailableCommand),
        _meta: AcpMeta,
      }),
      z.looseObject({ sessionUpdate: z.literal("current_mode_update"), currentModeId: z.string(), _meta: AcpMeta }),
      z.looseObject({
        sessionUpdate: z.literal("config_option_update"),
        configOptions: z.array(SessionConfigOption),
        _meta: AcpMeta,
      }),
      z.looseObject({
        sessionUpdate: z.literal("session_info_update"),
        title: z.string().nullish(),
        updatedAt: z.string().nullish(),
        _meta: AcpMeta,
      }),
      z.looseObject({
        sessionUpdate: z.literal("usage_update"),
        used: z.number().int().min(0),
        size: z.number().int().min(0),
        cost: z.looseObject({ amount: z.number(), currency: z.string(), _meta: AcpMeta }).nullish(),
        _meta: AcpMeta,
      }),
    ]),
  "SessionUpdate",
);
export type SessionUpdate = z.infer<typeof SessionUpdate>;

/** `session/update` params (ACP `SessionNotification`). */
export const SessionUpdateParams = lazySchema(
  () => z.looseObject({ sessionId: SessionId, update: SessionUpdate, _meta: AcpMeta }),
  "SessionUpdateParams",
);
export type SessionUpdateParams = z.infer<typeof SessionUpdateParams>;

// ---------------------------------------------------------------------------------------------------------------
// session/request_permission (server → client request)

export const PermissionOptionKind = lazySchema(
  () => z.enum(["allow_once", "allow_always", "reject_once", "reject_always"]),
  "PermissionOptionKind",
);

export const PermissionOption = lazySchema(
  () =>
    z.looseObject({
      optionId: z.string().min(1),
      name: z.string(),
      kind: PermissionOptionKind,
      _meta: AcpMeta,
    }),
  "PermissionOption",
);
export type PermissionOption = z.infer<typeof PermissionOption>;

export const RequestPermissionParams = lazySchema(
  () =>
    z.looseObject({
      sessionId: SessionId,
      toolCall: ToolCallUpdate,
      options: z.array(PermissionOption),
      _meta: AcpMeta,
    }),
  "RequestPermissionParams",
);
export type RequestPermissionParams = z.infer<typeof RequestPermissionParams>;

export const RequestPermissionOutcome = lazySchema(
  () =>
    z.discriminatedUnion("outcome", [
      z.looseObject({ outcome: z.literal("cancelled"), _meta: AcpMeta }),
      z.looseObject({ outcome: z.literal("selected"), optionId: z.string(), _meta: AcpMeta }),
    ]),
  "RequestPermissionOutcome",
);

export const RequestPermissionResult = lazySchema(
  () => z.looseObject({ outcome: RequestPermissionOutcome, _meta: AcpMeta }),
  "RequestPermissionResult",
);
export type RequestPermissionResult = z.infer<typeof RequestPermissionResult>;
