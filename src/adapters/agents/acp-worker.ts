/**
 * The ACP subprocess worker client (DESIGN.md, Agents): `AcpWorkerPool` implements the core's `WorkerPort` by starting
 * the assigned agent as a subprocess and speaking ACP v1 to it as its *client* (official SDK, `client({name})`).
 * This file also defines the task brief a worker receives (`formatTaskBrief`) and its `_meta` mirror.
 *
 * Owns: one child process per task attempt, its stdio, its ACP session, cancellation/timeout/kill escalation, the
 * mapping of ACP traffic onto `WorkerEvents`/`WorkerResult`, and the answers to what a worker asks of its client:
 * `session/request_permission` (forwarded to the IDE through the pool's forwarder, else the `permissions` policy) and
 * `fs/read_text_file` / `fs/write_text_file` (served inside the task's workspace only, see workspace-fs.ts).
 * It must never throw from `runTask` for an agent failure, never write to stdout, never advertise client capabilities
 * it does not serve (fs yes, terminal no), and never leave a child running after `shutdown()` or after the server
 * process exits.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { client, methods, ndJsonStream, PROTOCOL_VERSION, RequestError } from "@agentclientprotocol/sdk";
import { delay, killTree, trackChild } from "./child-processes.js";
import type {
  ClientContext,
  PermissionOption,
  PromptResponse,
  ReadTextFileRequest,
  ReadTextFileResponse,
  RequestPermissionRequest,
  RequestPermissionResponse,
  SessionNotification,
  WriteTextFileRequest,
  WriteTextFileResponse,
} from "@agentclientprotocol/sdk";
import type {
  DependencyOutput,
  Logger,
  WorkerEvents,
  WorkerPort,
  WorkerRequest,
  WorkerResult,
} from "../../core/ports.js";
import { permissionDecision } from "./registry.js";
import type { AgentRegistry, PermissionPolicy } from "./registry.js";
import { WorkspaceFs, WorkspaceFsError } from "./workspace-fs.js";

// ---------------------------------------------------------------------------------------------------------------
// The task brief

/** Key of our entry in ACP `_meta` objects (prompt requests, prompt responses). */
export const META_KEY = "acp-orchestrator";

/** At most this many characters of one dependency's output go into a brief; the rest is cut with a marker. */
export const MAX_DEPENDENCY_OUTPUT_CHARS = 20_000;
/** At most this many characters of all dependency outputs together; later dependencies are then omitted. */
export const MAX_TOTAL_DEPENDENCY_CHARS = 200_000;
/** Length of the dependency output excerpt carried in the prompt's `_meta`. */
const META_EXCERPT_CHARS = 500;
/** At most this many characters of agent text are kept as the task output (all of it is still streamed). */
export const MAX_OUTPUT_CHARS = 1_000_000;
/** Length of the stderr tail quoted in a failure. */
export const STDERR_TAIL_CHARS = 2_048;

/** The structured mirror of the brief, sent as `_meta["acp-orchestrator"]` of `session/prompt`. */
export interface TaskBriefMeta {
  taskId: string;
  title: string;
  productId: string;
  attempt: number;
  description: string;
  acceptance?: string;
  dependencies: { taskId: string; title: string; excerpt: string }[];
}

function truncate(text: string, max: number): string {
  if (text.length <= max) return text;
  return `${text.slice(0, max)}\n[… truncated: ${text.length - max} more characters]`;
}

/**
 * Builds the prompt of one task attempt: a markdown brief whose first line is `# Task <taskId>: <title>`, followed by
 * the context, `## Description`, `## Acceptance criteria` (when set) and one `### Output of dependency <taskId>:
 * <title>` section per dependency (each cut at `MAX_DEPENDENCY_OUTPUT_CHARS`, all together at
 * `MAX_TOTAL_DEPENDENCY_CHARS`). Also returns the `_meta` mirror. Pure.
 */
export function formatTaskBrief(request: Omit<WorkerRequest, "signal" | "instance">): {
  text: string;
  meta: TaskBriefMeta;
} {
  const { task, attempt } = request;
  const lines: string[] = [
    `# Task ${task.taskId}: ${task.title}`,
    "",
    `You are a worker on one task of a larger plan run by acp-orchestrator (product ${request.productId}, attempt ${attempt}` +
      `${attempt > 1 ? "; earlier attempts failed, so check the workspace for partial work" : ""}).`,
    `Work only inside the workspace ${request.cwd}. When you are done, reply with a short summary of what you did and where the results are.`,
    "",
    "## Description",
    "",
    task.description.trim() === "" ? "(no description)" : task.description,
  ];
  if (task.acceptance !== undefined && task.acceptance.trim() !== "") {
    lines.push("", "## Acceptance criteria", "", task.acceptance);
  }
  const deps: DependencyOutput[] = request.dependencyOutputs;
  if (deps.length > 0) {
    lines.push(
      "",
      "## Dependencies",
      "",
      `This task builds on ${deps.length} completed task(s); their outputs follow.`,
    );
    let budget = MAX_TOTAL_DEPENDENCY_CHARS;
    for (const dep of deps) {
      lines.push("", `### Output of dependency ${dep.taskId}: ${dep.title}`, "");
      if (budget <= 0) {
        lines.push("[output omitted: the brief's size limit was reached]");
        continue;
      }
      const cut = truncate(dep.output, Math.min(MAX_DEPENDENCY_OUTPUT_CHARS, budget));
      budget -= Math.min(dep.output.length, MAX_DEPENDENCY_OUTPUT_CHARS);
      lines.push(dep.output.trim() === "" ? "(no output)" : cut);
    }
  }
  const meta: TaskBriefMeta = {
    taskId: task.taskId,
    title: task.title,
    productId: request.productId,
    attempt,
    description: task.description,
    dependencies: deps.map((d) => ({
      taskId: d.taskId,
      title: d.title,
      excerpt: truncate(d.output, META_EXCERPT_CHARS),
    })),
  };
  if (task.acceptance !== undefined) meta.acceptance = task.acceptance;
  return { text: lines.join("\n"), meta };
}

/** Reads `{taskId, title}` from a brief's header line (`# Task <taskId>: <title>`), or `undefined`. Pure. */
export function parseBriefHeader(text: string): { taskId: string; title: string } | undefined {
  const match = /^# Task (\S+): (.+)$/m.exec(text);
  if (match === null || match[1] === undefined || match[2] === undefined) return undefined;
  return { taskId: match[1], title: match[2].trim() };
}

// ---------------------------------------------------------------------------------------------------------------
// One task attempt

type StopKind = "cancel" | "timeout" | "shutdown";

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

type Settled =
  | { kind: "answered"; response: PromptResponse | undefined }
  | { kind: "error"; error: unknown }
  | { kind: "spawnError"; error: Error }
  | { kind: "exited"; exit: Exit }
  | { kind: "stopped"; stop: StopKind };

interface AttemptOptions {
  registry: AgentRegistry;
  logger: Logger;
  graceMs: number;
  taskTimeoutMs: number | undefined;
  permissions: PermissionPolicy;
  /** The current forwarder (read at request time, so it can be installed after the pool was built). */
  forwarder: () => PermissionForwarder | undefined;
  /** The current output gate (read before each read of a worker's stdout; see `AcpWorkerPool.setOutputGate`). */
  outputGate: () => OutputGate | undefined;
  clientName: string;
  clientVersion: string;
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

/** Token usage carried by a prompt response: `_meta.usage`, `_meta["acp-orchestrator"].usage`, or the unstable `usage`. */
function usageOf(response: PromptResponse): { inputTokens: number; outputTokens: number } | undefined {
  const meta = isRecord(response._meta) ? response._meta : {};
  const ours = isRecord(meta[META_KEY]) ? meta[META_KEY] : {};
  const candidates = [ours["usage"], meta["usage"], (response as Record<string, unknown>)["usage"]];
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
 * Picks the answer to a worker's permission request under the configured policy, for a request of tool kind `kind`
 * (absent = `other`; only matters for per-kind rules). `allow` picks the first allow option (once before always),
 * else a reject one; `deny` picks the first reject option. No suitable option: `cancelled`. Pure.
 */
export function choosePermission(
  options: PermissionOption[],
  policy: PermissionPolicy,
  kind?: string | null,
): RequestPermissionResponse {
  const allow = options.find((o) => o.kind === "allow_once") ?? options.find((o) => o.kind === "allow_always");
  const reject = options.find((o) => o.kind === "reject_once" || o.kind === "reject_always");
  const chosen = permissionDecision(policy, kind) === "allow" ? (allow ?? reject) : reject;
  if (chosen === undefined) return { outcome: { outcome: "cancelled" } };
  return { outcome: { outcome: "selected", optionId: chosen.optionId } };
}

/** A worker's `session/request_permission` as handed to the pool's forwarder (see `PermissionForwarder`). */
export interface WorkerPermissionRequest {
  productId: string;
  taskId: string;
  taskTitle: string;
  attempt: number;
  agentId: string;
  /** The request exactly as the worker sent it (its own `sessionId`, `toolCall`, `options`). */
  params: RequestPermissionRequest;
  /** Aborted when the attempt stops (cancel, pause, timeout, shutdown): a pending question must then be withdrawn. */
  signal: AbortSignal;
}

/**
 * Forwards a worker's permission request to whoever can answer it for the product (the IDE of the product's ACP
 * session). Resolves `undefined` when nobody can (then the `permissions` policy decides). A rejection means someone
 * was asked and failed to answer: the worker is then denied, whatever the policy says.
 */
export type PermissionForwarder = (request: WorkerPermissionRequest) => Promise<RequestPermissionResponse | undefined>;

/** Resolves when the consumer of worker output can take more (see `AcpWorkerPool.setOutputGate`). Never rejects. */
export type OutputGate = () => Promise<void>;

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

class TaskAttempt {
  private child: ChildProcess | undefined;
  private exited: Promise<Exit> | undefined;
  private closed: Promise<void> | undefined;
  private spawnError: Promise<Error> | undefined;
  private stderrTail = "";
  private stderrLine = "";
  private output = "";
  private sessionId: string | undefined;
  private ctx: ClientContext | undefined;
  private stopKind: StopKind | undefined;
  /** Set when the agent did not answer a cancelled prompt within the grace period: kill without further courtesy. */
  private unresponsive = false;
  private resolveStop: ((kind: StopKind) => void) | undefined;
  private readonly stopped: Promise<StopKind>;
  private reportedInput = 0;
  private reportedOutput = 0;
  private lastContextUsed = 0;
  private readonly log: Logger;
  /** Aborted on stop: withdraws permission questions forwarded to the IDE. */
  private readonly stopController = new AbortController();
  private workspace: WorkspaceFs | undefined;

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

  /** Asks the attempt to stop (first reason wins). Safe to call at any time, any number of times. */
  stop(kind: StopKind): void {
    if (this.stopKind !== undefined) return;
    this.stopKind = kind;
    this.resolveStop?.(kind);
    this.stopController.abort();
  }

  /** Runs the attempt to the end. Resolves only after the child process (if any) has exited. Never rejects. */
  async run(): Promise<WorkerResult> {
    const onAbort = (): void => this.stop("cancel");
    this.request.signal.addEventListener("abort", onAbort, { once: true });
    let timer: NodeJS.Timeout | undefined;
    if (this.options.taskTimeoutMs !== undefined) {
      timer = setTimeout(() => this.stop("timeout"), this.options.taskTimeoutMs);
    }
    let draft: Draft;
    try {
      draft = await this.runInner();
    } catch (error) {
      this.log.error({ err: error }, "worker attempt failed unexpectedly");
      draft = this.failed(`internal error while running the agent: ${describeError(error)}`);
    } finally {
      if (timer !== undefined) clearTimeout(timer);
      this.request.signal.removeEventListener("abort", onAbort);
    }
    await this.terminate();
    if (draft.outcome !== "failedWithTail") return draft;
    // The child is gone now, so its stderr is complete: quote the end of it.
    await this.settleStdio();
    const tail = this.stderrTail.trim().slice(-STDERR_TAIL_CHARS);
    return { outcome: "failed", error: `${draft.what} — stderr tail: ${tail === "" ? "(empty)" : tail}` };
  }

  private async runInner(): Promise<Draft> {
    const agentId = this.request.instance.agentId;
    let spec;
    try {
      spec = this.options.registry.launchSpec(agentId);
    } catch (error) {
      return { outcome: "failed", error: describeError(error) };
    }
    let child: ChildProcess;
    try {
      child = spawn(spec.command, spec.args, {
        cwd: spec.cwd ?? this.request.cwd,
        env: { ...process.env, ...spec.env },
        stdio: ["pipe", "pipe", "pipe"],
        detached: true, // own process group: killTree stops a wrapper and the agent it spawned together
        windowsHide: true,
      });
    } catch (error) {
      return this.failed(`could not start agent "${agentId}" (${spec.command}): ${describeError(error)}`);
    }
    this.child = child;
    trackChild(child);
    const spawnError = new Promise<Error>((resolve) => child.once("error", resolve));
    this.spawnError = spawnError;
    this.exited = new Promise<Exit>((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
    this.closed = new Promise<void>((resolve) => {
      child.once("close", () => resolve());
      child.once("error", () => {
        if (child.pid === undefined) resolve();
      });
    });
    child.stdin?.on("error", (error) => this.log.debug({ error: error.message }, "agent stdin error"));
    child.stdout?.on("error", (error) => this.log.debug({ error: error.message }, "agent stdout error"));
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (chunk: string) => this.onStderr(chunk));
    child.stderr?.on("end", () => this.flushStderrLine());
    this.log.debug({ pid: child.pid, command: spec.command, args: spec.args }, "agent started");

    const conversation = this.converse(child);
    const settled: Settled = await Promise.race([
      conversation.then(
        (response): Settled => ({ kind: "answered", response }),
        (error: unknown): Settled => ({ kind: "error", error }),
      ),
      spawnError.then((error): Settled => ({ kind: "spawnError", error })),
      this.exited.then((exit): Settled => ({ kind: "exited", exit })),
      this.stopped.then((stop): Settled => ({ kind: "stopped", stop })),
    ]);

    switch (settled.kind) {
      case "stopped":
        return this.stopAndSettle(settled.stop, conversation);
      case "spawnError":
        return this.failed(`could not start agent "${agentId}" (${spec.command}): ${settled.error.message}`);
      case "exited":
        return this.failed(`agent "${agentId}" ${this.describeExit(settled.exit)} before the turn ended`);
      case "error":
        return this.conversationFailed(settled.error);
      case "answered":
        if (this.stopKind !== undefined) return this.stopResult(this.stopKind);
        return this.answered(settled.response);
    }
  }

  /** initialize → session/new → session/prompt over the child's stdio. Resolves `undefined` if stopped early. */
  private converse(child: ChildProcess): Promise<PromptResponse | undefined> {
    if (child.stdin === null || child.stdout === null) return Promise.reject(new Error("agent stdio is not piped"));
    const app = client({ name: this.options.clientName })
      .onNotification(methods.client.session.update, ({ params }) => this.onUpdate(params))
      .onRequest(methods.client.session.requestPermission, ({ params }) => this.onPermission(params))
      .onRequest(methods.client.fs.readTextFile, ({ params }) => this.onReadTextFile(params))
      .onRequest(methods.client.fs.writeTextFile, ({ params }) => this.onWriteTextFile(params));
    const stream = ndJsonStream(
      Writable.toWeb(child.stdin) as WritableStream<Uint8Array>,
      gatedReadable(child.stdout, this.options.outputGate),
    );
    return app.connectWith(stream, async (ctx) => {
      this.ctx = ctx;
      const init = await ctx.request(methods.agent.initialize, {
        protocolVersion: PROTOCOL_VERSION,
        // Only what is really served: fs inside the task's workspace; no terminal.
        clientCapabilities: { fs: { readTextFile: true, writeTextFile: true } },
        clientInfo: { name: this.options.clientName, version: this.options.clientVersion },
      });
      if (init.protocolVersion !== PROTOCOL_VERSION) {
        throw new Error(`agent speaks ACP protocol version ${init.protocolVersion}, not ${PROTOCOL_VERSION}`);
      }
      if (this.stopKind !== undefined) return undefined;
      const session = await ctx.request(methods.agent.session.new, { cwd: this.request.cwd, mcpServers: [] });
      this.sessionId = session.sessionId;
      if (this.stopKind !== undefined) return undefined;
      const brief = formatTaskBrief(this.request);
      this.log.debug({ sessionId: session.sessionId, briefChars: brief.text.length }, "prompting agent");
      return ctx.request(methods.agent.session.prompt, {
        sessionId: session.sessionId,
        prompt: [{ type: "text", text: brief.text }],
        _meta: { [META_KEY]: brief.meta },
      });
    });
  }

  private onUpdate(notification: SessionNotification): void {
    if (this.sessionId !== undefined && notification.sessionId !== this.sessionId) return;
    const update = notification.update;
    try {
      switch (update.sessionUpdate) {
        case "agent_message_chunk":
          if (update.content.type === "text" && update.content.text !== "") {
            if (this.output.length < MAX_OUTPUT_CHARS) {
              this.output += update.content.text.slice(0, MAX_OUTPUT_CHARS - this.output.length);
            }
            this.events.onText(update.content.text);
          }
          break;
        case "tool_call":
          this.events.onActivity(update.title.trim() !== "" ? update.title : (update.kind ?? "other"));
          break;
        case "usage_update": {
          // `used` is the context window in use; its growth is the best lower bound of tokens consumed so far.
          const used = nonNegativeInt(update.used);
          if (used !== undefined && used > this.lastContextUsed) {
            const delta = used - this.lastContextUsed;
            this.lastContextUsed = used;
            this.reportUsage(delta, 0);
          }
          break;
        }
        default:
          break;
      }
    } catch (error) {
      this.log.warn({ err: error, update: update.sessionUpdate }, "worker event handler threw; ignored");
    }
  }

  /** Reports a usage increment (never negative) and keeps the running totals for reconciliation. */
  private reportUsage(inputTokens: number, outputTokens: number): void {
    if (inputTokens <= 0 && outputTokens <= 0) return;
    this.reportedInput += inputTokens;
    this.reportedOutput += outputTokens;
    this.events.onUsage({ inputTokens, outputTokens });
  }

  /**
   * A worker's `session/request_permission`: forwarded to the IDE when the pool's forwarder can reach one for this
   * product; otherwise (or when it says nobody can answer) the `permissions` policy decides by tool kind. An IDE
   * answer naming an option the worker did not offer, or an IDE that fails to answer, gets the worker a reject option.
   * A stopped attempt answers `cancelled`.
   */
  private async onPermission(params: RequestPermissionRequest): Promise<RequestPermissionResponse> {
    if (this.stopKind !== undefined) return { outcome: { outcome: "cancelled" } };
    const tool = params.toolCall.title ?? params.toolCall.toolCallId;
    const forwarder = this.options.forwarder();
    if (forwarder !== undefined) {
      let forwarded: RequestPermissionResponse | undefined;
      try {
        forwarded = await forwarder({
          productId: this.request.productId,
          taskId: this.request.task.taskId,
          taskTitle: this.request.task.title,
          attempt: this.request.attempt,
          agentId: this.request.instance.agentId,
          params,
          signal: this.stopController.signal,
        });
      } catch (error) {
        if (this.stopKind !== undefined) return { outcome: { outcome: "cancelled" } };
        this.log.warn({ err: error, tool }, "the IDE did not answer a worker permission request; denied");
        return choosePermission(params.options, "deny");
      }
      if (this.stopKind !== undefined) return { outcome: { outcome: "cancelled" } };
      if (forwarded !== undefined) {
        const outcome = forwarded.outcome;
        if (outcome.outcome === "cancelled") return { outcome: { outcome: "cancelled" } };
        if (params.options.some((o) => o.optionId === outcome.optionId)) {
          this.log.info({ tool, answer: outcome.optionId }, "worker permission request answered by the IDE");
          return { outcome: { outcome: "selected", optionId: outcome.optionId } };
        }
        this.log.warn({ tool, answer: outcome.optionId }, "the IDE chose an option the worker did not offer; denied");
        return choosePermission(params.options, "deny");
      }
    }
    const answer = choosePermission(params.options, this.options.permissions, params.toolCall.kind);
    this.log.info(
      { tool, kind: params.toolCall.kind ?? "other", policy: this.options.permissions, answer: answer.outcome },
      "answered worker permission request by policy",
    );
    return answer;
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
    if (usage !== undefined) {
      // The response carries the turn's totals: report only what the streamed updates did not already count.
      this.safely(() =>
        this.reportUsage(
          Math.max(0, usage.inputTokens - this.reportedInput),
          Math.max(0, usage.outputTokens - this.reportedOutput),
        ),
      );
    }
    switch (response.stopReason) {
      case "end_turn": {
        const question = questionOf(response);
        if (question !== undefined) return { outcome: "waiting", question };
        return { outcome: "completed", output: this.output };
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

  private async conversationFailed(error: unknown): Promise<Draft> {
    if (this.stopKind !== undefined) return this.stopResult(this.stopKind);
    const agentId = this.request.instance.agentId;
    if (error instanceof RequestError) {
      return this.failed(`agent "${agentId}" answered with ${describeError(error)}`);
    }
    // The connection closed: most likely the process died or never started. Give it a moment to say which.
    const spawnFailure = this.spawnError?.then((e) => ({ spawnError: e }));
    const exit = await Promise.race([this.exited, spawnFailure, delay(this.options.graceMs).then(() => undefined)]);
    if (exit !== undefined && "spawnError" in exit) {
      return this.failed(`could not start agent "${agentId}": ${exit.spawnError.message}`);
    }
    if (exit !== undefined) {
      return this.failed(`agent "${agentId}" ${this.describeExit(exit)} before the turn ended`);
    }
    return this.failed(`agent "${agentId}" connection failed: ${describeError(error)}`);
  }

  /** Cancellation/timeout/shutdown: session/cancel, then wait up to `graceMs` for the prompt to answer. */
  private async stopAndSettle(kind: StopKind, conversation: Promise<PromptResponse | undefined>): Promise<Draft> {
    this.log.info({ reason: kind }, "stopping worker");
    if (this.ctx !== undefined && this.sessionId !== undefined) {
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
    if (kind === "timeout") return this.failed(`timed out after ${this.options.taskTimeoutMs ?? 0} ms`);
    return { outcome: "cancelled" };
  }

  /**
   * Ends the child and resolves once it has exited. A responsive agent gets its stdin closed and `graceMs` to exit on
   * its own; then (or at once, for an agent that ignored session/cancel) SIGTERM, `graceMs` more, then SIGKILL.
   */
  private async terminate(): Promise<void> {
    const child = this.child;
    const exited = this.exited;
    if (child === undefined || exited === undefined || child.pid === undefined) return;
    const gone = (): boolean => child.exitCode !== null || child.signalCode !== null;
    const waitExit = async (ms: number): Promise<boolean> => {
      if (gone()) return true;
      await Promise.race([exited, delay(ms)]);
      return gone();
    };
    try {
      child.stdin?.end();
    } catch {
      // stdin already closed
    }
    if (!this.unresponsive && (await waitExit(this.options.graceMs))) return;
    this.log.debug({ pid: child.pid }, "agent still running; sending SIGTERM");
    killTree(child, "SIGTERM");
    if (await waitExit(this.options.graceMs)) {
      killTree(child, "SIGKILL"); // the wrapper exited on SIGTERM: a descendant that ignored it must not linger
      return;
    }
    this.log.warn({ pid: child.pid }, "agent ignored SIGTERM; sending SIGKILL");
    killTree(child, "SIGKILL");
    await exited;
  }

  /** Waits (briefly) until the child's stdio is drained so the stderr tail is complete. */
  private async settleStdio(): Promise<void> {
    if (this.closed !== undefined) await Promise.race([this.closed, delay(Math.min(500, this.options.graceMs))]);
    this.flushStderrLine();
  }

  private describeExit(exit: Exit): string {
    if (exit.signal !== null) return `was killed by ${exit.signal}`;
    if (exit.code !== 0) return `crashed (exit code ${String(exit.code)})`;
    return "exited (code 0)";
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

  /** A failure whose message gets the stderr tail appended once the child has exited (see `run`). */
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

// ---------------------------------------------------------------------------------------------------------------
// The pool

/** Options of `AcpWorkerPool`. Durations are milliseconds. */
export interface AcpWorkerPoolOptions {
  registry: AgentRegistry;
  logger: Logger;
  /** How long to wait for a cancelled prompt to answer, and then for the process to exit after SIGTERM. Default 2000. */
  graceMs?: number;
  /** Wall-time limit of one task attempt; on expiry the attempt is stopped and fails "timed out". Default: none. */
  taskTimeoutMs?: number;
  /**
   * Answer to worker `session/request_permission` when the forwarder cannot reach an IDE: `deny` (default) picks the
   * first reject option, `allow` the first allow one, per-kind rules decide by the request's tool kind.
   */
  permissions?: PermissionPolicy;
  /** Forwards worker permission requests up (the server wires the ACP session adapter). Also `setPermissionForwarder`. */
  forwardPermission?: PermissionForwarder;
  /** Name this client gives itself in `initialize` (`clientInfo.name`). Default `acp-orchestrator`. */
  clientName?: string;
  /** Version this client gives in `initialize` (`clientInfo.version`); the composition root passes the package's. Default `dev`. */
  clientVersion?: string;
}

/**
 * Runs task attempts on ACP agents started as subprocesses (DESIGN.md, Agents; ports.ts `WorkerPort`).
 *
 * One process per task attempt: every attempt gets a fresh `initialize`/`session/new`, so no state leaks between
 * tasks or attempts, a crash costs only that attempt, and "kill the process" is always a correct way to stop. The
 * price is one process start per attempt, small next to an agent turn. `runTask` never throws for agent failures and
 * resolves only once the attempt's child has exited. Worker `fs/read_text_file` and `fs/write_text_file` are served
 * inside the task's workspace (`cwd`) only, and advertised as such; terminals are neither served nor advertised.
 * Permission requests go to the forwarder first (the IDE of the product's ACP session), else the `permissions` policy.
 */
export class AcpWorkerPool implements WorkerPort {
  private readonly running = new Map<TaskAttempt, Promise<WorkerResult>>();
  private shuttingDown = false;
  private readonly options: AttemptOptions;
  private forwarder: PermissionForwarder | undefined;
  private outputGate: OutputGate | undefined;

  constructor(options: AcpWorkerPoolOptions) {
    const graceMs = options.graceMs ?? 2_000;
    if (!Number.isFinite(graceMs) || graceMs < 0)
      throw new RangeError("graceMs must be a non-negative number of milliseconds");
    if (
      options.taskTimeoutMs !== undefined &&
      (!Number.isFinite(options.taskTimeoutMs) || options.taskTimeoutMs <= 0)
    ) {
      throw new RangeError("taskTimeoutMs must be a positive number of milliseconds");
    }
    this.forwarder = options.forwardPermission;
    this.options = {
      registry: options.registry,
      logger: options.logger,
      graceMs,
      taskTimeoutMs: options.taskTimeoutMs,
      permissions: options.permissions ?? "deny",
      forwarder: () => this.forwarder,
      outputGate: () => this.outputGate,
      clientName: options.clientName ?? "acp-orchestrator",
      clientVersion: options.clientVersion ?? "dev",
    };
  }

  /**
   * Installs (or, with `undefined`, removes) the permission forwarder. Takes effect for requests that arrive later,
   * including those of attempts already running.
   */
  setPermissionForwarder(forwarder: PermissionForwarder | undefined): void {
    this.forwarder = forwarder;
  }

  /**
   * Installs (or, with `undefined`, removes) the output gate: before each read of a worker's stdout the pool awaits
   * it, so a client that reads the server's notifications slowly holds the workers back (their stdout pipe fills and
   * their writes wait) instead of growing this process's memory (issue 7, streaming). The server wires its
   * connection's `whenWritable`. Takes effect for reads that start later, including those of running attempts.
   */
  setOutputGate(gate: OutputGate | undefined): void {
    this.outputGate = gate;
  }

  /** Number of task attempts currently running (each has at most one live child process). */
  get runningCount(): number {
    return this.running.size;
  }

  /**
   * Runs one task attempt on the agent of `request.instance.agentId` (see the class contract). Results: `completed`
   * with all agent text on `end_turn`; `waiting` when the `end_turn` response carries `_meta["acp-orchestrator"].question`;
   * `cancelled` when `request.signal` aborts (or after `shutdown()`); `failed` with a reason and the stderr tail for
   * anything else, including "timed out after N ms". `events.onUsage` receives increments: their sum is the best
   * known usage of the attempt.
   */
  async runTask(request: WorkerRequest, events: WorkerEvents): Promise<WorkerResult> {
    if (this.shuttingDown || request.signal.aborted) return { outcome: "cancelled" };
    const attempt = new TaskAttempt(request, events, this.options);
    const result = attempt.run();
    this.running.set(attempt, result);
    try {
      return await result;
    } finally {
      this.running.delete(attempt);
    }
  }

  /**
   * Stops every running attempt (session/cancel, grace, SIGTERM, grace, SIGKILL) and resolves once every child has
   * exited. Later `runTask` calls answer `cancelled` without starting anything. Idempotent.
   */
  async shutdown(): Promise<void> {
    this.shuttingDown = true;
    const attempts = [...this.running.entries()];
    for (const [attempt] of attempts) attempt.stop("shutdown");
    await Promise.allSettled(attempts.map(([, result]) => result));
  }
}
