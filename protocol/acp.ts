/**
 * zod schemas of the ACP v1 messages the server serves and sends (PROTOCOL.md section 4, ACP-V1.md sections 2-4).
 *
 * Field names and required-ness follow `@agentclientprotocol/sdk/schema/v1/schema.json`, which wins over prose.
 * ACP objects are loose (`z.looseObject`): `_meta` and unknown future fields are accepted and kept on input, as ACP
 * extensibility requires, while required fields stay required. Optional ACP fields accept `null` where the ACP schema
 * does. The one exception is `InitializeResult`, which describes exactly the answer PROTOCOL.md section 4 fixes.
 * This file must never import anything but zod and the shared shapes of common.ts.
 */
import { z } from "zod";
import { AbsolutePath } from "./common.js";

/** ACP `_meta`: an open object, or `null` (ACP-V1.md section 5, Extensibility). */
export const AcpMeta = z.record(z.string(), z.unknown()).nullish();

/** ACP `ProtocolVersion`: one integer, uint16. */
export const ProtocolVersion = z.number().int().min(0).max(65535);

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

export const Role = z.enum(["assistant", "user"]);

export const Annotations = z.looseObject({
  audience: z.array(Role).nullish(),
  lastModified: z.string().nullish(),
  priority: z.number().nullish(),
  _meta: AcpMeta,
});

export const TextContent = z.looseObject({
  type: z.literal("text"),
  text: z.string(),
  annotations: Annotations.nullish(),
  _meta: AcpMeta,
});

export const ImageContent = z.looseObject({
  type: z.literal("image"),
  data: z.string(),
  mimeType: z.string(),
  uri: z.string().nullish(),
  annotations: Annotations.nullish(),
  _meta: AcpMeta,
});

export const AudioContent = z.looseObject({
  type: z.literal("audio"),
  data: z.string(),
  mimeType: z.string(),
  annotations: Annotations.nullish(),
  _meta: AcpMeta,
});

export const ResourceLink = z.looseObject({
  type: z.literal("resource_link"),
  uri: z.string(),
  name: z.string(),
  mimeType: z.string().nullish(),
  title: z.string().nullish(),
  description: z.string().nullish(),
  size: z.number().int().nullish(),
  annotations: Annotations.nullish(),
  _meta: AcpMeta,
});

export const TextResourceContents = z.looseObject({
  uri: z.string(),
  text: z.string(),
  mimeType: z.string().nullish(),
  _meta: AcpMeta,
});

export const BlobResourceContents = z.looseObject({
  uri: z.string(),
  blob: z.string(),
  mimeType: z.string().nullish(),
  _meta: AcpMeta,
});

export const EmbeddedResource = z.looseObject({
  type: z.literal("resource"),
  resource: z.union([TextResourceContents, BlobResourceContents]),
  annotations: Annotations.nullish(),
  _meta: AcpMeta,
});

/** ACP `ContentBlock`, discriminated by `type`. */
export const ContentBlock = z.discriminatedUnion("type", [
  TextContent,
  ImageContent,
  AudioContent,
  ResourceLink,
  EmbeddedResource,
]);
export type ContentBlock = z.infer<typeof ContentBlock>;

// ---------------------------------------------------------------------------------------------------------------
// Capabilities and initialize

export const Implementation = z.looseObject({
  name: z.string(),
  title: z.string().nullish(),
  version: z.string(),
  _meta: AcpMeta,
});

/**
 * This server's own client capability flags, read from `clientCapabilities._meta["acp-orchestrator"]`
 * (PROTOCOL.md sections 2 and 7).
 */
export const OrchestratorClientMeta = z.looseObject({
  /** `"_"`: send every server → client product notification and request with the ACP extension spelling. */
  extensionPrefix: z.enum(["", "_"]).optional(),
  /** `true`: persist through the host's `runState/*` requests instead of the embedded store. */
  runStateAuthority: z.boolean().optional(),
});
export type OrchestratorClientMeta = z.infer<typeof OrchestratorClientMeta>;

export const FileSystemCapabilities = z.looseObject({
  readTextFile: lenient(z.boolean()),
  writeTextFile: lenient(z.boolean()),
  _meta: AcpMeta,
});

export const ClientCapabilities = z.looseObject({
  fs: lenient(FileSystemCapabilities),
  terminal: lenient(z.boolean()),
  _meta: z.looseObject({ "acp-orchestrator": OrchestratorClientMeta.optional() }).nullish(),
});
export type ClientCapabilities = z.infer<typeof ClientCapabilities>;

export const InitializeParams = z.looseObject({
  protocolVersion: ProtocolVersion,
  clientCapabilities: ClientCapabilities.nullish(),
  clientInfo: Implementation.nullish(),
  _meta: AcpMeta,
});
export type InitializeParams = z.infer<typeof InitializeParams>;

/** The server's capability advertisement under `agentCapabilities._meta["acp-orchestrator"]`. */
export const OrchestratorAgentMeta = z.strictObject({
  /** The server's package version. */
  version: z.string(),
  /** Bare names of every extension method the server serves (each also served with a leading `_`). */
  methods: z.array(z.string()),
  /** Bare names of every extension notification the server may send. */
  notifications: z.array(z.string()),
});

/** Exactly the `initialize` answer of PROTOCOL.md section 4; nothing more, nothing less. */
export const InitializeResult = z.strictObject({
  protocolVersion: z.literal(1),
  agentCapabilities: z.strictObject({
    loadSession: z.literal(true),
    promptCapabilities: z.strictObject({
      image: z.literal(false),
      audio: z.literal(false),
      embeddedContext: z.literal(true),
    }),
    mcpCapabilities: z.strictObject({ http: z.literal(false), sse: z.literal(false) }),
    sessionCapabilities: z.strictObject({
      list: z.strictObject({}),
      close: z.strictObject({}),
      resume: z.strictObject({}),
      delete: z.strictObject({}),
    }),
    _meta: z.strictObject({ "acp-orchestrator": OrchestratorAgentMeta }),
  }),
  agentInfo: z.strictObject({ name: z.literal("acp-orchestrator"), version: z.string() }),
  authMethods: z.array(z.never()).max(0),
});
export type InitializeResult = z.infer<typeof InitializeResult>;

// ---------------------------------------------------------------------------------------------------------------
// Sessions

export const SessionId = z.string().min(1).max(1_000);

export const EnvVariable = z.looseObject({ name: z.string(), value: z.string(), _meta: AcpMeta });
export const HttpHeader = z.looseObject({ name: z.string(), value: z.string(), _meta: AcpMeta });

export const McpServerHttp = z.looseObject({
  type: z.literal("http"),
  name: z.string(),
  url: z.string(),
  headers: arrayDefaultOnNull(HttpHeader),
  _meta: AcpMeta,
});

export const McpServerSse = z.looseObject({
  type: z.literal("sse"),
  name: z.string(),
  url: z.string(),
  headers: arrayDefaultOnNull(HttpHeader),
  _meta: AcpMeta,
});

/** The stdio transport carries no `type` field (ACP-V1.md section 2). */
export const McpServerStdio = z.looseObject({
  name: z.string(),
  command: z.string(),
  args: arrayDefaultOnNull(z.string()),
  env: arrayDefaultOnNull(EnvVariable),
  _meta: AcpMeta,
});

export const McpServer = z.union([McpServerHttp, McpServerSse, McpServerStdio]);
export type McpServer = z.infer<typeof McpServer>;

export const SessionNewParams = z.looseObject({
  cwd: AbsolutePath,
  mcpServers: arrayDefaultOnNull(McpServer),
  additionalDirectories: z.array(AbsolutePath).nullish(),
  _meta: AcpMeta,
});
export type SessionNewParams = z.infer<typeof SessionNewParams>;

/** ACP `SessionMode`. */
export const SessionMode = z.looseObject({
  id: z.string().min(1),
  name: z.string(),
  description: z.string().nullish(),
  _meta: AcpMeta,
});

/** ACP `SessionModeState`: the session's modes (PROTOCOL.md section 4: `confirm`, `auto`, `goal`). */
export const SessionModeState = z.looseObject({
  currentModeId: z.string().min(1),
  availableModes: z.array(SessionMode),
  _meta: AcpMeta,
});
export type SessionModeState = z.infer<typeof SessionModeState>;

/** ACP `SessionConfigSelectOption`. */
export const SessionConfigSelectOption = z.looseObject({
  value: z.string(),
  name: z.string(),
  description: z.string().nullish(),
  _meta: AcpMeta,
});

/**
 * ACP `SessionConfigOption` of type `select` (the only type this server offers: PROTOCOL.md section 4, `leader`,
 * `parallelism`, `isolation`); `currentValue` is always one of the flat `options`.
 */
export const SessionConfigOption = z.looseObject({
  id: z.string().min(1),
  name: z.string(),
  description: z.string().nullish(),
  category: z.string().nullish(),
  type: z.literal("select"),
  currentValue: z.string(),
  options: z.array(SessionConfigSelectOption),
  _meta: AcpMeta,
});
export type SessionConfigOption = z.infer<typeof SessionConfigOption>;

/** `session/new` answers the session id, its modes and its config options (PROTOCOL.md section 4). */
export const SessionNewResult = z.looseObject({
  sessionId: SessionId,
  modes: SessionModeState.nullish(),
  configOptions: z.array(SessionConfigOption).nullish(),
  _meta: AcpMeta,
});
export type SessionNewResult = z.infer<typeof SessionNewResult>;

export const SessionLoadParams = z.looseObject({
  sessionId: SessionId,
  cwd: AbsolutePath,
  mcpServers: arrayDefaultOnNull(McpServer),
  additionalDirectories: z.array(AbsolutePath).nullish(),
  _meta: AcpMeta,
});
export type SessionLoadParams = z.infer<typeof SessionLoadParams>;

/**
 * `session/load` answers `{modes, configOptions}` once the conversation has been replayed (ACP-V1.md: an object,
 * not `null`).
 */
export const SessionLoadResult = z.looseObject({
  modes: SessionModeState.nullish(),
  configOptions: z.array(SessionConfigOption).nullish(),
  _meta: AcpMeta,
});
export type SessionLoadResult = z.infer<typeof SessionLoadResult>;

/** `session/resume`: like `session/load` without the replay; `mcpServers` is optional here (ACP-V1.md section 2). */
export const SessionResumeParams = z.looseObject({
  sessionId: SessionId,
  cwd: AbsolutePath,
  mcpServers: arrayDefaultOnNull(McpServer).optional(),
  additionalDirectories: z.array(AbsolutePath).nullish(),
  _meta: AcpMeta,
});
export type SessionResumeParams = z.infer<typeof SessionResumeParams>;

export const SessionResumeResult = z.looseObject({
  modes: SessionModeState.nullish(),
  configOptions: z.array(SessionConfigOption).nullish(),
  _meta: AcpMeta,
});
export type SessionResumeResult = z.infer<typeof SessionResumeResult>;

export const SessionDeleteParams = z.looseObject({ sessionId: SessionId, _meta: AcpMeta });
export type SessionDeleteParams = z.infer<typeof SessionDeleteParams>;

export const SessionDeleteResult = z.looseObject({ _meta: AcpMeta });
export type SessionDeleteResult = z.infer<typeof SessionDeleteResult>;

export const SessionSetModeParams = z.looseObject({ sessionId: SessionId, modeId: z.string().min(1), _meta: AcpMeta });
export type SessionSetModeParams = z.infer<typeof SessionSetModeParams>;

export const SessionSetModeResult = z.looseObject({ _meta: AcpMeta });
export type SessionSetModeResult = z.infer<typeof SessionSetModeResult>;

/** `session/set_config_option`: a select option takes a string value (boolean options are never offered). */
export const SessionSetConfigOptionParams = z.looseObject({
  sessionId: SessionId,
  configId: z.string().min(1),
  type: z.string().nullish(),
  value: z.union([z.string(), z.boolean()]),
  _meta: AcpMeta,
});
export type SessionSetConfigOptionParams = z.infer<typeof SessionSetConfigOptionParams>;

/** The complete list of config options, with the new value (ACP-V1.md section 2.3). */
export const SessionSetConfigOptionResult = z.looseObject({
  configOptions: z.array(SessionConfigOption),
  _meta: AcpMeta,
});
export type SessionSetConfigOptionResult = z.infer<typeof SessionSetConfigOptionResult>;

export const SessionListParams = z.looseObject({
  cwd: AbsolutePath.nullish(),
  cursor: z.string().max(1_000).nullish(),
  _meta: AcpMeta,
});
export type SessionListParams = z.infer<typeof SessionListParams>;

export const SessionInfo = z.looseObject({
  sessionId: SessionId,
  cwd: AbsolutePath,
  additionalDirectories: z.array(AbsolutePath).optional(),
  title: z.string().nullish(),
  /** ISO-8601. */
  updatedAt: z.string().nullish(),
  _meta: AcpMeta,
});
export type SessionInfo = z.infer<typeof SessionInfo>;

export const SessionListResult = z.looseObject({
  sessions: z.array(SessionInfo),
  nextCursor: z.string().nullish(),
  _meta: AcpMeta,
});
export type SessionListResult = z.infer<typeof SessionListResult>;

export const SessionCloseParams = z.looseObject({ sessionId: SessionId, _meta: AcpMeta });
export type SessionCloseParams = z.infer<typeof SessionCloseParams>;

export const SessionCloseResult = z.looseObject({ _meta: AcpMeta });
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

export const SessionPromptParams = z.looseObject({
  sessionId: SessionId,
  prompt: z
    .array(ContentBlock)
    .max(1_000, { abort: true })
    .refine((blocks) => promptTextChars(blocks) <= MAX_PROMPT_TEXT_CHARS, {
      message: `carries too much text: at most ${MAX_PROMPT_TEXT_CHARS} characters are accepted (like a goal)`,
    }),
  _meta: AcpMeta,
});
export type SessionPromptParams = z.infer<typeof SessionPromptParams>;

export const StopReason = z.enum(["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]);
export type StopReason = z.infer<typeof StopReason>;

export const SessionPromptResult = z.looseObject({ stopReason: StopReason, _meta: AcpMeta });
export type SessionPromptResult = z.infer<typeof SessionPromptResult>;

/** `session/cancel` (client → server notification). */
export const SessionCancelParams = z.looseObject({ sessionId: SessionId, _meta: AcpMeta });
export type SessionCancelParams = z.infer<typeof SessionCancelParams>;

// ---------------------------------------------------------------------------------------------------------------
// session/update (server → client notification)

export const ToolKind = z.enum([
  "read",
  "edit",
  "delete",
  "move",
  "search",
  "execute",
  "think",
  "fetch",
  "switch_mode",
  "other",
]);
export type ToolKind = z.infer<typeof ToolKind>;

/** ACP v1 has no `cancelled` tool call status. */
export const ToolCallStatus = z.enum(["pending", "in_progress", "completed", "failed"]);
export type ToolCallStatus = z.infer<typeof ToolCallStatus>;

/** Tool call content; bare ContentBlocks are not valid here, they are wrapped in `{type: "content"}`. */
export const ToolCallContent = z.discriminatedUnion("type", [
  z.looseObject({ type: z.literal("content"), content: ContentBlock, _meta: AcpMeta }),
  z.looseObject({
    type: z.literal("diff"),
    path: AbsolutePath,
    oldText: z.string().nullish(),
    newText: z.string(),
    _meta: AcpMeta,
  }),
  z.looseObject({ type: z.literal("terminal"), terminalId: z.string(), _meta: AcpMeta }),
]);
export type ToolCallContent = z.infer<typeof ToolCallContent>;

export const ToolCallLocation = z.looseObject({
  path: AbsolutePath,
  /** 1-based. */
  line: z.number().int().min(0).nullish(),
  _meta: AcpMeta,
});

/** The fields of a new tool call (`sessionUpdate: "tool_call"`). */
const toolCallFields = {
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
};

/** The fields of a tool call update: only `toolCallId` is required; `content`/`locations` replace when present. */
const toolCallUpdateFields = {
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
};

/** ACP `ToolCallUpdate` as it appears inside `session/request_permission`. */
export const ToolCallUpdate = z.looseObject(toolCallUpdateFields);
export type ToolCallUpdate = z.infer<typeof ToolCallUpdate>;

export const PlanEntry = z.looseObject({
  content: z.string(),
  priority: z.enum(["high", "medium", "low"]),
  status: z.enum(["pending", "in_progress", "completed"]),
  _meta: AcpMeta,
});
export type PlanEntry = z.infer<typeof PlanEntry>;

const contentChunkFields = { content: ContentBlock, messageId: z.string().nullish(), _meta: AcpMeta };

export const AvailableCommand = z.looseObject({
  name: z.string(),
  description: z.string(),
  input: z.looseObject({ hint: z.string(), _meta: AcpMeta }).nullish(),
  _meta: AcpMeta,
});
export type AvailableCommand = z.infer<typeof AvailableCommand>;

/** ACP `SessionUpdate`: the 11 stable v1 variants, discriminated by `sessionUpdate`. */
export const SessionUpdate = z.discriminatedUnion("sessionUpdate", [
  z.looseObject({ sessionUpdate: z.literal("user_message_chunk"), ...contentChunkFields }),
  z.looseObject({ sessionUpdate: z.literal("agent_message_chunk"), ...contentChunkFields }),
  z.looseObject({ sessionUpdate: z.literal("agent_thought_chunk"), ...contentChunkFields }),
  z.looseObject({ sessionUpdate: z.literal("tool_call"), ...toolCallFields }),
  z.looseObject({ sessionUpdate: z.literal("tool_call_update"), ...toolCallUpdateFields }),
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
]);
export type SessionUpdate = z.infer<typeof SessionUpdate>;

/** `session/update` params (ACP `SessionNotification`). */
export const SessionUpdateParams = z.looseObject({ sessionId: SessionId, update: SessionUpdate, _meta: AcpMeta });
export type SessionUpdateParams = z.infer<typeof SessionUpdateParams>;

// ---------------------------------------------------------------------------------------------------------------
// session/request_permission (server → client request)

export const PermissionOptionKind = z.enum(["allow_once", "allow_always", "reject_once", "reject_always"]);

export const PermissionOption = z.looseObject({
  optionId: z.string().min(1),
  name: z.string(),
  kind: PermissionOptionKind,
  _meta: AcpMeta,
});
export type PermissionOption = z.infer<typeof PermissionOption>;

export const RequestPermissionParams = z.looseObject({
  sessionId: SessionId,
  toolCall: ToolCallUpdate,
  options: z.array(PermissionOption),
  _meta: AcpMeta,
});
export type RequestPermissionParams = z.infer<typeof RequestPermissionParams>;

export const RequestPermissionOutcome = z.discriminatedUnion("outcome", [
  z.looseObject({ outcome: z.literal("cancelled"), _meta: AcpMeta }),
  z.looseObject({ outcome: z.literal("selected"), optionId: z.string(), _meta: AcpMeta }),
]);

export const RequestPermissionResult = z.looseObject({ outcome: RequestPermissionOutcome, _meta: AcpMeta });
export type RequestPermissionResult = z.infer<typeof RequestPermissionResult>;
