/**
 * One task attempt on an ACP worker agent (DESIGN.md, Agents and "Processes"): the agent process (behind its
 * watchdog, agent-process.ts), its ACP session as our *client* (official SDK), and what comes out of it.
 *
 * Owns: start (spawn → `initialize` → `authenticate` when configured → `session/new`, bounded by `startTimeoutMs`,
 * naming the stage that timed out), the prompt (bounded by `taskTimeoutMs`), cancellation (session/cancel with a short
 * grace), the end of the process at every attempt's end (stdin closed and the group signalled at once), the mapping
 * of ACP traffic onto `WorkerEvents`/`WorkerResult` (separate messages kept apart, one activity per tool call, tokens
 * from the prompt response's `usage` only), configuration errors (retrying cannot fix them), permission requests
 * (IDE first, else the policy; refusals reported and kept; a turn that ends after a policy refusal fails), and
 * `fs/*` requests inside the task's workspace. Never throws from `run`, never writes to stdout, never advertises
 * client capabilities it does not serve (fs yes, terminal no), never leaves a process behind.
 */
import { Readable, Writable } from "node:stream";
import { client, methods, ndJsonStream, PROTOCOL_VERSION, RequestError } from "@agentclientprotocol/sdk";
import type {
  ClientContext,
  PromptResponse,
  ReadTextFileRequest,
  ReadTextFileResponse,
  RequestPermissionRequest,
  RequestPermissionResponse,
  SessionNotification,
  WriteTextFileRequest,
  WriteTextFileResponse,
} from "@agentclientprotocol/sdk";
import type { Logger, RefusedPermission, WorkerEvents, WorkerRequest, WorkerResult } from "../../core/ports.js";
import { AgentProcess, delay } from "./agent-process.js";
import type { AgentExit } from "./agent-process.js";
import {
  handshakeConfigurationError,
  protocolConfigurationError,
  spawnConfigurationError,
  unknownAgentConfigurationError,
  unknownAuthMethodError,
} from "./agent-errors.js";
import type { AdvertisedAuthMethod, StartStage, AgentConfigurationError } from "./agent-errors.js";
import { describePolicy } from "./registry.js";
import type { AgentRegistry, LaunchSpec, PermissionPolicy } from "./registry.js";
import { formatTaskBrief, MAX_OUTPUT_CHARS, META_KEY, STDERR_TAIL_CHARS } from "./task-brief.js";
import { MessageJoiner, oneLine, OutputBuffer, ToolCallLedger } from "./worker-output.js";
import { divertTextChunks } from "./session-updates.js";
import type { TextChunk } from "./session-updates.js";
import { choosePermission, isRefusal } from "./worker-permissions.js";
import type { PermissionForwarder } from "./worker-permissions.js";
import { WorkspaceFs, WorkspaceFsError } from "./workspace-fs.js";
import { overloadOf } from "./overload.js";
import { McpSecrets, mcpServersFor, skippedMcpLines } from "./mcp-servers.js";
import type { Overload } from "./overload.js";

type StopKind = "cancel" | "timeout" | "startTimeout" | "shutdown";

type Settled =
  | { kind: "answered"; response: PromptResponse | undefined }
  | { kind: "error"; error: unknown }
  | { kind: "spawnError"; error: AgentConfigurationError }
  | { kind: "exited"; exit: AgentExit }
  | { kind: "stopped"; stop: StopKind };

/** Resolves when the consumer of worker output can take more (see `AcpWorkerPool.setOutputGate`). Never rejects. */
export type OutputGate = () => Promise<void>;

/** What every attempt of a pool shares. Durations are milliseconds. */
export interface AttemptOptions {
  registry: AgentRegistry;
  logger: Logger;
  graceMs: number;
  taskTimeoutMs: number;
  startTimeoutMs: number;
  permissions: PermissionPolicy;
  /**
   * The policy for an isolated attempt (its cwd is its own worktree) when the config file set none: `read` and
   * `edit` allowed, the rest refused (issue 12, permissions under isolation). Absent: `permissions` applies.
   */
  isolatedPermissions?: PermissionPolicy;
  /** The current forwarder (read at request time, so it can be installed after the pool was built). */
  forwarder: () => PermissionForwarder | undefined;
  /** The current output gate (read before each read of a worker's stdout; see `AcpWorkerPool.setOutputGate`). */
  outputGate: () => OutputGate | undefined;
  clientName: string;
  clientVersion: string;
  /** The secrets of products' MCP servers held by this process (issue 28); absent: none held. */
  mcpSecrets?: McpSecrets;
}

function describeError(error: unknown): string {
  if (error instanceof RequestError) return `error ${error.code}: ${error.message}`;
  if (error instanceof Error) return error.message;
  return String(error);
}

function nonNegativeInt(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value) && value >= 0 ? Math.floor(value) : undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Token usage of the turn a prompt response ends: ACP's `usage` (`inputTokens`, `outputTokens`), or the same shape in
 * `_meta.usage` / `_meta["acp-orchestrator"].usage`. `usage_update` notifications are NOT usage (their `used` is the
 * size of the context window in use), so they are never read here.
 */
export function usageOf(response: PromptResponse): { inputTokens: number; outputTokens: number } | undefined {
  const meta = isRecord(response._meta) ? response._meta : {};
  const ours = isRecord(meta[META_KEY]) ? meta[META_KEY] : {};
  const candidates = [(response as Record<string, unknown>)["usage"], ours["usage"], meta["usage"]];
  for (const candidate of candidates) {
    if (!isRecord(candidate)) continue;
    const inputTokens = nonNegativeInt(candidate["inputTokens"]);
    const outputTokens = nonNegativeInt(candidate["outputTokens"]);
    if (inputTokens !== undefined || outputTokens !== undefined) {
      return { inputTokens: inputTokens ?? 0, outputTokens: outputTokens ?? 0 };
    }
  }
  return undefined;
}

/** A question the agent needs answered, carried as `_meta["acp-orchestrator"].question` of the prompt response. */
function questionOf(response: PromptResponse): string | undefined {
  const meta = isRecord(response._meta) ? response._meta : {};
  const ours = meta[META_KEY];
  if (!isRecord(ours)) return undefined;
  const question = ours["question"];
  return typeof question === "string" && question.trim() !== "" ? question : undefined;
}

/**
 * A worker's stdout as a web stream that reads on only once `gate()` (read anew before every read; none = open)
 * resolved. While the gate is closed nothing is read, so the child's pipe fills and its own writes wait: end-to-end
 * backpressure, with at most one chunk (the pipe's size) read ahead. Cancelling the stream cancels the source.
 */
export function gatedReadable(source: Readable, gate: () => OutputGate | undefined): ReadableStream<Uint8Array> {
  const reader = (Readable.toWeb(source) as ReadableStream<Uint8Array>).getReader();
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const wait = gate();
        if (wait !== undefined) await wait();
        const { value, done } = await reader.read();
        if (done) controller.close();
        else controller.enqueue(value);
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}

/** An attempt's result before the child has exited: failures get their stderr tail only at the very end. */
type Draft = WorkerResult | { outcome: "failedWithTail"; what: string };

/** One task attempt: construct, then `run()` once. */
export class TaskAttempt {
  private agent: AgentProcess | undefined;
  private spec: LaunchSpec | undefined;
  private stderrTail = "";
  private stderrLine = "";
  private readonly output = new OutputBuffer(MAX_OUTPUT_CHARS);
  private sessionId: string | undefined;
  private ctx: ClientContext | undefined;
  private stopKind: StopKind | undefined;
  /** Set when the agent did not answer a cancelled prompt within the grace period: kill without further courtesy. */
  private unresponsive = false;
  private resolveStop: ((kind: StopKind) => void) | undefined;
  private readonly stopped: Promise<StopKind>;
  private stage: StartStage = "spawn";
  private prompted = false;
  private authMethods: AdvertisedAuthMethod[] = [];
  private readonly joiner = new MessageJoiner();
  private readonly toolCalls = new ToolCallLedger();
  private readonly refusals: RefusedPermission[] = [];
  private readonly log: Logger;
  /** Aborted on stop: withdraws permission questions forwarded to the IDE. */
  private readonly stopController = new AbortController();
  private workspace: WorkspaceFs | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** The text of a prompt-time error response, searched for an overload once the attempt failed. */
  private promptErrorText = "";
  #overload: Overload | undefined;

  constructor(
    private readonly request: WorkerRequest,
    private readonly events: WorkerEvents,
    private readonly options: AttemptOptions,
  ) {
    this.stopped = new Promise((resolve) => {
      this.resolveStop = resolve;
    });
    this.log = options.logger.child({
      agentId: request.instance.agentId,
      productId: request.productId,
      taskId: request.task.taskId,
      attempt: request.attempt,
    });
  }

  private get agentId(): string {
    return this.request.instance.agentId;
  }

  /**
   * Set once `run()` resolved `failed` after the prompt was sent, when the failure says the model provider is
   * overloaded or rate limiting (overload.ts): the pool then retries instead of failing the attempt (issue 28).
   */
  get overload(): Overload | undefined {
    return this.#overload;
  }

  /** Asks the attempt to stop (first reason wins). Safe to call at any time, any number of times. */
  stop(kind: StopKind): void {
    if (this.stopKind !== undefined) return;
    this.stopKind = kind;
    this.resolveStop?.(kind);
    this.stopController.abort();
  }

  /** Runs the attempt to the end. Resolves only after the agent and all it started have exited. Never rejects. */
  async run(): Promise<WorkerResult> {
    const onAbort = (): void => this.stop("cancel");
    this.request.signal.addEventListener("abort", onAbort, { once: true });
    this.arm(this.options.startTimeoutMs, "startTimeout");
    let draft: Draft;
    try {
      draft = await this.runInner();
    } catch (error) {
      this.log.error({ err: error }, "worker attempt failed unexpectedly");
      draft = this.failed(`internal error while running the agent: ${describeError(error)}`);
    } finally {
      if (this.timer !== undefined) clearTimeout(this.timer);
      this.request.signal.removeEventListener("abort", onAbort);
    }
    await this.terminate();
    if (draft.outcome === "failed" && draft.prompted === undefined) draft.prompted = this.prompted;
    if (draft.outcome === "cancelled" && !this.prompted) return { outcome: "cancelled", prompted: false };
    if (draft.outcome !== "failedWithTail") return draft;
    // The agent is gone now, so its stderr is complete: quote the end of it.
    await this.settleStdio();
    const tail = this.stderrTail.trim().slice(-STDERR_TAIL_CHARS);
    if (this.prompted && this.stopKind === undefined) {
      this.#overload = overloadOf(`${draft.what}\n${this.promptErrorText}\n${tail}`);
    }
    return {
      outcome: "failed",
      error: `${draft.what} — stderr tail: ${tail === "" ? "(empty)" : tail}`,
      agentId: this.agentId,
      prompted: this.prompted,
    };
  }

  private arm(ms: number, kind: "startTimeout" | "timeout"): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.stop(kind), ms);
  }

  private async runInner(): Promise<Draft> {
    let spec: LaunchSpec;
    try {
      spec = this.options.registry.launchSpec(this.agentId);
    } catch {
      // An agent the registry does not know (resumed without the planning --config): a configuration error, never
      // a retry (issue 11).
      const known = this.options.registry.all().map((a) => a.agentId);
      return this.configurationFailure(unknownAgentConfigurationError(this.agentId, known));
    }
    this.spec = spec;
    let agent: AgentProcess;
    try {
      agent = AgentProcess.spawn({
        command: spec.command,
        args: spec.args,
        cwd: spec.cwd ?? this.request.cwd,
        env: spec.env,
      });
    } catch (error) {
      return this.failed(`could not start the watchdog of agent "${this.agentId}": ${describeError(error)}`);
    }
    this.agent = agent;
    agent.stdin.on("error", (error) => this.log.debug({ error: error.message }, "agent stdin error"));
    agent.stdout.on("error", (error) => this.log.debug({ error: error.message }, "agent stdout error"));
    agent.stderr.setEncoding("utf8");
    agent.stderr.on("data", (chunk: string) => this.onStderr(chunk));
    agent.stderr.on("end", () => this.flushStderrLine());
    this.log.debug({ command: spec.command, args: spec.args }, "agent starting");

    const conversation = this.converse(agent, spec);
    const settled: Settled = await Promise.race([
      conversation.then(
        (response): Settled => ({ kind: "answered", response }),
        (error: unknown): Settled => ({ kind: "error", error }),
      ),
      agent.spawnFailed.then(
        (failure): Settled => ({
          kind: "spawnError",
          error: spawnConfigurationError(this.agentId, spec.command, failure),
        }),
      ),
      agent.exited.then((exit): Settled => ({ kind: "exited", exit })),
      this.stopped.then((stop): Settled => ({ kind: "stopped", stop })),
    ]);

    switch (settled.kind) {
      case "stopped":
        return this.stopAndSettle(settled.stop, conversation);
      case "spawnError":
        return this.configurationFailure(settled.error);
      case "exited":
        return this.exitedEarly(settled.exit);
      case "error":
        return this.conversationFailed(settled.error);
      case "answered":
        if (this.stopKind !== undefined) return this.stopResult(this.stopKind);
        return this.answered(settled.response);
    }
  }

  /** initialize → authenticate (when configured) → session/new → session/prompt over the agent's stdio. */
  private converse(agent: AgentProcess, spec: LaunchSpec): Promise<PromptResponse | undefined> {
    const app = client({ name: this.options.clientName })
      .onNotification(methods.client.session.update, ({ params }) => this.onUpdate(params))
      .onRequest(methods.client.session.requestPermission, ({ params }) => this.onPermission(params))
      .onRequest(methods.client.fs.readTextFile, ({ params }) => this.onReadTextFile(params))
      .onRequest(methods.client.fs.writeTextFile, ({ params }) => this.onWriteTextFile(params));
    const frames = ndJsonStream(
      Writable.toWeb(agent.stdin) as WritableStream<Uint8Array>,
      gatedReadable(agent.stdout, this.options.outputGate),
    );
    // Text chunks, nearly all of a worker's traffic, are taken off before the SDK validates them (session-updates.ts).
    const stream = {
      writable: frames.writable,
      readable: divertTextChunks(frames.readable, (chunk) => this.onTextChunk(chunk)),
    };
    return app.connectWith(stream, async (ctx) => {
      this.ctx = ctx;
      this.stage = "initialize";
      const init = await ctx.request(methods.agent.initialize, {
        protocolVersion: PROTOCOL_VERSION,
        // Only what is really served: fs inside the task's workspace; no terminal.
        clientCapabilities: { fs: { readTextFile: true, writeTextFile: true } },
        clientInfo: { name: this.options.clientName, version: this.options.clientVersion },
      });
      if (init.protocolVersion !== PROTOCOL_VERSION) {
        throw protocolConfigurationError(this.agentId, init.protocolVersion, PROTOCOL_VERSION);
      }
      this.authMethods = (init.authMethods ?? []).map((m) => ({ id: m.id, name: m.name }));
      if (this.stopKind !== undefined) return undefined;
      if (spec.auth !== undefined && this.authMethods.length > 0) {
        if (!this.authMethods.some((m) => m.id === spec.auth?.methodId)) {
          throw unknownAuthMethodError(this.agentId, spec.auth.methodId, this.authMethods);
        }
        this.stage = "authenticate";
        await ctx.request(methods.agent.authenticate, { methodId: spec.auth.methodId });
        if (this.stopKind !== undefined) return undefined;
      }
      this.stage = "session/new";
      const mcpServers = this.mcpServers(init.agentCapabilities?.mcpCapabilities);
      const session = await ctx.request(methods.agent.session.new, { cwd: this.request.cwd, mcpServers });
      this.sessionId = session.sessionId;
      if (this.stopKind !== undefined) return undefined;
      const brief = formatTaskBrief(this.request);
      this.log.debug({ sessionId: session.sessionId, briefChars: brief.text.length }, "prompting agent");
      this.prompted = true;
      this.arm(this.options.taskTimeoutMs, "timeout");
      return ctx.request(methods.agent.session.prompt, {
        sessionId: session.sessionId,
        prompt: [{ type: "text", text: brief.text }],
        _meta: { [META_KEY]: brief.meta },
      });
    });
  }

  /**
   * The MCP servers of this attempt's `session/new` (issue 28, mcp-servers.ts): the product's, with the secrets this
   * process holds, merged with the agent's own, in the transports it advertises. Each one left out is logged and
   * reported as the task's activity.
   */
  private mcpServers(capabilities: { http?: boolean | null; sse?: boolean | null } | null | undefined): never[] {
    const stored = this.request.mcpServers ?? [];
    const resolved = (this.options.mcpSecrets ?? new McpSecrets()).resolve(this.request.productId, stored);
    const { servers, skipped } = mcpServersFor(resolved.servers, this.spec?.mcpServers, capabilities);
    for (const line of skippedMcpLines(resolved.lost, skipped)) {
      this.log.warn({}, line);
      this.safely(() => this.events.onActivity(line));
    }
    if (servers.length > 0) this.log.debug({ mcpServers: servers.map((m) => m.name) }, "giving MCP servers");
    return servers as never[];
  }

  /** A text chunk taken off the stream before the SDK (session-updates.ts): the same as `onUpdate` would do. */
  private onTextChunk(chunk: TextChunk): void {
    if (this.sessionId !== undefined && chunk.sessionId !== this.sessionId) return;
    if (chunk.kind !== "agent_message_chunk") return; // thoughts are not task output
    try {
      this.onMessageText(chunk.text, chunk.messageId);
    } catch (error) {
      this.log.warn({ err: error, update: chunk.kind }, "worker event handler threw; ignored");
    }
  }

  private onMessageText(chunk: string, messageId: string | undefined): void {
    if (chunk === "") return;
    const text = this.joiner.text(chunk, messageId);
    this.output.append(text);
    this.events.onText(text);
  }

  private onUpdate(notification: SessionNotification): void {
    if (this.sessionId !== undefined && notification.sessionId !== this.sessionId) return;
    const update = notification.update;
    try {
      switch (update.sessionUpdate) {
        case "agent_message_chunk":
          if (update.content.type === "text") this.onMessageText(update.content.text, update.messageId ?? undefined);
          break;
        case "tool_call":
        case "tool_call_update": {
          this.joiner.toolCall();
          const title = this.toolCalls.record(update.toolCallId, update.title, update.kind);
          if (title !== undefined) this.events.onActivity(title, update.toolCallId);
          break;
        }
        default:
          // usage_update is the context window in use, not consumption: never counted (issue 11, accounting).
          break;
      }
    } catch (error) {
      this.log.warn({ err: error, update: update.sessionUpdate }, "worker event handler threw; ignored");
    }
  }

  /**
   * A worker's `session/request_permission`, with `kind`/`title` completed from its earlier tool call of the same id:
   * forwarded to the IDE when the pool's forwarder can reach one for this product; otherwise (or when it says nobody
   * can answer) the `permissions` policy decides by tool kind. An IDE answer naming an option the worker did not
   * offer, or an IDE that fails to answer, gets the worker a reject option. Every refusal is reported and kept. A
   * stopped attempt answers `cancelled`.
   */
  private async onPermission(raw: RequestPermissionRequest): Promise<RequestPermissionResponse> {
    if (this.stopKind !== undefined) return { outcome: { outcome: "cancelled" } };
    const known = this.toolCalls.get(raw.toolCall.toolCallId);
    const kind = raw.toolCall.kind ?? known?.kind;
    const titled = raw.toolCall.title ?? (known?.title !== undefined && known.title !== "" ? known.title : undefined);
    const title = oneLine(titled ?? raw.toolCall.toolCallId);
    const params: RequestPermissionRequest = {
      ...raw,
      toolCall: { ...raw.toolCall, title, ...(kind !== undefined ? { kind: kind as never } : {}) },
    };
    const forwarder = this.options.forwarder();
    if (forwarder !== undefined) {
      let forwarded: RequestPermissionResponse | undefined;
      try {
        forwarded = await forwarder({
          productId: this.request.productId,
          taskId: this.request.task.taskId,
          taskTitle: this.request.task.title,
          attempt: this.request.attempt,
          agentId: this.agentId,
          params,
          signal: this.stopController.signal,
        });
      } catch (error) {
        if (this.stopKind !== undefined) return { outcome: { outcome: "cancelled" } };
        this.log.warn({ err: error, tool: title }, "the IDE did not answer a worker permission request; denied");
        this.refused(raw.toolCall.toolCallId, kind, title, "client");
        return choosePermission(params.options, "deny");
      }
      if (this.stopKind !== undefined) return { outcome: { outcome: "cancelled" } };
      if (forwarded !== undefined) {
        const outcome = forwarded.outcome;
        if (outcome.outcome === "selected" && !params.options.some((o) => o.optionId === outcome.optionId)) {
          this.log.warn(
            { tool: title, answer: outcome.optionId },
            "the IDE chose an option the worker did not offer; denied",
          );
          this.refused(raw.toolCall.toolCallId, kind, title, "client");
          return choosePermission(params.options, "deny");
        }
        this.log.info({ tool: title, answer: outcome }, "worker permission request answered by the IDE");
        if (isRefusal(forwarded, params.options)) this.refused(raw.toolCall.toolCallId, kind, title, "client");
        return outcome.outcome === "cancelled"
          ? { outcome: { outcome: "cancelled" } }
          : { outcome: { outcome: "selected", optionId: outcome.optionId } };
      }
    }
    const policy = this.policy();
    const answer = choosePermission(params.options, policy, kind);
    this.log.info(
      { tool: title, kind: kind ?? "other", policy, answer: answer.outcome },
      "answered worker permission request by policy",
    );
    if (isRefusal(answer, params.options)) this.refused(raw.toolCall.toolCallId, kind, title, "policy");
    return answer;
  }

  /**
   * The policy that answers this attempt's permission requests when no IDE does: the isolated default for an attempt
   * in its own worktree when the config file set no `permissions` (issue 12), else the configured one.
   */
  private policy(): PermissionPolicy {
    return (this.request.isolated ? this.options.isolatedPermissions : undefined) ?? this.options.permissions;
  }

  /** Reports and keeps one refusal; the tool call's activity says it was refused. */
  private refused(toolCallId: string, kind: string | undefined, title: string, by: "policy" | "client"): void {
    const refusal: RefusedPermission = { kind: kind ?? "other", title, by };
    this.refusals.push(refusal);
    const who = by === "policy" ? `the permission policy ${describePolicy(this.policy())}` : "the client";
    this.safely(() => this.events.onPermissionRefused?.(refusal));
    this.safely(() => this.events.onActivity(oneLine(`${title} (${refusal.kind}): refused by ${who}`), toolCallId));
  }

  /** The workspace view of this attempt (the task's cwd), or a refusal when the request is not for our session. */
  private workspaceFor(sessionId: string, path: string): WorkspaceFs {
    if (this.stopKind !== undefined) {
      throw new RequestError(-32800, "The task was stopped; the file request was not served.", { path });
    }
    if (this.sessionId === undefined || sessionId !== this.sessionId) {
      throw RequestError.invalidParams({ path, sessionId }, `Unknown session "${sessionId}" for this worker.`);
    }
    this.workspace ??= new WorkspaceFs(this.request.cwd);
    return this.workspace;
  }

  /** `fs/read_text_file`: served inside the task's workspace only (workspace-fs.ts); refusals are JSON-RPC errors. */
  private async onReadTextFile(params: ReadTextFileRequest): Promise<ReadTextFileResponse> {
    try {
      const fs = this.workspaceFor(params.sessionId, params.path);
      const content = await fs.readTextFile(params.path, { line: params.line ?? null, limit: params.limit ?? null });
      this.log.debug({ path: params.path, chars: content.length }, "worker read a file");
      return { content };
    } catch (error) {
      throw this.fsRefusal("read", params.path, error);
    }
  }

  /** `fs/write_text_file`: served inside the task's workspace only; nothing is written on refusal. */
  private async onWriteTextFile(params: WriteTextFileRequest): Promise<WriteTextFileResponse> {
    try {
      const fs = this.workspaceFor(params.sessionId, params.path);
      await fs.writeTextFile(params.path, params.content);
      this.log.debug({ path: params.path, chars: params.content.length }, "worker wrote a file");
      return {};
    } catch (error) {
      throw this.fsRefusal("write", params.path, error);
    }
  }

  private fsRefusal(op: "read" | "write", path: string, error: unknown): RequestError {
    if (error instanceof RequestError) return error;
    if (error instanceof WorkspaceFsError) {
      this.log.info({ op, path, reason: error.data.reason }, "worker file request refused");
      return new RequestError(error.code, error.message, error.data);
    }
    this.log.warn({ err: error, op, path }, "worker file request failed");
    return RequestError.internalError({ path }, `Could not ${op} ${path}.`);
  }

  private answered(response: PromptResponse | undefined): Draft {
    if (response === undefined) return this.failed("agent session ended without a prompt response");
    const usage = usageOf(response);
    if (usage !== undefined && (usage.inputTokens > 0 || usage.outputTokens > 0)) {
      this.safely(() => this.events.onUsage(usage));
    }
    const byPolicy = this.refusals.filter((r) => r.by === "policy");
    if (byPolicy.length > 0 && response.stopReason !== "max_tokens" && response.stopReason !== "max_turn_requests") {
      // A refused action leaves the task undone however the agent ends its turn: not a silent success (issue 11).
      const actions = byPolicy.map((r) => `${r.kind} "${r.title}"`).join(", ");
      return {
        outcome: "failed",
        kind: "permission",
        agentId: this.agentId,
        prompted: true,
        error:
          `The permission policy ${describePolicy(this.policy())} refused ${actions} to agent ` +
          `"${this.agentId}", so the task could not be done (the agent ended its turn: ${response.stopReason}). ` +
          `Allow that kind of action in "permissions" of the agent configuration, or run the product from an ACP ` +
          `session to answer permission requests yourself.`,
      };
    }
    switch (response.stopReason) {
      case "end_turn": {
        const question = questionOf(response);
        if (question !== undefined) return { outcome: "waiting", question };
        return { outcome: "completed", output: this.output.text };
      }
      case "cancelled":
        // The agent cancelled on its own (we never asked): treat it as a failure so the core retries or consults.
        return { outcome: "failed", error: "agent ended the turn as cancelled without being asked to" };
      case "refusal":
        return { outcome: "failed", error: "agent refused the task (stop reason: refusal)" };
      case "max_tokens":
        return { outcome: "failed", error: "agent ran out of tokens (stop reason: max_tokens)" };
      case "max_turn_requests":
        return { outcome: "failed", error: "agent hit its turn request limit (stop reason: max_turn_requests)" };
      default:
        return {
          outcome: "failed",
          error: `agent ended the turn with unknown stop reason "${String(response.stopReason)}"`,
        };
    }
  }

  private configurationFailure(error: AgentConfigurationError): Draft {
    this.log.warn({ err: error.message }, "agent configuration error");
    return {
      outcome: "failed",
      kind: "configuration",
      error: error.message,
      remediation: error.remediation,
      agentId: this.agentId,
      prompted: false,
    };
  }

  private async exitedEarly(exit: AgentExit): Promise<Draft> {
    const failure = this.agent?.spawnFailure;
    if (failure !== undefined && this.spec !== undefined) {
      return this.configurationFailure(spawnConfigurationError(this.agentId, this.spec.command, failure));
    }
    return this.failed(`agent "${this.agentId}" ${describeExit(exit)} before the turn ended`);
  }

  private async conversationFailed(error: unknown): Promise<Draft> {
    if (this.stopKind !== undefined) return this.stopResult(this.stopKind);
    if (!this.prompted) {
      const configuration = handshakeConfigurationError(this.agentId, this.stage, error, this.authMethods);
      if (configuration !== undefined) return this.configurationFailure(configuration);
    }
    if (error instanceof RequestError) {
      if (this.prompted) this.promptErrorText = JSON.stringify(error.data ?? null).slice(0, 4_000);
      return this.failed(`agent "${this.agentId}" answered with ${describeError(error)}`);
    }
    // The connection closed: most likely the process died or never started. Give it a moment to say which.
    const agent = this.agent;
    if (agent !== undefined) {
      const exit = await Promise.race([
        agent.exited,
        agent.spawnFailed.then(() => undefined),
        delay(this.options.graceMs).then(() => undefined),
      ]);
      if (agent.spawnFailure !== undefined && this.spec !== undefined) {
        return this.configurationFailure(spawnConfigurationError(this.agentId, this.spec.command, agent.spawnFailure));
      }
      if (exit !== undefined) return this.failed(`agent "${this.agentId}" ${describeExit(exit)} before the turn ended`);
    }
    return this.failed(`agent "${this.agentId}" connection failed: ${describeError(error)}`);
  }

  /** Cancellation/timeout/shutdown: session/cancel, then wait up to `graceMs` for the prompt to answer. */
  private async stopAndSettle(kind: StopKind, conversation: Promise<PromptResponse | undefined>): Promise<Draft> {
    this.log.info({ reason: kind, stage: this.prompted ? "prompt" : this.stage }, "stopping worker");
    if (this.ctx !== undefined && this.sessionId !== undefined && this.prompted) {
      const sessionId = this.sessionId;
      await this.ctx
        .notify(methods.agent.session.cancel, { sessionId })
        .catch((error: unknown) => this.log.debug({ err: error }, "session/cancel could not be sent"));
      const answered = await Promise.race([
        conversation.then(
          () => true,
          () => true,
        ),
        delay(this.options.graceMs).then(() => false),
      ]);
      this.unresponsive = !answered;
    } else {
      this.unresponsive = true;
    }
    return this.stopResult(kind);
  }

  private stopResult(kind: StopKind): Draft {
    if (kind === "timeout") return this.failed(`timed out after ${this.options.taskTimeoutMs} ms`);
    if (kind === "startTimeout") {
      const stage = this.agent?.pid === undefined || this.stage === "spawn" ? "spawn" : this.stage;
      return this.failed(
        `agent "${this.agentId}" did not start within ${this.options.startTimeoutMs} ms (stage ${stage} did not finish)`,
      );
    }
    return { outcome: "cancelled" };
  }

  /**
   * Ends the agent and resolves once it (and everything it started) is gone: stdin closed and the group signalled at
   * once (SIGTERM, SIGKILL after `graceMs`); an agent that ignored session/cancel is SIGKILLed straight away.
   */
  private async terminate(): Promise<void> {
    const agent = this.agent;
    if (agent === undefined) return;
    if (this.unresponsive) await agent.kill();
    else await agent.stop(this.options.graceMs);
  }

  /** Waits (briefly) until the agent's stdio is drained so the stderr tail is complete. */
  private async settleStdio(): Promise<void> {
    if (this.agent !== undefined) await Promise.race([this.agent.closed, delay(Math.min(500, this.options.graceMs))]);
    this.flushStderrLine();
  }

  private onStderr(chunk: string): void {
    this.stderrTail = (this.stderrTail + chunk).slice(-4 * STDERR_TAIL_CHARS);
    const lines = (this.stderrLine + chunk).split("\n");
    this.stderrLine = lines.pop() ?? "";
    for (const line of lines) if (line.trim() !== "") this.log.debug({ stderr: line }, "agent stderr");
  }

  private flushStderrLine(): void {
    if (this.stderrLine.trim() !== "") this.log.debug({ stderr: this.stderrLine }, "agent stderr");
    this.stderrLine = "";
  }

  /** A failure whose message gets the stderr tail appended once the agent has exited (see `run`). */
  private failed(what: string): Draft {
    return { outcome: "failedWithTail", what };
  }

  private safely(fn: () => void): void {
    try {
      fn();
    } catch (error) {
      this.log.warn({ err: error }, "worker event handler threw; ignored");
    }
  }
}

/** "was killed by SIGKILL" / "crashed (exit code 3)" / "exited (code 0)". Pure. */
export function describeExit(exit: AgentExit): string {
  if (exit.signal !== null) return `was killed by ${exit.signal}`;
  if (exit.code !== 0) return `crashed (exit code ${String(exit.code)})`;
  return "exited (code 0)";
}
