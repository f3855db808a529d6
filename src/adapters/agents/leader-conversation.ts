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
import type { ClientConnection, SessionNotification, StopReason } from "@agentclientprotocol/sdk";
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

  /** Runs one prompt turn after the previous ones; resolves with all agent text of the turn. */
  turn(text: string, meta: TurnMeta, signal: AbortSignal, onText: (text: string) => void): Promise<TurnAnswer> {
    this.busy += 1;
    this.lastUsed = Date.now();
    const run = this.queue.then(() => this.runTurn(text, meta, signal, onText));
    this.queue = run.catch(() => undefined);
    return run.finally(() => {
      this.busy -= 1;
      this.lastUsed = Date.now();
    });
  }

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
    this.child = child;
    const spawnError = child.spawnFailed;
    void spawnError.then((failure) => {
      this.spawnFailure = `${spec.command}: ${failure.message}`;
      this.dead = true;
    });
    this.exited = child.exited.then((exit) => {
      this.dead = true;
      return exit;
    });
    this.closedIo = child.closed;
    child.stdin.on("error", (error) => this.log.debug({ error: error.message }, "leader stdin error"));
    child.stdout.on("error", (error) => this.log.debug({ error: error.message }, "leader stdout error"));
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (chunk: string) => {
      this.stderrTail = (this.stderrTail + chunk).slice(-4 * STDERR_TAIL_CHARS);
    });
    this.log.debug({ pid: child.pid, command: spec.command, args: spec.args }, "leader agent started");
    const app = client({ name: this.options.clientName })
      .onNotification(methods.client.session.update, ({ params }) => this.onUpdate(params))
      .onRequest(methods.client.session.requestPermission, ({ params }) => {
        // The leader plans; it is never allowed to act through this client.
        this.log.info(
          { tool: params.toolCall.title ?? params.toolCall.toolCallId },
          "refused a leader permission request",
        );
        return choosePermission(params.options, "deny");
      });
    const connection = app.connect(
      ndJsonStream(
        Writable.toWeb(child.stdin) as WritableStream<Uint8Array>,
        Readable.toWeb(child.stdout) as ReadableStream<Uint8Array>,
      ),
    );
    this.connection = connection;
    this.stage = "initialize";
    let authMethods: { id: string; name?: string }[] = [];
    const handshake = (async () => {
      const init = await connection.agent.request(methods.agent.initialize, {
        protocolVersion: PROTOCOL_VERSION,
        clientCapabilities: {},
        clientInfo: { name: this.options.clientName, version: this.options.clientVersion },
      });
      if (init.protocolVersion !== PROTOCOL_VERSION) {
        throw protocolConfigurationError(agentId, init.protocolVersion, PROTOCOL_VERSION);
      }
      authMethods = (init.authMethods ?? []).map((m) => ({ id: m.id, name: m.name }));
      if (spec.auth !== undefined && authMethods.length > 0) {
        if (!authMethods.some((m) => m.id === spec.auth?.methodId)) {
          throw unknownAuthMethodError(agentId, spec.auth.methodId, authMethods);
        }
        this.stage = "authenticate";
        await connection.agent.request(methods.agent.authenticate, { methodId: spec.auth.methodId });
      }
      this.stage = "session/new";
      const session = await connection.agent.request(methods.agent.session.new, {
        cwd: this.options.cwd,
        mcpServers: this.mcpServers(init.agentCapabilities?.mcpCapabilities),
      });
      this.sessionId = session.sessionId;
    })().catch(async (error: unknown) => {
      // A refused handshake is a configuration error: say what to fix (DESIGN.md "Processes").
      const configuration = handshakeConfigurationError(agentId, this.stage, error, authMethods);
      if (configuration !== undefined) throw configuration;
      // A connection that closed may be a command that could not start: the watchdog says so on its own channel,
      // which may be read after the agent's stdout ended. Wait (briefly) for the exit to know.
      await Promise.race([child.exited, delay(this.options.graceMs)]);
      const failure = child.spawnFailure;
      if (failure !== undefined) throw spawnConfigurationError(agentId, spec.command, failure);
      throw error;
    });
    // Whichever comes first: the handshake, a spawn failure, or an exit.
    return Promise.race([
      handshake,
      spawnError.then((failure) => {
        throw spawnConfigurationError(agentId, spec.command, failure);
      }),
      this.exited.then(async (exit) => {
        const failure = child.spawnFailure;
        if (failure !== undefined) throw spawnConfigurationError(agentId, spec.command, failure);
        throw new Error(await this.exitMessage(exit, "before its session was ready"));
      }),
    ]);
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

  private async runTurn(
    text: string,
    meta: TurnMeta,
    signal: AbortSignal,
    onText: (t: string) => void,
  ): Promise<TurnAnswer> {
    if (signal.aborted) throw abortReason(signal);
    if (this.closing !== undefined || this.dead)
      throw new Error(`the leader agent "${this.options.agentId}" was closed`);
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
    type Settled =
      | { kind: "answered"; stopReason: StopReason }
      | { kind: "error"; error: unknown }
      | { kind: "exited"; exit: Exit }
      | { kind: "aborted" }
      | { kind: "timeout" };
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    let prompted = false;
    let settle: (settled: Settled) => void = () => undefined;
    const outcome = new Promise<Settled>((resolve) => {
      settle = resolve;
    });
    // The process start and handshake have their own limit; the answer's limit runs from the prompt on.
    const arm = (ms: number): void => {
      if (timer !== undefined) clearTimeout(timer);
      timer = setTimeout(() => settle({ kind: "timeout" }), ms);
    };
    arm(this.options.startTimeoutMs);
    const work = (async () => {
      await this.ready;
      if (signal.aborted) throw abortReason(signal);
      const connection = this.connection as ClientConnection;
      prompted = true;
      arm(this.options.turnTimeoutMs);
      return connection.agent.request(methods.agent.session.prompt, {
        sessionId: this.sessionId as string,
        prompt: [{ type: "text", text }],
        _meta: { [META_KEY]: { leaderTurn: { ...meta, promptVersion: LEADER_PROMPT_VERSION } } },
      });
    })();
    try {
      work.then(
        (response) => settle({ kind: "answered", stopReason: response.stopReason }),
        (error: unknown) => settle({ kind: "error", error }),
      );
      void this.exited?.then((exit) => settle({ kind: "exited", exit }));
      onAbort = () => settle({ kind: "aborted" });
      signal.addEventListener("abort", onAbort, { once: true });
      const settled = await outcome;
      switch (settled.kind) {
        case "answered":
          return { text: answerText, stopReason: settled.stopReason };
        case "aborted":
          await this.cancelTurn(prompted, work);
          throw abortReason(signal);
        case "timeout":
          await this.cancelTurn(prompted, work);
          await this.kill();
          throw new Error(
            prompted
              ? `the leader agent "${this.options.agentId}" did not answer within ${this.options.turnTimeoutMs} ms`
              : `the leader agent "${this.options.agentId}" did not start within ${this.options.startTimeoutMs} ms ` +
                `(stage ${this.stage} did not finish)`,
          );
        case "exited": {
          if (this.closing !== undefined) throw new Error(`the leader agent "${this.options.agentId}" was closed`);
          // An agent that exits while starting may have told why (a configuration error): that wins.
          const startError = prompted
            ? undefined
            : await this.ready?.then(
                () => undefined,
                (e: unknown) => e,
              );
          if (startError instanceof AgentConfigurationError) throw startError;
          throw new Error(
            await this.exitMessage(settled.exit, prompted ? "during its turn" : "before its session was ready"),
          );
        }
        case "error": {
          if (signal.aborted) throw abortReason(signal);
          if (this.closing !== undefined) throw new Error(`the leader agent "${this.options.agentId}" was closed`);
          if (settled.error instanceof AgentConfigurationError) throw settled.error;
          if (settled.error instanceof RequestError) {
            throw new Error(`the leader agent "${this.options.agentId}" answered with ${describeError(settled.error)}`);
          }
          // The connection failed: most likely the process died. Give it a moment to say how.
          const exit = this.exited
            ? await Promise.race([this.exited, delay(this.options.graceMs).then(() => undefined)])
            : undefined;
          if (exit !== undefined) throw new Error(await this.exitMessage(exit, "during its turn"));
          throw new Error(`the leader agent "${this.options.agentId}" failed: ${describeError(settled.error)}`);
        }
        default:
          throw new Error(`unexpected turn outcome ${JSON.stringify(settled satisfies never)}`);
      }
    } finally {
      if (timer !== undefined) clearTimeout(timer);
      if (onAbort !== undefined) signal.removeEventListener("abort", onAbort);
      this.onChunk = undefined;
      work.catch(() => undefined);
    }
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
