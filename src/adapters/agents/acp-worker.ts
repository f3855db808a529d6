/**
 * The ACP subprocess worker pool (DESIGN.md, Agents): `AcpWorkerPool` implements the core's `WorkerPort` by running
 * each task attempt on the assigned agent, started as a subprocess behind its watchdog, speaking ACP v1 to it as its
 * *client* (one attempt: worker-attempt.ts; the brief: task-brief.ts; permissions: worker-permissions.ts).
 *
 * Owns: the set of running attempts, their shared options (timeouts, grace, permission policy, forwarder, output
 * gate) and shutdown. It must never throw from `runTask` for an agent failure, never write to stdout, and never leave
 * an agent running after `shutdown()` or after the server process exits (guarantee 12).
 */
import type { Logger, WorkerEvents, WorkerPort, WorkerRequest, WorkerResult } from "../../core/ports.js";
import type { AgentRegistry, PermissionPolicy } from "./registry.js";
import { delay } from "./agent-process.js";
import { DEFAULT_OVERLOAD_POLICY, overloadDelayMs, overloadNote } from "./overload.js";
import type { OverloadPolicy } from "./overload.js";
import type { McpSecrets } from "./mcp-servers.js";
import type { ReadAttachment } from "../../core/product/agent-inputs.js";
import { TaskAttempt } from "./worker-attempt.js";
import type { AttemptOptions, OutputGate } from "./worker-attempt.js";
import type { PermissionForwarder } from "./worker-permissions.js";

export {
  formatTaskBrief,
  MAX_DEPENDENCY_OUTPUT_CHARS,
  MAX_OUTPUT_CHARS,
  MAX_TOTAL_DEPENDENCY_CHARS,
  META_KEY,
  parseBriefHeader,
  STDERR_TAIL_CHARS,
} from "./task-brief.js";
export type { TaskBriefMeta } from "./task-brief.js";
export { gatedReadable, usageOf } from "./worker-attempt.js";
export type { OutputGate } from "./worker-attempt.js";
export { choosePermission } from "./worker-permissions.js";
export type { PermissionForwarder, WorkerPermissionRequest } from "./worker-permissions.js";

/** Default wall-time limit of one task attempt's prompt turn: 30 minutes. */
export const DEFAULT_TASK_TIMEOUT_MS = 30 * 60_000;
/** Default wall-time limit of starting an agent (spawn, `initialize`, `authenticate`, `session/new`): 60 s. */
export const DEFAULT_START_TIMEOUT_MS = 60_000;

// ---------------------------------------------------------------------------------------------------------------
// The pool

/** Options of `AcpWorkerPool`. Durations are milliseconds. */
export interface AcpWorkerPoolOptions {
  registry: AgentRegistry;
  logger: Logger;
  /**
   * Cancellation only: how long a cancelled prompt may take to answer; also how long an agent may take to exit after
   * SIGTERM before SIGKILL. A normal end (the turn answered) signals the agent at once. Default 2000.
   */
  graceMs?: number;
  /** Wall-time limit of one attempt's prompt turn; on expiry the attempt is stopped and fails "timed out". Default 30 min. */
  taskTimeoutMs?: number;
  /**
   * Wall-time limit of starting the agent (spawn, `initialize`, `authenticate`, `session/new`); on expiry the attempt
   * fails naming the stage that did not finish. Default 60 s.
   */
  startTimeoutMs?: number;
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
  /** How an attempt whose provider is overloaded is retried (overload.ts; config `overload`). Default: its defaults. */
  overload?: Partial<OverloadPolicy>;
  /** Random numbers in [0, 1) for the backoff's jitter (tests pin it). Default `Math.random`. */
  random?: () => number;
  /** The secrets of products' MCP servers held by this process (issue 28, mcp-servers.ts). */
  mcpSecrets?: McpSecrets;
  /**
   * Reads the user's stored attachments for the prompts (issue 31, prompt-content.ts); absent: an attachment reaches
   * a worker as a `resource_link` or a text note only.
   */
  readAttachment?: ReadAttachment;
}

/**
 * Runs task attempts on ACP agents started as subprocesses (DESIGN.md, Agents; ports.ts `WorkerPort`).
 *
 * One process per task attempt: every attempt gets a fresh `initialize`/`session/new`, so no state leaks between
 * tasks or attempts, a crash costs only that attempt, and "kill the process" is always a correct way to stop. The
 * price is one process start per attempt, small next to an agent turn. `runTask` never throws for agent failures and
 * resolves only once the attempt's child has exited. Worker `fs/read_text_file` and `fs/write_text_file` are served
 * inside the task's workspace (`cwd`) and the product's additional directories only, and advertised as such; terminals are neither served nor advertised.
 * Permission requests go to the forwarder first (the IDE of the product's ACP session), else the `permissions` policy.
 */
export class AcpWorkerPool implements WorkerPort {
  private readonly running = new Map<TaskAttempt, Promise<WorkerResult>>();
  /** Wakes the overload waits at shutdown. */
  private readonly stopWaits = new Set<() => void>();
  private shuttingDown = false;
  private readonly options: AttemptOptions;
  private forwarder: PermissionForwarder | undefined;
  private outputGate: OutputGate | undefined;
  private readonly overload: OverloadPolicy;
  private readonly random: () => number;

  constructor(options: AcpWorkerPoolOptions) {
    const graceMs = options.graceMs ?? 2_000;
    if (!Number.isFinite(graceMs) || graceMs < 0)
      throw new RangeError("graceMs must be a non-negative number of milliseconds");
    const positive = (value: number, name: string): number => {
      if (!Number.isFinite(value) || value <= 0)
        throw new RangeError(`${name} must be a positive number of milliseconds`);
      return value;
    };
    this.forwarder = options.forwardPermission;
    this.overload = { ...DEFAULT_OVERLOAD_POLICY, ...options.overload };
    this.random = options.random ?? Math.random;
    this.options = {
      registry: options.registry,
      logger: options.logger,
      graceMs,
      taskTimeoutMs: positive(options.taskTimeoutMs ?? DEFAULT_TASK_TIMEOUT_MS, "taskTimeoutMs"),
      startTimeoutMs: positive(options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS, "startTimeoutMs"),
      permissions: options.permissions ?? "deny",
      // Issue 12: an isolated attempt edits only its own worktree, so the default allows `read` and `edit` there.
      ...(options.permissions === undefined
        ? {
            isolatedPermissions: {
              default: "deny" as const,
              rules: { read: "allow" as const, edit: "allow" as const },
            },
          }
        : {}),
      forwarder: () => this.forwarder,
      outputGate: () => this.outputGate,
      clientName: options.clientName ?? "acp-orchestrator",
      clientVersion: options.clientVersion ?? "dev",
      ...(options.mcpSecrets !== undefined ? { mcpSecrets: options.mcpSecrets } : {}),
      ...(options.readAttachment !== undefined ? { readAttachment: options.readAttachment } : {}),
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
    let waitedMs = 0;
    for (let retry = 0; ; retry++) {
      const result = await this.runOnce(request, events);
      const overload = result.attempt?.overload;
      if (result.outcome.outcome !== "failed" || overload === undefined) return result.outcome;
      // Issue 28: an overloaded provider is waited for, within the same attempt, up to `maxWaitMs` in all.
      const delayMs = overloadDelayMs(retry, this.overload, overload.retryAfterMs, this.random);
      if (waitedMs + delayMs > this.overload.maxWaitMs) {
        const spent = Math.round(waitedMs / 1_000);
        return {
          ...result.outcome,
          error: `${result.outcome.error} (the provider stayed overloaded: ${spent} s of retries)`,
        };
      }
      const message = overloadNote(overload, delayMs);
      this.options.logger.warn(
        { productId: request.productId, taskId: request.task.taskId, attempt: request.attempt, retry, delayMs },
        message,
      );
      try {
        events.onOverloaded?.({ message, reason: overload.reason, retryInMs: delayMs, retry: retry + 1 });
      } catch (error) {
        this.options.logger.warn({ err: error }, "worker event handler threw; ignored");
      }
      if (!(await this.wait(delayMs, request.signal))) return { outcome: "cancelled", prompted: true };
      waitedMs += delayMs;
    }
  }

  /** One run of the attempt's agent; `attempt` is absent when nothing was started. */
  private async runOnce(
    request: WorkerRequest,
    events: WorkerEvents,
  ): Promise<{ outcome: WorkerResult; attempt?: TaskAttempt }> {
    if (this.shuttingDown || request.signal.aborted) return { outcome: { outcome: "cancelled" } };
    const attempt = new TaskAttempt(request, events, this.options);
    const result = attempt.run();
    this.running.set(attempt, result);
    try {
      return { outcome: await result, attempt };
    } finally {
      this.running.delete(attempt);
    }
  }

  /** Waits `ms`; false when `signal` aborted or the pool shut down first. */
  private async wait(ms: number, signal: AbortSignal): Promise<boolean> {
    if (signal.aborted || this.shuttingDown) return false;
    let wake: () => void = () => undefined;
    const woken = new Promise<void>((resolve) => (wake = resolve));
    signal.addEventListener("abort", wake, { once: true });
    this.stopWaits.add(wake);
    try {
      await Promise.race([delay(ms), woken]);
    } finally {
      signal.removeEventListener("abort", wake);
      this.stopWaits.delete(wake);
    }
    return !signal.aborted && !this.shuttingDown;
  }

  /**
   * Stops every running attempt (session/cancel, grace, SIGTERM, grace, SIGKILL) and resolves once every child has
   * exited. Later `runTask` calls answer `cancelled` without starting anything. Idempotent.
   */
  async shutdown(): Promise<void> {
    this.shuttingDown = true;
    for (const wake of this.stopWaits) wake();
    this.stopWaits.clear();
    const attempts = [...this.running.entries()];
    for (const [attempt] of attempts) attempt.stop("shutdown");
    await Promise.allSettled(attempts.map(([, result]) => result));
  }
}
