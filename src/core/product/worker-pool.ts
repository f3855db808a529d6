/**
 * The worker pool of one product (DESIGN.md, Execution model): the attempts running in this process, the latest
 * launch of each task (a result counts only when it belongs to it), the results settled and not yet handled by a
 * wave, why workers were stopped, and who waits for them all to stop. It starts a worker for an attempt already
 * recorded as running (write before act, guarantee 1), stops workers by aborting their signals, and hands settled
 * results to the loop; it never decides what a result means (decide.ts) and never writes.
 */
import type { Instance, Task, TaskWorkspace } from "../../../protocol/common.js";
import type { RefusedPermission, WorkerPort, WorkerResult } from "../ports.js";
import { agentInputsOf, type AgentInputs } from "./agent-inputs.js";
import type { OverloadWait } from "./task-waits.js";
import { PREPARE_REMEDIATION } from "../workspace/integration.js";
import { INTERRUPTION, type SettledAttempt, type StopReason } from "./decide.js";

export interface RunningTask {
  controller: AbortController;
  attempt: number;
  briefChars: number;
  reportedUsage: boolean;
  /** Permission requests refused during this attempt (kept on the task when it settles). */
  refusals: RefusedPermission[];
  /** Hash of the input this attempt was given (guarantee 7), recorded with its completion. */
  inputHash: string;
  /** The attempt's worktree (isolation `worktree`), removed once its result was written. */
  workspace?: TaskWorkspace;
  /** While the worker waits for an overloaded provider (issue 28): why and when it retries (epoch ms). */
  overloaded?: OverloadWait;
}

/** A settled attempt with its launch record (a result counts only if it belongs to the task's latest launch). */
export interface SettledResult extends SettledAttempt {
  entry: RunningTask;
}

/** Everything a worker call needs, computed by the loop (execution.ts) from the recorded running state. */
export interface LaunchSpec {
  productId: string;
  task: Task;
  attempt: number;
  instance: Instance;
  cwd: string;
  isolated: boolean;
  /** With `isolated`: the product's `cwd`, the user's checkout (WorkerRequest.checkout). */
  checkout?: string;
  dependencyOutputs: { taskId: string; title: string; output: string }[];
  briefChars: number;
  inputHash: string;
  workspace?: TaskWorkspace;
  /** Creates the attempt's worktree first (isolation); a rejection fails the attempt with its message. */
  prepare?: () => Promise<void>;
  /** The product's MCP servers, additional directories and attachments (agent-inputs.ts), for the worker's session. */
  inputs?: AgentInputs;
  /**
   * Runs after the worker completed and before its result is queued (guarantee 17: the candidate's checks), while
   * the attempt still counts as running, so `stop` aborts it through `signal`. Its rejection is ignored.
   */
  beforeSettle?: (signal: AbortSignal) => Promise<void>;
  /** The previous attempt's error (a retry's brief says why it failed, e.g. a red check's output). */
  previousError?: string;
}

/** What the pool reports while a worker runs. */
export interface LaunchHooks {
  onText(text: string, signal: AbortSignal): void;
  onActivity(toolName: string): void;
  onUsage(inputTokens: number, outputTokens: number): void;
  /** The worker waits for an overloaded provider (issue 28); `entry` is the attempt's launch record. */
  onOverloaded(entry: RunningTask, wait: { message: string; reason: string; retryInMs: number; retry: number }): void;
  /** A result was queued (`take`): the loop schedules a wave. */
  onSettled(): void;
}

export class WorkerPool {
  readonly #running = new Map<string, RunningTask>();
  /** The latest launch of each task whose result has not been taken yet. */
  readonly #latest = new Map<string, RunningTask>();
  readonly #settled: SettledResult[] = [];
  /** Work aside of any attempt that `stop` aborts and `whenIdle` waits for (the final head's checks). */
  readonly #aside = new Map<string, AbortController>();
  #stopReason: StopReason | null = null;
  #idleWaiters: (() => void)[] = [];

  constructor(private readonly workers: WorkerPort) {}

  /** Running tasks whose worker waits for an overloaded provider: taskId → why and when it retries (epoch ms). */
  overloaded(): Map<string, OverloadWait> {
    const out = new Map<string, OverloadWait>();
    for (const [taskId, entry] of this.#running) if (entry.overloaded) out.set(taskId, entry.overloaded);
    return out;
  }

  /** Attempts running now, and work aside (`runAside`) in flight. */
  get size(): number {
    return this.#running.size + this.#aside.size;
  }

  /** True when a worker of `taskId` runs in this process. */
  runs(taskId: string): boolean {
    return this.#running.has(taskId);
  }

  /** Worktree paths of the attempts running now. */
  workspacePaths(): Set<string> {
    const paths = new Set<string>();
    for (const r of this.#running.values()) if (r.workspace) paths.add(r.workspace.path);
    return paths;
  }

  /** Why workers were last stopped (`null` after `clearStopReason`). */
  get stopReason(): StopReason | null {
    return this.#stopReason;
  }

  clearStopReason(): void {
    this.#stopReason = null;
  }

  /** True when nothing of the pool is in flight: no worker, no launch awaiting its result, no result, no waiter. */
  get empty(): boolean {
    return this.size === 0 && this.#latest.size === 0 && this.#settled.length === 0 && this.#idleWaiters.length === 0;
  }

  /** Takes every settled result queued since the last call (stale ones included: their worktrees are released). */
  take(): SettledResult[] {
    return this.#settled.splice(0);
  }

  /**
   * True when `r` belongs to its task's latest launch, which it then closes; false for a stale result (task reset,
   * removed or re-run since). Attempt numbers alone cannot tell: a replay restarts them, so an old worker's late
   * answer could carry the new attempt's number.
   */
  claim(r: SettledResult): boolean {
    if (this.#latest.get(r.taskId) !== r.entry) return false;
    this.#latest.delete(r.taskId);
    return true;
  }

  /** Aborts the running workers (all, or those of `only`); their tasks become what `reason` says (decide.ts). */
  stop(reason: StopReason, only?: ReadonlySet<string>): void {
    this.#stopReason = reason;
    for (const [taskId, r] of this.#running) {
      if (only && !only.has(taskId)) continue;
      r.controller.abort(new Error(INTERRUPTION[reason]));
    }
    if (!only) for (const c of this.#aside.values()) c.abort(new Error(INTERRUPTION[reason]));
  }

  /** Resolves once no worker runs and every settled result was handled (`waveQueued`: a wave is still to come). */
  whenIdle(waveQueued: boolean): Promise<void> {
    if (this.size === 0 && this.#settled.length === 0 && !waveQueued) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /** Wakes `whenIdle` waiters when nothing runs and nothing is left to handle. */
  resolveIdle(): void {
    if (this.size > 0 || this.#settled.length > 0) return;
    for (const w of this.#idleWaiters.splice(0)) w();
  }

  /**
   * Guarantee 17: a settled result whose candidate was not verified on the head as it is now goes back to running:
   * `run` verifies it (aborted by `stop`), then the result is queued again (`onSettled`). Call after `claim`.
   */
  reverify(r: SettledResult, run: (signal: AbortSignal) => Promise<void>, onSettled: () => void): void {
    const entry = r.entry;
    this.#running.set(r.taskId, entry);
    this.#latest.set(r.taskId, entry);
    void run(entry.controller.signal)
      .catch(() => undefined)
      .finally(() => {
        if (this.#running.get(r.taskId) === entry) this.#running.delete(r.taskId);
        this.#settled.push({ ...r, verifyRounds: (r.verifyRounds ?? 0) + 1 });
        onSettled();
      });
  }

  /**
   * Runs `run` aside of any attempt (at most one per `key`; a second call while one runs is a no-op): `stop` aborts
   * it, `whenIdle` waits for it, `onDone` follows its end. Rejections are ignored.
   */
  runAside(key: string, run: (signal: AbortSignal) => Promise<void>, onDone: () => void): void {
    if (this.#aside.has(key)) return;
    const controller = new AbortController();
    this.#aside.set(key, controller);
    void run(controller.signal)
      .catch(() => undefined)
      .finally(() => {
        this.#aside.delete(key);
        onDone();
      });
  }

  /** Starts the worker of an attempt already recorded as running. Never throws; the result is queued for a wave. */
  launch(spec: LaunchSpec, hooks: LaunchHooks): void {
    const controller = new AbortController();
    const entry: RunningTask = {
      controller,
      attempt: spec.attempt,
      briefChars: spec.briefChars,
      reportedUsage: false,
      refusals: [],
      inputHash: spec.inputHash,
      ...(spec.workspace ? { workspace: spec.workspace } : {}),
    };
    const taskId = spec.task.taskId;
    this.#running.set(taskId, entry);
    this.#latest.set(taskId, entry);
    const finish = (result: WorkerResult): void => {
      if (this.#running.get(taskId) === entry) this.#running.delete(taskId);
      this.#settled.push({ entry, taskId, attempt: entry.attempt, result, ...settledMeta(entry) });
      hooks.onSettled();
    };
    if (!spec.prepare) {
      // Nothing to create first: the worker is called on the next microtask (issue 34: one promise, not three).
      void Promise.resolve()
        .then(() => this.run(spec, entry, hooks, finish))
        .catch(() => undefined);
      return;
    }
    // Isolation: the worker runs in the attempt's worktree (its cwd and its fs confinement root), created first.
    spec
      .prepare()
      .then(
        () => undefined,
        (err: unknown) =>
          `The task's worktree could not be prepared: ${err instanceof Error ? err.message : String(err)}`,
      )
      .then((prepareError) =>
        prepareError !== undefined
          ? // The adapter retried already; what fails still is the repository's, not the agent's: no attempt spent.
            finish({ outcome: "failed", kind: "configuration", error: prepareError, remediation: PREPARE_REMEDIATION })
          : this.run(spec, entry, hooks, finish),
      )
      .catch(() => undefined);
  }

  private run(spec: LaunchSpec, entry: RunningTask, hooks: LaunchHooks, finish: (r: WorkerResult) => void): void {
    const signal = entry.controller.signal;
    if (signal.aborted) {
      finish({ outcome: "cancelled" });
      return;
    }
    this.workers
      .runTask(
        {
          productId: spec.productId,
          task: spec.task,
          instance: spec.instance,
          cwd: spec.cwd,
          ...(spec.isolated ? { isolated: true } : {}),
          ...(spec.checkout !== undefined ? { checkout: spec.checkout } : {}),
          ...(spec.workspace ? { root: spec.workspace.path } : {}), // issue 31: `cwd` may be a folder of it
          attempt: spec.attempt,
          dependencyOutputs: spec.dependencyOutputs,
          ...agentInputsOf(spec.inputs ?? {}),
          ...(spec.previousError !== undefined ? { previousError: spec.previousError } : {}),
          signal,
        },
        {
          onText: (text) => {
            entry.overloaded = undefined;
            hooks.onText(text, signal);
          },
          onActivity: (toolName) => hooks.onActivity(toolName),
          onPermissionRefused: (refusal) => {
            if (entry.refusals.length < 50) entry.refusals.push({ ...refusal });
          },
          onUsage: (usage) => {
            entry.reportedUsage = true;
            hooks.onUsage(usage.inputTokens, usage.outputTokens);
          },
          onOverloaded: (wait) => hooks.onOverloaded(entry, wait),
        },
      )
      .then(
        (result) =>
          result.outcome === "completed" && spec.beforeSettle
            ? spec
                .beforeSettle(signal)
                .catch(() => undefined)
                .then(() => finish(result))
            : finish(result),
        (err: unknown) =>
          finish({
            outcome: "failed",
            error: `The worker failed unexpectedly: ${err instanceof Error ? err.message : String(err)}`,
          }),
      );
  }
}

/** The launch record's parts a settled result carries, as they are when it settles. */
function settledMeta(entry: RunningTask): Omit<SettledAttempt, "taskId" | "attempt" | "result"> {
  return {
    briefChars: entry.briefChars,
    reportedUsage: entry.reportedUsage,
    inputHash: entry.inputHash,
    refusals: entry.refusals,
  };
}
