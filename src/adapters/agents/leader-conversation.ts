/**
 * One conversation of a model-backed leader: one agent process (own process group, watchdog) with one ACP session
 * (official SDK, as its client), turns serialised, start and turn timeouts, cancellation with a short grace.
 *
 * Owns: the process and session of one conversation. It must never write to stdout, never advertise client
 * capabilities it does not serve (no fs, no terminal; permission requests are always refused), and never leave its
 * process (or anything it started) running after `close()`, a kill, or the server's exit.
 */
import { Readable, Writable } from "node:stream";
import { client, methods, ndJsonStream, PROTOCOL_VERSION, RequestError } from "@agentclientprotocol/sdk";
import type { ClientConnection, PromptResponse, SessionNotification, StopReason } from "@agentclientprotocol/sdk";
import { AgentConfigurationError } from "../../core/ports.js";
import type { Logger } from "../../core/ports.js";
import { AgentProcess, delay } from "./agent-process.js";
import type { AgentExit } from "./agent-process.js";
import {
  handshakeConfigurationError,
  protocolConfigurationError,
  spawnConfigurationError,
  unknownAuthMethodError,
} from "./agent-errors.js";
import type { StartStage } from "./agent-errors.js";
import { LEADER_PROMPT_VERSION } from "./leader-prompts.js";
import type { LeaderTurnKind } from "./leader-prompts.js";
import type { LaunchSpec } from "./registry.js";
import { mcpServersFor, skippedMcpLines } from "./mcp-servers.js";
import type { ResolvedMcp } from "./mcp-servers.js";
import { META_KEY } from "./task-brief.js";
import { attachmentBlocks, sessionDirectories } from "./prompt-content.js";
import type { PromptCaps } from "./prompt-content.js";
import type { AttachmentRef, ReadAttachment } from "../../core/product/agent-inputs.js";
import { choosePermission } from "./worker-permissions.js";

export function describeError(error: unknown): string {
  if (error instanceof RequestError) return `error ${error.code}: ${error.message}`;
  if (error instanceof Error) return error.message;
  return String(error);
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("The leader turn was aborted.", "AbortError");
}

// ===============================================================================================================
// One conversation: one child process, one ACP session

type Exit = AgentExit;

/** What a turn's `_meta` tells the agent about the turn. */
export interface TurnMeta {
  kind: LeaderTurnKind;
  attempt: number;
  repair: boolean;
  subject: { productId: string } | { goalRunId: string };
}

/** All agent text of a turn and how it ended. */
export interface TurnAnswer {
  text: string;
  stopReason: StopReason;
}

/** How a turn settled: the first of the answer, an error, the process's exit, the abort, or the timeout. */
type Settled =
  | { kind: "answered"; stopReason: StopReason }
  | { kind: "error"; error: unknown }
  | { kind: "exited"; exit: Exit }
  | { kind: "aborted" }
  | { kind: "timeout" };

/** One turn in flight (LeaderConversation.sendTurn). */
interface TurnInFlight {
  /** Settles once, with the first outcome. */
  readonly outcome: Promise<Settled>;
  /** The handshake wait and the session/prompt request. */
  readonly work: Promise<PromptResponse>;
  /** The `abort` listener on the turn's signal. */
  readonly onAbort: () => void;
  readonly progress: {
    /** True once session/prompt was sent (the turn timeout runs from then on). */
    prompted: boolean;
    /** The start or turn timeout, whichever is armed. */
    timer: NodeJS.Timeout | undefined;
  };
}

/** Options of `LeaderConversation`; durations are milliseconds (see `AcpLeaderOptions`). */
export interface ConversationOptions {
  agentId: string;
  spec: LaunchSpec;
  cwd: string;
  logger: Logger;
  graceMs: number;
  turnTimeoutMs: number;
  startTimeoutMs: number;
  clientName: string;
  clientVersion: string;
  /** The product's MCP servers for the leader's session (issue 28); absent: only the agent's own. */
  mcp?: ResolvedMcp;
  /** The product's additional directories (issue 31), for `session/new` when the agent advertises them. */
  additionalDirectories?: readonly string[];
  /** Reads a stored attachment for a turn's prompt (issue 31); absent: attachments stay the notes of the text. */
  readAttachment?: ReadAttachment;
}

const STDERR_TAIL_CHARS = 2_048;

/**
 * One leader process with one ACP session in the product's (or goal run's) cwd. Turns are serialised. After a crash,
 * a kill, a timeout or an unanswered cancel the conversation is dead and the owner replaces it.
 */
export class LeaderConversation {
  private child: AgentProcess | undefined;
  private exited: Promise<AgentExit> | undefined;
  private closedIo: Promise<void> | undefined;
  private connection: ClientConnection | undefined;
  private sessionId: string | undefined;
  /** What the agent's `initialize` said it takes in a prompt (issue 31). */
  private promptCaps: PromptCaps | undefined;
  private ready: Promise<void> | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private onChunk: ((text: string) => void) | undefined;
  private stderrTail = "";
  private spawnFailure: string | undefined;
  /** The start stage reached (named when the start times out). */
  private stage: StartStage = "spawn";
  private closing: Promise<void> | undefined;
  /** Set when the process must not be used again (it exited, or was killed). */
  dead = false;
  /** Turns queued or running. */
  busy = 0;
  lastUsed = Date.now();
  private readonly log: Logger;

  constructor(
    readonly key: string,
    private readonly options: ConversationOptions,
  ) {
    this.log = options.logger.child({ leaderAgentId: options.agentId, conversation: key });
  }

  /** The child's pid, if it was started. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /**
   * Runs one prompt turn after the previous ones; resolves with all agent text of the turn. `attachments` follow the
   * text in the content types the agent advertises (prompt-content.ts; the text already names each one).
   */
  turn(
    text: string,
    meta: TurnMeta,
    signal: AbortSignal,
    onText: (text: string) => void,
    attachments: readonly AttachmentRef[] = [],
  ): Promise<TurnAnswer> {
    this.busy += 1;
    this.lastUsed = Date.now();
    const run = this.queue.then(() => this.runTurn(text, meta, signal, onText, attachments));
    this.queue = run.catch(() => undefined);
    return run.finally(() => {
      this.busy -= 1;
      this.lastUsed = Date.now();
    });
  }

  /**
   * Spawns the agent and runs the ACP handshake (initialize, authenticate when configured, session/new). Resolves
   * once the session is ready; rejects with an `AgentConfigurationError` (what to fix) or an Error saying how the
   * process ended, whichever of the handshake, a spawn failure or an exit comes first.
   */
  private start(): Promise<void> {
    const { spec, agentId } = this.options;
    let child: AgentProcess;
    try {
      child = AgentProcess.spawn({
        command: spec.command,
        args: spec.args,
        cwd: spec.cwd ?? this.options.cwd,
        env: spec.env,
      });
    } catch (error) {
      this.dead = true;
      return Promise.reject(
        new Error(`could not start leader agent "${agentId}" (${spec.command}): ${describeError(error)}`),
      );
    }
    const exited = this.watch(child);
    const connection = this.connect(child);
    this.connection = connection;
    this.stage = "initialize";
    // Whichever comes first: the handshake, a spawn failure, or an exit.
    return Promise.race([
      this.handshake(connection, child),
      child.spawnFailed.then((failure) => {
        throw spawnConfigurationError(agentId, spec.command, failure);
      }),
      exited.then(async (exit) => {
        const failure = child.spawnFailure;
        if (failure !== undefined) throw spawnConfigurationError(agentId, spec.command, failure);
        throw new Error(await this.exitMessage(exit, "before its session was ready"));
      }),
    ]);
  }

  /**
   * Adopts a spawned child: marks the conversation dead on a spawn failure or an exit, keeps the stderr tail, logs
   * pipe errors. Returns the exit (also kept as `this.exited`).
   */
  private watch(child: AgentProcess): Promise<AgentExit> {
    const { spec } = this.options;
    this.child = child;
    void child.spawnFailed.then((failure) => {
      this.spawnFailure = `${spec.command}: ${failure.message}`;
      this.dead = true;
    });
    const exited = child.exited.then((exit) => {
      this.dead = true;
      return exit;
    });
    this.exited = exited;
    this.closedIo = child.closed;
    child.stdin.on("error", (error) => this.log.debug({ error: error.message }, "leader stdin error"));
    child.stdout.on("error", (error) => this.log.debug({ error: error.message }, "leader stdout error"));
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (chunk: string) => {
      this.stderrTail = (this.stderrTail + chunk).slice(-4 * STDERR_TAIL_CHARS);
    });
    this.log.debug({ pid: child.pid, command: spec.command, args: spec.args }, "leader agent started");
    return exited;
  }

  /**
   * The ACP client connection over the child's stdio: session updates feed the running turn's text; every
   * permission request is refused (the leader plans; it is never allowed to act through this client).
   */
  private connect(child: AgentProcess): ClientConnection {
    const app = client({ name: this.options.clientName })
      .onNotification(methods.client.session.update, ({ params }) => this.onUpdate(params))
      .onRequest(methods.client.session.requestPermission, ({ params }) => {
        this.log.info(
          { tool: params.toolCall.title ?? params.toolCall.toolCallId },
          "refused a leader permission request",
        );
        return choosePermission(params.options, "deny");
      });
    return app.connect(
      ndJsonStream(
        Writable.toWeb(child.stdin) as WritableStream<Uint8Array>,
        Readable.toWeb(child.stdout) as ReadableStream<Uint8Array>,
      ),
    );
  }

  /**
   * Runs `openSession`; a refusal becomes a configuration error that says what to fix (DESIGN.md "Processes"), a
   * closed connection of a command that could not start becomes a spawn configuration error, anything else rethrows.
   */
  private async handshake(connection: ClientConnection, child: AgentProcess): Promise<void> {
    const { spec, agentId } = this.options;
    const offered: { authMethods: { id: string; name?: string }[] } = { authMethods: [] };
    try {
      await this.openSession(connection, offered);
    } catch (error) {
      const configuration = handshakeConfigurationError(agentId, this.stage, error, offered.authMethods);
      if (configuration !== undefined) throw configuration;
      // A connection that closed may be a command that could not start: the watchdog says so on its own channel,
      // which may be read after the agent's stdout ended. Wait (briefly) for the exit to know.
      await Promise.race([child.exited, delay(this.options.graceMs)]);
      const failure = child.spawnFailure;
      if (failure !== undefined) throw spawnConfigurationError(agentId, spec.command, failure);
      throw error;
    }
  }

  /**
   * initialize (the protocol version must be ours), authenticate when the spec names a method the agent offers (one
   * it does not offer is a configuration error), then session/new in the conversation's cwd; advances `stage` and
   * records the offered auth methods in `offered` as it goes.
   */
  private async openSession(
    connection: ClientConnection,
    offered: { authMethods: { id: string; name?: string }[] },
  ): Promise<void> {
    const { spec, agentId } = this.options;
    const init = await connection.agent.request(methods.agent.initialize, {
      protocolVersion: PROTOCOL_VERSION,
      clientCapabilities: {},
      clientInfo: { name: this.options.clientName, version: this.options.clientVersion },
    });
    if (init.protocolVersion !== PROTOCOL_VERSION) {
      throw protocolConfigurationError(agentId, init.protocolVersion, PROTOCOL_VERSION);
    }
    const authMethods = (init.authMethods ?? []).map((m) => ({ id: m.id, name: m.name }));
    offered.authMethods = authMethods;
    if (spec.auth !== undefined && authMethods.length > 0) {
      if (!authMethods.some((m) => m.id === spec.auth?.methodId)) {
        throw unknownAuthMethodError(agentId, spec.auth.methodId, authMethods);
      }
      this.stage = "authenticate";
      await connection.agent.request(methods.agent.authenticate, { methodId: spec.auth.methodId });
    }
    this.stage = "session/new";
    const caps = init.agentCapabilities;
    this.promptCaps = caps?.promptCapabilities ?? undefined;
    const session = await connection.agent.request(methods.agent.session.new, {
      cwd: this.options.cwd,
      mcpServers: this.mcpServers(caps?.mcpCapabilities),
      ...sessionDirectories(this.options.additionalDirectories, caps?.sessionCapabilities, this.log),
    });
    this.sessionId = session.sessionId;
  }

  /**
   * The MCP servers of this conversation's `session/new` (issue 28, mcp-servers.ts): the product's, merged with the
   * agent's own, in the transports it advertises; each one left out is logged with its reason.
   */
  private mcpServers(capabilities: { http?: boolean | null; sse?: boolean | null } | null | undefined): never[] {
    const mcp = this.options.mcp ?? { servers: [], lost: [] };
    const { servers, skipped } = mcpServersFor(mcp.servers, this.options.spec.mcpServers, capabilities);
    for (const line of skippedMcpLines(mcp.lost, skipped)) this.log.warn({}, line);
    return servers as never[];
  }

  /**
   * One turn: starts the conversation on first use, sends the prompt, and settles on the first of: the answer, an
   * error, the process's exit, the abort of `signal`, or the start/turn timeout. Only an answer resolves; every other
   * outcome rejects (`turnFailure`). Clears its timer, listener and text handler whatever happens.
   */
  private async runTurn(
    text: string,
    meta: TurnMeta,
    signal: AbortSignal,
    onText: (t: string) => void,
    attachments: readonly AttachmentRef[],
  ): Promise<TurnAnswer> {
    if (signal.aborted) throw abortReason(signal);
    if (this.closing !== undefined || this.dead) throw this.closedError();
    if (this.ready === undefined) {
      this.ready = this.start();
      // A conversation whose process or handshake failed is never used again.
      this.ready.catch(() => {
        this.dead = true;
      });
    }
    let answerText = "";
    this.onChunk = (chunk) => {
      answerText += chunk;
      try {
        onText(chunk);
      } catch (error) {
        this.log.warn({ err: error }, "leader text handler threw; ignored");
      }
    };
    const turn = this.sendTurn(text, meta, signal, attachments);
    try {
      const settled = await turn.outcome;
      if (settled.kind === "answered") return { text: answerText, stopReason: settled.stopReason };
      throw await this.turnFailure(settled, turn, signal);
    } finally {
      if (turn.progress.timer !== undefined) clearTimeout(turn.progress.timer);
      signal.removeEventListener("abort", turn.onAbort);
      this.onChunk = undefined;
      turn.work.catch(() => undefined);
    }
  }

  /**
   * Starts one turn's prompt after the handshake and arms its timeouts: the start and handshake have their own limit
   * (`startTimeoutMs`); the answer's limit (`turnTimeoutMs`) runs from the prompt on. `outcome` settles once.
   */
  private sendTurn(
    text: string,
    meta: TurnMeta,
    signal: AbortSignal,
    attachments: readonly AttachmentRef[],
  ): TurnInFlight {
    let settle: (settled: Settled) => void = () => undefined;
    const outcome = new Promise<Settled>((resolve) => {
      settle = resolve;
    });
    const progress: TurnInFlight["progress"] = { prompted: false, timer: undefined };
    const arm = (ms: number): void => {
      if (progress.timer !== undefined) clearTimeout(progress.timer);
      progress.timer = setTimeout(() => settle({ kind: "timeout" }), ms);
    };
    arm(this.options.startTimeoutMs);
    const work = (async () => {
      await this.ready;
      const read = this.options.readAttachment;
      const extra = await attachmentBlocks(attachments, this.promptCaps, read, this.log, { notes: false });
      if (signal.aborted) throw abortReason(signal);
      const connection = this.connection as ClientConnection;
      progress.prompted = true;
      arm(this.options.turnTimeoutMs);
      return connection.agent.request(methods.agent.session.prompt, {
        sessionId: this.sessionId as string,
        prompt: [{ type: "text", text }, ...extra],
        _meta: { [META_KEY]: { leaderTurn: { ...meta, promptVersion: LEADER_PROMPT_VERSION } } },
      });
    })();
    work.then(
      (response) => settle({ kind: "answered", stopReason: response.stopReason }),
      (error: unknown) => settle({ kind: "error", error }),
    );
    void this.exited?.then((exit) => settle({ kind: "exited", exit }));
    const onAbort = () => settle({ kind: "aborted" });
    signal.addEventListener("abort", onAbort, { once: true });
    return { outcome, work, onAbort, progress };
  }

  /**
   * What a turn that was not answered rejects with. An abort cancels the turn and rethrows the signal's reason; a
   * timeout cancels, kills the process and names the limit (and the start stage that did not finish).
   */
  private async turnFailure(
    settled: Exclude<Settled, { kind: "answered" }>,
    turn: TurnInFlight,
    signal: AbortSignal,
  ): Promise<unknown> {
    switch (settled.kind) {
      case "aborted":
        await this.cancelTurn(turn.progress.prompted, turn.work);
        return abortReason(signal);
      case "timeout":
        await this.cancelTurn(turn.progress.prompted, turn.work);
        await this.kill();
        return new Error(
          turn.progress.prompted
            ? `the leader agent "${this.options.agentId}" did not answer within ${this.options.turnTimeoutMs} ms`
            : `the leader agent "${this.options.agentId}" did not start within ${this.options.startTimeoutMs} ms ` +
              `(stage ${this.stage} did not finish)`,
        );
      case "exited":
        return this.exitFailure(settled.exit, turn.progress.prompted);
      case "error":
        return this.errorFailure(settled.error, signal);
      default:
        throw new Error(`unexpected turn outcome ${JSON.stringify(settled satisfies never)}`);
    }
  }

  /** The process exited during the turn: a closed conversation says so; a configuration error from the start wins. */
  private async exitFailure(exit: AgentExit, prompted: boolean): Promise<unknown> {
    if (this.closing !== undefined) return this.closedError();
    // An agent that exits while starting may have told why (a configuration error): that wins.
    const startError = prompted
      ? undefined
      : await this.ready?.then(
          () => undefined,
          (e: unknown) => e,
        );
    if (startError instanceof AgentConfigurationError) return startError;
    return new Error(await this.exitMessage(exit, prompted ? "during its turn" : "before its session was ready"));
  }

  /**
   * The prompt (or the start) failed: an abort or a close wins, a configuration error and an agent's error response
   * are passed on, and a failed connection waits up to `graceMs` for the exit to say how the process died.
   */
  private async errorFailure(error: unknown, signal: AbortSignal): Promise<unknown> {
    if (signal.aborted) return abortReason(signal);
    if (this.closing !== undefined) return this.closedError();
    if (error instanceof AgentConfigurationError) return error;
    if (error instanceof RequestError) {
      return new Error(`the leader agent "${this.options.agentId}" answered with ${describeError(error)}`);
    }
    // The connection failed: most likely the process died. Give it a moment to say how.
    const exit = this.exited
      ? await Promise.race([this.exited, delay(this.options.graceMs).then(() => undefined)])
      : undefined;
    if (exit !== undefined) return new Error(await this.exitMessage(exit, "during its turn"));
    return new Error(`the leader agent "${this.options.agentId}" failed: ${describeError(error)}`);
  }

  /** The error of a turn on a closed conversation. */
  private closedError(): Error {
    return new Error(`the leader agent "${this.options.agentId}" was closed`);
  }

  /** session/cancel, then up to `graceMs` for the prompt to answer; an agent that does not answer is killed. */
  private async cancelTurn(prompted: boolean, work: Promise<unknown>): Promise<void> {
    const connection = this.connection;
    if (!prompted || connection === undefined || this.sessionId === undefined || this.dead) {
      await this.kill();
      return;
    }
    this.log.info({}, "cancelling the leader turn");
    await connection.agent
      .notify(methods.agent.session.cancel, { sessionId: this.sessionId })
      .catch((error: unknown) => this.log.debug({ err: error }, "session/cancel could not be sent"));
    const answered = await Promise.race([
      work.then(
        () => true,
        () => true,
      ),
      delay(this.options.graceMs).then(() => false),
    ]);
    if (!answered) await this.kill();
  }

  private onUpdate(notification: SessionNotification): void {
    if (this.sessionId !== undefined && notification.sessionId !== this.sessionId) return;
    const update = notification.update;
    if (update.sessionUpdate === "agent_message_chunk") {
      if (update.content.type === "text" && update.content.text !== "") this.onChunk?.(update.content.text);
    } else if (update.sessionUpdate === "tool_call") {
      this.log.debug({ tool: update.title }, "leader tool call");
    }
  }

  private async exitMessage(exit: Exit, when: string): Promise<string> {
    if (this.closedIo !== undefined) await Promise.race([this.closedIo, delay(Math.min(500, this.options.graceMs))]);
    const how =
      this.child?.spawnFailure !== undefined || this.spawnFailure !== undefined
        ? `could not be started (${this.spawnFailure ?? `${this.options.spec.command}: ${this.child?.spawnFailure?.message ?? ""}`})`
        : exit.signal !== null
          ? `was killed by ${exit.signal}`
          : exit.code === null
            ? `could not be started (${this.spawnFailure ?? this.options.spec.command})`
            : exit.code === 0
              ? "exited (code 0)"
              : `crashed (exit code ${exit.code})`;
    const tail = this.stderrTail.trim().slice(-STDERR_TAIL_CHARS);
    return `the leader agent "${this.options.agentId}" ${how} ${when}${tail === "" ? "" : ` — stderr tail: ${tail}`}`;
  }

  /** Marks the conversation dead and SIGKILLs its process group. Resolves once it (and all it started) is gone. */
  private async kill(): Promise<void> {
    this.dead = true;
    const child = this.child;
    if (child === undefined || child.gone) return;
    await child.kill();
  }

  /**
   * Ends the conversation: closes stdin and signals the agent's group at once (SIGTERM, then SIGKILL after
   * `graceMs`): a leader between turns owes nothing. A running turn rejects ("was closed"). Resolves once the process
   * and everything it started are gone. Idempotent.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.dead = true;
      const child = this.child;
      if (child !== undefined) await child.stop(this.options.graceMs);
      this.connection?.close();
    })();
    return this.closing;
  }
}
