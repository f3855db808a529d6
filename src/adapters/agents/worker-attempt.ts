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
 * `fs/*` requests inside the task's workspace and the product's additional directories (given in `session/new` to an
 * agent that advertises them), the user's attachments in the content types the agent advertises. Never throws from `run`, never writes to stdout, never advertises
 * client capabilities it does not serve (fs yes, terminal no), never leaves a process behind.
 */
import { Writable } from "node:stream";
import { client, methods, ndJsonStream, PROTOCOL_VERSION, RequestError } from "@agentclientprotocol/sdk";
import type { ClientContext, PromptResponse, SessionNotification } from "@agentclientprotocol/sdk";
import type { Logger, WorkerEvents, WorkerRequest, WorkerResult } from "../../core/ports.js";
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
import { MessageJoiner, OutputBuffer, ToolCallLedger } from "./worker-output.js";
import { divertTextChunks } from "./session-updates.js";
import type { TextChunk } from "./session-updates.js";
import type { PermissionForwarder } from "./worker-permissions.js";
import { overloadOf } from "./overload.js";
import { McpSecrets, mcpServersFor, skippedMcpLines } from "./mcp-servers.js";
import type { Overload } from "./overload.js";
import { WorkerClientRequests } from "./worker-client-requests.js";
import { attachmentBlocks, sessionDirectories } from "./prompt-content.js";
import type { ReadAttachment } from "../../core/product/agent-inputs.js";
import { describeError, describeExit, gatedReadable, turnOutcome, usageOf } from "./worker-turn.js";
import type { Draft, OutputGate } from "./worker-turn.js";

export type { OutputGate } from "./worker-turn.js";
export { describeExit, gatedReadable, usageOf } from "./worker-turn.js";

type StopKind = "cancel" | "timeout" | "startTimeout" | "shutdown";

type Settled =
  | { kind: "answered"; response: PromptResponse | undefined }
  | { kind: "error"; error: unknown }
  | { kind: "spawnError"; error: AgentConfigurationError }
  | { kind: "exited"; exit: AgentExit }
  | { kind: "stopped"; stop: StopKind };

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
  /** Reads a stored attachment for the prompt (issue 31); absent: attachments reach the agent as links or notes. */
  readAttachment?: ReadAttachment;
}

/** One task attempt: construct, then `run()` once. */
export class TaskAttempt {
  private agent: AgentProcess | undefined;
  private spec: LaunchSpec | undefined;
  private stderrTail = "";
  private stderrLine = "";
  private readonly output = new OutputBuffer(MAX_OUTPUT_CHARS);
  private sessionId: string | undefined;
  /** The additional directories given in `session/new` (issue 31): further roots of the agent's file requests. */
  private roots: string[] = [];
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
  private readonly log: Logger;
  /** Aborted on stop: withdraws permission questions forwarded to the IDE. */
  private readonly stopController = new AbortController();
  /** Serves the agent's permission and file requests (worker-client-requests.ts). */
  private readonly client: WorkerClientRequests;
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
    this.client = new WorkerClientRequests({
      request,
      agentId: request.instance.agentId,
      options,
      log: this.log,
      events,
      toolCalls: this.toolCalls,
      stopped: () => this.stopKind !== undefined,
      sessionId: () => this.sessionId,
      additionalRoots: () => this.roots,
      signal: this.stopController.signal,
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
      .onRequest(methods.client.session.requestPermission, ({ params }) => this.client.onPermission(params))
      .onRequest(methods.client.fs.readTextFile, ({ params }) => this.client.onReadTextFile(params))
      .onRequest(methods.client.fs.writeTextFile, ({ params }) => this.client.onWriteTextFile(params));
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
      const caps = init.agentCapabilities;
      const dirs = sessionDirectories(this.request.additionalDirectories, caps?.sessionCapabilities, this.log);
      const session = await ctx.request(methods.agent.session.new, { cwd: this.request.cwd, mcpServers, ...dirs });
      // Its fs/* requests are served in the roots its session has: the cwd and the directories it was given.
      this.roots = dirs.additionalDirectories ?? [];
      this.sessionId = session.sessionId;
      if (this.stopKind !== undefined) return undefined;
      const brief = formatTaskBrief(this.request, this.roots);
      // Issue 31: the user's attachments in the content types this agent advertises (prompt-content.ts).
      const read = this.options.readAttachment;
      const extra = await attachmentBlocks(this.request.attachments, caps?.promptCapabilities, read, this.log);
      this.log.debug({ sessionId: session.sessionId, briefChars: brief.text.length }, "prompting agent");
      if (this.stopKind !== undefined) return undefined;
      this.prompted = true;
      this.arm(this.options.taskTimeoutMs, "timeout");
      return ctx.request(methods.agent.session.prompt, {
        sessionId: session.sessionId,
        prompt: [{ type: "text", text: brief.text }, ...extra],
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

  private answered(response: PromptResponse | undefined): Draft {
    if (response !== undefined) {
      const usage = usageOf(response);
      if (usage !== undefined && (usage.inputTokens > 0 || usage.outputTokens > 0)) {
        this.safely(() => this.events.onUsage(usage));
      }
    }
    return turnOutcome(response, {
      agentId: this.agentId,
      output: this.output.text,
      refusals: this.client.refusals,
      policy: describePolicy(this.client.policy()),
    });
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
